/*
 * consumer: takes DLPack tensors in from another producer and reads them
 * correctly whatever their layout.
 *
 * The "producer" here is a few lines of this file that build managed
 * tensors the way a foreign library would: a float64 3x4 matrix stored
 * transposed (strides {1, 3}) behind a byte_offset, and a legacy int16
 * tensor that is a strided slice (every other column). dlb_import_* takes
 * ownership; the sum walks the strides for any int/uint/float of 8 to 64
 * bits; releasing the buffer runs the producer's deleter exactly once.
 *
 * Build: cc -std=c99 -I include examples/consumer.c -L build/src -ldlbridge
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlbridge/dlbridge.h>

/* ---- the foreign producer ------------------------------------------------ */

static int deleter_calls = 0;

struct foreign {
  void* data;
  int64_t shape[2];
  int64_t strides[2];
};

static void foreign_free(struct foreign* f) {
  free(f->data);
  free(f);
  ++deleter_calls;
  printf("producer: deleter ran (%d so far)\n", deleter_calls);
}

static void delete_versioned(DLManagedTensorVersioned* self) {
  foreign_free((struct foreign*)self->manager_ctx);
  free(self);
}

static void delete_legacy(DLManagedTensor* self) {
  foreign_free((struct foreign*)self->manager_ctx);
  free(self);
}

/* A 3x4 float64 matrix m[i][j] = 10*i + j, stored column-major (the
 * transpose of a 4x3 row-major array), after two padding elements. */
static DLManagedTensorVersioned* make_transposed_f64(void) {
  struct foreign* f = (struct foreign*)calloc(1, sizeof *f);
  DLManagedTensorVersioned* t = (DLManagedTensorVersioned*)calloc(1, sizeof *t);
  double* storage = (double*)malloc((2 + 12) * sizeof(double));
  int i, j;
  if (f == NULL || t == NULL || storage == NULL) exit(1);
  storage[0] = storage[1] = -1e9; /* padding a consumer must skip */
  for (i = 0; i < 3; ++i)
    for (j = 0; j < 4; ++j) storage[2 + j * 3 + i] = 10.0 * i + j;
  f->data = storage;
  f->shape[0] = 3;
  f->shape[1] = 4;
  f->strides[0] = 1;
  f->strides[1] = 3;
  t->version.major = 1;
  t->version.minor = 0;
  t->manager_ctx = f;
  t->deleter = delete_versioned;
  t->flags = 0;
  t->dl_tensor.data = storage;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.device.device_id = 0;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = kDLFloat;
  t->dl_tensor.dtype.bits = 64;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = f->shape;
  t->dl_tensor.strides = f->strides;
  t->dl_tensor.byte_offset = 2 * sizeof(double);
  return t;
}

/* Columns 0, 2, 4 of a 2x6 int16 array a[i][j] = 100*i - j: shape {2, 3},
 * strides {6, 2}, a legacy (pre-1.0) managed tensor. */
static DLManagedTensor* make_sliced_i16(void) {
  struct foreign* f = (struct foreign*)calloc(1, sizeof *f);
  DLManagedTensor* t = (DLManagedTensor*)calloc(1, sizeof *t);
  int16_t* storage = (int16_t*)malloc(12 * sizeof(int16_t));
  int i, j;
  if (f == NULL || t == NULL || storage == NULL) exit(1);
  for (i = 0; i < 2; ++i)
    for (j = 0; j < 6; ++j) storage[i * 6 + j] = (int16_t)(100 * i - j);
  f->data = storage;
  f->shape[0] = 2;
  f->shape[1] = 3;
  f->strides[0] = 6;
  f->strides[1] = 2;
  t->manager_ctx = f;
  t->deleter = delete_legacy;
  t->dl_tensor.data = storage;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = kDLInt;
  t->dl_tensor.dtype.bits = 16;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = f->shape;
  t->dl_tensor.strides = f->strides;
  t->dl_tensor.byte_offset = 0;
  return t;
}

/* ---- the consumer --------------------------------------------------------- */

