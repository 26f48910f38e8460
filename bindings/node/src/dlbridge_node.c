/* dlbridge for Node.js: the N-API addon under index.js.
 *
 * Handles are napi externals, type-tagged so that a wrong object is a
 * TypeError and never a crash: a buffer handle holds one dlb_buffer
 * reference, a tensor handle one owned managed tensor. close() drops them at
 * once; the external's finalizer drops what close() did not, as a backstop.
 *
 * Memory of JavaScript (dlb_buffer_wrap over an ArrayBuffer) is kept alive
 * by a strong napi reference to the ArrayBuffer, which the library's
 * release callback drops. That callback runs on whichever thread drops the
 * last reference: a native library may run an export's deleter on a thread
 * of its own. A napi reference may only be touched on its environment's
 * thread, so a release on another thread is posted to that thread through
 * one thread-safe function per environment (unreferenced: it never keeps
 * the event loop alive); a release on the environment's own thread, the
 * common case, deletes the reference at once. Once the environment is
 * being torn down, releases leave the reference to the teardown.
 *
 * Errors: a refusal of the library is a DlbError (the class index.js hands
 * to init()) whose `code` is the status name dlb_status_name() gives
 * ("DLB_ERR_DELETED") and whose `status` is its number, with the library's
 * message (read on the thread that made the call: for openTicketAsync, in
 * the worker). A closed handle is DLB_ERR_INVALID_ARGUMENT, as in the other
 * bindings. Host views are the library's: dlb_buffer_host_view() decides
 * which buffers JavaScript may see as an ArrayBuffer. */
#include <dlbridge/dlbridge.h>
#include <node_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL(env, expr)                                                      \
  do {                                                                       \
    if ((expr) != napi_ok) return throw_napi(env);                           \
  } while (0)

static const napi_type_tag BUFFER_TAG = {0x646c62726964676bULL, 0x6275666665720001ULL};
static const napi_type_tag TENSOR_TAG = {0x646c62726964676bULL, 0x74656e736f720001ULL};

typedef struct buffer_handle {
  dlb_buffer* buffer; /* NULL once closed */
} buffer_handle;

typedef struct tensor_handle {
  void* tensor; /* NULL once closed, imported or handed on */
  bool versioned;
} tensor_handle;

/* ---------------------------------------------------------------- errors */

typedef struct env_state env_state;
static napi_ref error_class_of(napi_env env);

static napi_value throw_napi(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) {
    const napi_extended_error_info* info = NULL;
    napi_get_last_error_info(env, &info);
    napi_throw_error(env, "ERR_DLBRIDGE_NAPI", info && info->error_message ? info->error_message : "N-API call failed");
  }
  return NULL;
}

/* A DlbError(message, code, status) (a plain Error with the same fields
 * before init()); false with an exception pending when N-API fails. */
static bool make_error(napi_env env, dlb_status status, const char* message, napi_value* out) {
  napi_value argv[3], ctor;
  napi_ref cls = error_class_of(env);
  if (napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &argv[0]) != napi_ok ||
      napi_create_string_utf8(env, dlb_status_name(status), NAPI_AUTO_LENGTH, &argv[1]) != napi_ok ||
      napi_create_int32(env, status, &argv[2]) != napi_ok)
    return false;
  if (cls && napi_get_reference_value(env, cls, &ctor) == napi_ok && ctor)
    return napi_new_instance(env, ctor, 3, argv, out) == napi_ok;
  return napi_create_error(env, argv[1], argv[0], out) == napi_ok &&
         napi_set_named_property(env, *out, "status", argv[2]) == napi_ok;
}

static napi_value throw_with(napi_env env, dlb_status status, const char* message) {
  napi_value err;
  if (!make_error(env, status, message, &err)) return throw_napi(env);
  napi_throw(env, err);
  return NULL;
}

/* The calling thread's last error, read right after the call that failed. */
static napi_value throw_status(napi_env env, dlb_status status) {
  return throw_with(env, status, dlb_last_error_message());
}

/* --------------------------------------------------------------- handles */

