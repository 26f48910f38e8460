/* dlbridge.Tensor: the extension type (see _glue.h).
 *
 * One dlb_buffer reference, released by the object's deallocator; its
 * properties (a metadata tuple read from the library once and cached); and
 * the DLPack producer side (__dlpack__, __dlpack_device__) with the
 * protocol's argument rules. The type is immutable and its instances are
 * not tracked by the garbage collector (they reference no Python object that
 * could lead back to them), so that making and dropping one costs a small
 * allocation. How its DLPack C exchange table is published depends on the
 * CPython version (_module.c, make_tensor_type).
 */
#include "_glue.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>


dlb_buffer* dlbpy_tensor_buffer(PyObject* obj) {
  const dlbpy_state* state = dlbpy_state_get();
  if (state == NULL || Py_TYPE(obj) != state->tensor_type) {
    PyErr_Format(PyExc_TypeError, "expected a dlbridge.Tensor, not %R", (PyObject*)Py_TYPE(obj));
    return NULL;
  }
  return ((dlbpy_tensor*)obj)->buffer;
}

PyObject* dlbpy_tensor_new_in(dlbpy_state* state, dlb_buffer* buffer) {
  PyTypeObject* type = state != NULL ? state->tensor_type : NULL;
  allocfunc alloc = type != NULL ? (allocfunc)PyType_GetSlot(type, Py_tp_alloc) : NULL;
  dlbpy_tensor* t = alloc != NULL ? (dlbpy_tensor*)alloc(type, 0) : NULL;
  if (t == NULL) {
    dlbpy_buffer_release(buffer);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "dlbridge._glue is not initialised");
    return NULL;
  }
  t->buffer = buffer; /* the rest was zeroed by tp_alloc, which took a reference on the type */
  return (PyObject*)t;
}

PyObject* dlbpy_tensor_new(dlb_buffer* buffer) { return dlbpy_tensor_new_in(dlbpy_state_get(), buffer); }

static PyObject* tensor_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)type;
  (void)args;
  (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "dlbridge.Tensor is made by dlbridge.empty(), dlbridge.from_buffer() or "
                  "dlbridge.from_dlpack()");
  return NULL;
}