/* One element at `p` as a double, for int/uint 8..64 and float 32/64. */
static int read_element(const void* p, DLDataType dt, double* out) {
  if (dt.lanes != 1) return 0;
  switch (dt.code) {
    case kDLInt:
      switch (dt.bits) {
        case 8: { int8_t v; memcpy(&v, p, 1); *out = v; return 1; }
        case 16: { int16_t v; memcpy(&v, p, 2); *out = v; return 1; }
        case 32: { int32_t v; memcpy(&v, p, 4); *out = v; return 1; }
        case 64: { int64_t v; memcpy(&v, p, 8); *out = (double)v; return 1; }
      }
      return 0;
    case kDLUInt:
      switch (dt.bits) {
        case 8: { uint8_t v; memcpy(&v, p, 1); *out = v; return 1; }
        case 16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 1; }
        case 32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 1; }
        case 64: { uint64_t v; memcpy(&v, p, 8); *out = (double)v; return 1; }
      }
      return 0;
    case kDLFloat:
      switch (dt.bits) {
        case 32: { float v; memcpy(&v, p, 4); *out = v; return 1; }
        case 64: { double v; memcpy(&v, p, 8); *out = v; return 1; }
      }
      return 0;
    default:
      return 0;
  }
}

/* Sums every element of a host tensor, honouring byte_offset and strides. */
static int sum_tensor(const DLTensor* t, double* sum) {
  int64_t index[DLB_MAX_NDIM];
  const size_t elem = (size_t)(t->dtype.bits / 8);
  int d;
  *sum = 0.0;
  for (d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0) return 1;
    index[d] = 0;
  }
  for (;;) {
    int64_t offset = 0;
    double v;
    for (d = 0; d < t->ndim; ++d) offset += index[d] * t->strides[d];
    if (!read_element((const char*)t->data + t->byte_offset + offset * (int64_t)elem, t->dtype, &v)) return 0;
    *sum += v;
    for (d = t->ndim - 1; d >= 0; --d) {
      if (++index[d] < t->shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return 1;
  }
}

static int report(const char* label, dlb_buffer* buffer) {
  DLTensor view;
  char name[32];
  double sum;
  dlb_status s = dlb_buffer_dltensor(buffer, &view);
  if (s != DLB_OK || dlb_dtype_name(view.dtype, name, sizeof name) != DLB_OK) {
    fprintf(stderr, "consumer: %s: %s\n", dlb_status_name(s), dlb_last_error_message());
    return 0;
  }
  if (!sum_tensor(&view, &sum)) {
    fprintf(stderr, "consumer: dtype %s is not summable here\n", name);
    return 0;
  }
  printf("consumer: %s: %s shape (%" PRId64 ", %" PRId64 ") strides (%" PRId64 ", %" PRId64 ") byte_offset %" PRIu64
         "\n",
         label, name, view.shape[0], view.shape[1], view.strides[0], view.strides[1], view.byte_offset);
  printf("consumer: %s: sum = %g\n", label, sum);
  return 1;
}

int main(void) {
  DLManagedTensorVersioned* a = make_transposed_f64();
  DLManagedTensor* b = make_sliced_i16();
  dlb_buffer* buf = NULL;
  dlb_status s;
  int ok = 1;

  s = dlb_import_versioned(a, NULL, &buf);
  if (s != DLB_OK) {
    fprintf(stderr, "consumer: import failed: %s: %s\n", dlb_status_name(s), dlb_last_error_message());
    dlb_managed_free_versioned(a); /* still ours on failure */
    return 1;
  }
  ok &= report("transposed float64", buf);
  dlb_buffer_release(buf);
  printf("consumer: released; deleter calls: %d\n", deleter_calls);

  buf = NULL;
  s = dlb_import_legacy(b, NULL, &buf);
  if (s != DLB_OK) {
    fprintf(stderr, "consumer: import failed: %s: %s\n", dlb_status_name(s), dlb_last_error_message());
    dlb_managed_free_legacy(b);
    return 1;
  }
  ok &= report("sliced int16", buf);
  dlb_buffer_release(buf);
  printf("consumer: released; deleter calls: %d\n", deleter_calls);
  return ok && deleter_calls == 2 ? 0 : 1;
}
