/* dlbridge's side of the DLPack 1.3 C exchange API (see _exchange.h).
 *
 * Producer: a static DLPackExchangeAPI published as
 * dlbridge.Tensor.__dlpack_c_exchange_api__. Its functions are thin: the
 * library decides everything (what an export is, what an import accepts,
 * the allocator's rules in dlb_managed_tensor_alloc); this file turns
 * statuses into Python exceptions. None of the library's C calls lets an
 * exception out, and nothing here is C++.
 *
 * Consumer: dlbridge.from_dlpack looks the table up on type(obj) and takes
 * the tensor through managed_tensor_from_py_object_no_sync, without
 * calling __dlpack__. The validated table is cached per type: a type's
 * entry keeps the capsule it was read from, and each exchange checks with
 * one attribute lookup (served by CPython's type attribute cache) that the
 * type still holds that capsule, so a type whose attribute changes is
 * re-read. A type without a table is remembered as such (a failed lookup
 * raises and clears an AttributeError, which costs more than an exchange)
 * and looked at again every kNegativeRecheck exchanges.
 */
#include "_glue.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Producer                                                                 */
/* ------------------------------------------------------------------------ */

/* BufferError "DLB_ERR_X: message" (the library's last error); -1. */
static int buffer_error(dlb_status status) {
  PyErr_Format(PyExc_BufferError, "%s: %s", dlb_status_name(status), dlb_last_error_message());
  return -1;
}

/* What __dlpack__(max_version=(1, 3)) gives, without the capsule. */
static int xapi_from_py_object(void* py_object, DLManagedTensorVersioned** out) {
  if (py_object == NULL || out == NULL) {
    PyErr_SetString(PyExc_ValueError, "dlbridge exchange table: py_object and out must not be NULL");
    return -1;
  }
  dlb_buffer* buffer = dlbpy_tensor_buffer((PyObject*)py_object);
  if (buffer == NULL) return -1;
  const dlb_status s = dlb_export_versioned(buffer, NULL, out);
  return s == DLB_OK ? 0 : buffer_error(s);
}

/* Takes ownership of `tensor` in every case: on failure its deleter has
 * run exactly once when this returns. */
static int xapi_to_py_object(DLManagedTensorVersioned* tensor, void** out_py_object) {
  if (tensor == NULL) {
    PyErr_SetString(PyExc_ValueError, "dlbridge exchange table: tensor is NULL");
    return -1;
  }
  if (out_py_object == NULL) {
    dlbpy_managed_free_versioned(tensor);
    PyErr_SetString(PyExc_ValueError, "dlbridge exchange table: out_py_object is NULL");
    return -1;
  }
  dlb_buffer* buffer = NULL;
  const dlb_status s = dlb_import_versioned(tensor, NULL, &buffer);
  if (s != DLB_OK) {
    /* Refused (another major version, a malformed tensor): still ours to
     * free. The message first, since the deleter may call the library. */
    char text[512];
    snprintf(text, sizeof text, "%s: %s", dlb_status_name(s), dlb_last_error_message());
    dlbpy_managed_free_versioned(tensor); /* reads only the stable prefix */
    PyErr_SetString(PyExc_BufferError, text);
    return -1;
  }
  /* dlbpy_tensor_new releases the buffer, and so runs the deleter, when it
   * cannot make the object. */
  PyObject* obj = dlbpy_tensor_new(buffer);
  if (obj == NULL) return -1;
  *out_py_object = obj;
  return 0;
}

/* A borrowed view: shape and strides point into the buffer, valid while
 * the tensor lives. A DLTensor has no flags, so read-only tensors are
 * refused rather than shown as writable, and padded sub-byte tensors rather
 * than shown as packed (a consumer would read other values); a backend
 * buffer has no host address to show. Each refusal is a BufferError that
 * starts with the status name, as the library's own are. */