static void buffer_finalize(napi_env env, void* data, void* hint) {
  (void)env, (void)hint;
  buffer_handle* h = data;
  dlb_buffer_release(h->buffer);
  free(h);
}

static void tensor_free(tensor_handle* h) {
  void* t = h->tensor;
  h->tensor = NULL;
  if (h->versioned) dlb_managed_free_versioned(t);
  else dlb_managed_free_legacy(t);
}

static void tensor_finalize(napi_env env, void* data, void* hint) {
  (void)env, (void)hint;
  tensor_free(data);
  free(data);
}

static napi_value new_handle(napi_env env, void* h, const napi_type_tag* tag, napi_finalize fin) {
  napi_value ext;
  if (napi_create_external(env, h, fin, NULL, &ext) != napi_ok) {
    fin(env, h, NULL);
    return throw_napi(env);
  }
  CALL(env, napi_type_tag_object(env, ext, tag));
  return ext;
}

static napi_value new_buffer(napi_env env, dlb_buffer* b) {
  buffer_handle* h = malloc(sizeof *h);
  if (!h) {
    dlb_buffer_release(b);
    napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory");
    return NULL;
  }
  h->buffer = b;
  return new_handle(env, h, &BUFFER_TAG, buffer_finalize);
}

static napi_value new_tensor(napi_env env, void* t, bool versioned) {
  tensor_handle* h = malloc(sizeof *h);
  if (!h) {
    if (versioned) dlb_managed_free_versioned(t);
    else dlb_managed_free_legacy(t);
    napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory");
    return NULL;
  }
  h->tensor = t;
  h->versioned = versioned;
  return new_handle(env, h, &TENSOR_TAG, tensor_finalize);
}

/* The handle behind v, checked; NULL with an exception pending. */
static void* unwrap(napi_env env, napi_value v, const napi_type_tag* tag) {
  bool ok = false;
  void* h = NULL;
  if (napi_check_object_type_tag(env, v, tag, &ok) != napi_ok || !ok ||
      napi_get_value_external(env, v, &h) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "not a dlbridge handle of this kind");
    return NULL;
  }
  return h;
}

static dlb_buffer* buffer_of(napi_env env, napi_value v) {
  buffer_handle* h = unwrap(env, v, &BUFFER_TAG);
  if (h && !h->buffer) throw_with(env, DLB_ERR_INVALID_ARGUMENT, "the buffer is closed");
  return h ? h->buffer : NULL;
}

static tensor_handle* tensor_of(napi_env env, napi_value v) {
  tensor_handle* h = unwrap(env, v, &TENSOR_TAG);
  if (h && !h->tensor) {
    throw_with(env, DLB_ERR_INVALID_ARGUMENT, "the managed tensor was closed, imported or handed on");
    return NULL;
  }
  return h;
}

/* ------------------------------------------------------------- arguments */

#define MAX_ARGS 4

static bool args(napi_env env, napi_callback_info info, size_t n, napi_value* out) {
  size_t got = n;
  if (napi_get_cb_info(env, info, &got, out, NULL, NULL) != napi_ok) return throw_napi(env), false;
  for (size_t i = got; i < n; ++i) napi_get_undefined(env, &out[i]);
  return true;
}

static bool get_dtype(napi_env env, napi_value v, DLDataType* out) {
  char stack[64], *name = stack;
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "the dtype must be a string such as 'float32'");
    return false;
  }
  if (len >= sizeof stack && !(name = malloc(len + 1))) {
    napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory");
    return false;
  }
  napi_get_value_string_utf8(env, v, name, len + 1, &len);
  dlb_status s = dlb_dtype_from_name(name, out);
  if (name != stack) free(name);
  if (s != DLB_OK) return throw_status(env, s), false;
  return true;
}

/* Reads a shape: an array of integers. *ndim is its length (which the
 * library checks); at most DLB_MAX_NDIM extents are stored. */
