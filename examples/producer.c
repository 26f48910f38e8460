/*
 * producer: a program that owns an image and hands it out through DLPack.
 *
 * The image (4 rows x 6 columns x 3 channels, uint8, HWC) is memory this
 * program allocated. dlb_buffer_wrap() wraps it without copying; the export
 * is what a consumer (numpy, torch, another library) would receive. The
 * release callback frees the image once nothing uses it: not when the
 * buffer handle goes, but when the consumer calls the export's deleter.
 *
 * Build: cc -std=c99 -I include examples/producer.c -L build/src -ldlbridge
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <dlbridge/dlbridge.h>

enum { H = 4, W = 6, C = 3 };

struct image {
  uint8_t* pixels;
  size_t size;
};

/* Runs exactly once, when the last user of the memory is gone. */
static void release_image(void* ctx) {
  struct image* img = (struct image*)ctx;
  printf("producer: release callback: freeing the %zu-byte image\n", img->size);
  free(img->pixels);
  free(img);
}

static int fail(const char* what, dlb_status s) {
  fprintf(stderr, "producer: %s failed: %s: %s\n", what, dlb_status_name(s), dlb_last_error_message());
  return 1;
}

int main(void) {
  struct image* img = (struct image*)malloc(sizeof *img);
  int64_t shape[3] = {H, W, C};
  DLTensor view;
  dlb_buffer* buffer = NULL;
  DLManagedTensorVersioned* exported = NULL;
  const DLTensor* t;
  char dtype_name[32];
  dlb_status s;
  int i;

  if (img == NULL) return 1;
  img->size = (size_t)H * W * C;
  img->pixels = (uint8_t*)malloc(img->size);
  if (img->pixels == NULL) return 1;
  for (i = 0; i < H * W * C; ++i) img->pixels[i] = (uint8_t)i; /* pixel (y,x,c) = (y*W+x)*C+c */

  view.data = img->pixels;
  view.device.device_type = kDLCPU;
  view.device.device_id = 0;
  view.ndim = 3;
  view.dtype.code = kDLUInt;
  view.dtype.bits = 8;
  view.dtype.lanes = 1;
  view.shape = shape;
  view.strides = NULL; /* compact row-major */
  view.byte_offset = 0;

  s = dlb_buffer_wrap(&view, 0, release_image, img, &buffer);
  if (s != DLB_OK) {
    free(img->pixels);
    free(img);
    return fail("dlb_buffer_wrap", s);
  }
  printf("producer: wrapped a %dx%dx%d uint8 image at %p\n", H, W, C, (void*)img->pixels);

  s = dlb_export_versioned(buffer, NULL, &exported);
  if (s != DLB_OK) {
    dlb_buffer_release(buffer);
    return fail("dlb_export_versioned", s);
  }
  /* The handle is not needed any more: the export holds its own reference. */
  dlb_buffer_release(buffer);
  printf("producer: buffer handle released; the export keeps the image alive\n");

  t = &exported->dl_tensor;
  if (dlb_dtype_name(t->dtype, dtype_name, sizeof dtype_name) != DLB_OK) return fail("dlb_dtype_name", 1);
  printf("consumer sees: DLPack %u.%u, flags %" PRIu64 "\n", exported->version.major, exported->version.minor,
         exported->flags);
  printf("consumer sees: shape (%" PRId64 ", %" PRId64 ", %" PRId64 "), strides (%" PRId64 ", %" PRId64 ", %" PRId64
         ") elements\n",
         t->shape[0], t->shape[1], t->shape[2], t->strides[0], t->strides[1], t->strides[2]);
  printf("consumer sees: dtype %s, device (%d, %d)\n", dtype_name, (int)t->device.device_type, (int)t->device.device_id);
  printf("consumer sees: data %p (%s)\n", (void*)((char*)t->data + t->byte_offset),
         (uint8_t*)t->data + t->byte_offset == img->pixels ? "the producer's own memory: zero-copy" : "a copy");
  {
    const uint8_t* px = (const uint8_t*)t->data + t->byte_offset;
    int64_t y = 2, x = 5;
    printf("consumer sees: pixel (2, 5) = (%u, %u, %u)\n", px[y * t->strides[0] + x * t->strides[1]],
           px[y * t->strides[0] + x * t->strides[1] + t->strides[2]],
           px[y * t->strides[0] + x * t->strides[1] + 2 * t->strides[2]]);
  }
  printf("producer: live exports: %" PRId64 "\n", dlb_live_exports());

  printf("consumer: done, calling the deleter\n");
  exported->deleter(exported);
  printf("producer: live exports: %" PRId64 "\n", dlb_live_exports());
  return dlb_live_exports() == 0 ? 0 : 1;
}
