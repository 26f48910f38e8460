"""Tensors shared with other processes (Linux).

The work is libdlbridge's (``include/dlbridge/share.h``), reached through
ctypes: the shared memory, the descriptor's format and its checks, the
socket framing. This module turns its buffers into :class:`dlbridge.Tensor`
objects and teaches :mod:`multiprocessing` to pass tensors by sharing.

* :func:`share` returns a tensor in shared memory for any DLPack producer:
  the same memory when it is shared already, else one copy.
* :func:`share_send` / :func:`share_recv` pass a tensor over a connected
  Unix socket; the other side may be a C or Rust program using
  ``dlb_share_send`` / ``dlb_share_recv``.
* ``multiprocessing`` queues, pipes and pools (``ForkingPickler``) carry a
  ``dlbridge.Tensor`` as its memory file, with every start method: the
  receiving process maps the same memory, and writes are seen both ways.
  A tensor that is not in shared memory yet is copied once into it.
  Plain :func:`pickle.dumps` still refuses a tensor: bytes may leave the
  machine, a memory file cannot.
"""

import ctypes
import multiprocessing.reduction
import os
from typing import Any, Optional, Tuple

from . import Error, Tensor, _glue, _lib
from . import from_dlpack as _from_dlpack

__all__ = ["share", "share_send", "share_recv", "shared_mappings", "open_shared", "descriptor"]

DLB_ERR_NOT_ZERO_COPY = 4
DLB_SHARE_COPY_IF_NEEDED = 1 << 0
DLB_SHARE_READ_ONLY = 1 << 1
DLB_MAX_NDIM = 64
DLB_SHARE_DESCRIPTION_MAX = 56 + 16 * DLB_MAX_NDIM


class _Descriptor(ctypes.Structure):
    """dlb_share_descriptor."""

    _fields_ = [
        ("fd", ctypes.c_int32),
        ("size", ctypes.c_uint32),
        ("description", ctypes.c_ubyte * DLB_SHARE_DESCRIPTION_MAX),
    ]


_c = ctypes.CDLL(_lib.path)
_c.dlb_buffer_share.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(_Descriptor)]
_c.dlb_buffer_share.restype = ctypes.c_int32
_c.dlb_buffer_open_shared.argtypes = [ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64,
                                      ctypes.POINTER(ctypes.c_void_p)]
_c.dlb_buffer_open_shared.restype = ctypes.c_int32
_c.dlb_share_send.argtypes = [ctypes.c_int32, ctypes.POINTER(_Descriptor)]
_c.dlb_share_send.restype = ctypes.c_int32
_c.dlb_share_recv.argtypes = [ctypes.c_int32, ctypes.POINTER(_Descriptor)]
_c.dlb_share_recv.restype = ctypes.c_int32
_c.dlb_share_descriptor_close.argtypes = [ctypes.POINTER(_Descriptor)]
_c.dlb_share_descriptor_close.restype = None
_c.dlb_shared_mappings.argtypes = []
_c.dlb_shared_mappings.restype = ctypes.c_int64
_c.dlb_export_versioned.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
_c.dlb_export_versioned.restype = ctypes.c_int32
_c.dlb_buffer_release.argtypes = [ctypes.c_void_p]
_c.dlb_buffer_release.restype = None
_c.dlb_managed_free_versioned.argtypes = [ctypes.c_void_p]
_c.dlb_managed_free_versioned.restype = None
_c.dlb_last_error_message.argtypes = []
_c.dlb_last_error_message.restype = ctypes.c_char_p

# ctypes.pythonapi[name] is a fresh function object: declaring it here does
# not disturb other users of ctypes.pythonapi.
_capsule_new = ctypes.pythonapi["PyCapsule_New"]
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_new.restype = ctypes.py_object
_capsule_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid.restype = ctypes.c_int

_VERSIONED = b"dltensor_versioned"


def _check(status: int) -> None:
    if status != 0:
        raise Error(status, _c.dlb_last_error_message().decode("utf-8", "replace"))


