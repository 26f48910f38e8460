/* The C side of the dlbridge Python package (the dlbridge._glue extension),
 * shared by its C files:
 *
 *   _support.c  what every other file calls, and calls none of them: the
 *               module state, errors, argument helpers, the
 *               interpreter-exit flag
 *   _module.c   the module: its definition, setup, small module functions
 *   _tensor.c   the dlbridge.Tensor type and its producer side (__dlpack__)
 *   _capsule.c  DLPack capsules out (export) and in (import), deleter shims
 *   _consumer.c dlbridge.from_dlpack: protocol negotiation, legacy producers,
 *               the host-copy cure for a producer's refusal
 *   _cure.c     the refusal rule: which producer exceptions the cure
 *               answers, and the state DLPack cannot carry (torch's bits)
 *   _buffer.c   the Python buffer protocol (from_buffer), 3.11 limited API
 *   _exchange.c the DLPack 1.3 C exchange table, both directions
 *   _share.c    sharing with other processes (dlbridge._share)
 *   _pickle.c   Tensor.__reduce_ex__: pickle protocol 5's out-of-band
 *               buffers (Ray, Dask) and their rebuild, 3.11 limited API
 *
 * Every function here needs the GIL. Built against the CPython 3.10 limited
 * API (_buffer.c: 3.11, see there). */
#ifndef DLBRIDGE_PYTHON_GLUE_H_
#define DLBRIDGE_PYTHON_GLUE_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/dlbridge.h>

#include "_exchange.h"

/* A dlbridge.Tensor (the extension type itself, immutable, not a base type,
 * not tracked by the collector). */
typedef struct dlbpy_tensor {
  PyObject_HEAD
  dlb_buffer* buffer; /* one reference, owned; never NULL once made */
  PyObject* meta;     /* cached metadata tuple or NULL */
  PyObject* weaklist;
} dlbpy_tensor;

/* The module's state (PyModule_GetState of dlbridge._glue). Every object
 * is owned by the state and released by the module's m_clear. */
typedef struct dlbpy_state {
  PyTypeObject* tensor_type;   /* dlbridge.Tensor */
  PyObject* exchange_base;     /* CPython 3.10, 3.11: the base class holding the table */
  PyObject* exchange_capsule;  /* the table's capsule */
  PyObject* error_type;        /* dlbridge.Error, set by register(); NULL before */
  PyObject* refusal_type;      /* dlbridge.RefusalError (Error and BufferError), set by register() */
  PyObject* protocol_of;       /* dict: producer type -> True (legacy) / False (1.x) */
  PyObject* str_dlpack;        /* "__dlpack__" */
  PyObject* max_version;       /* (DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR) */
  PyObject* str_max_version;   /* "max_version", interned */
  PyObject* max_version_kwargs; /* {"max_version": max_version}, reused by calls (never changed by us) */
  PyObject* max_version_names; /* ("max_version",), keyword names of a vectorcall */
  dlbpy_exchange_cache cache;  /* exchange tables of producer types */
} dlbpy_state;

/* The module's definition (_module.c; single-phase initialisation). */
extern struct PyModuleDef dlbpy_module_def;

/* ---- support (_support.c) --------------------------------------------- */

/* The state of this interpreter's dlbridge._glue; NULL (no exception) before
 * the module is made or after it is gone. */
dlbpy_state* dlbpy_state_get(void);

/* Raises dlbridge.Error(status, text) (RuntimeError before register());
 * returns NULL. */
PyObject* dlbpy_raise_error(dlb_status status, const char* text);

/* Raises dlbridge.Error(status, the library's last message); returns NULL. */
PyObject* dlbpy_raise_status(dlb_status status);

/* An export failure, "DLB_ERR_X: message": BufferError when the data cannot
 * be exported, as the protocol asks of __dlpack__; ValueError when the
 * library refused an argument. Returns NULL. */
PyObject* dlbpy_raise_buffer_error(dlb_status status);

/* True while Python code may run from any thread: initialised, and the
 * interpreter has not started to exit (an atexit-registered flag). Once it
 * is false, callbacks leak what they would free (never a crash). */
int dlbpy_interpreter_alive(void);

/* Clears that flag for good (the module's atexit callback). */
void dlbpy_mark_exiting(void);

