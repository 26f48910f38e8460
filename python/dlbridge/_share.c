/* Sharing tensors with other processes (include/dlbridge/share.h), for
 * dlbridge._share: the descriptor of a tensor, a tensor over a descriptor,
 * sending and receiving over a Unix socket, the mapping count. The
 * descriptor's layout and the wire format stay the library's; Python sees
 * a file descriptor (an int) and the description's bytes.
 *
 * Ownership of file descriptors, in every function below: a descriptor
 * returned to Python is new and the caller's to close (os.close); a
 * descriptor passed in is borrowed, never closed here. */
#include <string.h>

#include "_glue.h"

/* The flags of keyword arguments given as Python truth values. */
static int share_flag(PyObject* value, uint64_t flag, uint64_t* flags) {
  if (value == NULL) return 0;
  const int truth = PyObject_IsTrue(value);
  if (truth < 0) return -1;
  if (truth) *flags |= flag;
  return 0;
}

/* A file descriptor given as an int (a socket's fileno(), os.open()). */
static int share_fd(PyObject* value, const char* what, int32_t* out) {
  const long long fd = PyLong_AsLongLong(value);
  if (fd == -1 && PyErr_Occurred()) return -1;
  if (fd < 0 || fd > INT32_MAX) {
    char text[96];
    snprintf(text, sizeof text, "%s %lld is not a file descriptor", what, fd);
    dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, text);
    return -1;
  }
  *out = (int32_t)fd;
  return 0;
}

/* (fd, description) from a descriptor whose fd is handed to the result;
 * the descriptor is closed when the tuple cannot be made. */
static PyObject* share_pair(dlb_share_descriptor* d) {
  PyObject* result = Py_BuildValue("(iy#)", (int)d->fd, (const char*)d->description, (Py_ssize_t)d->size);
  if (result == NULL) dlb_share_descriptor_close(d);
  return result;
}

PyObject* dlbpy_share_descriptor(PyObject* module, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kwnames) {
  (void)module;
  static const char* const names[] = {"copy", "read_only"};
  PyObject* values[2];
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "share_descriptor() takes one tensor");
    return NULL;
  }
  if (dlbpy_keyword_only("share_descriptor", args + 1, 0, kwnames, names, 2, values) != 0) return NULL;
  dlb_buffer* buffer = dlbpy_tensor_buffer(args[0]);
  if (buffer == NULL) return NULL;
  uint64_t flags = 0;
  if (share_flag(values[0], DLB_SHARE_COPY_IF_NEEDED, &flags) != 0 ||
      share_flag(values[1], DLB_SHARE_READ_ONLY, &flags) != 0)
    return NULL;
  dlb_share_descriptor d;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS  /* a copy into shared memory may take a while */
  s = dlb_buffer_share(buffer, flags, &d);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return share_pair(&d);
}
const char dlbpy_share_descriptor_doc[] =
    "share_descriptor(tensor, /, *, copy=False, read_only=False) -> (fd, description)\n"
    "--\n\n"
    "The descriptor of a tensor for another process: a new file descriptor, the\n"
    "caller's to close, and the description's bytes. Memory that is not shared\n"
    "raises dlbridge.Error DLB_ERR_NOT_ZERO_COPY unless copy is true (then it is\n"
    "copied once into new shared memory).";

PyObject* dlbpy_share_copy(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const names[] = {"read_only"};
  PyObject* values[1];
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "share_copy() takes one tensor");
    return NULL;
  }
  if (dlbpy_keyword_only("share_copy", args + 1, 0, kwnames, names, 1, values) != 0) return NULL;
  dlb_buffer* buffer = dlbpy_tensor_buffer(args[0]);
  if (buffer == NULL) return NULL;
  uint64_t flags = 0;
  if (share_flag(values[0], DLB_SHARE_READ_ONLY, &flags) != 0)
    return NULL;
  dlb_buffer* copy = NULL;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS  /* the copy may take a while */
  s = dlb_buffer_copy_shared(buffer, flags, &copy);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (copy == NULL) return dlbpy_raise_error(DLB_ERR_INTERNAL, "dlb_buffer_copy_shared gave no buffer");
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), copy);
}
const char dlbpy_share_copy_doc[] =
    "share_copy(tensor, /, *, read_only=False) -> Tensor\n"
    "--\n\n"
    "A new tensor in shared memory with the tensor's elements (compact), copied\n"
    "once (dlb_buffer_copy_shared); read-only when asked for or when the tensor is.";

