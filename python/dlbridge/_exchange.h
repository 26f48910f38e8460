/* dlbridge's side of the DLPack 1.3 C exchange API in the dlbridge._glue
 * extension (python/dlbridge/_exchange.c): the table dlbridge.Tensor
 * publishes, and the consumer path of dlbridge.from_dlpack. Every function
 * here needs the GIL. */
#ifndef DLBRIDGE_PYTHON_EXCHANGE_H_
#define DLBRIDGE_PYTHON_EXCHANGE_H_

#include "_glue.h"

/* A new PyCapsule named "dlpack_exchange_api" holding dlbridge's table (a
 * static DLPackExchangeAPI that lives as long as the process), for the
 * class attribute dlbridge.Tensor.__dlpack_c_exchange_api__. NULL with an
 * exception set on failure. */
PyObject* dlbpy_exchange_capsule(void);

/* dlbridge.from_dlpack(obj, device=, copy=) through the exchange table of
 * type(obj), when it has a usable one. `device` is NULL or the requested
 * (device_type, device_id); `policy` a dlb_copy_policy.
 *
 * *handled is set to 0 when type(obj) publishes no table dlbridge can use
 * (none, a capsule of another name, no 1.x table along prev_api, a NULL
 * managed_tensor_from_py_object_no_sync): the caller falls back to
 * __dlpack__, and nothing was called or allocated. Otherwise *handled is 1
 * and the result is a new dlbridge.Tensor, or NULL with the exception set
 * (the producer's own when its function failed). */
PyObject* dlbpy_exchange_from_dlpack(PyObject* obj, const long long* device, int policy,
                                     int* handled);

#endif /* DLBRIDGE_PYTHON_EXCHANGE_H_ */