static int xapi_dltensor_from_py_object(void* py_object, DLTensor* out) {
  if (py_object == NULL || out == NULL) {
    PyErr_SetString(PyExc_ValueError, "dlbridge exchange table: py_object and out must not be NULL");
    return -1;
  }
  dlb_buffer* buffer = dlbpy_tensor_buffer((PyObject*)py_object);
  if (buffer == NULL) return -1;
  const uint64_t flags = dlb_buffer_flags(buffer);
  if (flags & DLB_BUFFER_READ_ONLY) {
    PyErr_SetString(PyExc_BufferError,
                    "DLB_ERR_READ_ONLY: the tensor is read-only and a DLTensor view cannot say so; take it with "
                    "managed_tensor_from_py_object_no_sync, which sets READ_ONLY");
    return -1;
  }
  if (flags & DLB_BUFFER_SUBBYTE_PADDED) {
    PyErr_SetString(PyExc_BufferError,
                    "DLB_ERR_UNSUPPORTED_LAYOUT: the tensor's sub-byte elements are padded to a byte each "
                    "and a DLTensor view cannot say so (it would read as packed); take it with "
                    "managed_tensor_from_py_object_no_sync, which sets IS_SUBBYTE_TYPE_PADDED");
    return -1;
  }
  if (flags & DLB_BUFFER_BACKEND) {
    PyErr_SetString(PyExc_BufferError,
                    "DLB_ERR_NOT_ZERO_COPY: the tensor lives on a backend without a view to lend; take it with "
                    "managed_tensor_from_py_object_no_sync, which copies it to the host");
    return -1;
  }
  DLTensor view;
  const dlb_status s = dlb_buffer_dltensor(buffer, &view);
  if (s != DLB_OK) return buffer_error(s);
  *out = view;
  return 0;
}

/* dlbridge launches no device work and keeps no current stream: NULL for
 * every device (for host devices the spec asks for NULL anyway). */
static int xapi_current_work_stream(DLDeviceType device_type, int32_t device_id, void** out_current_stream) {
  (void)device_type;
  (void)device_id;
  if (out_current_stream == NULL) {
    PyErr_SetString(PyExc_ValueError, "dlbridge exchange table: out_current_stream is NULL");
    return -1;
  }
  *out_current_stream = NULL;
  return 0;
}

static DLPackExchangeAPI g_table = {
    {{DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}, NULL},
    dlb_managed_tensor_alloc,
    xapi_from_py_object,
    xapi_to_py_object,
    xapi_dltensor_from_py_object,
    xapi_current_work_stream,
};

PyObject* dlbpy_exchange_capsule(void) {
  return PyCapsule_New(&g_table, DLB_EXCHANGE_API_CAPSULE_NAME, NULL);
}

/* ------------------------------------------------------------------------ */
/* Consumer                                                                 */
/* ------------------------------------------------------------------------ */

enum { kCacheSlots = DLBPY_CACHE_SLOTS, kProbes = 4, kNegativeRecheck = 256, kMaxChain = 16 };

typedef dlbpy_cache_entry cache_entry;

/* Open addressing: a type sits in one of kProbes slots from its hash, so
 * that two busy types rarely push each other out. The cache is part of the
 * module state and bounded; its strong references (a type and its capsule
 * per slot) go with the module. */

int dlbpy_exchange_cache_init(dlbpy_exchange_cache* cache) {
  cache->attr_name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  cache->attr_name_old = PyUnicode_InternFromString("__c_dlpack_exchange_api__");
  cache->bit_query[0] = PyUnicode_InternFromString("is_conj");
  cache->bit_query[1] = PyUnicode_InternFromString("is_neg");
  cache->bit_resolve[0] = PyUnicode_InternFromString("resolve_conj");
  cache->bit_resolve[1] = PyUnicode_InternFromString("resolve_neg");
  return cache->attr_name != NULL && cache->attr_name_old != NULL && cache->bit_query[0] != NULL &&
                 cache->bit_query[1] != NULL && cache->bit_resolve[0] != NULL && cache->bit_resolve[1] != NULL
             ? 0
             : -1;
}

