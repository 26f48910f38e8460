// Host copies of strided views of a cl_mem: every layout's values equal the
// elements the view reaches in the driver's own copy of the memory, and a
// view made of compact blocks of rows is read with one rectangular read per
// block of rows and slices, not one per element.
#include "opencl_fixture.hpp"
#include "opencl/opencl_internal.hpp"

namespace ocltest {
namespace {

struct Layout {
  const char* name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements
  std::int64_t offset;                // elements
  std::uint64_t reads;                // reads the host copy may take at most (0: not checked)
};

class OpenclStrided : public OpenclTest, public ::testing::WithParamInterface<Layout> {};

// A 6 x 8 x 10 array of doubles (480), 0, 1, 2, ... in one cl_mem of 512.
constexpr std::size_t kElements = 512;

TEST_P(OpenclStrided, HostCopyEqualsTheElementsTheViewReaches) {
  const Layout& l = GetParam();
  const std::vector<unsigned char> values = iota_doubles(kElements, 0.5);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  const cl_uint refs = refcount(mem);
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
  std::vector<std::int64_t> shape = l.shape, strides = l.strides;
  DLTensor view{mem,           {kDLOpenCL, 0},
                static_cast<std::int32_t>(shape.size()), f64(), shape.data(), strides.data(),
                static_cast<std::uint64_t>(l.offset) * sizeof(double)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_OK) << dlb_last_error_message();
  dlb_backend_release(be);

  const std::uint64_t reads_before = dlb::opencl::reads_enqueued();
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << dlb_last_error_message();
  const std::uint64_t reads = dlb::opencl::reads_enqueued() - reads_before;
  if (l.reads != 0) {
    EXPECT_LE(reads, l.reads) << l.name;
  }

  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  const std::vector<unsigned char> expect =
      gather(read_all(mem, cl().queue), sizeof(double), shape, strides, l.offset * static_cast<std::int64_t>(sizeof(double)));
  ASSERT_EQ(dlb_buffer_nbytes(h), expect.size());
  EXPECT_EQ(std::memcmp(ht.data, expect.data(), expect.size()), 0) << l.name;
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, OpenclStrided,
    ::testing::Values(
        Layout{"compact", {6, 8, 10}, {80, 10, 1}, 0, 1},
        Layout{"compact at an offset", {4, 10}, {10, 1}, 17, 1},
        // rows of a wider array: one rectangle of 6 rows of 5
        Layout{"sub-rows", {6, 5}, {10, 1}, 3, 1},
        // a 3-d box inside 6 x 8 x 10: one rectangle (block x rows x slices)
        Layout{"box", {4, 5, 7}, {80, 10, 1}, 12, 1},
        // every other row: rows pitch 20
        Layout{"every other row", {3, 10}, {20, 1}, 0, 1},
        // every other element: blocks of one element, still one rectangle
        Layout{"every other element", {6, 5}, {10, 2}, 1, 1},
        // a 4-d view: one rectangle per index of the outermost dimension
        Layout{"4-d", {2, 3, 4, 5}, {240, 80, 10, 1}, 0, 2},
        // memory order differs from the view's: reads into staging, the engine permutes
        Layout{"transposed", {10, 8}, {1, 10}, 0, 1},
        Layout{"transposed box", {5, 4}, {1, 10}, 21, 1},
        Layout{"permuted 3-d", {10, 6, 8}, {1, 80, 10}, 0, 1},
        // irregular: negative, broadcast and interleaved strides read the span once
        Layout{"reversed", {10}, {-1}, 9, 1},
        Layout{"reversed rows", {4, 10}, {-10, 1}, 30, 1},
        Layout{"broadcast", {3, 10}, {0, 1}, 0, 1},
        Layout{"interleaved", {4, 4}, {3, 2}, 0, 1},
        Layout{"size-1 dims", {1, 6, 1, 5}, {7, 10, 3, 1}, 2, 1}),
    [](const ::testing::TestParamInfo<Layout>& info) {
      std::string name = info.param.name;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// A strided view that is not made of compact blocks at all still takes
// rectangles, not one read per element: 60 elements, at most 1 read.
TEST_F(OpenclTest, AColumnIsOneRectangleNotOneReadPerElement) {
  const std::vector<unsigned char> values = iota_doubles(600);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
  int64_t shape[1] = {60};
  int64_t strides[1] = {10};
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, strides, 3 * sizeof(double)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_OK);
  const std::uint64_t before = dlb::opencl::reads_enqueued();
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  EXPECT_EQ(dlb::opencl::reads_enqueued() - before, 1u);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(static_cast<double*>(ht.data)[i], 3.0 + 10.0 * i);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  clReleaseMemObject(mem);
}

}  // namespace
}  // namespace ocltest
