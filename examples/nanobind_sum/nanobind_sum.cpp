// A C++ extension (nanobind) that takes any framework's CPU tensor through
// dlbridge and works on it with dlbridge's C API, beside the same functions
// taking nanobind's own nb::ndarray.
//
//   import nanobind_sum as ns
//   ns.sum(x)           # x: a dlbridge.Tensor or any DLPack producer
//   ns.scale_(x, 2.0)   # in place; a read-only tensor is refused
//   ns.sum_ndarray(x)   # the same through nb::ndarray
//   ns.scale_ndarray_(x, 2.0)
//
// How sum() gets the tensor:
//   1. anything that is not a dlbridge.Tensor goes through
//      dlbridge.from_dlpack(x): the producer's exchange table when its type
//      has one (torch 2), else __dlpack__, and the host copy when the
//      producer refuses with BufferError (a JAX array sharded over several
//      devices);
//   2. dlbridge.Tensor's own DLPack exchange table hands over a
//      DLManagedTensorVersioned, without a capsule or a Python call;
//   3. dlb_import_versioned() takes it over as a dlb_buffer (validated; with
//      require_writable for scale_, so read-only memory is refused by the
//      library with DLB_ERR_READ_ONLY), dlb_buffer_dltensor() describes it,
//      and dlb_buffer_release() gives it back (the producer's deleter runs
//      once, when the last reference goes).
//
// Built by examples/nanobind_sum/build.py (nanobind's sources compiled in,
// linked against the libdlbridge the dlbridge package loads).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <dlbridge/dlbridge.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace nb = nanobind;

namespace {

// dlbridge.Tensor's exchange table and dlbridge.from_dlpack, looked up once.
struct Dlbridge {
  nb::object tensor_type;
  nb::object from_dlpack;
  const DLPackExchangeAPI* api = nullptr;
};

Dlbridge& dlbridge() {
  static Dlbridge* d = [] {
    auto* d = new Dlbridge();  // kept for the process: the module holds its types
    nb::module_ m = nb::module_::import_("dlbridge");
    d->tensor_type = m.attr("Tensor");
    d->from_dlpack = m.attr("from_dlpack");
    nb::object capsule = d->tensor_type.attr("__dlpack_c_exchange_api__");
    void* p = PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api");
    if (p == nullptr) throw nb::python_error();
    d->api = static_cast<const DLPackExchangeAPI*>(p);
    return d;
  }();
  return *d;
}

[[noreturn]] void raise_status(dlb_status status, const char* what) {
  std::string msg = std::string(what) + ": " + dlb_status_name(status) + ": " + dlb_last_error_message();
  if (status == DLB_ERR_READ_ONLY) throw nb::value_error(msg.c_str());
  throw nb::type_error(msg.c_str());
}

// A dlb_buffer reference, released at scope exit.
struct Buffer {
  dlb_buffer* b = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { dlb_buffer_release(b); }
};

// The tensor of any producer, as a dlb_buffer of host memory.
void import_tensor(nb::handle obj, bool writable, Buffer& out) {
  Dlbridge& d = dlbridge();
  nb::object t = nb::borrow(obj);
  if (!nb::isinstance(t, d.tensor_type)) t = d.from_dlpack(t);
  DLManagedTensorVersioned* mt = nullptr;
  if (d.api->managed_tensor_from_py_object_no_sync(t.ptr(), &mt) != 0) throw nb::python_error();
  dlb_import_options options;
  dlb_import_options_init(&options);
  options.require_writable = writable ? 1 : 0;
  dlb_status s = dlb_import_versioned(mt, &options, &out.b);
  if (s != DLB_OK) {
    dlb_managed_free_versioned(mt);  // still ours on failure
    raise_status(s, writable ? "scale_" : "sum");
  }
}

// Calls f(element pointer) for every element of a strided host tensor
// (strides in elements, as DLPack has them).
template <typename F>
void for_each(char* data, int32_t ndim, const int64_t* shape, const int64_t* strides, int64_t itemsize, F&& f) {
  if (ndim > 32) throw nb::type_error("more than 32 dimensions");
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) n *= shape[i];
  if (n == 0) return;
  int64_t index[32] = {0};
  char* p = data;
  for (int64_t k = 0; k < n; ++k) {
    f(p);
    for (int32_t i = ndim - 1; i >= 0; --i) {  // odometer over the dimensions
      if (++index[i] < shape[i]) {
        p += strides[i] * itemsize;
        break;
      }
      p -= (shape[i] - 1) * strides[i] * itemsize;
      index[i] = 0;
    }
  }
}