/* Releasing what a producer handed over, with the GIL held: the release may
 * run the producer's deleter, and a deleter written in Python (a ctypes
 * callback) must neither see nor clear an exception the caller has set
 * (CPython would report "error return without exception set", or run the
 * callback with an exception pending and leak). These save the error
 * indicator, release, and restore it; an exception the deleter itself
 * raises is ctypes' to report, as it always is. Every release in the
 * extension that runs with the GIL held goes through them. The extension is
 * built against the 3.11 limited API, where PyErr_Fetch / PyErr_Restore is
 * the way (3.12's PyErr_GetRaisedException is the same on 3.12+). */
static inline void dlbpy_buffer_release(dlb_buffer* buffer) {
  if (buffer == NULL) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  dlb_buffer_release(buffer);
  PyErr_Restore(type, value, trace);
}
static inline void dlbpy_managed_free_versioned(DLManagedTensorVersioned* tensor) {
  if (tensor == NULL) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  dlb_managed_free_versioned(tensor);
  PyErr_Restore(type, value, trace);
}
static inline void dlbpy_managed_free_legacy(DLManagedTensor* tensor) {
  if (tensor == NULL) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  dlb_managed_free_legacy(tensor);
  PyErr_Restore(type, value, trace);
}

/* Keyword-only arguments of a METH_FASTCALL | METH_KEYWORDS call: values[i]
 * is the argument called names[i] (borrowed), or NULL when not given.
 * 0, or -1 with TypeError set. */
int dlbpy_keyword_only(const char* function, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames, const char* const* names, int count, PyObject** values);

/* A (int, int) pair from any sequence of two integers; 0, or -1 with
 * TypeError naming `what` set. */
int dlbpy_int_pair(PyObject* value, const char* what, const char* form, long long out[2]);

/* copy=None/True/False as a dlb_copy_policy; -1 with TypeError otherwise. */
int dlbpy_copy_policy(PyObject* copy);

/* Export options for a consumer's device (NULL: none) and copy policy. */
void dlbpy_request_options(const long long* device, int policy, dlb_export_options* options);

/* ---- tensors (_tensor.c) ---------------------------------------------- */

/* dlbridge.Tensor's spec: with instance_exchange, instances read
 * __dlpack_c_exchange_api__ through a getter of their own (the class
 * attribute then comes from the metaclass, dlbpy_tensor_meta_spec). */
PyType_Spec* dlbpy_tensor_spec(int instance_exchange);
extern PyType_Spec dlbpy_tensor_meta_spec;

/* The buffer of a tensor, borrowed (valid while `obj` lives); NULL with
 * TypeError set when `obj` is not a dlbridge.Tensor. */
dlb_buffer* dlbpy_tensor_buffer(PyObject* obj);

/* A new dlbridge.Tensor taking over the caller's reference on `buffer`
 * (released again when the tensor cannot be made: NULL, exception set).
 * The _in form takes the state the caller has at hand. */
PyObject* dlbpy_tensor_new(dlb_buffer* buffer);
PyObject* dlbpy_tensor_new_in(dlbpy_state* state, dlb_buffer* buffer);

/* ---- capsules (_capsule.c) -------------------------------------------- */

/* Exports `buffer` into a new "dltensor_versioned" (versioned != 0) or
 * "dltensor" capsule; NULL with BufferError set on failure, nothing left
 * allocated. The caller keeps its reference on `buffer`. */
PyObject* dlbpy_export_capsule(dlb_buffer* buffer, const dlb_export_options* options,
                               int versioned);

/* Imports a "dltensor_versioned" or "dltensor" capsule, renamed used_* on
 * success, when *out is a new buffer owned by the caller: returns 0. On
 * failure returns -1 with dlbridge.Error set, the capsule untouched.
 * `stream` is the stream value CUDA memory is ordered before (1 when the
 * producer was asked without a stream). */
int dlbpy_import_capsule(PyObject* capsule, int64_t stream, dlb_buffer** out);

/* A capsule in as a new buffer, the caller's (NULL with the exception
 * set), the capsule dropped afterwards with the exception kept aside (a
 * refused capsule's destructor may run Python code). Steals `capsule`.
 * `dl_flags`: DLPack flags added to a versioned tensor's own
 * (DLPACK_FLAG_BITMASK_IS_COPIED for a tensor known to be a new one);
 * ignored for a legacy one, which has none. The capsule layer makes
 * buffers; tensors are made by their callers. */
dlb_buffer* dlbpy_capsule_to_buffer(PyObject* capsule, int64_t stream, uint64_t dl_flags);

