/* DLPack capsules (see _glue.h): exports of dlbridge buffers into
 * "dltensor_versioned" / "dltensor" capsules whose destructor frees an
 * unconsumed tensor, and imports from a producer's capsules (renamed
 * used_*), through deleter shims that take the GIL, since the library may
 * run a producer's deleter on any thread.
 */
#include "_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char kNameVersioned[] = "dltensor_versioned";
static const char kNameLegacy[] = "dltensor";
static const char kNameUsedVersioned[] = "used_dltensor_versioned";
static const char kNameUsedLegacy[] = "used_dltensor";

/* ------------------------------------------------------------------------ */
/* Export                                                                   */
/* ------------------------------------------------------------------------ */

/* Destructor of the capsules this module makes, called with the GIL held.
 * A consumer that took the tensor renamed the capsule used_*: then the
 * tensor is no longer ours to free. */
static void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kNameVersioned)) {
    dlbpy_managed_free_versioned(
        (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kNameVersioned));
  } else if (PyCapsule_IsValid(capsule, kNameLegacy)) {
    dlbpy_managed_free_legacy((DLManagedTensor*)PyCapsule_GetPointer(capsule, kNameLegacy));
  }
}

PyObject* dlbpy_export_capsule(dlb_buffer* buffer, const dlb_export_options* options,
                               int versioned) {
  void* managed = NULL;
  const char* name;
  dlb_status s;
  if (versioned) {
    DLManagedTensorVersioned* t = NULL;
    s = dlb_export_versioned(buffer, options, &t);
    managed = t;
    name = kNameVersioned;
  } else {
    DLManagedTensor* t = NULL;
    s = dlb_export_legacy(buffer, options, &t);
    managed = t;
    name = kNameLegacy;
  }
  if (s != DLB_OK) return dlbpy_raise_buffer_error(s);
  PyObject* capsule = PyCapsule_New(managed, name, capsule_destructor);
  if (capsule == NULL) {
    if (versioned) {
      dlbpy_managed_free_versioned((DLManagedTensorVersioned*)managed);
    } else {
      dlbpy_managed_free_legacy((DLManagedTensor*)managed);
    }
  }
  return capsule;
}

/* ------------------------------------------------------------------------ */
/* Import                                                                   */
/* ------------------------------------------------------------------------ */

/* The library gets a shim whose deleter takes the GIL before calling the
 * producer's deleter: producers such as numpy 1.x free Python objects in
 * their deleters without taking it, and the library may run a deleter on
 * any thread. If the interpreter is gone, the producer's tensor leaks. */