static void tensor_dealloc(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  PyTypeObject* type = Py_TYPE(self);
  if (t->weaklist != NULL) PyObject_ClearWeakRefs(self);
  Py_CLEAR(t->meta);
  dlb_buffer* buffer = t->buffer;
  t->buffer = NULL;
  dlbpy_buffer_release(buffer); /* may run a producer's deleter: GIL held */
  freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_object(self);
  Py_DECREF(type); /* instances of heap types own a reference to the type */
}
static PyObject* int_tuple(const int64_t* values, int n) {
  PyObject* tuple = PyTuple_New(n);
  if (tuple == NULL) return NULL;
  for (int i = 0; i < n; ++i) {
    PyObject* item = PyLong_FromLongLong(values[i]);
    if (item == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SetItem(tuple, i, item); /* steals */
  }
  return tuple;
}

/* (device_type, device_id) of a buffer, or NULL with dlbridge.Error set. */
static PyObject* device_tuple(const DLDevice* device) {
  return Py_BuildValue("(ii)", (int)device->device_type, (int)device->device_id);
}

/* The metadata tuple Tensor's properties read: (shape, strides, dtype name,
 * (device_type, device_id), data_ptr, readonly, nbytes). Strides in
 * elements; data_ptr is data + byte_offset as the buffer holds them. */
static PyObject* make_meta(dlb_buffer* buffer) {
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(buffer, &t);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  char name[64];
  s = dlb_dtype_name(t.dtype, name, sizeof name);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  uintptr_t data = (uintptr_t)t.data + (uintptr_t)t.byte_offset;
  if (t.data == NULL && (dlb_buffer_flags(buffer) & DLB_BUFFER_BACKEND) != 0) {
    /* A backend's memory (CUDA device memory) is only reached through an
     * export: one that orders nothing (stream -1) and copies nothing, read
     * and freed. */
    dlb_export_options options;
    dlb_export_options_init(&options);
    options.copy = DLB_COPY_NEVER;
    options.stream = -1;
    options.flags |= DLB_EXPORT_STREAM_GIVEN;
    DLManagedTensorVersioned* view = NULL;
    if (dlb_export_versioned(buffer, &options, &view) == DLB_OK) {
      data = (uintptr_t)view->dl_tensor.data + (uintptr_t)view->dl_tensor.byte_offset;
      dlbpy_managed_free_versioned(view);
    }
  }
  return Py_BuildValue("(NNsNNNN)", int_tuple(t.shape, t.ndim), int_tuple(t.strides, t.ndim), name,
                       device_tuple(&t.device), PyLong_FromUnsignedLongLong(data),
                       PyBool_FromLong((dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0),
                       PyLong_FromUnsignedLongLong(dlb_buffer_nbytes(buffer)));
}

/* The cached metadata tuple, borrowed; NULL with dlbridge.Error set when
 * it cannot be read (a tensor deleted before it was ever read). */
static PyObject* meta_of(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  if (t->meta == NULL) t->meta = make_meta(t->buffer);
  return t->meta;
}

static PyObject* tensor_get_meta(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  Py_XINCREF(meta);
  return meta;
}

/* The properties: items of the metadata tuple, chosen by the closure. */
static PyObject* tensor_get_item(PyObject* self, void* closure) {
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  PyObject* item = PyTuple_GetItem(meta, (Py_ssize_t)(intptr_t)closure);
  Py_XINCREF(item);
  return item;
}

static PyObject* tensor_get_ndim(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  return PyLong_FromSsize_t(PyTuple_Size(PyTuple_GetItem(meta, 0)));
}

/* The number of elements, as a Python int (no overflow however the
 * extents multiply). */
static PyObject* tensor_get_size(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  PyObject* shape = PyTuple_GetItem(meta, 0);
  PyObject* n = PyLong_FromLong(1);
  for (Py_ssize_t i = 0; n != NULL && i < PyTuple_Size(shape); ++i) {
    PyObject* product = PyNumber_Multiply(n, PyTuple_GetItem(shape, i));
    Py_DECREF(n);
    n = product;
  }
  return n;
}

static Py_ssize_t tensor_length(PyObject* self) {
  PyObject* meta = meta_of(self);
  if (meta == NULL) return -1;
  PyObject* shape = PyTuple_GetItem(meta, 0);
  if (PyTuple_Size(shape) == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
    return -1;
  }
  return PyLong_AsSsize_t(PyTuple_GetItem(shape, 0));
}

static PyObject* tensor_repr(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  PyObject* meta = meta_of(self);
  if (meta == NULL) {
    const dlbpy_state* state = dlbpy_state_get();
    if (state == NULL || state->error_type == NULL || !PyErr_ExceptionMatches(state->error_type)) return NULL;
    PyErr_Clear();
    return PyUnicode_FromString("dlbridge.Tensor(<deleted>)");
  }
  const int readonly = PyObject_IsTrue(PyTuple_GetItem(meta, 5));
  const int deleted = (dlb_buffer_flags(t->buffer) & DLB_BUFFER_DELETED) != 0;
  return PyUnicode_FromFormat("dlbridge.Tensor(shape=%R, dtype=%U, device=%R%s%s)", PyTuple_GetItem(meta, 0),
                              PyTuple_GetItem(meta, 2), PyTuple_GetItem(meta, 3),
                              readonly ? ", readonly=True" : "", deleted ? ", deleted=True" : "");
}

static PyObject* tensor_reduce(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  /* Reached only by a direct call (pickle and copy call __reduce_ex__,
   * _pickle.c): a copy of this object would share the handle and release
   * it twice. */
  PyErr_SetString(PyExc_TypeError, "dlbridge.Tensor cannot be pickled or copied here; export it with DLPack");
  return NULL;
}

static PyObject* tensor_get_handle(PyObject* self, void* closure) {
  (void)closure;
  return PyLong_FromVoidPtr(((dlbpy_tensor*)self)->buffer);
}

static PyObject* tensor_get_deleted(PyObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong((dlb_buffer_flags(((dlbpy_tensor*)self)->buffer) & DLB_BUFFER_DELETED) != 0);
}

/* Whether the buffer's memory is a copy made for this tensor: a producer
 * marked its export IS_COPIED, or dlbridge copied (a copy= or device= the
 * producer could not honour, the host-copy cure of a refusal). The
 * library's DLB_BUFFER_COPIED. */
static PyObject* tensor_get_copied(PyObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong((dlb_buffer_flags(((dlbpy_tensor*)self)->buffer) & DLB_BUFFER_COPIED) != 0);
}

static PyObject* tensor_delete(PyObject* self, PyObject* unused) {
  (void)unused;
  if (meta_of(self) == NULL) return NULL; /* the properties keep working after the delete */
  const dlb_status s = dlb_buffer_delete(((dlbpy_tensor*)self)->buffer);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_RETURN_NONE;
}

/* set_stream(stream): records the stream value of the buffer's last writer
 * (dlb_cuda_buffer_set_stream); dlbridge.Error for a tensor that is not
 * CUDA memory of the library's backend or a value below -1. */
static PyObject* tensor_set_stream(PyObject* self, PyObject* arg) {
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "stream must be an int, not %R", arg);
    return NULL;
  }
  const long long value = PyLong_AsLongLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  const dlb_status s = dlb_cuda_buffer_set_stream(((dlbpy_tensor*)self)->buffer, (int64_t)value);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_RETURN_NONE;
}

