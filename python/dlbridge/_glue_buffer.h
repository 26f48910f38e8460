/* The buffer protocol for the limited API of CPython 3.10.
 *
 * Py_buffer, PyObject_GetBuffer() and PyBuffer_Release() joined the limited
 * API in 3.11, with the layout and signatures they have had since 3.3. The
 * extension is built for the 3.10 limited API, so for that target this
 * header declares them itself; _glue_check.c compiles the same declarations
 * against <Python.h> with the 3.11 limited API and fails the build if a
 * field, a size, a constant or a signature differs.
 */
#ifndef DLBRIDGE_PYTHON_GLUE_BUFFER_H_
#define DLBRIDGE_PYTHON_GLUE_BUFFER_H_

#define DLBPY_BUFFER_FIELDS \
  void* buf;                \
  PyObject* obj;            \
  Py_ssize_t len;           \
  Py_ssize_t itemsize;      \
  int readonly;             \
  int ndim;                 \
  char* format;             \
  Py_ssize_t* shape;        \
  Py_ssize_t* strides;      \
  Py_ssize_t* suboffsets;   \
  void* internal;

#define DLBPY_BUF_FORMAT 0x0004
#define DLBPY_BUF_ND 0x0008
#define DLBPY_BUF_STRIDES (0x0010 | DLBPY_BUF_ND)
#define DLBPY_BUF_RECORDS_RO (DLBPY_BUF_STRIDES | DLBPY_BUF_FORMAT)

#if defined(Py_LIMITED_API) && Py_LIMITED_API + 0 < 0x030B0000
typedef struct {
  DLBPY_BUFFER_FIELDS
} Py_buffer;
PyAPI_FUNC(int) PyObject_GetBuffer(PyObject* obj, Py_buffer* view, int flags);
PyAPI_FUNC(void) PyBuffer_Release(Py_buffer* view);
#endif

#endif /* DLBRIDGE_PYTHON_GLUE_BUFFER_H_ */
