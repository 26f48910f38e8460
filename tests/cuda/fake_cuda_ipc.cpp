// CUDA IPC: device memory is a shared anonymous mapping, so that a child
// made by fork() sees the same bytes as its parent. A memory handle holds
// the allocating process, the address, the size and the allocation's
// generation (so a freed and reused address does not open); it opens in a
// forked child (same address) and, as on hardware, not in the process
// that made it (CUDA_ERROR_INVALID_CONTEXT). An interprocess event counts
// its records and completions in shared memory; a stream wait on it polls.
// fake_cuda_ipc_counts() says how many handles were opened and closed.
// After fork() the child starts with fresh streams (the parent's worker
// threads do not exist in it).
#include "fake_cuda.hpp"

using namespace fakecuda;

extern "C" {

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, std::size_t* size, CUdeviceptr p) {
  FAKE_ENTER("cuMemGetAddressRange_v2");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.allocations.upper_bound(static_cast<std::uintptr_t>(p));
  if (it == s.allocations.begin()) return kNotFound;
  --it;
  if (p >= it->first + it->second.size) return kNotFound;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second.size;
  return kSuccess;
}

FAKE_API CUresult cuIpcGetMemHandle(MemHandle* out, CUdeviceptr p) {
  FAKE_ENTER("cuIpcGetMemHandle");
  if (out == nullptr) return kInvalidValue;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.allocations.find(static_cast<std::uintptr_t>(p));
  if (it == s.allocations.end() || it->second.kind != Kind::device) return kInvalidValue;
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->magic, "FAKEMEM", 8);
  out->pid = static_cast<std::uint64_t>(getpid());
  out->ptr = p;
  out->size = it->second.size;
  out->generation = it->second.generation;
  return kSuccess;
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* out, MemHandle handle, unsigned flags) {
  FAKE_ENTER("cuIpcOpenMemHandle_v2");
  if (out == nullptr || flags != 1) return kInvalidValue;
  if (!has_current_context()) return kInvalidContext;
  if (std::memcmp(handle.magic, "FAKEMEM", 8) != 0) return kInvalidValue;
  if (handle.pid == static_cast<std::uint64_t>(getpid())) return kInvalidContext;  // as on hardware
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.allocations.find(static_cast<std::uintptr_t>(handle.ptr));
  if (it == s.allocations.end() || it->second.generation != handle.generation || it->second.kind != Kind::device)
    return kInvalidHandle;  // freed (or never made) in the exporting process
  ++s.ipc_open[it->first];
  s.ipc_opened.fetch_add(1);
  *out = handle.ptr;
  return kSuccess;
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  FAKE_ENTER("cuIpcCloseMemHandle");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.ipc_open.find(static_cast<std::uintptr_t>(p));
  if (it == s.ipc_open.end()) return kInvalidValue;
  if (--it->second == 0) s.ipc_open.erase(it);
  s.ipc_closed.fetch_add(1);
  return kSuccess;
}

FAKE_API CUresult cuIpcGetEventHandle(EventHandle* out, void* event) {
  FAKE_ENTER("cuIpcGetEventHandle");
  if (out == nullptr || event == nullptr) return kInvalidValue;
  auto* e = static_cast<Event*>(event);
  if (e->ipc == nullptr) return kInvalidValue;  // not CU_EVENT_INTERPROCESS
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->magic, "FAKEEVT", 8);
  out->pid = static_cast<std::uint64_t>(getpid());
  out->event = reinterpret_cast<std::uintptr_t>(e);
  out->generation = e->generation;
  return kSuccess;
}

FAKE_API CUresult cuIpcOpenEventHandle(void** out, EventHandle handle) {
  FAKE_ENTER("cuIpcOpenEventHandle");
  if (out == nullptr || std::memcmp(handle.magic, "FAKEEVT", 8) != 0) return kInvalidValue;
  if (!has_current_context() || handle.pid == static_cast<std::uint64_t>(getpid())) return kInvalidContext;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.ipc_events.find(static_cast<std::uintptr_t>(handle.event));
  if (it == s.ipc_events.end() || it->second != handle.generation) return kInvalidHandle;
  auto* theirs = reinterpret_cast<Event*>(static_cast<std::uintptr_t>(handle.event));
  auto* e = new Event;
  e->ipc = theirs->ipc;  // the shared counters, mapped at the same address since fork
  *out = e;
  return kSuccess;
}

}  // extern "C"
