/* Instruction counts of the core's hot paths under callgrind: a versioned
 * export and its deleter, an import of a foreign versioned tensor and its
 * release, and an import re-exported. Counts, not seconds: repeatable
 * whatever else the machine does.
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null build/bench/bench/callgrind_ops MODE 10000
 *   MODE: none, export, import, reexport
 *
 * Instructions per operation = (Ir(MODE) - Ir(none)) / 10000; bench/README.md
 * ("Instruction counts") lists the figures. */
#include <dlbridge/dlbridge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t shape[2] = {4, 8};
static void noop_deleter(DLManagedTensorVersioned* m) { (void)m; }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "none";
  const long n = argc > 2 ? atol(argv[2]) : 10000;
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  static float data[32];
  dlb_buffer* buf = NULL;
  if (dlb_buffer_alloc(cpu, f32, 2, shape, &buf) != DLB_OK) return 1;
  DLManagedTensorVersioned foreign;
  memset(&foreign, 0, sizeof foreign);
  foreign.version.major = 1;
  foreign.deleter = noop_deleter;
  foreign.dl_tensor.data = data;
  foreign.dl_tensor.device = cpu;
  foreign.dl_tensor.ndim = 2;
  foreign.dl_tensor.dtype = f32;
  foreign.dl_tensor.shape = shape;
  int do_export = strcmp(mode, "export") == 0, do_import = strcmp(mode, "import") == 0,
      do_reexport = strcmp(mode, "reexport") == 0;
  for (long i = 0; i < n; ++i) {
    if (do_export) {
      DLManagedTensorVersioned* m = NULL;
      if (dlb_export_versioned(buf, NULL, &m) != DLB_OK) return 2;
      m->deleter(m);
    } else if (do_import || do_reexport) {
      dlb_buffer* b = NULL;
      if (dlb_import_versioned(&foreign, NULL, &b) != DLB_OK) return 3;
      if (do_reexport) {
        DLManagedTensorVersioned* m = NULL;
        if (dlb_export_versioned(b, NULL, &m) != DLB_OK) return 4;
        m->deleter(m);
      }
      dlb_buffer_release(b);
    }
  }
  dlb_buffer_release(buf);
  return dlb_live_exports() == 0 ? 0 : 5;
}