// Applies op<T>(pointer) with the C type of a DLPack dtype.
template <template <typename> class Op, typename... Args>
void with_ctype(DLDataType dt, Args&&... args) {
  if (dt.lanes != 1) throw nb::type_error("vector dtypes are not summed here");
  switch (dt.code * 1000 + dt.bits) {
    case kDLFloat * 1000 + 32: return Op<float>()(args...);
    case kDLFloat * 1000 + 64: return Op<double>()(args...);
    case kDLInt * 1000 + 8: return Op<int8_t>()(args...);
    case kDLInt * 1000 + 16: return Op<int16_t>()(args...);
    case kDLInt * 1000 + 32: return Op<int32_t>()(args...);
    case kDLInt * 1000 + 64: return Op<int64_t>()(args...);
    case kDLUInt * 1000 + 8: return Op<uint8_t>()(args...);
    case kDLUInt * 1000 + 16: return Op<uint16_t>()(args...);
    case kDLUInt * 1000 + 32: return Op<uint32_t>()(args...);
    case kDLUInt * 1000 + 64: return Op<uint64_t>()(args...);
    case kDLBool * 1000 + 8: return Op<bool>()(args...);
    default: {
      char name[32];
      if (dlb_dtype_name(dt, name, sizeof name) != DLB_OK) std::strcpy(name, "an unknown dtype");
      throw nb::type_error((std::string("no C++ arithmetic here for ") + name).c_str());
    }
  }
}

template <typename T>
struct SumOp {
  void operator()(char* data, int32_t ndim, const int64_t* shape, const int64_t* strides, double* out) const {
    double s = 0;
    for_each(data, ndim, shape, strides, sizeof(T), [&](char* p) {
      T v;
      std::memcpy(&v, p, sizeof v);
      s += static_cast<double>(v);
    });
    *out = s;
  }
};

template <typename T>
struct ScaleOp {
  void operator()(char* data, int32_t ndim, const int64_t* shape, const int64_t* strides, double f) const {
    for_each(data, ndim, shape, strides, sizeof(T), [&](char* p) {
      T v;
      std::memcpy(&v, p, sizeof v);
      v = static_cast<T>(static_cast<double>(v) * f);
      std::memcpy(p, &v, sizeof v);
    });
  }
};

void require_cpu(DLDevice device) {
  if (device.device_type != kDLCPU)
    throw nb::type_error("only CPU tensors are summed here");
}

double sum(nb::handle obj) {
  Buffer b;
  import_tensor(obj, false, b);
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(b.b, &t);
  if (s != DLB_OK) raise_status(s, "sum");
  require_cpu(t.device);
  double out = 0;
  with_ctype<SumOp>(t.dtype, static_cast<char*>(t.data) + t.byte_offset, t.ndim, t.shape, t.strides, &out);
  return out;
}

void scale_(nb::handle obj, double f) {
  Buffer b;
  import_tensor(obj, true, b);
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(b.b, &t);
  if (s != DLB_OK) raise_status(s, "scale_");
  require_cpu(t.device);
  with_ctype<ScaleOp>(t.dtype, static_cast<char*>(t.data) + t.byte_offset, t.ndim, t.shape, t.strides, f);
}

// nb::ndarray's strides are in elements too, like DLPack's.
template <typename Array>
void describe(const Array& a, DLDataType* dt, int64_t* shape, int64_t* strides) {
  nb::dlpack::dtype d = a.dtype();
  *dt = DLDataType{d.code, d.bits, d.lanes};
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = static_cast<int64_t>(a.shape(i));
    strides[i] = a.stride(i);
  }
}

double sum_ndarray(nb::ndarray<nb::ro, nb::device::cpu> a) {
  if (a.ndim() > 32) throw nb::type_error("more than 32 dimensions");
  DLDataType dt;
  int64_t shape[32], strides[32];
  describe(a, &dt, shape, strides);
  double out = 0;
  with_ctype<SumOp>(dt, const_cast<char*>(static_cast<const char*>(a.data())), static_cast<int32_t>(a.ndim()),
                    shape, strides, &out);
  return out;
}

void scale_ndarray_(nb::ndarray<nb::device::cpu> a, double f) {
  if (a.ndim() > 32) throw nb::type_error("more than 32 dimensions");
  DLDataType dt;
  int64_t shape[32], strides[32];
  describe(a, &dt, shape, strides);
  with_ctype<ScaleOp>(dt, static_cast<char*>(a.data()), static_cast<int32_t>(a.ndim()), shape, strides, f);
}

}  // namespace

NB_MODULE(nanobind_sum, m) {
  m.doc() = "Sums any framework's CPU tensor in C++, through dlbridge or through nb::ndarray.";
  m.def("sum", &sum, nb::arg("x"),
        "The sum of a dlbridge.Tensor or any DLPack producer's tensor, taken through dlbridge.");
  m.def("scale_", &scale_, nb::arg("x"), nb::arg("factor"),
        "Multiplies the tensor in place, through dlbridge (read-only memory is refused).");
  m.def("sum_ndarray", &sum_ndarray, nb::arg("x"), "The sum, taking nb::ndarray<nb::ro> directly.");
  m.def("scale_ndarray_", &scale_ndarray_, nb::arg("x"), nb::arg("factor"),
        "Multiplies in place, taking a writable nb::ndarray directly.");
}
