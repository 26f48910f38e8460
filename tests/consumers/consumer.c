/*
 * The program every consumer project builds against an installed dlbridge:
 * it allocates a tensor, exports it (versioned and legacy), imports the
 * exports back, and checks data, zero-copy identity and that every deleter
 * ran. Exit status 0 means the install is usable from C.
 */
#include <stdio.h>
#include <string.h>

#include <dlbridge/dlbridge.h>

static int failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "consumer.c:%d: check failed: %s (last error: %s)\n", \
              __LINE__, #cond, dlb_last_error_message());                   \
      failures++;                                                           \
    }                                                                       \
  } while (0)

int main(void) {
  const DLDevice cpu = {kDLCPU, 0};
  const DLDataType f32 = {kDLFloat, 32, 1};
  const int64_t shape[2] = {2, 3};
  dlb_buffer* buf = NULL;
  dlb_buffer* imported = NULL;
  DLManagedTensorVersioned* versioned = NULL;
  DLManagedTensor* legacy = NULL;
  DLTensor view;
  float* data;
  int i;

  CHECK(dlb_version_number() == DLB_VERSION_NUMBER);

  CHECK(dlb_buffer_alloc(cpu, f32, 2, shape, &buf) == DLB_OK);
  if (buf == NULL) return 1;
  CHECK(dlb_buffer_dltensor(buf, &view) == DLB_OK);
  data = (float*)view.data;
  for (i = 0; i < 6; i++) data[i] = (float)i * 1.5f;

  /* Versioned export, then import: the same memory, one deleter call. */
  CHECK(dlb_export_versioned(buf, NULL, &versioned) == DLB_OK);
  if (versioned == NULL) return 1;
  CHECK(versioned->version.major == DLB_DLPACK_MAJOR);
  CHECK(versioned->dl_tensor.ndim == 2 && versioned->dl_tensor.shape[1] == 3);
  CHECK(dlb_live_exports() == 1);
  CHECK(dlb_import_versioned(versioned, NULL, &imported) == DLB_OK);
  if (imported == NULL) return 1;
  CHECK(dlb_buffer_dltensor(imported, &view) == DLB_OK);
  CHECK(view.data == (void*)data);
  CHECK(((const float*)view.data)[5] == 7.5f);
  dlb_buffer_release(imported);
  imported = NULL;
  CHECK(dlb_live_exports() == 0);

  /* Legacy export, then import. */
  CHECK(dlb_export_legacy(buf, NULL, &legacy) == DLB_OK);
  if (legacy == NULL) return 1;
  CHECK(dlb_import_legacy(legacy, NULL, &imported) == DLB_OK);
  if (imported == NULL) return 1;
  CHECK(dlb_buffer_nbytes(imported) == 6 * sizeof(float));
  dlb_buffer_release(imported);
  dlb_buffer_release(buf);
  CHECK(dlb_live_exports() == 0);

  if (failures != 0) return 1;
  printf("dlbridge %s consumer: ok\n", dlb_version_string());
  return 0;
}