PyObject* dlbpy_is_shared(PyObject* module, PyObject* tensor) {
  (void)module;
  dlb_buffer* buffer = dlbpy_tensor_buffer(tensor);
  if (buffer == NULL) return NULL;
  int32_t shared = 0;
  dlb_status s = dlb_buffer_is_shared(buffer, &shared);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  DLTensor t;
  if (shared && dlb_buffer_dltensor(buffer, &t) == DLB_OK && t.device.device_type != kDLCPU) {
    /* Device memory (CUDA IPC): a descriptor made now makes the buffer's
     * interprocess event, so that share() leaves it ready for a process
     * forked next, as dlb_buffer_share() would (docs/sharing.md). Host
     * memory gets none: a pooled slot would be kept for good. */
    dlb_share_descriptor d;
    s = dlb_buffer_share(buffer, 0, &d);
    if (s != DLB_OK) return dlbpy_raise_status(s);
    dlb_share_descriptor_close(&d);
  }
  return PyBool_FromLong(shared);
}
const char dlbpy_is_shared_doc[] =
    "is_shared(tensor, /) -> bool\n--\n\n"
    "Whether the tensor's elements lie in shared memory (sharing it needs no copy).";

/* A tensor over a descriptor; `fd` stays the caller's unless `flags` has
 * DLB_SHARE_TAKE_FD. */
static PyObject* share_open(dlbpy_state* state, int32_t fd, const void* description, size_t size,
                            uint64_t flags) {
  dlb_buffer* buffer = NULL;
  const dlb_status s = dlb_buffer_open_shared(fd, description, size, flags, &buffer);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (buffer == NULL) return dlbpy_raise_error(DLB_ERR_INTERNAL, "dlb_buffer_open_shared gave no buffer");
  return dlbpy_tensor_new_in(state, buffer);
}

PyObject* dlbpy_open_shared(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const names[] = {"read_only"};
  PyObject* values[1];
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "open_shared() takes a file descriptor and a description");
    return NULL;
  }
  if (dlbpy_keyword_only("open_shared", args + 2, 0, kwnames, names, 1, values) != 0) return NULL;
  int32_t fd;
  /* -1 is a CUDA IPC description's fd; the library judges it. */
  if (PyLong_Check(args[0]) && PyLong_AsLongLong(args[0]) == -1) {
    fd = -1;
  } else if (share_fd(args[0], "fd", &fd) != 0) {
    return NULL;
  }
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(args[1], &bytes, &size) != 0) return NULL;
  uint64_t flags = 0;
  if (share_flag(values[0], DLB_SHARE_READ_ONLY, &flags) != 0) return NULL;
  return share_open((dlbpy_state*)PyModule_GetState(module), fd, bytes, (size_t)size, flags);
}
const char dlbpy_open_shared_doc[] =
    "open_shared(fd, description, /, *, read_only=False) -> Tensor\n--\n\n"
    "The tensor a descriptor describes, mapped in this process (fd -1 for a CUDA\n"
    "IPC description, opened by handle). fd is borrowed:\n"
    "it stays the caller's, who may close it right after the call.";

PyObject* dlbpy_share_send(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "share_send() takes a socket's file descriptor and a tensor");
    return NULL;
  }
  int32_t sock;
  if (share_fd(args[0], "socket", &sock) != 0) return NULL;
  dlb_buffer* buffer = dlbpy_tensor_buffer(args[1]);
  if (buffer == NULL) return NULL;
  dlb_share_descriptor d;
  dlb_status s = dlb_buffer_share(buffer, 0, &d);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_BEGIN_ALLOW_THREADS  /* blocks until the peer reads */
  s = dlb_share_send(sock, &d);
  Py_END_ALLOW_THREADS
  dlb_share_descriptor_close(&d);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_RETURN_NONE;
}
const char dlbpy_share_send_doc[] =
    "share_send(socket_fd, tensor, /) -> None\n--\n\n"
    "Sends a tensor in shared memory over a connected Unix socket (the socket\n"
    "stays open). Memory that is not shared raises DLB_ERR_NOT_ZERO_COPY.";

