/*
 * errors: what a failing call looks like. Each call below is wrong on
 * purpose; the program prints the status name and the thread-local message
 * the library set, which names the value at fault.
 *
 * Build: cc -std=c99 -I include examples/errors.c -L build/src -ldlbridge
 */
#include <stdio.h>
#include <stdlib.h>

#include <dlbridge/dlbridge.h>

static int failures_seen = 0;

/* Prints one failed call; returns 1 when it failed with `expected`. */
static int show(const char* what, dlb_status got, dlb_status expected) {
  printf("%s\n  status:  %s (%d)\n  message: %s\n", what, dlb_status_name(got), (int)got, dlb_last_error_message());
  dlb_clear_last_error();
  if (got == expected) ++failures_seen;
  return got == expected;
}

static void noop_deleter(DLManagedTensorVersioned* self) { (void)self; }

int main(void) {
  DLDevice cpu = {kDLCPU, 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDataType bad = {kDLFloat, 7, 1};
  int64_t shape[2] = {2, -3};
  int64_t good_shape[1] = {4};
  dlb_buffer* buf = (dlb_buffer*)0;
  dlb_buffer* out = (dlb_buffer*)0;
  DLManagedTensorVersioned* exported = NULL;
  DLManagedTensor* legacy = NULL;
  int ok = 1;

  ok &= show("alloc with shape (2, -3)", dlb_buffer_alloc(cpu, f32, 2, shape, &out), DLB_ERR_MALFORMED);
  ok &= show("alloc with dtype float7", dlb_buffer_alloc(cpu, bad, 1, good_shape, &out), DLB_ERR_UNSUPPORTED_DTYPE);
  ok &= show("alloc with ndim 2 and a NULL shape", dlb_buffer_alloc(cpu, f32, 2, NULL, &out),
             DLB_ERR_INVALID_ARGUMENT);
  if (out != NULL) return 1; /* out is written only on success */

  if (dlb_buffer_alloc(cpu, f32, 1, good_shape, &buf) != DLB_OK) return 1;
  dlb_buffer_delete(buf);
  ok &= show("export of a deleted buffer", dlb_export_versioned(buf, NULL, &exported), DLB_ERR_DELETED);
  dlb_buffer_release(buf);

  {
    float values[4] = {1, 2, 3, 4};
    DLTensor view = {0};
    view.data = values;
    view.device = cpu;
    view.ndim = 1;
    view.dtype = f32;
    view.shape = good_shape;
    if (dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, NULL, NULL, &buf) != DLB_OK) return 1;
    /* The legacy struct cannot say read-only: by default the export is a
       writable copy; with copies forbidden it is refused. */
    dlb_export_options never;
    dlb_export_options_init(&never);
    never.copy = DLB_COPY_NEVER;
    ok &= show("legacy export of a read-only buffer, copies forbidden", dlb_export_legacy(buf, &never, &legacy),
               DLB_ERR_READ_ONLY);
    dlb_buffer_release(buf);
  }

  {
    DLManagedTensorVersioned future = {{0, 0}, NULL, NULL, 0, {0}};
    future.version.major = 2;
    future.deleter = noop_deleter;
    ok &= show("import of a DLPack 2.0 tensor", dlb_import_versioned(&future, NULL, &out), DLB_ERR_VERSION);
    dlb_managed_free_versioned(&future); /* still the caller's after a failure */
  }

  printf("dlb_status_name(99) = %s\n", dlb_status_name(99));
  printf("%d of 6 calls failed as documented; live exports: %d\n", failures_seen, (int)dlb_live_exports());
  return ok && exported == NULL && legacy == NULL ? 0 : 1;
}