void dlbpy_exchange_cache_clear(dlbpy_exchange_cache* cache) {
  for (size_t i = 0; i < kCacheSlots; ++i) {
    Py_CLEAR(cache->slots[i].capsule);
    Py_CLEAR(cache->slots[i].type);
    cache->slots[i].api = NULL;
  }
  Py_CLEAR(cache->attr_name);
  Py_CLEAR(cache->attr_name_old);
  for (int i = 0; i < 2; ++i) {
    Py_CLEAR(cache->bit_query[i]);
    Py_CLEAR(cache->bit_resolve[i]);
  }
}

int dlbpy_exchange_cache_traverse(dlbpy_exchange_cache* cache, visitproc visit, void* arg) {
  for (size_t i = 0; i < kCacheSlots; ++i) {
    Py_VISIT(cache->slots[i].type);
    Py_VISIT(cache->slots[i].capsule);
  }
  return 0;
}

static size_t home_of(PyObject* type) {
  const uintptr_t p = (uintptr_t)type;
  return (size_t)((p >> 4) ^ (p >> 12));
}

/* The entry of `type`, or NULL. */
static cache_entry* find_entry(dlbpy_exchange_cache* cache, PyObject* type) {
  const size_t home = home_of(type);
  for (size_t i = 0; i < kProbes; ++i) {
    cache_entry* e = &cache->slots[(home + i) % kCacheSlots];
    if (e->type == type) return e;
  }
  return NULL;
}

/* A slot for a new entry of `type`: an empty one, else one to reuse. */
static cache_entry* free_entry(dlbpy_exchange_cache* cache, PyObject* type) {
  const size_t home = home_of(type);
  for (size_t i = 0; i < kProbes; ++i) {
    cache_entry* e = &cache->slots[(home + i) % kCacheSlots];
    if (e->type == NULL) return e;
  }
  return &cache->slots[(home + (cache->evict++ % kProbes)) % kCacheSlots];
}

/* The capsule type(obj) publishes under the current name or the earlier
 * one (a new reference), NULL without an exception when it has neither,
 * or -1 on an error other than AttributeError. */
static int lookup_capsule(dlbpy_exchange_cache* cache, PyObject* type, PyObject** out) {
  PyObject* capsule = PyObject_GetAttr(type, cache->attr_name);
  if (capsule == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    capsule = PyObject_GetAttr(type, cache->attr_name_old);
    if (capsule == NULL) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
    }
  }
  *out = capsule;
  return 0;
}

/* The 1.x table a capsule leads to, or NULL (no exception) when it is not
 * one dlbridge can use. */
static const DLPackExchangeAPI* usable_table(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, DLB_EXCHANGE_API_CAPSULE_NAME)) return NULL;
  const DLPackExchangeAPIHeader* header =
      (const DLPackExchangeAPIHeader*)PyCapsule_GetPointer(capsule, DLB_EXCHANGE_API_CAPSULE_NAME);
  for (int hops = 0; header != NULL && hops < kMaxChain; ++hops, header = header->prev_api) {
    if (header->version.major == DLB_DLPACK_MAJOR) {
      const DLPackExchangeAPI* api = (const DLPackExchangeAPI*)header;
      return api->managed_tensor_from_py_object_no_sync != NULL ? api : NULL;
    }
  }
  return NULL;
}

/* True when `type` and every class of its MRO are immutable types (static
 * types, and heap types made with Py_TPFLAGS_IMMUTABLETYPE): then no
 * attribute of any of them can be set or deleted, nor the MRO replaced. */
