/* One export + deleter from C, the baseline of bindings/bench/export-ratio:
 * a 4-d float32 buffer (2x3x4x5) exported as a DLManagedTensorVersioned and
 * its deleter run, ROUNDS rounds of N after a warm-up round; prints the
 * median, min and max nanoseconds per export + deleter. */
#include <dlbridge/dlbridge.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 2000000;
  enum { ROUNDS = 7 };
  const int64_t shape[4] = {2, 3, 4, 5};
  const DLDevice cpu = {kDLCPU, 0};
  const DLDataType f32 = {kDLFloat, 32, 1};
  dlb_buffer* b = NULL;
  if (dlb_buffer_alloc(cpu, f32, 4, shape, &b) != DLB_OK) return 1;
  double per[ROUNDS + 1];
  for (int r = 0; r <= ROUNDS; ++r) { /* round 0: warm-up */
    const double t0 = now();
    for (long i = 0; i < n; ++i) {
      DLManagedTensorVersioned* t = NULL;
      if (dlb_export_versioned(b, NULL, &t) != DLB_OK) return 1;
      t->deleter(t);
    }
    per[r] = (now() - t0) / n * 1e9;
  }
  qsort(per + 1, ROUNDS, sizeof per[0], cmp);
  printf("ns %.1f %.1f %.1f\n", per[1 + ROUNDS / 2], per[1], per[ROUNDS]);
  dlb_buffer_release(b);
  return dlb_live_exports() == 0 ? 0 : 1;
}