/* A DLPack 1.x managed tensor (major version 1) in as a buffer: CUDA memory
 * (kDLCUDA, kDLCUDAHost, kDLCUDAManaged) through dlb_cuda_import_versioned
 * with `stream`, the stream its producer ordered the data before; other
 * memory, and CUDA memory the CUDA backend does not take, through
 * dlb_import_versioned. DLB_OK with *out a new buffer owning `tensor`;
 * otherwise the status, dlbridge.Error set, and `tensor` still the
 * caller's. */
dlb_status dlbpy_import_managed(DLManagedTensorVersioned* tensor, int64_t stream, dlb_buffer** out);

/* ---- consumer (_consumer.c) ------------------------------------------- */

/* dlbridge.from_dlpack(obj, /, *, device=None, copy=None, stream=None). */
PyObject* dlbpy_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames);
extern const char dlbpy_from_dlpack_doc[];

/* A refusal of obj.__dlpack__ or obj.__dlpack_device__ (`called`, the
 * exception set) as from_dlpack answers it (_cure.c, the one refusal
 * rule): the exception as it is when it is not about the array
 * (MemoryError, RecursionError, KeyboardInterrupt, SystemExit),
 * dlbridge.Error DLB_ERR_DELETED for a deleted array, else the host copy
 * the planner allows, or dlbridge's own error naming the refusal.
 * `modern`: the producer takes the 1.x keywords. A new tensor, or NULL
 * with the exception set. */
PyObject* dlbpy_cure(dlbpy_state* state, PyObject* obj, PyObject* method, int modern, const long long* device,
                     int policy, const char* called);

/* Raises dlbridge.RefusalError(status, text) (a BufferError and a
 * dlbridge.Error; BufferError "STATUS: text" before register()), the class
 * of from_dlpack's refusals; ValueError "STATUS: text" for
 * DLB_ERR_INVALID_ARGUMENT (a bad argument, not a refusal). NULL. */
PyObject* dlbpy_raise_refusal(dlb_status status, const char* text);

/* from_dlpack's exception, if it is a plain dlbridge.Error (a failure of
 * the library on the producer's tensor: a malformed capsule, a dtype or
 * device it refuses), as the dlbridge.RefusalError it is, with the same
 * status, message, __cause__ and traceback. Returns NULL. */
PyObject* dlbpy_as_refusal(dlbpy_state* state);

/* The one rule of what from_dlpack hands over (_consumer.c): `buffer`
 * (consumed) as the consumer's device and copy policy ask. With
 * DLB_COPY_ALWAYS a buffer that is not a copy (DLB_BUFFER_COPIED: a
 * versioned import with IS_COPIED, a copy the library made) is copied:
 * a producer that ignored copy=True, or answered with a legacy capsule,
 * which cannot say, does not hand over its memory. A device, and
 * copy=False, as dlb_buffer_resolve decides them. A new tensor, or NULL
 * with RefusalError (ValueError for a bad device) set. */
PyObject* dlbpy_deliver(dlbpy_state* state, dlb_buffer* buffer, const long long* device, int policy);

/* from_dlpack of a new tensor only this call holds (what a producer's
 * resolve_conj() returned), imported as a copy (copied True; a legacy
 * capsule, which cannot say so, is copied) and delivered to `device`. */
PyObject* dlbpy_from_dlpack_fresh(dlbpy_state* state, PyObject* obj, const long long* device);

/* PyObject_VectorcallMethod where the running interpreter has it (see
 * _consumer.c), else NULL. */
typedef PyObject* (*dlbpy_vectorcall_method_fn)(PyObject* name, PyObject* const* args, size_t nargsf,
                                                PyObject* kwnames);
dlbpy_vectorcall_method_fn dlbpy_vectorcall_method(void);

/* ---- producer state DLPack cannot carry (_cure.c) ---------------------- */

/* Which of the DLBPY_BIT_* queries `type_bits` names are true of obj
 * (obj.is_conj(), obj.is_neg()): the set bits, 0, or -1 with an exception
 * set (a query that raised, or answered something not a bool). */
int dlbpy_set_bits(dlbpy_state* state, PyObject* obj, unsigned type_bits);

/* from_dlpack of obj whose state DLPack cannot carry (`set`, DLBPY_BIT_*):
 * under copy=False a RefusalError (DLB_ERR_NOT_ZERO_COPY) naming each bit;
 * otherwise the producer's own resolve_conj() / resolve_neg(), imported as
 * a copy (dlbpy_from_dlpack_fresh). A new tensor, or NULL with the
 * exception set. */
