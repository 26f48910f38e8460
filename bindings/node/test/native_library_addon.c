/* Test only: tests/lang/native_library.c (a native library that takes
 * DLPack, knowing nothing of dlbridge) made callable from JavaScript, as
 * any addon of a native library would be. Tensors cross by address (a
 * BigInt), the binding's raw-pointer entry points (ManagedTensor#address,
 * #transfer, ManagedTensor.adopt). Built by scripts/test.d/59-node.sh with
 * cc, linked to the build's libnative_library.so. */
#include <dlbridge/dlbridge.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>

int nl_sum(const DLTensor* t, double* out);
int nl_consume_versioned(DLManagedTensorVersioned* t, double* out);
int nl_consume_legacy(DLManagedTensor* t, double* out);
int nl_store_f64(const DLTensor* t, int64_t i, double value);
DLManagedTensorVersioned* nl_make_versioned(int64_t n, double start);
DLManagedTensor* nl_make_legacy(int64_t n, double start);
long long nl_deleter_calls(void);
long long nl_live(void);

static napi_value fail(napi_env env, const char* what) {
  napi_throw_error(env, "ERR_NATIVE_LIBRARY", what);
  return NULL;
}

/* (address, versioned, ...numbers) */
static bool read_args(napi_env env, napi_callback_info info, void** t, bool* versioned, double* nums, size_t n) {
  napi_value a[4];
  size_t argc = 4;
  uint64_t address = 0;
  bool lossless;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc < 2 + n || napi_get_value_bigint_uint64(env, a[0], &address, &lossless) != napi_ok ||
      napi_get_value_bool(env, a[1], versioned) != napi_ok)
    return fail(env, "arguments: (address BigInt, versioned, ...)"), false;
  for (size_t i = 0; i < n; ++i) napi_get_value_double(env, a[2 + i], &nums[i]);
  *t = (void*)(uintptr_t)address;
  return true;
}

static DLTensor* dltensor(void* t, bool versioned) {
  return versioned ? &((DLManagedTensorVersioned*)t)->dl_tensor : &((DLManagedTensor*)t)->dl_tensor;
}

static napi_value number(napi_env env, double d) {
  napi_value v;
  napi_create_double(env, d, &v);
  return v;
}

static napi_value js_sum(napi_env env, napi_callback_info info) {
  void* t;
  bool versioned;
  double out;
  if (!read_args(env, info, &t, &versioned, NULL, 0)) return NULL;
  return nl_sum(dltensor(t, versioned), &out) == 0 ? number(env, out) : fail(env, "nl_sum refused the tensor");
}

static napi_value js_store(napi_env env, napi_callback_info info) {
  void* t;
  bool versioned;
  double nums[2];
  if (!read_args(env, info, &t, &versioned, nums, 2)) return NULL;
  return nl_store_f64(dltensor(t, versioned), (int64_t)nums[0], nums[1]) == 0 ? NULL : fail(env, "nl_store_f64 refused");
}

static napi_value js_data(napi_env env, napi_callback_info info) {
  void* t;
  bool versioned;
  napi_value v;
  if (!read_args(env, info, &t, &versioned, NULL, 0)) return NULL;
  napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)dltensor(t, versioned)->data, &v);
  return v;
}

static int consume(void* t, bool versioned, double* out) {
  return versioned ? nl_consume_versioned(t, out) : nl_consume_legacy(t, out);
}

static napi_value js_consume(napi_env env, napi_callback_info info) {
  void* t;
  bool versioned;
  double out;
  if (!read_args(env, info, &t, &versioned, NULL, 0)) return NULL;
  return consume(t, versioned, &out) == 0 ? number(env, out) : fail(env, "the library refused the tensor");
}

struct job {
  void* t;
  bool versioned;
  double out;
  int rc;
};

static void* run_job(void* arg) {
  struct job* j = arg;
  j->rc = consume(j->t, j->versioned, &j->out);
  return NULL;
}

/* The library consumes the tensor on a thread of its own, where the
 * deleter runs; the call waits for that thread. */
static napi_value js_consume_on_thread(napi_env env, napi_callback_info info) {
  struct job j = {0};
  pthread_t thread;
  if (!read_args(env, info, &j.t, &j.versioned, NULL, 0)) return NULL;
  if (pthread_create(&thread, NULL, run_job, &j) != 0) return fail(env, "pthread_create failed");
  pthread_join(thread, NULL);
  return j.rc == 0 ? number(env, j.out) : fail(env, "the library refused the tensor");
}

/* make(n, start, versioned): the library's own float64 tensor, by address */
static napi_value js_make(napi_env env, napi_callback_info info) {
  napi_value a[3], v;
  size_t argc = 3;
  double n = 0, start = 0;
  bool versioned = true;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  napi_get_value_double(env, a[0], &n);
  napi_get_value_double(env, a[1], &start);
  napi_get_value_bool(env, a[2], &versioned);
  void* t = versioned ? (void*)nl_make_versioned((int64_t)n, start) : (void*)nl_make_legacy((int64_t)n, start);
  if (!t) return fail(env, "nl_make refused");
  napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)t, &v);
  return v;
}

/* A legacy tensor that breaks the DLPack rules (an extent of -1), whose
 * deleter counts its calls: for the binding's refused imports. */
static int64_t malformed_shape[1] = {-1};
static double malformed_data[1];
static long long malformed_deletes;
static void malformed_deleter(DLManagedTensor* t) {
  (void)t;
  ++malformed_deletes;
}
static DLManagedTensor malformed = {
    {malformed_data, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, malformed_shape, NULL, 0}, NULL, malformed_deleter};

static napi_value js_make_malformed(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)&malformed, &v);
  return v;
}

static napi_value js_malformed_deletes(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)malformed_deletes);
}

/* A strided tensor (every other float64 of 8, shape [4], strides [2]),
 * legacy, static; its deleter counts. */
static double strided_data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
static int64_t strided_shape[1] = {4}, strided_strides[1] = {2};
static long long strided_deletes;
static void strided_deleter(DLManagedTensor* t) {
  (void)t;
  ++strided_deletes;
}
static DLManagedTensor strided = {
    {strided_data, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, strided_shape, strided_strides, 0}, NULL, strided_deleter};

static napi_value js_make_strided(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)&strided, &v);
  return v;
}

static napi_value js_strided_deletes(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)strided_deletes);
}

static napi_value js_deleter_calls(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)nl_deleter_calls());
}

static napi_value js_live(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)nl_live());
}

NAPI_MODULE_INIT() {
  static const struct {
    const char* name;
    napi_callback fn;
  } fns[] = {{"sum", js_sum},   {"store", js_store}, {"data", js_data}, {"consume", js_consume},
             {"consumeOnThread", js_consume_on_thread}, {"make", js_make},
             {"deleterCalls", js_deleter_calls}, {"live", js_live}, {"makeMalformed", js_make_malformed},
             {"malformedDeletes", js_malformed_deletes}, {"makeStrided", js_make_strided},
             {"stridedDeletes", js_strided_deletes}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}