static bool get_shape(napi_env env, napi_value v, int64_t* shape, int32_t* ndim) {
  bool is_array = false;
  uint32_t len = 0;
  if (napi_is_array(env, v, &is_array) != napi_ok || !is_array || napi_get_array_length(env, v, &len) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "the shape must be an array of integers");
    return false;
  }
  for (uint32_t i = 0; i < len && i < DLB_MAX_NDIM; ++i) {
    napi_value e;
    double d;
    if (napi_get_element(env, v, i, &e) != napi_ok || napi_get_value_double(env, e, &d) != napi_ok ||
        !(d > -9223372036854775808.0 && d < 9223372036854775808.0) || d != (double)(int64_t)d) {
      napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "the shape must be an array of integers");
      return false;
    }
    shape[i] = (int64_t)d;
  }
  *ndim = len > INT32_MAX ? INT32_MAX : (int32_t)len;
  return true;
}

static napi_value int64_array(napi_env env, const int64_t* v, int32_t n) {
  napi_value arr, e;
  CALL(env, napi_create_array_with_length(env, (size_t)n, &arr));
  for (int32_t i = 0; i < n; ++i) {
    CALL(env, napi_create_int64(env, v[i], &e));
    CALL(env, napi_set_element(env, arr, (uint32_t)i, e));
  }
  return arr;
}

/* ----------------------------------------------- JavaScript memory, kept */

struct env_state {
  napi_ref error_class; /* DlbError, from init(); NULL before */
  napi_threadsafe_function tsfn;
  pthread_t thread;
  pthread_mutex_t mutex;
  bool closing;      /* under mutex (written on the environment's thread) */
  atomic_int users;  /* the environment, and each pin not yet released */
};

static napi_ref error_class_of(napi_env env) {
  env_state* st = NULL;
  return napi_get_instance_data(env, (void**)&st) == napi_ok && st ? st->error_class : NULL;
}

typedef struct pin {
  napi_env env;
  napi_ref ref;
  env_state* state;
} pin;

static atomic_llong pins_alive; /* ArrayBuffers kept for the library */

static void state_unuse(env_state* st) {
  if (atomic_fetch_sub(&st->users, 1) == 1) {
    pthread_mutex_destroy(&st->mutex);
    free(st);
  }
}

static void pin_done(pin* p, bool delete_ref) {
  if (delete_ref) napi_delete_reference(p->env, p->ref);
  atomic_fetch_sub(&pins_alive, 1);
  state_unuse(p->state);
  free(p);
}

/* On the environment's thread, from the thread-safe function (env NULL
 * when it is being torn down). */
static void pin_release_posted(napi_env env, napi_value js_cb, void* context, void* data) {
  (void)js_cb, (void)context;
  pin_done(data, env != NULL);
}

/* dlb_release_fn of wraps over JavaScript memory: any thread. */
static void pin_release(void* ctx) {
  pin* p = ctx;
  env_state* st = p->state;
  pthread_mutex_lock(&st->mutex);
  if (st->closing) {
    pthread_mutex_unlock(&st->mutex);
    pin_done(p, false);
  } else if (pthread_equal(pthread_self(), st->thread)) {
    pthread_mutex_unlock(&st->mutex);
    pin_done(p, true);
  } else {
    napi_status s = napi_call_threadsafe_function(st->tsfn, p, napi_tsfn_nonblocking);
    pthread_mutex_unlock(&st->mutex);
    if (s != napi_ok) pin_done(p, false);
  }
}

static void env_cleanup(void* arg) {
  env_state* st = arg;
  pthread_mutex_lock(&st->mutex);
  st->closing = true;
  napi_release_threadsafe_function(st->tsfn, napi_tsfn_abort);
  pthread_mutex_unlock(&st->mutex);
  state_unuse(st);
}

/* --------------------------------------------------------------- exports */

static napi_value js_version(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CALL(env, napi_create_string_utf8(env, dlb_version_string(), NAPI_AUTO_LENGTH, &v));
  return v;
}

static napi_value js_live_exports(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CALL(env, napi_create_int64(env, dlb_live_exports(), &v));
  return v;
}

static napi_value js_pinned(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CALL(env, napi_create_int64(env, atomic_load(&pins_alive), &v));
  return v;
}