class _Capsule:
    """Hands one capsule to from_dlpack (which consumes it)."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (1, 0)


def _tensor_from_buffer(buffer: int) -> Tensor:
    """A Tensor over a dlb_buffer* (whose reference this takes)."""
    managed = ctypes.c_void_p()
    try:
        _check(_c.dlb_export_versioned(buffer, None, ctypes.byref(managed)))
    finally:
        _c.dlb_buffer_release(buffer)  # the export holds the buffer now
    capsule = _capsule_new(managed.value, _VERSIONED, None)
    try:
        result: Tensor = _from_dlpack(_Capsule(capsule))
    except BaseException:
        if _capsule_is_valid(capsule, _VERSIONED):  # not consumed: ours to free
            _c.dlb_managed_free_versioned(managed.value)
        raise
    return result


def descriptor(tensor: Tensor, *, copy: bool = False, read_only: bool = False) -> Tuple[int, bytes]:
    """``(fd, description)`` for ``tensor``: a new file descriptor that the
    caller owns and closes, and the description's bytes.

    Memory that is not shared raises :class:`dlbridge.Error`
    (``DLB_ERR_NOT_ZERO_COPY``) unless ``copy`` is true, when it is copied
    once into new shared memory.
    """
    flags = (DLB_SHARE_COPY_IF_NEEDED if copy else 0) | (DLB_SHARE_READ_ONLY if read_only else 0)
    d = _Descriptor()
    _check(_c.dlb_buffer_share(tensor._handle, flags, ctypes.byref(d)))
    return d.fd, bytes(d.description[: d.size])


def open_shared(fd: int, description: bytes, *, read_only: bool = False) -> Tensor:
    """The tensor a descriptor describes, mapped in this process. ``fd`` stays
    the caller's (it may be closed right after)."""
    buffer = ctypes.c_void_p()
    _check(_c.dlb_buffer_open_shared(fd, bytes(description), len(description),
                                     DLB_SHARE_READ_ONLY if read_only else 0, ctypes.byref(buffer)))
    if buffer.value is None:  # never on success; said rather than assumed
        raise Error(14, "dlb_buffer_open_shared succeeded without a buffer")
    return _tensor_from_buffer(buffer.value)


def share(obj: Any) -> Tensor:
    """A :class:`dlbridge.Tensor` in shared memory with ``obj``'s elements.

    ``obj`` is a Tensor or any DLPack producer (numpy, torch, ...). When its
    memory is shared memory already (a tensor made here, or a framework's
    view of one) the result is the same memory, without a copy; otherwise
    the elements are copied once into new shared memory.
    """
    tensor = obj if isinstance(obj, Tensor) else _from_dlpack(obj)
    d = _Descriptor()
    status = _c.dlb_buffer_share(tensor._handle, 0, ctypes.byref(d))
    if status == 0:
        _c.dlb_share_descriptor_close(ctypes.byref(d))
        return tensor
    if status != DLB_ERR_NOT_ZERO_COPY:
        _check(status)
    fd, description = descriptor(tensor, copy=True, read_only=tensor.readonly)
    try:
        return open_shared(fd, description)
    finally:
        os.close(fd)


def share_send(sock: Any, obj: Any) -> None:
    """Sends ``obj`` (shared first with :func:`share` when it is not) over a
    connected Unix socket (a ``socket.socket`` or a file descriptor)."""
    tensor = share(obj)
    fileno = sock if isinstance(sock, int) else sock.fileno()
    d = _Descriptor()
    _check(_c.dlb_buffer_share(tensor._handle, 0, ctypes.byref(d)))
    try:
        _check(_c.dlb_share_send(fileno, ctypes.byref(d)))
    finally:
        _c.dlb_share_descriptor_close(ctypes.byref(d))


def share_recv(sock: Any) -> Optional[Tensor]:
    """The next tensor from a connected Unix socket, mapped here; None at the
    end of the stream."""
    fileno = sock if isinstance(sock, int) else sock.fileno()
    d = _Descriptor()
    _check(_c.dlb_share_recv(fileno, ctypes.byref(d)))
    if d.fd < 0:
        return None
    try:
        return open_shared(d.fd, bytes(d.description[: d.size]))
    finally:
        _c.dlb_share_descriptor_close(ctypes.byref(d))


def shared_mappings() -> int:
    """Shared-memory mappings the library holds in this process."""
    result: int = _c.dlb_shared_mappings()
    return result


# ---------------------------------------------------------------------------
# multiprocessing: a Tensor travels as its memory file
# ---------------------------------------------------------------------------


def _rebuild(dup: Any, description: bytes, read_only: bool) -> Tensor:
    fd = dup.detach()
    try:
        return open_shared(fd, description, read_only=read_only)
    finally:
        os.close(fd)


def _reduce(tensor: Tensor) -> Tuple[Any, Tuple[Any, bytes, bool]]:
    # The resource sharer serves a duplicate of the file descriptor to the
    # receiving process once, with every start method (fork, spawn,
    # forkserver); ours is closed at once.
    from multiprocessing import resource_sharer

    fd, description = descriptor(tensor, copy=True, read_only=tensor.readonly)
    try:
        dup = resource_sharer.DupFd(fd)
    finally:
        os.close(fd)
    return _rebuild, (dup, description, tensor.readonly)


multiprocessing.reduction.ForkingPickler.register(Tensor, _reduce)
del _glue
