/* xproducer's declarations shared by its parts: the counters, the XTensor
 * object, the exports it makes, the exchange tables and the type specs.
 *
 *   xproducer.c         the module: counters, exports and their deleters,
 *                       the module functions, PyInit_xproducer
 *   xproducer_table.c   the DLPack 1.3 C exchange table (and the 2.0 ones)
 *   xproducer_tensor.c  the types XTensor, FrozenXTensor and BoundXTensor
 */
#ifndef XPRODUCER_H
#define XPRODUCER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION < 3
#error "xproducer needs a DLPack 1.3 dlpack.h (tests/header/dlpack13)"
#endif

#define XMAX_NDIM 8

/* Calls of each entry point, exports made and deleters run. Touched with
 * the GIL held only. */
struct xcounts {
  long long dlpack;       /* __dlpack__ */
  long long allocator;    /* managed_tensor_allocator */
  long long from_py;      /* managed_tensor_from_py_object_no_sync */
  long long to_py;        /* managed_tensor_to_py_object_no_sync */
  long long dltensor;     /* dltensor_from_py_object_no_sync */
  long long stream;       /* current_work_stream */
  long long major2;       /* any function of the 2.0 table */
  long long exports;      /* managed tensors this module made */
  long long deleters;     /* their deleters run */
  long long foreign_freed; /* deleters of wrapped foreign tensors called */
  long long bound_calls;    /* BoundXTensor.__dlpack__ calls */
  long long bound_refusals; /* ... refused for keyword arguments */
};
extern struct xcounts counts;

/* Set by xproducer.set_failing(): from-py-object fails. */
extern PyObject* failing;

typedef struct {
  PyObject_HEAD
  char* data; /* address of element 0 (byte_offset folded in) */
  double* storage; /* owned storage, or NULL */
  DLManagedTensorVersioned* foreign; /* owned foreign tensor, or NULL */
  DLDataType dtype;
  int32_t ndim;
  int readonly;
  int64_t shape[XMAX_NDIM];
  int64_t strides[XMAX_NDIM];
} XTensor;

extern PyTypeObject* XTensorType;
extern PyTypeObject* FrozenXTensorType; /* the same, immutable */

int is_xtensor(PyObject* obj);
/* The DLTensor of `t`'s elements on the CPU, with the given shape and
 * strides arrays (the tensor's own, or an export's copies). */
void xtensor_describe(const XTensor* t, int64_t* shape, int64_t* strides, DLTensor* out);

typedef struct {
  DLManagedTensorVersioned mt;
  DLManagedTensor legacy;
  int64_t shape[XMAX_NDIM];
  int64_t strides[XMAX_NDIM];
  PyObject* owner; /* a reference to the XTensor, or NULL */
  void* storage;   /* memory of an allocator tensor, or NULL */
} XExport;

/* A new export of `t` (a reference to it held), or NULL with an exception. */
XExport* xexport_new(XTensor* t);
/* Runs an export's deleter: drops its reference, frees its memory. */
void xexport_free(XExport* e);
/* The versioned deleter of xproducer's exports (the allocator's too). */
void xexport_deleter(DLManagedTensorVersioned* self);

/* xproducer_table.c */
extern DLPackExchangeAPI table_ok;           /* the 1.3 table, all five functions */
extern DLPackExchangeAPI table_null_from_py; /* ... without from-py-object */
extern DLPackExchangeAPI table_major2;       /* a 2.0 table whose calls fail */
extern DLPackExchangeAPI table_major2_prev;  /* ... whose prev_api is table_ok */

/* xproducer_tensor.c */
/* Makes `t` own the foreign tensor `mt` (even on failure: -1, exception). */
int xtensor_adopt(XTensor* t, DLManagedTensorVersioned* mt);
extern PyType_Spec xtensor_spec;
extern PyType_Spec frozen_spec;
extern PyType_Spec bound_spec;

#endif /* XPRODUCER_H */