/* The stream value of the last writer of CUDA memory (dlb_cuda_buffer_stream),
 * None for a tensor the CUDA backend does not hold. */
static PyObject* tensor_get_stream(PyObject* self, void* closure) {
  (void)closure;
  int64_t value = 0;
  if (dlb_cuda_buffer_stream(((dlbpy_tensor*)self)->buffer, &value) != DLB_OK) Py_RETURN_NONE;
  return PyLong_FromLongLong((long long)value);
}

static PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused) {
  (void)unused;
  DLTensor t;
  const dlb_status s = dlb_buffer_dltensor(((dlbpy_tensor*)self)->buffer, &t);
  if (s != DLB_OK) {
    /* A deleted tensor still says where it was. */
    dlbpy_tensor* tensor = (dlbpy_tensor*)self;
    if (tensor->meta != NULL) {
      PyObject* device = PyTuple_GetItem(tensor->meta, 3);
      Py_XINCREF(device);
      return device;
    }
    return dlbpy_raise_status(s);
  }
  return device_tuple(&t.device);
}


/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject* tensor_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  dlb_buffer* buffer = ((dlbpy_tensor*)self)->buffer;
  if (nargs == 0 && kwnames == NULL) return dlbpy_export_capsule(buffer, NULL, 0);

  static const char* const names[] = {"stream", "max_version", "dl_device", "copy"};
  PyObject* v[4];
  if (dlbpy_keyword_only("__dlpack__", args, nargs, kwnames, names, 4, v) != 0) return NULL;
  PyObject* stream = v[0] == Py_None ? NULL : v[0];
  PyObject* max_version = v[1] == Py_None ? NULL : v[1];
  PyObject* dl_device = v[2] == Py_None ? NULL : v[2];
  PyObject* copy = v[3] == Py_None ? NULL : v[3];

  dlb_export_options options;
  dlb_export_options_init(&options);
  int versioned = 0;
  if (max_version != NULL) {
    long long version[2];
    if (dlbpy_int_pair(max_version, "max_version", "(major, minor)", version) != 0) return NULL;
    versioned = version[0] >= 1;
  }
  const int policy = dlbpy_copy_policy(copy);
  if (policy < 0) return NULL;
  options.copy = policy;
  if (dl_device != NULL) {
    long long device[2];
    if (dlbpy_int_pair(dl_device, "dl_device", "(device_type, device_id)", device) != 0) return NULL;
    if (device[0] < INT32_MIN || device[0] > INT32_MAX || device[1] < INT32_MIN ||
        device[1] > INT32_MAX) {
      PyErr_Format(PyExc_ValueError, "dl_device %R is out of range", dl_device);
      return NULL;
    }
    options.has_target_device = 1;
    options.target_device.device_type = (DLDeviceType)device[0];
    options.target_device.device_id = (int32_t)device[1];
  }
  if (stream != NULL) {
    /* The library decides what a stream means for the buffer's device
     * (refused for host memory, 0 refused where streams exist, ...): the
     * value goes through as given. */
    if (!PyLong_Check(stream)) {
      PyErr_Format(PyExc_TypeError, "stream must be an int or None, not %R", stream);
      return NULL;
    }
    const long long value = PyLong_AsLongLong(stream);
    if (value == -1 && PyErr_Occurred()) return NULL;
    options.stream = (int64_t)value;
    options.flags |= DLB_EXPORT_STREAM_GIVEN;
  }
  return dlbpy_export_capsule(buffer, &options, versioned);
}