/* alloc(dtype, shape, shared) */
static napi_value js_alloc(napi_env env, napi_callback_info info) {
  napi_value a[3];
  DLDataType dtype;
  int64_t shape[DLB_MAX_NDIM];
  int32_t ndim;
  bool shared = false;
  if (!args(env, info, 3, a) || !get_dtype(env, a[0], &dtype) || !get_shape(env, a[1], shape, &ndim)) return NULL;
  napi_get_value_bool(env, a[2], &shared);
  DLDevice cpu = {kDLCPU, 0};
  dlb_buffer* b = NULL;
  dlb_status s = shared ? dlb_buffer_alloc_shared(cpu, dtype, ndim, shape, &b)
                        : dlb_buffer_alloc(cpu, dtype, ndim, shape, &b);
  return s == DLB_OK ? new_buffer(env, b) : throw_status(env, s);
}

/* wrap(arrayBufferOrView, dtype, shape): zero-copy over the JS memory. */
static napi_value js_wrap(napi_env env, napi_callback_info info) {
  napi_value a[3], ab = NULL;
  DLDataType dtype;
  int64_t shape[DLB_MAX_NDIM];
  int32_t ndim;
  if (!args(env, info, 3, a) || !get_dtype(env, a[1], &dtype) || !get_shape(env, a[2], shape, &ndim)) return NULL;
  bool is_ab = false, is_ta = false, is_dv = false;
  void* data = NULL;
  size_t length = 0, offset = 0;
  napi_is_arraybuffer(env, a[0], &is_ab);
  napi_is_typedarray(env, a[0], &is_ta);
  napi_is_dataview(env, a[0], &is_dv);
  if (is_ab) {
    ab = a[0];
    CALL(env, napi_get_arraybuffer_info(env, ab, &data, &length));
  } else if (is_ta) {
    napi_typedarray_type type;
    size_t count;
    napi_value v;
    int64_t byte_length = 0;
    CALL(env, napi_get_typedarray_info(env, a[0], &type, &count, &data, &ab, &offset));
    CALL(env, napi_get_named_property(env, a[0], "byteLength", &v));
    CALL(env, napi_get_value_int64(env, v, &byte_length));
    length = (size_t)byte_length;
  } else if (is_dv) {
    CALL(env, napi_get_dataview_info(env, a[0], &length, &data, &ab, &offset));
  } else {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "wrap takes an ArrayBuffer, a TypedArray or a DataView");
    return NULL;
  }
  bool detached = false;
  if (napi_is_detached_arraybuffer(env, ab, &detached) == napi_ok && detached)
    return throw_with(env, DLB_ERR_DELETED, "the ArrayBuffer is detached (transferred away): it has no memory to wrap");
  env_state* st = NULL;
  CALL(env, napi_get_instance_data(env, (void**)&st));
  pin* p = malloc(sizeof *p);
  if (!p) return napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory"), NULL;
  p->env = env;
  p->state = st;
  if (napi_create_reference(env, ab, 1, &p->ref) != napi_ok) {
    free(p);
    return throw_napi(env);
  }
  DLTensor view;
  memset(&view, 0, sizeof view);
  view.data = data ? data : (void*)shape; /* an empty ArrayBuffer may have none: any address for 0 bytes */
  view.device.device_type = kDLCPU;
  view.ndim = ndim;
  view.dtype = dtype;
  view.shape = shape;
  dlb_buffer* b = NULL;
  dlb_status s = dlb_buffer_wrap(&view, 0, pin_release, p, &b);
  if (s != DLB_OK) {
    napi_delete_reference(env, p->ref); /* not called on failure: still ours */
    free(p);
    return throw_status(env, s);
  }
  atomic_fetch_add(&pins_alive, 1);
  atomic_fetch_add(&st->users, 1);
  if (dlb_buffer_nbytes(b) > length || (!data && dlb_buffer_nbytes(b) > 0)) {
    char msg[160];
    snprintf(msg, sizeof msg, "the tensor needs %llu bytes and the memory has %zu",
             (unsigned long long)dlb_buffer_nbytes(b), length);
    dlb_buffer_release(b); /* runs pin_release on this thread */
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
    return NULL;
  }
  return new_buffer(env, b);
}

