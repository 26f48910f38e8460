// Command queues as the protocol's streams: a buffer's last writer is an
// event; an export to a consumer queue makes that queue wait for it
// (without the host waiting), an export without a stream makes the host
// wait, -1 waits for nothing, and a host copy is always ordered after it.
// The writer is held back by a user event the test completes, so the
// ordering is observed, not assumed.
#include <chrono>
#include <future>
#include <thread>

#include "opencl_fixture.hpp"

namespace ocltest {
namespace {

using OpenclStreams = OpenclTest;

// A cl_mem of `count` doubles 0, 1, 2, ... and a pending write of `later`
// into it, held back until `gate` is completed.
struct PendingWrite {
  cl_mem mem = nullptr;
  cl_event gate = nullptr;
  cl_event write = nullptr;
  std::vector<double> later;

  explicit PendingWrite(std::size_t count) : later(count) {
    const std::vector<unsigned char> start = iota_doubles(count);
    mem = make_mem(cl().context, start.size(), start.data());
    for (std::size_t i = 0; i < count; ++i) later[i] = 1000.0 + static_cast<double>(i);
    cl_int rc = CL_SUCCESS;
    gate = clCreateUserEvent(cl().context, &rc);
    EXPECT_EQ(rc, CL_SUCCESS);
    // The writer runs on the test's own queue, after the gate.
    EXPECT_EQ(clEnqueueWriteBuffer(cl().queue, mem, CL_FALSE, 0, count * sizeof(double), later.data(), 1, &gate,
                                   &write),
              CL_SUCCESS);
    clFlush(cl().queue);
  }
  void open() { EXPECT_EQ(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS); }
  cl_int write_status() const {
    cl_int status = 0;
    clGetEventInfo(write, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    return status;
  }
  ~PendingWrite() {
    clWaitForEvents(1, &write);
    clReleaseEvent(write);
    clReleaseEvent(gate);
    clReleaseMemObject(mem);
  }
};

dlb_buffer* wrap_on_own_queue(cl_mem mem, std::size_t count, void* event, dlb_backend** backend) {
  // The buffer's backend has a queue of its own (not the writer's), so
  // only the event orders it after the writer.
  cl_int rc = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(cl().context, cl().device, 0, &rc);
  EXPECT_EQ(rc, CL_SUCCESS);
  EXPECT_EQ(dlb_opencl_backend_from_queue(cl().context, q, backend), DLB_OK);
  clReleaseCommandQueue(q);
  static int64_t shape[1];
  shape[0] = static_cast<int64_t>(count);
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_opencl_buffer_wrap(*backend, &view, 0, event, nullptr, nullptr, &b), DLB_OK);
  return b;
}

TEST_F(OpenclStreams, AConsumerQueueWaitsForTheWriterWithoutTheHostWaiting) {
  PendingWrite w(64);
  dlb_backend* be = nullptr;
  dlb_buffer* b = wrap_on_own_queue(w.mem, 64, w.write, &be);
  ASSERT_NE(b, nullptr);
  // The consumer: a queue of its own in the same context.
  cl_int rc = CL_SUCCESS;
  cl_command_queue consumer = clCreateCommandQueue(cl().context, cl().device, 0, &rc);
  CL_OK(rc);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_STREAM_GIVEN);
  o.stream = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(consumer));
  DLManagedTensorVersioned* t = nullptr;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(dlb_export_versioned(b, &o, &t), DLB_OK) << dlb_last_error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // returned with the gate closed
  EXPECT_NE(w.write_status(), CL_COMPLETE);
  // The consumer reads on its queue: ordered after the writer by the barrier.
  std::vector<double> seen(64, -1.0);
  cl_event read = nullptr;
  CL_OK(clEnqueueReadBuffer(consumer, static_cast<cl_mem>(t->dl_tensor.data), CL_FALSE, 0, 64 * sizeof(double),
                            seen.data(), 0, nullptr, &read));
  clFlush(consumer);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cl_int status = 0;
  CL_OK(clGetEventInfo(read, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr));
  EXPECT_NE(status, CL_COMPLETE) << "the consumer's read ran before the writer";
  w.open();
  CL_OK(clWaitForEvents(1, &read));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(seen[i], 1000.0 + i);
  clReleaseEvent(read);
  clReleaseCommandQueue(consumer);
  t->deleter(t);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(OpenclStreams, WithoutAStreamTheHostWaitsAndAHostCopySeesTheWrite) {
  PendingWrite w(32);
  dlb_backend* be = nullptr;
  dlb_buffer* b = wrap_on_own_queue(w.mem, 32, nullptr, &be);
  ASSERT_NE(b, nullptr);
  // The writer is recorded after the wrap.
  ASSERT_EQ(dlb_opencl_buffer_set_event(b, w.write), DLB_OK);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    w.open();
  });
  const auto start = std::chrono::steady_clock::now();
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &t), DLB_OK);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  EXPECT_EQ(w.write_status(), CL_COMPLETE);
  opener.join();
  t->deleter(t);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(static_cast<double*>(ht.data)[i], 1000.0 + i);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(OpenclStreams, AHostCopyIsOrderedAfterAPendingWriter) {
  PendingWrite w(16);
  dlb_backend* be = nullptr;
  dlb_buffer* b = wrap_on_own_queue(w.mem, 16, w.write, &be);
  ASSERT_NE(b, nullptr);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.open();
  });
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  opener.join();
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(static_cast<double*>(ht.data)[i], 1000.0 + i);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(OpenclStreams, MinusOneWaitsForNothing) {
  PendingWrite w(8);
  dlb_backend* be = nullptr;
  dlb_buffer* b = wrap_on_own_queue(w.mem, 8, w.write, &be);
  ASSERT_NE(b, nullptr);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_STREAM_GIVEN);
  o.stream = -1;
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &t), DLB_OK);
  EXPECT_NE(w.write_status(), CL_COMPLETE);  // nobody waited
  t->deleter(t);
  w.open();
  dlb_buffer_release(b);
  dlb_backend_release(be);
}