/* ------------------------------------------------------------------------ */
/* The type                                                                 */
/* ------------------------------------------------------------------------ */

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Exports the tensor as a DLPack capsule (the array API standard's protocol)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(device_type, device_id) in DLPack's numbering."},
    {"set_stream", tensor_set_stream, METH_O,
     "set_stream(stream, /)\n--\n\n"
     "Records the CUDA stream of the tensor's last writer (a stream value: 1 the\n"
     "legacy default stream, 2 the per-thread default stream, -1 no pending work,\n"
     "or a CUstream handle as an int), so that later exports and copies are\n"
     "ordered after that work. dlbridge.Error (DLB_ERR_INVALID_ARGUMENT) for a\n"
     "tensor that is not CUDA memory of dlbridge's CUDA backend."},
    {"delete", tensor_delete, METH_NOARGS,
     "delete()\n--\n\nDeletes (donates) the buffer: later exports raise BufferError."},
    {"__reduce_ex__", dlbpy_tensor_reduce_ex, METH_O, dlbpy_tensor_reduce_ex_doc},
    {"__reduce__", tensor_reduce, METH_NOARGS,
     "Refused: pickle and copy call __reduce_ex__ (_pickle.c); multiprocessing shares the\n"
     "memory (dlbridge._share)."},
    {NULL, NULL, 0, NULL},
};

/* The exchange capsule, for the getters below. */
static PyObject* get_exchange(PyObject* self, void* closure) {
  (void)self;
  (void)closure;
  const dlbpy_state* state = dlbpy_state_get();
  if (state == NULL || state->exchange_capsule == NULL) {
    PyErr_SetString(PyExc_AttributeError, "__dlpack_c_exchange_api__");
    return NULL;
  }
  Py_INCREF(state->exchange_capsule);
  return state->exchange_capsule;
}

static const char exchange_doc[] = "The DLPack C exchange table (a PyCapsule named \"dlpack_exchange_api\").";

/* Entry 0 serves instances when the class attribute comes from the
 * metaclass (dlbpy_tensor_spec); without one it is left out. */