PyObject* dlbpy_share_recv(PyObject* module, PyObject* arg) {
  int32_t sock;
  if (share_fd(arg, "socket", &sock) != 0) return NULL;
  dlb_share_descriptor d;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS  /* blocks until the peer sends */
  s = dlb_share_recv(sock, &d);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (d.fd < 0 && d.size == 0) Py_RETURN_NONE;  /* the end of the stream; a CUDA IPC description has no fd */
  /* The file descriptor that arrived is the buffer's (or closed on failure). */
  const uint64_t take = d.fd >= 0 ? DLB_SHARE_TAKE_FD : 0;
  return share_open((dlbpy_state*)PyModule_GetState(module), d.fd, d.description, d.size, take);
}
const char dlbpy_share_recv_doc[] =
    "share_recv(socket_fd, /) -> Tensor | None\n--\n\n"
    "The next tensor from a connected Unix socket, mapped in this process; None\n"
    "at the end of the stream. A file descriptor that arrived is the tensor's\n"
    "(closed when it is released) or, if opening it fails, closed.";

PyObject* dlbpy_shared_mappings(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLongLong(dlb_shared_mappings());
}
const char dlbpy_shared_mappings_doc[] =
    "shared_mappings() -> int\n--\n\n"
    "Shared-memory mappings the library holds in this process (for leak checks).";

/* ---- tickets (multiprocessing): the library's hand-over ------------------ */

PyObject* dlbpy_share_ticket(PyObject* module, PyObject* tensor) {
  (void)module;
  dlb_buffer* buffer = dlbpy_tensor_buffer(tensor);
  if (buffer == NULL) return NULL;
  dlb_share_ticket t;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS /* a copy into shared memory may take a while */
  s = dlb_share_ticket_issue(buffer, DLB_SHARE_COPY_IF_NEEDED, &t);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return PyBytes_FromStringAndSize((const char*)t.bytes, (Py_ssize_t)t.size);
}
const char dlbpy_share_ticket_doc[] =
    "share_ticket(tensor, /) -> bytes\n--\n\n"
    "A ticket for the tensor (dlb_share_ticket_issue; memory not shared yet is\n"
    "copied once): this process keeps its file until one process opens it or\n"
    "it is withdrawn.";

PyObject* dlbpy_share_ticket_open(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const names[] = {"read_only", "via_server"};
  PyObject* values[2];
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "share_ticket_open() takes a ticket");
    return NULL;
  }
  if (dlbpy_keyword_only("share_ticket_open", args + 1, 0, kwnames, names, 2, values) != 0) return NULL;
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(args[0], &bytes, &size) != 0) return NULL;
  uint64_t flags = 0;
  if (share_flag(values[0], DLB_SHARE_READ_ONLY, &flags) != 0 || share_flag(values[1], DLB_SHARE_VIA_SERVER, &flags) != 0)
    return NULL;
  dlb_buffer* buffer = NULL;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS /* may wait for the sender's server */
  s = dlb_share_ticket_open(bytes, (size_t)size, flags, &buffer);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
}
const char dlbpy_share_ticket_open_doc[] =
    "share_ticket_open(ticket, /, *, read_only=False, via_server=False) -> Tensor\n--\n\n"
    "The tensor a ticket names, mapped in this process (dlb_share_ticket_open:\n"
    "the sender's ticket server hands its file over). via_server is accepted\n"
    "and changes nothing (DLB_SHARE_VIA_SERVER).";

PyObject* dlbpy_share_ticket_withdraw(PyObject* module, PyObject* arg) {
  (void)module;
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (arg != Py_None && PyBytes_AsStringAndSize(arg, &bytes, &size) != 0) return NULL;
  int64_t withdrawn = 0;
  const dlb_status s = dlb_share_ticket_withdraw(bytes, (size_t)size, &withdrawn);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return PyLong_FromLongLong((long long)withdrawn);
}
const char dlbpy_share_ticket_withdraw_doc[] =
    "share_ticket_withdraw(ticket, /) -> int\n--\n\n"
    "Takes back a ticket this process issued (None: every one not opened yet;\n"
    "dlb_share_ticket_withdraw); returns how many were withdrawn.";