TEST_F(OpenclStreams, StreamValuesThatAreNotQueuesAreRefused) {
  const int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f32(), 1, shape, &b), DLB_OK);
  for (int64_t bad : {int64_t{1}, int64_t{2}, int64_t{-7}}) {
    dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_STREAM_GIVEN);
    o.stream = bad;
    DLManagedTensorVersioned* t = nullptr;
    EXPECT_EQ(dlb_export_versioned(b, &o, &t), DLB_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(t, nullptr);
  }
  EXPECT_TRUE(MessageContains("is not an OpenCL stream value"));
  // A handle that is no queue at all (host memory) is refused, not followed.
  std::vector<unsigned char> junk(64, 0x5a);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED, DLB_EXPORT_STREAM_GIVEN);
  o.stream = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(junk.data()));
  DLManagedTensorVersioned* t = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &t), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("is not a live cl_command_queue"));
  dlb_buffer_release(b);
}

TEST_F(OpenclStreams, AnImportOnAProducerQueueIsOrderedAfterItsWork) {
  // The producer's work is the pending write on cl().queue; its stream is
  // that queue: the import's marker on it becomes the writer.
  PendingWrite w(24);
  ClProducer p(w.mem, {24}, {}, 0);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_import_versioned(nullptr, &p.versioned,
                                        static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(cl().queue)), &b),
            DLB_OK)
      << dlb_last_error_message();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.open();
  });
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  opener.join();
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(static_cast<double*>(ht.data)[i], 1000.0 + i);
  dlb_buffer_release(h);
  EXPECT_EQ(p.deleter_calls, 0);
  dlb_buffer_release(b);
  EXPECT_EQ(p.deleter_calls, 1);
}

}  // namespace
}  // namespace ocltest
