// The built-in device backends of this build: the table the core looks a
// device type up in (core/device_backend.hpp). Each entry is its backend's
// own constant table (a build without the backend has one that refuses),
// so the list below is constant data, complete before any code runs.
#include "core/device_backend.hpp"
#include "cuda/cuda_backend.hpp"
#include "opencl/opencl_backend.hpp"

namespace dlb {
namespace {

constexpr const DeviceBackend* kDeviceBackends[] = {&kCudaDeviceBackend, &kOpenclDeviceBackend};

}  // namespace

const DeviceBackend* device_backend(std::int32_t device_type) noexcept {
  if (device_type == 0) return nullptr;
  for (const DeviceBackend* be : kDeviceBackends) {
    for (const std::int32_t t : be->device_types) {
      if (t == 0) break;
      if (t == device_type) return be;
    }
  }
  return nullptr;
}

}  // namespace dlb
