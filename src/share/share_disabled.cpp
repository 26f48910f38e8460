// The sharing entry points of a library built without sharing
// (-Dshare=disabled): each one refuses with DLB_ERR_UNSUPPORTED_DEVICE,
// keeping the ownership rules of share.h (a file descriptor given with
// DLB_SHARE_TAKE_FD is closed); the counts are 0.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <initializer_list>

#include <unistd.h>

#include "core/errors.hpp"

namespace {

dlb_status refused(const char* function) noexcept {
  return dlb::firewall(function, [&] {
    return dlb::set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                          "%s: this dlbridge was built without sharing across processes (meson option "
                          "-Dshare=disabled); rebuild with -Dshare=enabled to use it",
                          function);
  });
}

}  // namespace

extern "C" {

DLB_API dlb_status dlb_buffer_alloc_shared(DLDevice, DLDataType, int32_t, const int64_t*, dlb_buffer**) {
  return refused(__func__);
}
DLB_API dlb_status dlb_buffer_copy_shared(dlb_buffer*, uint64_t, dlb_buffer**) { return refused(__func__); }
DLB_API dlb_status dlb_buffer_share(dlb_buffer*, uint64_t, dlb_share_descriptor*) { return refused(__func__); }
DLB_API dlb_status dlb_buffer_is_shared(dlb_buffer*, int32_t*) { return refused(__func__); }
DLB_API dlb_status dlb_buffer_open_shared(int32_t fd, const void*, size_t, uint64_t flags, dlb_buffer**) {
  if ((flags & DLB_SHARE_TAKE_FD) != 0 && fd >= 0) close(fd);
  return refused(__func__);
}
DLB_API dlb_status dlb_share_description_kind(const void*, size_t, uint32_t*) { return refused(__func__); }
DLB_API void dlb_share_descriptor_close(dlb_share_descriptor* descriptor) {
  if (descriptor == nullptr || descriptor->fd < 0) return;
  close(descriptor->fd);
  descriptor->fd = -1;
}
DLB_API dlb_status dlb_share_send(int32_t, const dlb_share_descriptor*) { return refused(__func__); }
DLB_API dlb_status dlb_share_recv(int32_t, dlb_share_descriptor*) { return refused(__func__); }
DLB_API int64_t dlb_shared_mappings(void) { return 0; }
DLB_API dlb_status dlb_share_ticket_issue(dlb_buffer*, uint64_t, dlb_share_ticket*) { return refused(__func__); }
DLB_API dlb_status dlb_share_ticket_open(const void*, size_t, uint64_t, dlb_buffer**) { return refused(__func__); }
DLB_API int32_t dlb_share_ticket_server(int64_t* held, int64_t* connections, int64_t* links) {
  for (int64_t* p : {held, connections, links})
    if (p != nullptr) *p = 0;
  return 0;
}
DLB_API dlb_status dlb_share_ticket_withdraw(const void*, size_t, int64_t*) { return refused(__func__); }
DLB_API int64_t dlb_share_ticket_wait(int64_t) { return 0; }

}  // extern "C"
