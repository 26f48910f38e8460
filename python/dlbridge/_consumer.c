/* dlbridge.from_dlpack, the consumer side (see _glue.h).
 *
 * The negotiation: a producer's DLPack C exchange table first (_exchange.c;
 * a refusal there hands over to what follows), else __dlpack__ asked for a versioned capsule (max_version, with
 * dl_device, copy and stream when given), or asked without keywords when
 * the producer speaks only the protocol before DLPack 1.0.
 *
 * Which protocol a producer type speaks is read from its __dlpack__'s
 * signature where Python can read one (a function's code object, a
 * builtin's __text_signature__); a builtin without either (numpy 1.x,
 * pybind11 and nanobind bindings) is asked once with the 1.x keywords and,
 * if that is refused with a TypeError while the call without keywords
 * works, known as legacy from then on. No error text is read. The answer is
 * remembered per type in the module state.
 *
 * A TypeError of the 1.x call always earns one legacy retry (the call
 * without the 1.x keywords), whatever the signature said: a wrapper whose
 * __dlpack__(*args, **kwargs) forwards to a legacy producer says it takes
 * anything. A plain TypeError that remains (the retry raised TypeError
 * too, or a legacy call raised it) is the protocol's answer to arguments
 * and is raised as it is; a producer's subclass of TypeError is a refusal
 * for the cure.
 *
 * Every other exception of the producer's __dlpack__ (or of its
 * __dlpack_device__, asked when a stream is given) goes to the one
 * refusal rule of _cure.c: the host-copy cure, or dlbridge's own error
 * naming the producer's. Whether a copy may be made, and the refusal when
 * copy=False forbids it, are the library's export planner's
 * (dlb_buffer_resolve), the same rule that decides a dlbridge.Tensor's own
 * exports.
 *
 * Before a producer's export, the state it cannot carry (torch's
 * conjugate and negative bits, _cure.c) is asked of types that have the
 * queries. What any path got is handed over by dlbpy_deliver, the one
 * place that answers "is this what the consumer asked for?" (a copy under
 * copy=True, the device asked for). A failure of the library on what the
 * producer gave is raised as dlbridge.RefusalError (dlbpy_as_refusal).
 */
#include "_glue.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------------------ */
/* Which protocol a producer type speaks                                    */
/* ------------------------------------------------------------------------ */

enum { kModern = 0, kLegacy = 1, kUnknown = -1 };

/* The remembered answer for `type`: kModern, kLegacy or kUnknown. */
static int remembered(const dlbpy_state* state, PyObject* type) {
  PyObject* known = PyDict_GetItem(state->protocol_of, type); /* borrowed, no exception */
  if (known == NULL) return kUnknown;
  return known == Py_True ? kLegacy : kModern;
}

/* 0, or -1 with an exception set. */
static int remember(dlbpy_state* state, PyObject* type, int legacy) {
  return PyDict_SetItem(state->protocol_of, type, legacy ? Py_True : Py_False);
}

PyObject* dlbpy_is_legacy_producer(PyObject* module, PyObject* type) {
  return PyBool_FromLong(remembered((dlbpy_state*)PyModule_GetState(module), type) == kLegacy);
}

/* An attribute or NULL, without an exception either way. */
static PyObject* maybe_attr(PyObject* obj, const char* name) {
  PyObject* value = PyObject_GetAttrString(obj, name);
  if (value == NULL) PyErr_Clear();
  return value;
}

static long long int_attr(PyObject* obj, const char* name) {
  PyObject* value = maybe_attr(obj, name);
  long long n = value != NULL && PyLong_Check(value) ? PyLong_AsLongLong(value) : -1;
  if (n == -1 && PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(value);
  return n;
}

/* What a code object says: 1 when max_version can be passed by keyword
 * (a parameter of that name, or **kwargs), 0 when not, kUnknown when the
 * object is not readable as a code object. */
static int code_takes_max_version(PyObject* code) {
  const long long flags = int_attr(code, "co_flags");
  const long long argc = int_attr(code, "co_argcount");
  const long long posonly = int_attr(code, "co_posonlyargcount");
  const long long kwonly = int_attr(code, "co_kwonlyargcount");
  PyObject* names = maybe_attr(code, "co_varnames");
  int answer = kUnknown;
  if (flags >= 0 && argc >= 0 && posonly >= 0 && kwonly >= 0 && names != NULL && PyTuple_Check(names) &&
      argc + kwonly <= PyTuple_Size(names)) {
    answer = (flags & 0x08) != 0; /* CO_VARKEYWORDS */
    for (long long i = posonly; !answer && i < argc + kwonly; ++i) {
      PyObject* name = PyTuple_GetItem(names, (Py_ssize_t)i);
      answer = name != NULL && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "max_version") == 0;
    }
  }
  Py_XDECREF(names);
  return answer;
}

