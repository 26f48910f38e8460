// dlbridge from C++: a tensor handed to C code and taken back, with errors.
#include <dlbridge/dlbridge.hpp>

#include <cstdio>

// What a C library that takes DLPack tensors does: reads, then runs the deleter.
extern "C" double consume(DLManagedTensorVersioned* t) {
  const float* x = static_cast<const float*>(t->dl_tensor.data);
  double sum = 0;
  for (int64_t i = 0; i < t->dl_tensor.shape[0] * t->dl_tensor.shape[1]; ++i) sum += x[i];
  t->deleter(t);
  return sum;
}

int main() {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(dlbridge::dtype("float32"), {2, 3});
  float* x = b.data<float>();  // C++20: b.span<float>()
  for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(i);

  // A zero-copy export; released to C code, which runs its deleter.
  dlbridge::ManagedTensor t = b.export_versioned();
  std::printf("sum %g\n", consume(t.release()));

  // Taken back in: the buffer owns the tensor, the deleter runs with its last owner.
  dlbridge::Buffer back = dlbridge::Buffer::import(b.export_versioned());
  std::printf("same memory: %s\n", back.data<const float>() == x ? "yes" : "no");

  // Refusals: an exception carrying the status, or a value from try_*.
  try {
    dlbridge::Buffer::alloc(dlbridge::dtype("float32"), {2, -3});
  } catch (const dlbridge::Error& e) {
    std::printf("%s\n", e.what());
  }
  auto r = dlbridge::Buffer::try_alloc(dlbridge::dtype("float32"), {2, -3});
  std::printf("%s\n", r.ok() ? "allocated" : r.status().name());

  back.reset();
  b.reset();
  std::printf("live exports: %lld\n", static_cast<long long>(dlbridge::live_exports()));
  return dlbridge::live_exports() == 0 ? 0 : 1;
}