/* importTensor(tensorHandle): on success the buffer owns the tensor. */
static napi_value js_import(napi_env env, napi_callback_info info) {
  napi_value a[1];
  tensor_handle* h;
  if (!args(env, info, 1, a) || !(h = tensor_of(env, a[0]))) return NULL;
  dlb_buffer* b = NULL;
  dlb_status s = h->versioned ? dlb_import_versioned(h->tensor, NULL, &b) : dlb_import_legacy(h->tensor, NULL, &b);
  if (s != DLB_OK) return throw_status(env, s); /* the handle still owns it */
  h->tensor = NULL;
  return new_buffer(env, b);
}

/* A ticket argument: a Uint8Array (or a Buffer), its bytes lent for the
 * call. Throws a TypeError and returns false for anything else. */
static bool ticket_arg(napi_env env, napi_value v, void** data, size_t* length) {
  bool is_ta = false;
  napi_typedarray_type type = napi_int8_array;
  if (napi_is_typedarray(env, v, &is_ta) != napi_ok ||
      (is_ta && napi_get_typedarray_info(env, v, &type, length, data, NULL, NULL) != napi_ok)) {
    throw_napi(env);
    return false;
  }
  if (!is_ta || type != napi_uint8_array) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "a ticket is a Uint8Array (or a Buffer)");
    return false;
  }
  return true;
}

/* openTicket(bytes) */
static napi_value js_open_ticket(napi_env env, napi_callback_info info) {
  napi_value a[1];
  if (!args(env, info, 1, a)) return NULL;
  size_t length = 0;
  void* data = NULL;
  if (!ticket_arg(env, a[0], &data, &length)) return NULL;
  dlb_buffer* b = NULL;
  dlb_status s = dlb_share_ticket_open(data, length, 0, &b);
  return s == DLB_OK ? new_buffer(env, b) : throw_status(env, s);
}

/* openTicketAsync(bytes): a Promise of a buffer handle. The open, which
 * waits for the issuer's answer (up to 20 s), runs on a worker thread of
 * libuv's pool; the ticket's bytes are copied first. */
typedef struct open_work {
  napi_async_work work;
  napi_deferred deferred;
  void* ticket;
  size_t size;
  dlb_buffer* buffer;
  dlb_status status;
  char message[1024]; /* the worker thread's error message */
} open_work;

static void open_execute(napi_env env, void* data) {
  (void)env;
  open_work* w = data;
  w->status = dlb_share_ticket_open(w->ticket, w->size, 0, &w->buffer);
  if (w->status != DLB_OK) snprintf(w->message, sizeof w->message, "%s", dlb_last_error_message());
}

static void open_complete(napi_env env, napi_status status, void* data) {
  open_work* w = data;
  napi_value result = NULL, err = NULL;
  if (status == napi_ok && w->status == DLB_OK) {
    dlb_buffer* b = w->buffer;
    w->buffer = NULL;
    result = new_buffer(env, b); /* releases b when it fails */
  } else if (status == napi_ok) {
    if (make_error(env, w->status, w->message, &err)) napi_reject_deferred(env, w->deferred, err);
  }
  if (result) {
    napi_resolve_deferred(env, w->deferred, result);
  } else if (!err) {
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
        napi_get_and_clear_last_exception(env, &err) == napi_ok)
      napi_reject_deferred(env, w->deferred, err);
  }
  dlb_buffer_release(w->buffer); /* cancelled or torn down: opened for nobody */
  napi_delete_async_work(env, w->work);
  free(w->ticket);
  free(w);
}

