/* A stand-in for a native library that speaks DLPack (a kernel library, an
 * inference runtime), for the tests of the language bindings: it takes
 * managed tensors in (and so owns them: it runs their deleters), reads and
 * writes borrowed ones, and hands out tensors of its own whose deleters it
 * counts. It knows nothing of dlbridge: it reads the DLPack structs as any
 * consumer would, honouring strides and byte_offset. Not installed.
 *
 * Every function returns 0 on success and -1 when the tensor is not one it
 * handles (a NULL pointer, a non-CPU device, a dtype other than float64,
 * float32, int64 or int32 with one lane); a consuming call that fails does
 * not take ownership, so the caller still frees the tensor. */
#include <dlbridge/dlbridge.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#define NL_API __declspec(dllexport)
#else
#define NL_API __attribute__((visibility("default")))
#endif

static atomic_llong own_deleter_calls;
static atomic_llong own_live;

/* The offset in elements of row-major index i of t (NULL strides: compact
 * row-major, as producers before DLPack 1.2 may send). */
static int64_t offset_of(const DLTensor* t, int64_t i) {
  int64_t offset = 0, step = 1;
  for (int32_t d = t->ndim - 1; d >= 0; --d) {
    offset += (i % t->shape[d]) * (t->strides ? t->strides[d] : step);
    i /= t->shape[d];
    step *= t->shape[d];
  }
  return offset;
}

/* The element at row-major index i of t, as a double. */
static double element(const DLTensor* t, int64_t i) {
  const char* base = (const char*)t->data + t->byte_offset;
  const int64_t offset = offset_of(t, i);
  switch (t->dtype.code * 1000 + t->dtype.bits) {
    case kDLFloat * 1000 + 64: return ((const double*)base)[offset];
    case kDLFloat * 1000 + 32: return ((const float*)base)[offset];
    case kDLInt * 1000 + 64: return (double)((const int64_t*)base)[offset];
    default: return (double)((const int32_t*)base)[offset];
  }
}

static int readable(const DLTensor* t) {
  if (t->device.device_type != kDLCPU || t->dtype.lanes != 1) return 0;
  switch (t->dtype.code * 1000 + t->dtype.bits) {
    case kDLFloat * 1000 + 64:
    case kDLFloat * 1000 + 32:
    case kDLInt * 1000 + 64:
    case kDLInt * 1000 + 32: return 1;
    default: return 0;
  }
}

static int64_t count(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

static double sum(const DLTensor* t) {
  double s = 0;
  const int64_t n = count(t);
  for (int64_t i = 0; i < n; ++i) s += element(t, i);
  return s;
}

/* Sums a borrowed tensor's elements into *out; the caller keeps it. */
NL_API int nl_sum(const DLTensor* t, double* out) {
  if (!t || !out || !readable(t)) return -1;
  *out = sum(t);
  return 0;
}

/* Takes a versioned managed tensor: sums its elements into *out and runs
 * its deleter (once). On -1 the caller still owns it. */
NL_API int nl_consume_versioned(DLManagedTensorVersioned* t, double* out) {
  if (!t || !out || !readable(&t->dl_tensor)) return -1;
  *out = sum(&t->dl_tensor);
  if (t->deleter) t->deleter(t);
  return 0;
}

/* The same for a legacy managed tensor. */
NL_API int nl_consume_legacy(DLManagedTensor* t, double* out) {
  if (!t || !out || !readable(&t->dl_tensor)) return -1;
  *out = sum(&t->dl_tensor);
  if (t->deleter) t->deleter(t);
  return 0;
}

/* Writes value into element i (row-major index) of a borrowed float64
 * tensor, as a library writing its output into a caller's tensor would. */
NL_API int nl_store_f64(const DLTensor* t, int64_t i, double value) {
  if (!t || t->device.device_type != kDLCPU || t->dtype.code != kDLFloat || t->dtype.bits != 64 ||
      t->dtype.lanes != 1 || i < 0 || i >= count(t))
    return -1;
  ((double*)((char*)t->data + t->byte_offset))[offset_of(t, i)] = value;
  return 0;
}

/* What the library's own tensors hold: the struct, its shape and strides
 * and its elements, in one allocation. */
struct own_tensor {
  DLManagedTensorVersioned versioned;
  DLManagedTensor legacy;
  int64_t shape[1];
  int64_t strides[1];
  double data[];
};

static void own_release(struct own_tensor* o) {
  atomic_fetch_add(&own_deleter_calls, 1);
  atomic_fetch_sub(&own_live, 1);
  free(o);
}
static void own_deleter_versioned(DLManagedTensorVersioned* t) { own_release((struct own_tensor*)t->manager_ctx); }
static void own_deleter_legacy(DLManagedTensor* t) { own_release((struct own_tensor*)t->manager_ctx); }

static struct own_tensor* own_make(int64_t n, double start) {
  if (n < 0 || n > (int64_t)1 << 40) return NULL;
  struct own_tensor* o = calloc(1, sizeof *o + (size_t)n * sizeof(double));
  if (!o) return NULL;
  for (int64_t i = 0; i < n; ++i) o->data[i] = start + (double)i;
  o->shape[0] = n;
  o->strides[0] = 1;
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = o->data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = o->shape;
  t.strides = o->strides;
  o->versioned.dl_tensor = t;
  o->versioned.version.major = DLPACK_MAJOR_VERSION;
  o->versioned.version.minor = DLPACK_MINOR_VERSION;
  o->versioned.manager_ctx = o;
  o->versioned.deleter = own_deleter_versioned;
  o->legacy.dl_tensor = t;
  o->legacy.manager_ctx = o;
  o->legacy.deleter = own_deleter_legacy;
  atomic_fetch_add(&own_live, 1);
  return o;
}

/* A float64 tensor of the library's own, [start, start + 1, ...] of n
 * elements; the caller owns it and runs its deleter. NULL when n is
 * negative or too large, or memory ran out. */
NL_API DLManagedTensorVersioned* nl_make_versioned(int64_t n, double start) {
  struct own_tensor* o = own_make(n, start);
  return o ? &o->versioned : NULL;
}

/* The same as a legacy managed tensor. */
NL_API DLManagedTensor* nl_make_legacy(int64_t n, double start) {
  struct own_tensor* o = own_make(n, start);
  return o ? &o->legacy : NULL;
}

/* How many of the library's own tensors had their deleter run, and how many
 * are still alive. */
NL_API long long nl_deleter_calls(void) { return atomic_load(&own_deleter_calls); }
NL_API long long nl_live(void) { return atomic_load(&own_live); }