static PyGetSetDef tensor_getset[] = {
    {"__dlpack_c_exchange_api__", get_exchange, NULL, exchange_doc, NULL},
    {"_m", tensor_get_meta, NULL, "metadata tuple (cached)", NULL},
    {"shape", tensor_get_item, NULL, "Extents, a tuple of ints.", (void*)0},
    {"strides", tensor_get_item, NULL, "Strides in elements (not bytes), a tuple of ints.", (void*)1},
    {"dtype", tensor_get_item, NULL,
     "numpy-style dtype name: \"float32\", \"bfloat16\", \"bool\", \"complex64\", ...", (void*)2},
    {"device", tensor_get_item, NULL, "(device_type, device_id), DLPack's numbering (CPU is (1, 0)).",
     (void*)3},
    {"data_ptr", tensor_get_item, NULL,
     "Address of the element at index (0, ..., 0): the buffer's data pointer plus\n"
     "its byte offset, as an int. A zero-size tensor has an address too (never\n"
     "NULL; DLPack consumers skip the deleter of a tensor whose data is NULL),\n"
     "which must not be read through.",
     (void*)4},
    {"readonly", tensor_get_item, NULL, "True when the memory must not be written through exports.",
     (void*)5},
    {"nbytes", tensor_get_item, NULL, "Bytes the elements take when compact.", (void*)6},
    {"ndim", tensor_get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", tensor_get_size, NULL, "Number of elements.", NULL},
    {"_handle", tensor_get_handle, NULL, "the dlb_buffer* as an int (borrowed)", NULL},
    {"deleted", tensor_get_deleted, NULL, "True once delete() was called.", NULL},
    {"copied", tensor_get_copied, NULL,
     "True when the memory is a copy made for this tensor: its producer said so\n"
     "(IS_COPIED), or dlbridge copied it (copy=True, a device= or copy= the producer\n"
     "could not honour, or the host-copy cure of a producer's refusal in\n"
     "from_dlpack). Such memory is shared with no other framework.",
     NULL},
    {"stream", tensor_get_stream, NULL,
     "The stream value of the last writer of CUDA memory (see set_stream); None for a\n"
     "tensor dlbridge's CUDA backend does not hold.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(dlbpy_tensor, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static const char tensor_doc[] =
    "A reference to a dlbridge buffer; a producer and consumer of DLPack.\n\n"
    "Made by dlbridge.empty(), dlbridge.from_buffer() and dlbridge.from_dlpack(),\n"
    "not by calling the class. Dropping the tensor releases its reference (in C;\n"
    "the class has no __del__). Metadata is read from the library once, on first\n"
    "use, and cached. strides are in elements, as DLPack counts them.\n\n"
    "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n"
    "exports a DLPack capsule: max_version None or with a major below 1 gives a\n"
    "legacy \"dltensor\" capsule (for read-only data, which the legacy struct\n"
    "cannot mark, a writable copy; BufferError with copy=False), a major of 1\n"
    "or more a\n"
    "\"dltensor_versioned\" one; copy True always copies, False never (BufferError\n"
    "when a copy is needed), None copies only when needed; dl_device is the\n"
    "consumer's (device_type, device_id); stream must be None for host memory.\n"
    "The type publishes the DLPack 1.3 C exchange table as\n"
    "__dlpack_c_exchange_api__.\n\n"
    "CUDA memory (tensors taken in with from_dlpack() from a CUDA producer)\n"
    "remembers the stream of its last writer: stream reads it (None for other\n"
    "tensors), set_stream(s) records a new one after enqueueing work that writes\n"
    "the memory. Exports to a consumer's stream and copies to the host are\n"
    "ordered after that stream.\n\n"
    "The type is immutable and cannot be subclassed.";

static PyType_Slot tensor_slots[] = {
    {Py_tp_new, (void*)tensor_tp_new},
    {Py_tp_dealloc, (void*)tensor_dealloc},
    {Py_tp_repr, (void*)tensor_repr},
    {Py_sq_length, (void*)tensor_length},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {Py_tp_members, tensor_members},
    {Py_tp_doc, (void*)tensor_doc},
    {0, NULL},
};

/* Immutable (its attributes, the exchange table among them, cannot be
 * replaced, which lets consumers cache the table for good) and not a base
 * type; no Py_TPFLAGS_HAVE_GC: see the comment at the top. */
static PyType_Spec tensor_spec = {
    "dlbridge.Tensor",
    sizeof(dlbpy_tensor),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    tensor_slots,
};

PyType_Spec* dlbpy_tensor_spec(int instance_exchange) {
  for (PyType_Slot* slot = tensor_slots; slot->slot != 0; ++slot) {
    if (slot->slot == Py_tp_getset) slot->pfunc = instance_exchange ? tensor_getset : tensor_getset + 1;
  }
  return &tensor_spec;
}

static PyGetSetDef meta_getset[] = {
    {"__dlpack_c_exchange_api__", get_exchange, NULL, exchange_doc, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot meta_slots[] = {
    {Py_tp_getset, meta_getset},
    {0, NULL},
};

PyType_Spec dlbpy_tensor_meta_spec = {
    "dlbridge._glue.TensorType",
    0,
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    meta_slots,
};