PyObject* dlbpy_share_ticket_wait(PyObject* module, PyObject* arg) {
  (void)module;
  const double seconds = PyFloat_AsDouble(arg);
  if (seconds == -1.0 && PyErr_Occurred()) return NULL;
  const int64_t ms = seconds > 0 ? (int64_t)(seconds * 1000.0 + 0.5) : 0;
  int64_t held;
  Py_BEGIN_ALLOW_THREADS /* receivers' opens are answered meanwhile */
  held = dlb_share_ticket_wait(ms);
  Py_END_ALLOW_THREADS
  return PyLong_FromLongLong((long long)held);
}
const char dlbpy_share_ticket_wait_doc[] =
    "share_ticket_wait(seconds, /) -> int\n--\n\n"
    "Waits up to seconds until every ticket this process issued was opened or\n"
    "withdrawn (dlb_share_ticket_wait); returns how many are still unopened.";

PyObject* dlbpy_share_server_state(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  int64_t held = 0, connections = 0, links = 0;
  const int32_t runs = dlb_share_ticket_server(&held, &connections, &links);
  return Py_BuildValue("(LLLO)", (long long)held, (long long)connections, (long long)links, runs ? Py_True : Py_False);
}
const char dlbpy_share_server_state_doc[] =
    "share_server_state() -> (held, connections, links, running)\n--\n\n"
    "This process's ticket server (dlb_share_ticket_server), for tests.";

/* ---- plain pickling: a copy of the elements ---------------------------- */