static napi_value js_open_ticket_async(napi_env env, napi_callback_info info) {
  napi_value a[1], promise, name;
  if (!args(env, info, 1, a)) return NULL;
  size_t length = 0;
  void* data = NULL;
  if (!ticket_arg(env, a[0], &data, &length)) return NULL;
  open_work* w = calloc(1, sizeof *w);
  if (w) w->ticket = malloc(length ? length : 1);
  if (!w || !w->ticket) {
    if (w) free(w);
    napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory");
    return NULL;
  }
  if (length) memcpy(w->ticket, data, length);
  w->size = length;
  if (napi_create_string_utf8(env, "dlbridge.openTicket", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, open_execute, open_complete, w, &w->work) != napi_ok) {
    free(w->ticket);
    free(w);
    return throw_napi(env);
  }
  if (napi_create_promise(env, &w->deferred, &promise) != napi_ok || napi_queue_async_work(env, w->work) != napi_ok) {
    napi_delete_async_work(env, w->work);
    free(w->ticket);
    free(w);
    return throw_napi(env);
  }
  return promise;
}

/* statusNames(): the library's status names, by number, from DLB_OK up to
 * the first number dlb_status_name() does not know. */
static napi_value js_status_names(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value arr, v;
  const char* unknown = dlb_status_name(-1);
  CALL(env, napi_create_array(env, &arr));
  for (int32_t i = 0; i < 4096 && strcmp(dlb_status_name(i), unknown) != 0; ++i) {
    CALL(env, napi_create_string_utf8(env, dlb_status_name(i), NAPI_AUTO_LENGTH, &v));
    CALL(env, napi_set_element(env, arr, (uint32_t)i, v));
  }
  return arr;
}

/* init(DlbError): the class of the errors thrown from now on. */
static napi_value js_init(napi_env env, napi_callback_info info) {
  napi_value a[1];
  napi_valuetype type;
  env_state* st = NULL;
  if (!args(env, info, 1, a)) return NULL;
  CALL(env, napi_typeof(env, a[0], &type));
  if (type != napi_function) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "init takes the error class");
    return NULL;
  }
  CALL(env, napi_get_instance_data(env, (void**)&st));
  if (st->error_class) napi_delete_reference(env, st->error_class);
  st->error_class = NULL;
  CALL(env, napi_create_reference(env, a[0], 1, &st->error_class));
  return NULL;
}

/* info(buffer): {shape, strides, dtype, nbytes, address} */
static napi_value js_info(napi_env env, napi_callback_info info) {
  napi_value a[1], obj, v;
  dlb_buffer* b;
  if (!args(env, info, 1, a) || !(b = buffer_of(env, a[0]))) return NULL;
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(b, &t);
  if (s != DLB_OK) return throw_status(env, s);
  char name[64];
  if ((s = dlb_dtype_name(t.dtype, name, sizeof name)) != DLB_OK) return throw_status(env, s);
  CALL(env, napi_create_object(env, &obj));
  if (!(v = int64_array(env, t.shape, t.ndim))) return NULL;
  CALL(env, napi_set_named_property(env, obj, "shape", v));
  if (!(v = int64_array(env, t.strides, t.ndim))) return NULL;
  CALL(env, napi_set_named_property(env, obj, "strides", v));
  CALL(env, napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &v));
  CALL(env, napi_set_named_property(env, obj, "dtype", v));
  CALL(env, napi_create_int64(env, (int64_t)dlb_buffer_nbytes(b), &v));
  CALL(env, napi_set_named_property(env, obj, "nbytes", v));
  CALL(env, napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)t.data + t.byte_offset, &v));
  CALL(env, napi_set_named_property(env, obj, "address", v));
  return obj;
}

/* flags(buffer): {readOnly, deleted}; also for a deleted buffer */
static napi_value js_flags(napi_env env, napi_callback_info info) {
  napi_value a[1], obj, v;
  dlb_buffer* b;
  if (!args(env, info, 1, a) || !(b = buffer_of(env, a[0]))) return NULL;
  uint64_t f = dlb_buffer_flags(b);
  CALL(env, napi_create_object(env, &obj));
  CALL(env, napi_get_boolean(env, (f & DLB_BUFFER_READ_ONLY) != 0, &v));
  CALL(env, napi_set_named_property(env, obj, "readOnly", v));
  CALL(env, napi_get_boolean(env, (f & DLB_BUFFER_DELETED) != 0, &v));
  CALL(env, napi_set_named_property(env, obj, "deleted", v));
  return obj;
}

