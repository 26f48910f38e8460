/* share.h compiles on its own (it brings dlbridge.h) and its names link. */
#include <dlbridge/share.h>

#include <stdio.h>

int main(void) {
  dlb_share_descriptor d;
  dlb_buffer* b = NULL;
  const int64_t shape[1] = {4};
  DLDevice cpu;
  DLDataType f32;
  cpu.device_type = kDLCPU;
  cpu.device_id = 0;
  f32.code = kDLFloat;
  f32.bits = 32;
  f32.lanes = 1;
  if (sizeof d.description != DLB_SHARE_DESCRIPTION_MAX) return 1;
  if (dlb_buffer_alloc_shared(cpu, f32, 1, shape, &b) != DLB_OK) return 2;
  if (dlb_buffer_share(b, DLB_SHARE_READ_ONLY, &d) != DLB_OK) return 3;
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
  if (dlb_shared_mappings() != 0) return 4;
  puts("share.h ok");
  return 0;
}