PyObject* dlbpy_tensor_payload(PyObject* module, PyObject* tensor) {
  (void)module;
  dlb_buffer* buffer = dlbpy_tensor_buffer(tensor);
  if (buffer == NULL) return NULL;
  dlb_buffer* host = NULL;
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS /* a large or device tensor's copy may take a while */
  s = dlb_buffer_to_host(buffer, &host);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise_status(s);
  DLTensor t;
  s = dlb_buffer_dltensor(host, &t);
  if (s != DLB_OK) {
    dlbpy_buffer_release(host);
    return dlbpy_raise_status(s);
  }
  PyObject* data =
      PyBytes_FromStringAndSize((const char*)t.data + t.byte_offset, (Py_ssize_t)dlb_buffer_nbytes(host));
  PyObject* shape = data != NULL ? PyTuple_New(t.ndim) : NULL;
  for (int32_t i = 0; shape != NULL && i < t.ndim; ++i) {
    PyObject* extent = PyLong_FromLongLong((long long)t.shape[i]);
    if (extent == NULL || PyTuple_SetItem(shape, i, extent) != 0) Py_CLEAR(shape);
  }
  const int read_only = (dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0;
  const int padded = (dlb_buffer_flags(host) & DLB_BUFFER_SUBBYTE_PADDED) != 0;
  PyObject* result = NULL;
  if (shape != NULL && padded) /* a fifth item, padded, only where it is true */
    result = Py_BuildValue("(OO(iii)OO)", data, shape, (int)t.dtype.code, (int)t.dtype.bits, (int)t.dtype.lanes,
                           read_only ? Py_True : Py_False, Py_True);
  else if (shape != NULL)
    result = Py_BuildValue("(OO(iii)O)", data, shape, (int)t.dtype.code, (int)t.dtype.bits, (int)t.dtype.lanes,
                           read_only ? Py_True : Py_False);
  Py_XDECREF(data);
  Py_XDECREF(shape);
  dlbpy_buffer_release(host);
  return result;
}
const char dlbpy_tensor_payload_doc[] =
    "tensor_payload(tensor, /) -> (bytes, shape, (code, bits, lanes), read_only[, padded])\n--\n\n"
    "The tensor's elements as compact row-major bytes (copied to the host with\n"
    "dlb_buffer_to_host), with what tensor_from_payload needs to make a tensor of\n"
    "them again: plain pickling's reduction.";

static void release_inner(void* inner) { dlb_buffer_release((dlb_buffer*)inner); }

PyObject* dlbpy_tensor_from_payload(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 && nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "tensor_from_payload() takes data, shape, dtype, read_only and padded");
    return NULL;
  }
  char* data = NULL;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(args[0], &data, &size) != 0) return NULL;
  if (!PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) || PyTuple_Size(args[2]) != 3) {
    PyErr_SetString(PyExc_TypeError, "tensor_from_payload(): shape and dtype are tuples (dtype: code, bits, lanes)");
    return NULL;
  }
  const Py_ssize_t ndim = PyTuple_Size(args[1]);
  if (ndim > DLB_MAX_NDIM)
    return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, "tensor_from_payload: more dimensions than DLB_MAX_NDIM");
  int64_t shape[DLB_MAX_NDIM];
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    shape[i] = (int64_t)PyLong_AsLongLong(PyTuple_GetItem(args[1], i));
    if (shape[i] == -1 && PyErr_Occurred()) return NULL;
  }
  long dt[3];
  for (int i = 0; i < 3; ++i) {
    dt[i] = PyLong_AsLong(PyTuple_GetItem(args[2], i));
    if (dt[i] == -1 && PyErr_Occurred()) return NULL;
    if (dt[i] < 0 || dt[i] > (i == 2 ? 65535 : 255))
      return dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DTYPE, "tensor_from_payload: a dtype field is out of range");
  }
  const int read_only = PyObject_IsTrue(args[3]);
  if (read_only < 0) return NULL;
  const int padded = nargs == 5 ? PyObject_IsTrue(args[4]) : 0;
  if (padded < 0) return NULL;
  const DLDevice cpu = {kDLCPU, 0};
  const DLDataType dtype = {(uint8_t)dt[0], (uint8_t)dt[1], (uint16_t)dt[2]};
  dlb_buffer* buffer = NULL;
  dlb_status s;
  if (padded) {
    /* Padded sub-byte elements (one byte each): the bytes seen as such a
     * tensor, and the library's copy of it (its byte size rule decides). */
    DLTensor v = {data, cpu, (int32_t)ndim, dtype, ndim > 0 ? shape : NULL, NULL, 0};
    dlb_buffer* view = NULL;
    s = dlb_buffer_wrap(&v, DLB_BUFFER_SUBBYTE_PADDED, NULL, NULL, &view);
    if (s == DLB_OK && dlb_buffer_nbytes(view) == (uint64_t)size) s = dlb_buffer_to_host(view, &buffer);
    else if (s == DLB_OK) buffer = dlb_buffer_retain(view); /* the size check below refuses it */
    dlbpy_buffer_release(view);
  } else {
    s = dlb_buffer_alloc(cpu, dtype, (int32_t)ndim, shape, &buffer);
  }
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (dlb_buffer_nbytes(buffer) != (uint64_t)size) {
    char text[160];
    snprintf(text, sizeof text, "tensor_from_payload: %zd bytes, but the shape and dtype need %llu", size,
             (unsigned long long)dlb_buffer_nbytes(buffer));
    dlbpy_buffer_release(buffer);
    return dlbpy_raise_error(DLB_ERR_MALFORMED, text);
  }
  DLTensor t;
  s = dlb_buffer_dltensor(buffer, &t);
  if (s == DLB_OK && size > 0 && !padded) memcpy((char*)t.data + t.byte_offset, data, (size_t)size);
  if (s == DLB_OK && read_only) { /* the same memory, read-only; the writable handle goes with it */
    dlb_buffer* frozen = NULL;
    s = dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY | (padded ? DLB_BUFFER_SUBBYTE_PADDED : 0), release_inner, buffer,
                        &frozen);
    if (s == DLB_OK) buffer = frozen;
  }
  if (s != DLB_OK) {
    dlbpy_buffer_release(buffer);
    return dlbpy_raise_status(s);
  }
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
}
const char dlbpy_tensor_from_payload_doc[] =
    "tensor_from_payload(data, shape, dtype, read_only, padded=False, /) -> Tensor\n--\n\n"
    "A new host tensor holding a copy of tensor_payload()'s bytes.";