static int mro_immutable(PyTypeObject* type) {
  if ((PyType_GetFlags(type) & Py_TPFLAGS_IMMUTABLETYPE) == 0) return 0;
  PyObject* mro = PyObject_GetAttrString((PyObject*)type, "__mro__");
  if (mro == NULL) {
    PyErr_Clear();
    return 0;
  }
  int all = PyTuple_Check(mro);
  for (Py_ssize_t i = 0; all && i < PyTuple_Size(mro); ++i) {
    PyObject* base = PyTuple_GetItem(mro, i);
    all = PyType_Check(base) && (PyType_GetFlags((PyTypeObject*)base) & Py_TPFLAGS_IMMUTABLETYPE) != 0;
  }
  Py_DECREF(mro);
  return all;
}

/* True when type.__dlpack_c_exchange_api__ can never change: the lookup
 * reads the type's MRO and its metatype's (for a data descriptor of that
 * name), all immutable. */
static int lookup_fixed(PyObject* type) {
  return mro_immutable((PyTypeObject*)type) && mro_immutable(Py_TYPE(type));
}

/* The DLBPY_BIT_* queries (is_conj, is_neg) `type` has; never fails. */
static unsigned bits_of_type(dlbpy_exchange_cache* cache, PyObject* type) {
  unsigned bits = 0;
  for (int i = 0; i < 2; ++i) {
    if (PyObject_HasAttr(type, cache->bit_query[i])) bits |= 1u << i;
  }
  return bits;
}

unsigned dlbpy_exchange_type_bits(dlbpy_state* state, PyObject* type) {
  const cache_entry* e = find_entry(&state->cache, type);
  return e != NULL ? e->bits : bits_of_type(&state->cache, type);
}

/* 1 with *api set, 0 when type has no usable table, -1 on error; *bits
 * the type's DLBPY_BIT_* queries either way (0 on error). */
static int table_for(dlbpy_exchange_cache* cache, PyObject* type, const DLPackExchangeAPI** api, unsigned* bits) {
  *bits = 0;
  cache_entry* e = find_entry(cache, type);
  if (e != NULL && e->fixed) {
    *api = e->api;
    *bits = e->bits;
    return e->api != NULL;
  }
  if (e != NULL && e->capsule == NULL && --e->recheck > 0) {
    *bits = e->bits;
    return 0;
  }
  PyObject* capsule = NULL;
  if (lookup_capsule(cache, type, &capsule) != 0) return -1;
  /* The lookup may have run Python code that used the cache: find again. */
  e = find_entry(cache, type);
  if (e != NULL && e->capsule == capsule && capsule != NULL) {
    Py_DECREF(capsule);
    *api = e->api;
    *bits = e->bits;
    return e->api != NULL;
  }
  /* A type not cached yet, or its attribute changed. */
  const int fixed = lookup_fixed(type); /* before the entry is chosen: it reads attributes */
  const unsigned type_bits = bits_of_type(cache, type);
  e = find_entry(cache, type);
  if (e == NULL) e = free_entry(cache, type);
  const DLPackExchangeAPI* found = capsule != NULL ? usable_table(capsule) : NULL;
  PyObject* old_type = e->type;
  PyObject* old_capsule = e->capsule;
  Py_INCREF(type);
  e->type = type;
  e->capsule = capsule; /* the lookup's reference */
  e->api = found;
  e->recheck = kNegativeRecheck;
  e->fixed = fixed;
  e->bits = type_bits;
  Py_XDECREF(old_capsule);
  Py_XDECREF(old_type);
  *api = found;
  *bits = type_bits;
  return found != NULL;
}