static void view_finalize(napi_env env, void* data, void* hint) {
  (void)env, (void)data;
  dlb_buffer_release(hint);
}

/* view(buffer): an external ArrayBuffer over the elements, holding a
 * reference of its own until it is collected. Which buffers have one is
 * the library's rule (dlb_buffer_host_view); JavaScript has no read-only
 * ArrayBuffer, so the view is asked for writing. */
static napi_value js_view(napi_env env, napi_callback_info info) {
  napi_value a[1], ab;
  dlb_buffer* b;
  if (!args(env, info, 1, a) || !(b = buffer_of(env, a[0]))) return NULL;
  dlb_host_view view;
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  dlb_status s = dlb_buffer_host_view(b, DLB_HOST_VIEW_WRITE, &view);
  if (s != DLB_OK) return throw_status(env, s);
  if (view.nbytes == 0) {
    CALL(env, napi_create_arraybuffer(env, 0, NULL, &ab));
    return ab;
  }
  if (view.nbytes > SIZE_MAX) return throw_with(env, DLB_ERR_OVERFLOW, "the buffer is larger than this process can address");
  dlb_buffer_retain(b);
  if (napi_create_external_arraybuffer(env, view.data, (size_t)view.nbytes, view_finalize, b, &ab) != napi_ok) {
    dlb_buffer_release(b);
    return throw_napi(env);
  }
  return ab;
}

static bool get_copy(napi_env env, napi_value v, int32_t* copy) {
  char name[16] = "";
  napi_valuetype type;
  napi_typeof(env, v, &type);
  if (type == napi_undefined) return *copy = DLB_COPY_IF_NEEDED, true;
  napi_get_value_string_utf8(env, v, name, sizeof name, NULL);
  if (!strcmp(name, "ifNeeded")) *copy = DLB_COPY_IF_NEEDED;
  else if (!strcmp(name, "never")) *copy = DLB_COPY_NEVER;
  else if (!strcmp(name, "always")) *copy = DLB_COPY_ALWAYS;
  else {
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "copy must be 'ifNeeded', 'never' or 'always'");
    return false;
  }
  return true;
}

/* exportTensor(buffer, versioned, copy, readOnly) */
static napi_value js_export(napi_env env, napi_callback_info info) {
  napi_value a[4];
  dlb_buffer* b;
  bool versioned = true, read_only = false;
  int32_t copy;
  if (!args(env, info, 4, a) || !(b = buffer_of(env, a[0])) || !get_copy(env, a[2], &copy)) return NULL;
  napi_get_value_bool(env, a[1], &versioned);
  napi_get_value_bool(env, a[3], &read_only);
  dlb_export_options options, *o = NULL;
  if (copy != DLB_COPY_IF_NEEDED || read_only) {
    dlb_export_options_init(&options);
    options.copy = copy;
    options.flags = read_only ? DLB_EXPORT_READ_ONLY : 0;
    o = &options;
  }
  void* t = NULL;
  dlb_status s = versioned ? dlb_export_versioned(b, o, (DLManagedTensorVersioned**)&t)
                           : dlb_export_legacy(b, o, (DLManagedTensor**)&t);
  return s == DLB_OK ? new_tensor(env, t, versioned) : throw_status(env, s);
}

static napi_value js_delete(napi_env env, napi_callback_info info) {
  napi_value a[1];
  dlb_buffer* b;
  if (!args(env, info, 1, a) || !(b = buffer_of(env, a[0]))) return NULL;
  dlb_status s = dlb_buffer_delete(b);
  return s == DLB_OK ? NULL : throw_status(env, s);
}

static napi_value js_close_buffer(napi_env env, napi_callback_info info) {
  napi_value a[1];
  buffer_handle* h;
  if (!args(env, info, 1, a) || !(h = unwrap(env, a[0], &BUFFER_TAG))) return NULL;
  dlb_buffer* b = h->buffer;
  h->buffer = NULL;
  dlb_buffer_release(b);
  return NULL;
}