static void shim_deleter_versioned(DLManagedTensorVersioned* shim) {
  DLManagedTensorVersioned* original = (DLManagedTensorVersioned*)shim->manager_ctx;
  free(shim);
  if (original == NULL || original->deleter == NULL || !dlbpy_interpreter_alive()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  original->deleter(original);
  PyGILState_Release(state);
}

static void shim_deleter_legacy(DLManagedTensor* shim) {
  DLManagedTensor* original = (DLManagedTensor*)shim->manager_ctx;
  free(shim);
  if (original == NULL || original->deleter == NULL || !dlbpy_interpreter_alive()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  original->deleter(original);
  PyGILState_Release(state);
}

/* A shim (see above) in as a buffer: the library routes CUDA memory to its
 * CUDA backend (DLB_IMPORT_CUDA_BACKEND), carrying `stream`, the stream its
 * producer ordered the data before, and takes what that backend does not
 * (no driver, built without CUDA, memory the driver does not know as that
 * kind) and every other memory as a plain buffer. On failure the
 * dlbridge.Error is set and the shim is still the caller's. */
static dlb_status take_in(void* shim, int versioned, int64_t stream, dlb_buffer** out) {
  dlb_import_options options;
  dlb_import_options_init(&options);
  options.flags |= DLB_IMPORT_CUDA_BACKEND;
  const dlb_status s =
      versioned ? dlb_import_versioned_on_stream((DLManagedTensorVersioned*)shim, &options, stream, out)
                : dlb_import_legacy_on_stream((DLManagedTensor*)shim, &options, stream, out);
  if (s != DLB_OK) dlbpy_raise_status(s);
  return s;
}

/* Imports a capsule; `stream` is the stream value CUDA memory is ordered
 * before (1 when the producer was asked without a stream, as the protocol
 * then has it assume the legacy default stream). */
static int import_versioned(PyObject* capsule, int64_t stream, uint64_t dl_flags, dlb_buffer** out) {
  DLManagedTensorVersioned* original =
      (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kNameVersioned);
  if (original == NULL) {  /* GCOVR_EXCL_START: the caller checked the name; a capsule cannot hold NULL */
    PyErr_Clear();
    dlbpy_raise_error(DLB_ERR_MALFORMED, "the dltensor_versioned capsule holds NULL");
    return -1;
  }  /* GCOVR_EXCL_STOP */
  dlb_buffer* buffer = NULL;
  if (original->version.major != 1) {
    /* Only the stable prefix may be read: the library refuses it. */
    const dlb_status s = dlb_import_versioned(original, NULL, &buffer);
    if (s != DLB_OK) {
      dlbpy_raise_status(s);
      return -1;
    }
    /* Unreachable for a major the library does not speak; kept exact. */
    PyCapsule_SetName(capsule, kNameUsedVersioned);
    *out = buffer;
    return 0;
  }
  DLManagedTensorVersioned* shim = (DLManagedTensorVersioned*)malloc(sizeof *shim);
  if (shim == NULL) {  /* GCOVR_EXCL_START: the C heap refusing a few dozen bytes, which no test arranges */
    PyErr_NoMemory();
    return -1;
  }  /* GCOVR_EXCL_STOP */
  *shim = *original;
  shim->flags |= dl_flags;
  shim->manager_ctx = original;
  shim->deleter = shim_deleter_versioned; /* frees the shim even when the producer's tensor has no deleter */
  if (take_in(shim, 1, stream, &buffer) != DLB_OK) {
    free(shim); /* the capsule still owns `original` */
    return -1;
  }
  PyCapsule_SetName(capsule, kNameUsedVersioned);
  *out = buffer;
  return 0;
}

static int import_legacy(PyObject* capsule, int64_t stream, dlb_buffer** out) {
  DLManagedTensor* original = (DLManagedTensor*)PyCapsule_GetPointer(capsule, kNameLegacy);
  if (original == NULL) {  /* GCOVR_EXCL_START: the caller checked the name; a capsule cannot hold NULL */
    PyErr_Clear();
    dlbpy_raise_error(DLB_ERR_MALFORMED, "the dltensor capsule holds NULL");
    return -1;
  }  /* GCOVR_EXCL_STOP */
  dlb_buffer* buffer = NULL;
  if (PyCapsule_GetDestructor(capsule) == capsule_destructor) {
    /* Made by this module (dlbpy_export_capsule): the library's own export,
     * whose deleter needs no GIL, goes in as it is, so that the library
     * knows it (a copy of read-only memory imports as copied). */
    if (take_in(original, 0, stream, &buffer) != DLB_OK) return -1;
    PyCapsule_SetName(capsule, kNameUsedLegacy);
    *out = buffer;
    return 0;
  }
  DLManagedTensor* shim = (DLManagedTensor*)malloc(sizeof *shim);
  if (shim == NULL) {  /* GCOVR_EXCL_START: the C heap refusing a few dozen bytes, which no test arranges */
    PyErr_NoMemory();
    return -1;
  }  /* GCOVR_EXCL_STOP */
  shim->dl_tensor = original->dl_tensor;
  shim->manager_ctx = original;
  shim->deleter = shim_deleter_legacy; /* as above */
  if (take_in(shim, 0, stream, &buffer) != DLB_OK) {
    free(shim);
    return -1;
  }
  PyCapsule_SetName(capsule, kNameUsedLegacy);
  *out = buffer;
  return 0;
}

static int import_capsule_on(PyObject* capsule, int64_t stream, uint64_t dl_flags, dlb_buffer** out) {
  if (PyCapsule_IsValid(capsule, kNameVersioned)) return import_versioned(capsule, stream, dl_flags, out);
  if (PyCapsule_IsValid(capsule, kNameLegacy)) return import_legacy(capsule, stream, out);
  char text[200];
  if (!PyCapsule_CheckExact(capsule)) {
    PyObject* type_name = PyObject_GetAttrString((PyObject*)Py_TYPE(capsule), "__name__");
    const char* name = type_name != NULL ? PyUnicode_AsUTF8AndSize(type_name, NULL) : NULL;
    if (name == NULL) PyErr_Clear();
    snprintf(text, sizeof text, "__dlpack__ gave an object of type %.100s, not a DLPack PyCapsule",
             name != NULL ? name : "(unnamed)");
    Py_XDECREF(type_name);
    dlbpy_raise_error(DLB_ERR_MALFORMED, text);
    return -1;
  }
  const char* name = PyCapsule_GetName(capsule);
  if (name == NULL) PyErr_Clear();
  if (name != NULL && (strcmp(name, kNameUsedVersioned) == 0 || strcmp(name, kNameUsedLegacy) == 0)) {
    snprintf(text, sizeof text, "the capsule was already consumed (named '%s')", name);
  } else {
    snprintf(text, sizeof text, "capsule named '%.100s' is not a DLPack capsule",
             name != NULL ? name : "(null)");
  }
  dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, text);
  return -1;
}

int dlbpy_import_capsule(PyObject* capsule, int64_t stream, dlb_buffer** out) {
  return import_capsule_on(capsule, stream, 0, out);
}

dlb_status dlbpy_import_managed(DLManagedTensorVersioned* tensor, int64_t stream, dlb_buffer** out) {
  return take_in(tensor, 1, stream, out);
}

/* Drops a producer's capsule. One the import refused still holds the
 * tensor, and the producer's capsule destructor, which may run Python code,
 * deletes it: the import's exception is kept aside meanwhile. */
static void drop_capsule(PyObject* capsule) {
  if (!PyErr_Occurred()) {
    Py_DECREF(capsule);
    return;
  }
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  Py_DECREF(capsule);
  PyErr_Restore(type, value, trace);
}

dlb_buffer* dlbpy_capsule_to_buffer(PyObject* capsule, int64_t stream, uint64_t dl_flags) {
  dlb_buffer* buffer = NULL;
  const int bad = import_capsule_on(capsule, stream, dl_flags, &buffer);
  drop_capsule(capsule);
  return bad ? NULL : buffer;
}