PyObject* dlbpy_resolve_bits(dlbpy_state* state, PyObject* obj, unsigned set, const long long* device, int policy);

/* Whether the exception set is a refusal of the array by the rule above
 * (an Exception, not MemoryError or RecursionError): 1 or 0, the exception
 * left set. The exchange-table path asks it before it hands a refused
 * table call over to __dlpack__ and the cure. */
int dlbpy_exception_is_refusal(void);

/* from_dlpack's answer to an object without __dlpack__ (_cure.c):
 * dlbridge.Error DLB_ERR_UNSUPPORTED_DTYPE for an array-like whose dtype
 * DLPack cannot describe (a JAX PRNG key array), AttributeError for
 * anything else. Always NULL with the exception set. */
PyObject* dlbpy_refuse_without_dlpack(PyObject* obj);

/* is_legacy_producer(type): the remembered answer for a producer type. */
PyObject* dlbpy_is_legacy_producer(PyObject* module, PyObject* type);

/* ---- buffer protocol (_buffer.c) -------------------------------------- */

/* from_buffer(obj): a zero-copy tensor over obj's buffer. */
PyObject* dlbpy_from_buffer(PyObject* module, PyObject* obj);
extern const char dlbpy_from_buffer_doc[];

/* A buffer (a new reference in *out, 0) over obj's buffer protocol, or -1
 * with dlbridge.Error set. */
int dlbpy_buffer_of(PyObject* obj, dlb_buffer** out);

/* The same, also over a buffer of big-endian elements (format '>' or '!'),
 * with *swapped set to 1 (0 for native order): for a copy that converts
 * them (the cure), never for a view. */
int dlbpy_buffer_of_any_order(PyObject* obj, dlb_buffer** out, int* swapped);

/* ---- sharing with other processes (_share.c) -------------------------- */

/* Module functions and their docstrings; file descriptors returned are the
 * caller's, those passed in are borrowed (see the file). */
PyObject* dlbpy_share_descriptor(PyObject* module, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kwnames);
extern const char dlbpy_share_descriptor_doc[];
PyObject* dlbpy_is_shared(PyObject* module, PyObject* tensor);
extern const char dlbpy_is_shared_doc[];
PyObject* dlbpy_share_copy(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
extern const char dlbpy_share_copy_doc[];
PyObject* dlbpy_open_shared(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
extern const char dlbpy_open_shared_doc[];
PyObject* dlbpy_share_send(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
extern const char dlbpy_share_send_doc[];
PyObject* dlbpy_share_recv(PyObject* module, PyObject* socket_fd);
extern const char dlbpy_share_recv_doc[];
PyObject* dlbpy_shared_mappings(PyObject* module, PyObject* unused);
extern const char dlbpy_shared_mappings_doc[];
PyObject* dlbpy_tensor_payload(PyObject* module, PyObject* tensor);
extern const char dlbpy_tensor_payload_doc[];
PyObject* dlbpy_tensor_from_payload(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
extern const char dlbpy_tensor_from_payload_doc[];

PyObject* dlbpy_share_ticket(PyObject* module, PyObject* tensor);
extern const char dlbpy_share_ticket_doc[];
PyObject* dlbpy_share_ticket_open(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
extern const char dlbpy_share_ticket_open_doc[];
PyObject* dlbpy_share_ticket_withdraw(PyObject* module, PyObject* ticket);
extern const char dlbpy_share_ticket_withdraw_doc[];
PyObject* dlbpy_share_ticket_wait(PyObject* module, PyObject* seconds);
extern const char dlbpy_share_ticket_wait_doc[];

/* ---- pickling (_pickle.c) ---------------------------------------------- */

/* Tensor.__reduce_ex__(protocol) and the rebuild it names for protocol 5. */
PyObject* dlbpy_tensor_reduce_ex(PyObject* self, PyObject* protocol);
extern const char dlbpy_tensor_reduce_ex_doc[];
PyObject* dlbpy_tensor_from_pickle(PyObject* module, PyObject* const* args, Py_ssize_t nargs);
extern const char dlbpy_tensor_from_pickle_doc[];
PyObject* dlbpy_share_server_state(PyObject* module, PyObject* unused);
extern const char dlbpy_share_server_state_doc[];

#endif /* DLBRIDGE_PYTHON_GLUE_H_ */
