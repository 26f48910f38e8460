/* Compile-time check of _glue_buffer.h against <Python.h> (3.11 limited
 * API, where the buffer protocol is declared): this file builds only if the
 * hand-written declarations the 3.10 build uses are the real ones. Nothing
 * links it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "_glue_buffer.h"

struct dlbpy_buffer_copy {
  DLBPY_BUFFER_FIELDS
};

#define SAME_FIELD(f)                                                                   \
  _Static_assert(offsetof(struct dlbpy_buffer_copy, f) == offsetof(Py_buffer, f) &&     \
                     sizeof(((struct dlbpy_buffer_copy*)0)->f) == sizeof(((Py_buffer*)0)->f), \
                 "Py_buffer." #f)

_Static_assert(sizeof(struct dlbpy_buffer_copy) == sizeof(Py_buffer), "sizeof(Py_buffer)");
SAME_FIELD(buf);
SAME_FIELD(obj);
SAME_FIELD(len);
SAME_FIELD(itemsize);
SAME_FIELD(readonly);
SAME_FIELD(ndim);
SAME_FIELD(format);
SAME_FIELD(shape);
SAME_FIELD(strides);
SAME_FIELD(suboffsets);
SAME_FIELD(internal);

_Static_assert(DLBPY_BUF_FORMAT == PyBUF_FORMAT, "PyBUF_FORMAT");
_Static_assert(DLBPY_BUF_ND == PyBUF_ND, "PyBUF_ND");
_Static_assert(DLBPY_BUF_STRIDES == PyBUF_STRIDES, "PyBUF_STRIDES");
_Static_assert(DLBPY_BUF_RECORDS_RO == PyBUF_RECORDS_RO, "PyBUF_RECORDS_RO");

/* The same prototypes the 3.10 build declares: a conflicting redeclaration
 * is a compile error. */
PyAPI_FUNC(int) PyObject_GetBuffer(PyObject* obj, Py_buffer* view, int flags);
PyAPI_FUNC(void) PyBuffer_Release(Py_buffer* view);

int dlbpy_glue_check_placeholder(void);
int dlbpy_glue_check_placeholder(void) { return 0; }