PyObject* dlbpy_exchange_from_dlpack(dlbpy_state* state, PyObject* obj, const long long* device, int policy,
                                     int fresh, int* handled, unsigned* bits) {
  *handled = 0;
  const DLPackExchangeAPI* api = NULL;
  const int found = table_for(&state->cache, (PyObject*)Py_TYPE(obj), &api, bits);
  if (found < 0) {
    *handled = 1;
    return NULL;
  }
  if (found == 0) return NULL;
  *handled = 1;  /* `device` is in int32 range: from_dlpack checked it */

  DLManagedTensorVersioned* tensor = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &tensor) != 0) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_BufferError,
                      "the producer's managed_tensor_from_py_object_no_sync failed without an exception");
    /* A refusal of the array (the rule of _cure.c) is not the last word:
     * the producer is asked through __dlpack__, where the legacy retry and
     * the host-copy cure answer a refusal as they answer any producer's.
     * Not about the array (MemoryError, KeyboardInterrupt, ...), or no
     * __dlpack__ to ask: the table's exception as it is. */
    if (dlbpy_exception_is_refusal()) {
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      if (PyObject_HasAttr(obj, state->str_dlpack)) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
        *handled = 0;
        *bits = 0; /* asked already: none is set */
        return NULL;
      }
      PyErr_Restore(type, value, trace);
    }
    return NULL;
  }
  if (tensor == NULL)
    return dlbpy_raise_refusal(DLB_ERR_MALFORMED, "the producer's managed_tensor_from_py_object_no_sync gave no tensor");
  /* State the table's tensor cannot carry (torch's conjugate and negative
   * bits, which its table does not check): resolved by a copy, or
   * refused. Asked after the export, whose dtype says whether conjugation
   * can change a value (complex elements only: one query saved on the hot
   * path of real tensors). */
  if (*bits != 0 && !fresh) {
    const unsigned ask = tensor->version.major == 1 && tensor->dl_tensor.dtype.code != kDLComplex
                             ? *bits & ~(unsigned)DLBPY_BIT_CONJ
                             : *bits;
    const int set = ask != 0 ? dlbpy_set_bits(state, obj, ask) : 0;
    if (set != 0) {
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      dlbpy_managed_free_versioned(tensor); /* the stored memory, not the values */
      PyErr_Restore(type, value, trace);
      return set < 0 ? NULL : dlbpy_resolve_bits(state, obj, (unsigned)set, device, policy);
    }
  }
  /* A new tensor only this call holds (a producer's resolve_conj()) is the
   * consumer's alone: a copy, as IS_COPIED says. */
  if (fresh && tensor->version.major == 1) tensor->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  /* No synchronisation was asked for: device memory is ordered before the
   * producer's current work stream (NULL, the legacy default stream, when
   * the producer has no say), which the buffer then carries. */
  int64_t stream = 1;
  const DLDevice where = tensor->version.major == 1 ? tensor->dl_tensor.device : (DLDevice){kDLCPU, 0};
  dlb_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (api->current_work_stream != NULL && dlb_device_type_info((int32_t)where.device_type, &info) == DLB_OK &&
      (info.flags & DLB_DEVICE_CUDA_BACKEND) != 0) {
    void* current = NULL;
    if (api->current_work_stream(where.device_type, where.device_id, &current) != 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_BufferError, "the producer's current_work_stream failed without an exception");
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      dlbpy_managed_free_versioned(tensor);
      PyErr_Restore(type, value, trace);
      return NULL;
    }
    if (current != NULL) stream = (int64_t)(uintptr_t)current;
  }
  dlb_buffer* buffer = NULL;
  const dlb_status s = tensor->version.major == 1 ? dlbpy_import_managed(tensor, stream, &buffer)
                                                  : dlb_import_versioned(tensor, NULL, &buffer);
  if (s != DLB_OK) {
    if (!PyErr_Occurred()) (void)dlbpy_raise_status(s);
    /* Still ours: free it with the exception kept aside, since the
     * deleter may run Python code. */
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    dlbpy_managed_free_versioned(tensor);
    PyErr_Restore(type, value, trace);
    return NULL;
  }
  /* device= and copy= on what the producer gave: the one rule of
   * dlbpy_deliver. */
  return dlbpy_deliver(state, buffer, device, policy);
}