/* Whether a __dlpack__ takes max_version, from its signature: 1, 0, or
 * kUnknown when Python has no signature to read (a builtin without a text
 * signature). */
static int signature_takes_max_version(PyObject* method) {
  PyObject* function = maybe_attr(method, "__func__"); /* a bound method's function */
  PyObject* target = function != NULL ? function : method;
  int answer = kUnknown;
  PyObject* code = maybe_attr(target, "__code__");
  if (code != NULL) {
    answer = code_takes_max_version(code);
    Py_DECREF(code);
  }
  if (answer == kUnknown) {
    PyObject* text = maybe_attr(target, "__text_signature__");
    if (text != NULL && PyUnicode_Check(text)) {
      PyObject* key = PyUnicode_FromString("max_version");
      PyObject* star = PyUnicode_FromString("**");
      if (key != NULL && star != NULL) {
        const int has_key = PyUnicode_Contains(text, key);
        const int has_star = PyUnicode_Contains(text, star);
        if (has_key >= 0 && has_star >= 0) answer = has_key == 1 || has_star == 1;
      }
      if (PyErr_Occurred()) PyErr_Clear();
      Py_XDECREF(key);
      Py_XDECREF(star);
    }
    Py_XDECREF(text);
  }
  Py_XDECREF(function);
  return answer;
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                    */
/* ------------------------------------------------------------------------ */

/* The keywords {"max_version": (1, 3)} of the common call, one dict kept
 * in the state: the limited API has no vectorcall with keyword names before
 * 3.12, and a dict made for each call (its key decoded from a C string, the
 * allocation the cyclic collector counts) costs more than the producer's
 * own export. Checked before each use, since a callee that takes **kwargs
 * as a C function gets this dict itself and could change it: anything but
 * exactly that one item gets a fresh dict. A new reference, or NULL with
 * an exception set. */
static PyObject* max_version_kwargs(dlbpy_state* state) {
  PyObject* kwargs = state->max_version_kwargs;
  if (kwargs != NULL && PyDict_Size(kwargs) == 1 &&
      PyDict_GetItem(kwargs, state->str_max_version) == state->max_version) {
    Py_INCREF(kwargs);
    return kwargs;
  }
  kwargs = PyDict_New();
  if (kwargs == NULL || PyDict_SetItem(kwargs, state->str_max_version, state->max_version) != 0) {
    Py_XDECREF(kwargs);
    return NULL;
  }
  PyObject* old = state->max_version_kwargs;
  state->max_version_kwargs = kwargs;
  Py_XDECREF(old);
  Py_INCREF(kwargs);
  return kwargs;
}

/* Whether the answer to __dlpack__(copy=True) is a copy that cannot be
 * one: a versioned capsule that says IS_COPIED and whose strides reach
 * beyond its compact size. A copy the producer made itself holds its
 * elements in numel slots or fewer; pyarrow 26's Tensor.__dlpack__(copy=True)
 * of a strided tensor keeps the source's strides over a buffer of the
 * compact size, so the elements past it read whatever follows. The extents
 * are the library's (dlb_layout_describe_flags); a capsule it cannot
 * describe is left to the import, which refuses it by name. */
static int copy_overreaches(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor_versioned")) return 0;
  const DLManagedTensorVersioned* t =
      (const DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (t == NULL || t->version.major != DLPACK_MAJOR_VERSION || (t->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0) {
    PyErr_Clear();
    return 0;
  }
  dlb_layout_info info;
  info.struct_size = sizeof info;
  const DLDataType dtype = t->dl_tensor.dtype;
  const uint64_t padded = (t->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0 &&
                                  (unsigned)dtype.bits * (unsigned)dtype.lanes < 8
                              ? DLB_BUFFER_SUBBYTE_PADDED
                              : 0;
  if (dlb_layout_describe_flags(&t->dl_tensor, padded, &info) != DLB_OK) {
    dlb_clear_last_error();
    return 0;
  }
  return info.numel > 0 && (uint64_t)(info.max_offset - info.min_offset) >= info.numel;
}

/* __dlpack__(max_version=..., [dl_device=...], [copy=...], [stream=...]). */
static PyObject* call_modern(dlbpy_state* state, PyObject* method, const long long* device,
                             PyObject* copy, PyObject* stream) {
  if (device == NULL && copy == NULL && stream == NULL) {
    PyObject* kwargs = max_version_kwargs(state);
    if (kwargs == NULL) return NULL;
    PyObject* empty = PyTuple_New(0);
    PyObject* capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(kwargs);
    return capsule;
  }
  PyObject* kwargs = PyDict_New();
  if (kwargs == NULL) return NULL;
  int bad = PyDict_SetItem(kwargs, state->str_max_version, state->max_version);
  if (!bad && device != NULL) {
    PyObject* pair = Py_BuildValue("(LL)", device[0], device[1]);
    bad = pair == NULL || PyDict_SetItemString(kwargs, "dl_device", pair) != 0;
    Py_XDECREF(pair);
  }
  if (!bad && copy != NULL) bad = PyDict_SetItemString(kwargs, "copy", copy);
  if (!bad && stream != NULL) bad = PyDict_SetItemString(kwargs, "stream", stream);
  PyObject* empty = bad ? NULL : PyTuple_New(0);
  PyObject* capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
  Py_XDECREF(empty);
  Py_DECREF(kwargs);
  return capsule;
}

/* PyObject_VectorcallMethod: a method call without a bound method object
 * or a keyword dict. In the limited API from 3.12; CPython 3.9 to 3.11
 * export the same function with the same signature, outside the limited
 * API, so it is looked up in the running interpreter once. NULL where it
 * cannot be found: the calls then go through a bound method and a dict. */
typedef dlbpy_vectorcall_method_fn vectorcall_method_fn;

vectorcall_method_fn dlbpy_vectorcall_method(void) {
  static int looked = 0;
  static vectorcall_method_fn fn = NULL;
  if (!looked) {
    looked = 1; /* under the GIL */
#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 >= 0x030C0000
    fn = PyObject_VectorcallMethod;
#else
    void* symbol = dlsym(RTLD_DEFAULT, "PyObject_VectorcallMethod");
    memcpy(&fn, &symbol, sizeof fn);
#endif
  }
  return fn;
}

/* __dlpack__() or __dlpack__(stream=...). */
static PyObject* call_legacy(PyObject* method, PyObject* stream) {
  if (stream == NULL) return PyObject_CallObject(method, NULL);
  PyObject* kwargs = Py_BuildValue("{sO}", "stream", stream);
  PyObject* empty = kwargs != NULL ? PyTuple_New(0) : NULL;
  PyObject* capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
  Py_XDECREF(empty);
  Py_XDECREF(kwargs);
  return capsule;
}

/* The legacy retry (the array API standard's rule, no error text read):
 * with a TypeError set by the 1.x call, __dlpack__ is called once more
 * without the 1.x keywords. Returns its capsule (*modern set to 0), or
 * NULL with an exception set: the retry's own when it failed otherwise
 * than with TypeError (*modern 0: the producer took the legacy call), else
 * the first (*modern unchanged; a TypeError of both calls is no refusal of
 * the array, and the cure passes it on: see `keyword_refusal`). Without a
 * TypeError set, NULL with the exception as it is. */
static PyObject* legacy_retry(PyObject* method, PyObject* stream, int* modern) {
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyObject* capsule = call_legacy(method, stream);
  if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    PyErr_Restore(type, value, trace);
    return NULL;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  *modern = 0;
  return capsule;
}

PyObject* dlbpy_deliver(dlbpy_state* state, dlb_buffer* buffer, const long long* device, int policy) {
  if (buffer == NULL) return NULL;
  /* "Did the consumer get a copy?", answered here only: the buffer says
   * so (DLB_BUFFER_COPIED) or it is not one. */
  if (policy == DLB_COPY_ALWAYS && (dlb_buffer_flags(buffer) & DLB_BUFFER_COPIED) != 0) policy = DLB_COPY_IF_NEEDED;
  if (device == NULL && policy == DLB_COPY_IF_NEEDED) return dlbpy_tensor_new_in(state, buffer);
  dlb_export_options options;
  dlbpy_request_options(device, policy, &options);
  dlb_buffer* out = NULL;
  const dlb_status s = dlb_buffer_resolve(buffer, &options, &out);
  /* On success `out` is `buffer` itself, retained, when it satisfies the
   * request, else a copy or, for host-readable memory the CPU was asked
   * for, the library's view of it on the CPU: either way ours. */
  dlbpy_buffer_release(buffer);
  if (s != DLB_OK) return dlbpy_raise_refusal(s, dlb_last_error_message());
  return dlbpy_tensor_new_in(state, out);
}

/* The consumer's stream of from_dlpack(obj, stream=...): an int (not a
 * bool), checked by the library's rule (dlb_check_consumer_stream) for the
 * device obj says its memory is on (obj.__dlpack_device__(), as the
 * standard's consumers ask before __dlpack__) and for the device asked for.
 * 0 with *value set, -1 with TypeError / ValueError set, or -2 with the
 * exception of obj.__dlpack_device__() set (a refusal for the cure). */
static int consumer_stream(PyObject* obj, PyObject* stream, const long long* device, long long* value) {
  if (!PyLong_Check(stream) || PyBool_Check(stream)) {
    PyErr_Format(PyExc_TypeError, "stream must be an int or None, not %R", stream);
    return -1;
  }
  *value = PyLong_AsLongLong(stream);
  if (*value == -1 && PyErr_Occurred()) return -1;
  PyObject* where = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (where == NULL) return -2;
  long long producer[2];
  const int bad = dlbpy_int_pair(where, "__dlpack_device__()", "(device_type, device_id)", producer);
  Py_DECREF(where);
  if (bad) return -1;
  const long long* targets[2] = {producer, device};
  for (int i = 0; i < 2; ++i) {
    const long long* d = targets[i];
    if (d == NULL) continue;
    dlb_status s = DLB_ERR_UNSUPPORTED_DEVICE;
    if (d[0] >= INT32_MIN && d[0] <= INT32_MAX && d[1] >= INT32_MIN && d[1] <= INT32_MAX) {
      DLDevice dev;
      const int32_t type = (int32_t)d[0];
      memcpy(&dev.device_type, &type, sizeof type);
      dev.device_id = (int32_t)d[1];
      s = dlb_check_consumer_stream(dev, (int64_t)*value);
    } else {
      dlb_clear_last_error();
    }
    if (s != DLB_OK) {
      const char* why = dlb_last_error_message();
      PyErr_Format(PyExc_ValueError, "%s (%s (%lld, %lld))", why[0] != '\0' ? why : dlb_status_name(s),
                   i == 0 ? "the producer's memory" : "the requested device", d[0], d[1]);
      return -1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* from_dlpack                                                              */
/* ------------------------------------------------------------------------ */

/* The producer's answer to a call (a capsule, or NULL with its exception
 * set) as from_dlpack's result; `fresh`: the capsule's tensor is a new one
 * only this call holds (imported as a copy). */
static PyObject* take(dlbpy_state* state, PyObject* obj, PyObject* method, PyObject* capsule, int modern,
                      int64_t stream, const long long* device, int policy, int fresh) {
  /* A plain TypeError (after the legacy retry, for a 1.x call): the
   * protocol's answer to arguments, passed on as it is. A producer's own
   * subclass of TypeError (pyarrow's ArrowTypeError) is a refusal of the
   * array, as any other exception is. */
  if (capsule == NULL && PyErr_Occurred() == PyExc_TypeError) return NULL;
  if (capsule == NULL) return dlbpy_cure(state, obj, method, modern, device, policy, "__dlpack__");
  /* A 1.x producer was asked for the device and copy itself, a legacy one
   * could not be: either way dlbpy_deliver sees to what it gave. */
  return dlbpy_deliver(state, dlbpy_capsule_to_buffer(capsule, stream, fresh ? DLPACK_FLAG_BITMASK_IS_COPIED : 0),
                       device, policy);
}

/* Producer state DLPack cannot carry, asked before the producer's export
 * (`bits`: the DLBPY_BIT_* queries its type has). *done 0 (NULL) when none
 * is set; else *done 1 and dlbpy_resolve_bits's answer. */
static PyObject* check_bits(dlbpy_state* state, PyObject* obj, unsigned bits, const long long* device, int policy,
                            int* done) {
  *done = 0;
  if (bits == 0) return NULL;
  const int set = dlbpy_set_bits(state, obj, bits);
  if (set == 0) return NULL;
  *done = 1;
  return set < 0 ? NULL : dlbpy_resolve_bits(state, obj, (unsigned)set, device, policy);
}

/* from_dlpack past the hot paths. `copy` is what the producer is asked
 * for (NULL: nothing), `policy` what is delivered; `tried`: the exchange
 * table was tried already, and `bits` are the type's queries it gave. */
static PyObject* from_dlpack_on(dlbpy_state* state, PyObject* obj, const long long* device, PyObject* copy,
                                int policy, PyObject* stream, int fresh, int tried, unsigned bits) {
  PyObject* producer = (PyObject*)Py_TYPE(obj);
  if (!tried && stream == NULL) {
    /* (with a stream the producer is asked through __dlpack__, which takes one) */
    int handled = 0;
    PyObject* tensor = dlbpy_exchange_from_dlpack(state, obj, device, policy, fresh, &handled, &bits);
    if (handled) return tensor;
  } else if (!tried) {
    bits = dlbpy_exchange_type_bits(state, producer);
  }

  /* A capsule straight from a to_dlpack() (asked first: looking for its
   * __dlpack__ would raise and clear an AttributeError). */
  PyObject* method = PyCapsule_CheckExact(obj) ? NULL : PyObject_GetAttr(obj, state->str_dlpack);
  if (method == NULL) {
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    if (PyCapsule_CheckExact(obj)) {
      if (stream != NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "stream= is for a producer's __dlpack__; a capsule is made already");
        return NULL;
      }
      Py_INCREF(obj);
      return dlbpy_deliver(state, dlbpy_capsule_to_buffer(obj, 1, 0), device, policy);
    }
    return dlbpy_refuse_without_dlpack(obj);
  }

  PyObject* result = NULL;
  int done = 0;
  if (!fresh) {
    result = check_bits(state, obj, bits, device, policy, &done);
    if (done) goto done;
  }
  long long stream_value = 1; /* none given: the producer assumes the legacy default stream */
  int protocol = remembered(state, producer);
  if (stream != NULL) {
    const int bad = consumer_stream(obj, stream, device, &stream_value);
    if (bad == -2) result = dlbpy_cure(state, obj, method, protocol != kLegacy, device, policy, "__dlpack_device__");
    if (bad != 0) goto done;
  }
  if (protocol == kUnknown) {
    const int takes = signature_takes_max_version(method);
    if (takes != kUnknown) {
      protocol = takes ? kModern : kLegacy;
      if (remember(state, producer, protocol == kLegacy) != 0) goto done;
    }
  }
  if (protocol == kLegacy) {
    result = take(state, obj, method, call_legacy(method, stream), 0, stream_value, device, policy, fresh);
    goto done;
  }
  PyObject* capsule = call_modern(state, method, device, copy, stream);
  if (capsule == NULL && copy == Py_True && !PyErr_ExceptionMatches(PyExc_TypeError) &&
      dlbpy_exception_is_refusal()) {
    /* copy=True refused while the array itself may export (tvm-ffi: "copy
     * not yet supported"): asked again without copy=, and the copy is made
     * here (dlbpy_deliver). Refused again, that refusal goes on. */
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    capsule = call_modern(state, method, device, NULL, stream);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
  } else if (capsule != NULL && copy == Py_True && copy_overreaches(capsule)) {
    /* A copy that cannot hold what it says (pyarrow 26's strided
     * Tensor): dropped, the producer asked again without copy=, and the
     * copy made here from what it then exports (dlbpy_deliver). */
    Py_DECREF(capsule);
    capsule = call_modern(state, method, device, NULL, stream);
  }
  int modern = 1;
  if (capsule == NULL) {
    /* A TypeError earns one legacy retry, whatever the signature said (a
     * wrapper taking **kwargs around a legacy producer). A builtin whose
     * signature cannot be read is known as legacy once the retry took
     * place (it returned, or failed with anything but TypeError). */
    capsule = legacy_retry(method, stream, &modern);
    if (!modern && protocol == kUnknown && remember(state, producer, 1) != 0) {
      Py_XDECREF(capsule);
      goto done;
    }
  } else if (protocol == kUnknown && remember(state, producer, 0) != 0) {
    /* A builtin whose signature cannot be read is known as modern once it
     * took the keywords. */
    Py_DECREF(capsule);
    goto done;
  }
  result = take(state, obj, method, capsule, modern, stream_value, device, policy, fresh);
done:
  Py_DECREF(method);
  return result;
}

PyObject* dlbpy_from_dlpack_fresh(dlbpy_state* state, PyObject* obj, const long long* device) {
  return from_dlpack_on(state, obj, device, NULL, DLB_COPY_ALWAYS, NULL, 1, 0, 0);
}

/* The hot paths of from_dlpack(obj) without keywords; *done 0 when none
 * applies (then *bits says the type's queries). */
static PyObject* from_dlpack_plain(dlbpy_state* state, PyObject* obj, int* done, unsigned* bits) {
  *done = 1;
  /* The fastest path: a producer publishing a DLPack C exchange table. */
  int handled = 0;
  PyObject* tensor = dlbpy_exchange_from_dlpack(state, obj, NULL, DLB_COPY_IF_NEEDED, 0, &handled, bits);
  if (handled) return tensor;
  int resolved = 0;
  tensor = check_bits(state, obj, *bits, NULL, DLB_COPY_IF_NEEDED, &resolved);
  if (resolved) return tensor;
  *bits = 0; /* asked */
  const int known = remembered(state, (PyObject*)Py_TYPE(obj));
  /* The hot path of a 1.x producer: obj.__dlpack__(max_version=(1, 3))
   * as one vectorcall. */
  vectorcall_method_fn call = known == kModern ? dlbpy_vectorcall_method() : NULL;
  if (call != NULL) {
    PyObject* argv[2] = {obj, state->max_version};
    PyObject* capsule = call(state->str_dlpack, argv, 1, state->max_version_names);
    if (capsule != NULL) return take(state, obj, NULL, capsule, 1, 1, NULL, DLB_COPY_IF_NEEDED, 0);
    /* Refused: the legacy retry and the cure want the method. */
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject* method = PyObject_GetAttr(obj, state->str_dlpack);
    if (method == NULL) {
      PyErr_Clear();
      PyErr_Restore(type, value, trace);
      return NULL;
    }
    PyErr_Restore(type, value, trace);
    int modern = 1;
    capsule = legacy_retry(method, NULL, &modern);
    PyObject* result = take(state, obj, method, capsule, modern, 1, NULL, DLB_COPY_IF_NEEDED, 0);
    Py_DECREF(method);
    return result;
  }
  /* The hot path: a producer known to speak only the legacy protocol. */
  if (known == kLegacy) {
    PyObject* method = PyObject_GetAttr(obj, state->str_dlpack);
    if (method == NULL) return NULL;
    PyObject* result =
        take(state, obj, method, PyObject_CallObject(method, NULL), 0, 1, NULL, DLB_COPY_IF_NEEDED, 0);
    Py_DECREF(method);
    return result;
  }
  *done = 0;
  return NULL;
}

PyObject* dlbpy_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "from_dlpack() takes 1 positional argument (%zd given)", nargs);
    return NULL;
  }
  PyObject* obj = args[0];
  PyObject* result = NULL;
  if (kwnames == NULL) {
    int done = 0;
    unsigned bits = 0;
    result = from_dlpack_plain(state, obj, &done, &bits);
    if (!done) result = from_dlpack_on(state, obj, NULL, NULL, DLB_COPY_IF_NEEDED, NULL, 0, 1, bits);
  } else {
    static const char* const names[] = {"device", "copy", "stream"};
    PyObject* v[3];
    if (dlbpy_keyword_only("from_dlpack", args + 1, 0, kwnames, names, 3, v) != 0) return NULL;
    /* keyword values sit after the positional one */
    PyObject* device_arg = v[0] == Py_None ? NULL : v[0];
    PyObject* copy = v[1] == Py_None ? NULL : v[1];
    PyObject* stream = v[2] == Py_None ? NULL : v[2];
    long long device_pair[2];
    if (device_arg != NULL &&
        dlbpy_int_pair(device_arg, "device", "(device_type, device_id)", device_pair) != 0) {
      return NULL;
    }
    if (device_arg != NULL && (device_pair[0] < INT32_MIN || device_pair[0] > INT32_MAX ||
                               device_pair[1] < INT32_MIN || device_pair[1] > INT32_MAX)) {
      /* as __dlpack__'s dl_device: refused, not cut to 32 bits */
      PyErr_Format(PyExc_ValueError, "device %R is out of range", device_arg);
      return NULL;
    }
    const int policy = dlbpy_copy_policy(copy);
    if (policy < 0) return NULL;
    result = from_dlpack_on(state, obj, device_arg != NULL ? device_pair : NULL, copy, policy, stream, 0, 0, 0);
  }
  /* A failure of the library on what the producer gave is a refusal. */
  return result != NULL ? result : dlbpy_as_refusal(state);
}

const char dlbpy_from_dlpack_doc[] =
    "from_dlpack(obj, /, *, device=None, copy=None, stream=None)\n--\n\n"
    "A Tensor over what any DLPack producer (numpy, torch, JAX, dlbridge, ...) exports:\n"
    "the producer's values, or an exception.\n\n"
    "A producer type publishing the DLPack C exchange table (__dlpack_c_exchange_api__)\n"
    "is read through it. Otherwise __dlpack__ is asked for a versioned capsule\n"
    "(max_version=(1, 3), with dl_device and copy when given), or without keywords\n"
    "when the producer speaks only the protocol before DLPack 1.0: read from the\n"
    "signature of its __dlpack__ where Python has one, else learnt from one call\n"
    "(the keywords refused with TypeError, the call without them taken), and\n"
    "remembered for the type; a TypeError of the 1.x call always earns one call\n"
    "without the 1.x keywords. Also takes a DLPack capsule itself. An object without\n"
    "__dlpack__ raises AttributeError (RefusalError DLB_ERR_UNSUPPORTED_DTYPE for an\n"
    "array whose dtype DLPack cannot describe, as a JAX PRNG key array).\n"
    "device: the (device_type, device_id) the result must be on: the producer's own,\n"
    "the CPU (1, 0) (memory the CPU cannot read is copied to the host), or an OpenCL\n"
    "device (4, n), to which host data is copied; RefusalError\n"
    "DLB_ERR_UNSUPPORTED_DEVICE for another. copy: True\n"
    "always gives a copy (a producer's answer that is not one, such as a legacy\n"
    "capsule, is copied here; a producer refusing copy=True is asked without it),\n"
    "False never copies (RefusalError, a BufferError, when a copy would be\n"
    "needed), None copies only when needed.\n\n"
    "State DLPack cannot carry (torch's conjugate and negative bits, asked through\n"
    "is_conj() and is_neg()) is resolved by the producer's resolve_conj() /\n"
    "resolve_neg(), imported as a copy; with copy=False it is refused naming the bit.\n\n"
    "A producer whose __dlpack__ refuses, with any exception (JAX's JaxRuntimeError for\n"
    "a string or int4 array, BufferError for an array sharded over several devices,\n"
    "TensorFlow's InvalidArgumentError, pyarrow's ArrowTypeError), is, unless\n"
    "copy=False, asked for host memory instead: __dlpack__(dl_device=(1, 0),\n"
    "copy=True), then the buffer protocol, then __array__(), then __array_interface__,\n"
    "then, when a device was asked for, __dlpack__() on the producer's own device,\n"
    "copied over by dlbridge's backend for that device (OpenCL, CUDA);\n"
    "the result is a host copy whose .copied is True, in the machine's byte order\n"
    "whatever order the producer's memory is in. Every refusal raises\n"
    "dlbridge.RefusalError, a BufferError and a dlbridge.Error: with copy=False\n"
    "DLB_ERR_NOT_ZERO_COPY naming the producer's refusal; when no copy can be made,\n"
    "why (DLB_ERR_UNSUPPORTED_DTYPE for a dtype DLPack cannot describe or dlbridge\n"
    "cannot establish, DLB_ERR_MALFORMED for a producer that contradicts itself),\n"
    "keeping the producer's exception class and words and chaining its exception.\n"
    "A producer whose is_deleted() says the array was deleted or donated raises\n"
    "RefusalError DLB_ERR_DELETED. MemoryError, RecursionError, KeyboardInterrupt\n"
    "and SystemExit pass through unchanged.\n\n"
    "stream (an extension of the standard's from_dlpack): the consumer's CUDA\n"
    "stream, passed to the producer's __dlpack__; -1, 1, 2 or a stream handle.\n"
    "ValueError for 0, or for any stream when the producer's memory or the\n"
    "device asked for has no streams (the standard allows only None there).\n"
    "CUDA memory comes in through dlbridge's CUDA backend, carrying that\n"
    "stream (1, the legacy default stream, when none is given: the protocol's\n"
    "producer then assumes it); without a usable CUDA driver it comes in as\n"
    "plain memory, which can be exported again but not copied to the host.";
