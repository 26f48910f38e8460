/**
 * @file dlbridge.h
 * dlbridge: DLPack export and import with correct lifetimes, behind a
 * stable C ABI.
 *
 * This header is valid C99 and C++ (C++11 or later). Every function in it is
 * a real exported symbol (no macro-only or inline entry points), so ctypes,
 * cffi's ABI mode and hand-written Rust declarations can reach all of it.
 *
 * Conventions that hold for every function below:
 *  - A function returning dlb_status returns DLB_OK (0) on success. On
 *    failure it returns one of the DLB_ERR_* codes and sets the calling
 *    thread's last-error message (dlb_last_error_message()), which names the
 *    offending value. A successful call does not clear an earlier message.
 *  - An `out` argument is written only on success; on failure it is left
 *    exactly as the caller passed it.
 *  - Functions that free or release accept NULL and then do nothing.
 *  - No C++ exception and no abort() leaves the library, whatever the input.
 *
 * This umbrella header includes the whole API; each part also compiles
 * alone. The parts, with the groups of the API reference they hold:
 *  - dlbridge/dlpack_compat.h: DLPack 1.x declarations for older dlpack.h
 *    (group DLPack compatibility; the exchange API types).
 *  - dlbridge/common.h: the export macro; version; status and errors; data
 *    types and limits.
 *  - dlbridge/buffer.h: buffers; export; import.
 *  - dlbridge/backend.h: backends.
 *  - dlbridge/devices.h: validation and copy; devices and protocol rules
 *    (the device table, the consumer-stream rule, dlb_buffer_resolve);
 *    copy threads.
 *  - dlbridge/cuda.h: the built-in CUDA backend.
 *  - dlbridge/opencl.h: the built-in OpenCL backend.
 *  - dlbridge/exchange.h: the DLPack C exchange API and its allocator.
 *  - dlbridge/share.h: tensors shared with other processes (shared memory,
 *    descriptors, Unix sockets).
 */
#ifndef DLBRIDGE_DLBRIDGE_H_
#define DLBRIDGE_DLBRIDGE_H_

#include "dlbridge/dlpack_compat.h"
#include "dlbridge/common.h"
#include "dlbridge/buffer.h"
#include "dlbridge/backend.h"
#include "dlbridge/devices.h"
#include "dlbridge/cuda.h"
#include "dlbridge/opencl.h"
#include "dlbridge/exchange.h"
#include "dlbridge/share.h"

#endif /* DLBRIDGE_DLBRIDGE_H_ */