/* issueTicket(buffer): a Buffer of the ticket's bytes */
static napi_value js_issue_ticket(napi_env env, napi_callback_info info) {
  napi_value a[1], out;
  dlb_buffer* b;
  if (!args(env, info, 1, a) || !(b = buffer_of(env, a[0]))) return NULL;
  dlb_share_ticket ticket;
  dlb_status s = dlb_share_ticket_issue(b, 0, &ticket);
  if (s != DLB_OK) return throw_status(env, s);
  CALL(env, napi_create_buffer_copy(env, ticket.size, ticket.bytes, NULL, &out));
  return out;
}

/* adopt(address, versioned): a tensor a native library handed over */
static napi_value js_adopt(napi_env env, napi_callback_info info) {
  napi_value a[2];
  uint64_t address = 0;
  bool lossless = false, versioned = true;
  if (!args(env, info, 2, a)) return NULL;
  if (napi_get_value_bigint_uint64(env, a[0], &address, &lossless) != napi_ok || !lossless || !address) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "the address must be a non-zero BigInt");
    return NULL;
  }
  napi_get_value_bool(env, a[1], &versioned);
  return new_tensor(env, (void*)(uintptr_t)address, versioned);
}

/* tensorAddress(tensor, transfer): the struct's address; with transfer,
 * ownership goes with it. */
static napi_value js_tensor_address(napi_env env, napi_callback_info info) {
  napi_value a[2], v;
  tensor_handle* h;
  bool transfer = false;
  if (!args(env, info, 2, a) || !(h = tensor_of(env, a[0]))) return NULL;
  napi_get_value_bool(env, a[1], &transfer);
  CALL(env, napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)h->tensor, &v));
  if (transfer) h->tensor = NULL;
  return v;
}

static napi_value js_tensor_versioned(napi_env env, napi_callback_info info) {
  napi_value a[1], v;
  tensor_handle* h;
  if (!args(env, info, 1, a) || !(h = unwrap(env, a[0], &TENSOR_TAG))) return NULL;
  CALL(env, napi_get_boolean(env, h->versioned, &v));
  return v;
}

static napi_value js_close_tensor(napi_env env, napi_callback_info info) {
  napi_value a[1];
  tensor_handle* h;
  if (!args(env, info, 1, a) || !(h = unwrap(env, a[0], &TENSOR_TAG))) return NULL;
  tensor_free(h);
  return NULL;
}

NAPI_MODULE_INIT() {
  env_state* st = calloc(1, sizeof *st);
  napi_value name;
  if (!st) return napi_throw_error(env, "ERR_MEMORY_ALLOCATION_FAILED", "out of memory"), NULL;
  st->thread = pthread_self();
  atomic_init(&st->users, 1);
  pthread_mutex_init(&st->mutex, NULL);
  if (napi_create_string_utf8(env, "dlbridge release", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, NULL, pin_release_posted,
                                      &st->tsfn) != napi_ok) {
    pthread_mutex_destroy(&st->mutex);
    free(st);
    return throw_napi(env);
  }
  napi_unref_threadsafe_function(env, st->tsfn);
  CALL(env, napi_set_instance_data(env, st, NULL, NULL));
  CALL(env, napi_add_env_cleanup_hook(env, env_cleanup, st));
  static const struct {
    const char* name;
    napi_callback fn;
  } fns[] = {
      {"version", js_version},       {"liveExports", js_live_exports},   {"pinned", js_pinned},
      {"alloc", js_alloc},           {"wrap", js_wrap},                  {"importTensor", js_import},
      {"openTicket", js_open_ticket}, {"info", js_info},                 {"flags", js_flags},
      {"view", js_view},             {"exportTensor", js_export},        {"deleteBuffer", js_delete},
      {"closeBuffer", js_close_buffer}, {"issueTicket", js_issue_ticket}, {"adopt", js_adopt},
      {"tensorAddress", js_tensor_address}, {"tensorVersioned", js_tensor_versioned},
      {"closeTensor", js_close_tensor}, {"openTicketAsync", js_open_ticket_async},
      {"statusNames", js_status_names}, {"init", js_init},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) {
    napi_value f;
    CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f));
    CALL(env, napi_set_named_property(env, exports, fns[i].name, f));
  }
  return exports;
}
