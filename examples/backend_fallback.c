/*
 * backend_fallback: a storage that lives on a backend with no zero-copy
 * access (here 'remote', which can only copy its data to the host).
 *
 *  1. export with DLB_COPY_IF_NEEDED: the library falls back to a host copy
 *     and marks the export IS_COPIED;
 *  2. the same export with DLB_COPY_NEVER: refused with
 *     DLB_ERR_NOT_ZERO_COPY and a message naming the backend;
 *  3. the buffer deleted (donated), then exported: DLB_ERR_DELETED.
 *
 * Build: cc -std=c99 -I include examples/backend_fallback.c -L build/src -ldlbridge
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlbridge/dlbridge.h>

/* The 'remote' memory system: a storage is a block of floats this backend
 * owns; only copy_to_host and free_storage are provided. */
struct remote_storage {
  float values[6];
};

static int32_t remote_copy_to_host(void* ctx, void* storage, void* dst, uint64_t dst_size) {
  const struct remote_storage* st = (const struct remote_storage*)storage;
  (void)ctx;
  if (dst_size < sizeof st->values) {
    dlb_backend_set_error("destination too small");
    return 1;
  }
  memcpy(dst, st->values, sizeof st->values);
  return 0;
}

static void remote_free_storage(void* ctx, void* storage) {
  (void)ctx;
  free(storage);
  printf("  remote: storage freed\n");
}

static const char* device_name(int32_t type) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLExtDev: return "ext_dev";
    default: return "other";
  }
}

int main(void) {
  dlb_backend_vtable vt;
  dlb_backend* remote = NULL;
  struct remote_storage* storage = (struct remote_storage*)malloc(sizeof *storage);
  int64_t shape[2] = {2, 3};
  DLTensor layout;
  dlb_buffer* buf = NULL;
  dlb_export_options opts;
  DLManagedTensorVersioned* t = NULL;
  dlb_status s;
  int i, ok = 1;

  if (storage == NULL) return 1;
  for (i = 0; i < 6; ++i) storage->values[i] = (float)(i + 1) * 1.5f;

  memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "remote";
  vt.copy_to_host = remote_copy_to_host;
  vt.free_storage = remote_free_storage;
  if (dlb_backend_create(&vt, NULL, &remote) != DLB_OK) return 1;

  memset(&layout, 0, sizeof layout);
  layout.device.device_type = kDLExtDev;
  layout.ndim = 2;
  layout.dtype.code = kDLFloat;
  layout.dtype.bits = 32;
  layout.dtype.lanes = 1;
  layout.shape = shape;
  if (dlb_buffer_from_backend(remote, storage, &layout, 0, &buf) != DLB_OK) {
    printf("dlb_buffer_from_backend: %s\n", dlb_last_error_message());
    return 1;
  }
  dlb_backend_release(remote); /* the buffer holds its own reference */
  printf("a 2x3 float32 buffer on backend 'remote' (copy_to_host only, no zero-copy access)\n");

  dlb_export_options_init(&opts);
  opts.copy = DLB_COPY_IF_NEEDED;
  s = dlb_export_versioned(buf, &opts, &t);
  printf("export, copy=IF_NEEDED -> %s\n", dlb_status_name(s));
  if (s == DLB_OK) {
    const float* v = (const float*)((const char*)t->dl_tensor.data + t->dl_tensor.byte_offset);
    printf("  device %s:%d, IS_COPIED %s, values", device_name((int32_t)t->dl_tensor.device.device_type),
           (int)t->dl_tensor.device.device_id, (t->flags & DLPACK_FLAG_BITMASK_IS_COPIED) ? "yes" : "no");
    for (i = 0; i < 6; ++i) printf(" %g", v[i]);
    printf("\n");
    ok &= (t->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0 && t->dl_tensor.device.device_type == kDLCPU;
    t->deleter(t);
    t = NULL;
  } else {
    ok = 0;
  }

  opts.copy = DLB_COPY_NEVER;
  s = dlb_export_versioned(buf, &opts, &t);
  printf("export, copy=NEVER -> %s\n  %s\n", dlb_status_name(s), dlb_last_error_message());
  ok &= s == DLB_ERR_NOT_ZERO_COPY && t == NULL;

  dlb_buffer_delete(buf);
  s = dlb_export_versioned(buf, NULL, &t);
  printf("export after dlb_buffer_delete -> %s\n  %s\n", dlb_status_name(s), dlb_last_error_message());
  ok &= s == DLB_ERR_DELETED && t == NULL;

  dlb_buffer_release(buf);
  printf("live exports: %" PRId64 "\n", dlb_live_exports());
  return ok && dlb_live_exports() == 0 ? 0 : 1;
}
