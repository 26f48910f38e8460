"""dlbridge: DLPack tensors with correct lifetimes, from Python.

Tensors speak the DLPack protocol of the array API standard in both
directions::

    import dlbridge, numpy as np, torch
    t = dlbridge.from_buffer(bytearray(16))          # or dlbridge.empty((2, 3), "float32")
    a = np.from_dlpack(t); g = torch.from_dlpack(t)  # zero-copy views of the same memory
    back = dlbridge.from_dlpack(g)                   # and back again, zero-copy

The public names are those of ``__all__``: :class:`Tensor` and the calls
that make one (:func:`from_dlpack`, :func:`from_buffer`, :func:`empty`),
:func:`live_exports`, :func:`device_info`, :class:`Error`, sharing with other
processes (:func:`share`, :func:`share_send`, :func:`share_recv`,
:func:`shared_mappings`) and the conformance checker :mod:`dlbridge.check`.

The work is done in C: by libdlbridge (bundled with the package) and by the
package's extension module ``dlbridge._glue``, which holds every call that
touches Python objects (capsules, the buffer protocol, the protocol's
argument rules, releases that take the GIL).

Errors: failures of an export (``__dlpack__``) raise ``BufferError`` with the
library's status name and message, as the protocol asks; a refusal of
:func:`from_dlpack` (the producer's, or dlbridge's of what it was given)
raises :class:`dlbridge.RefusalError`, which is both a ``BufferError`` and a
:class:`dlbridge.Error`; invalid protocol arguments raise ``TypeError`` /
``ValueError``; an object without ``__dlpack__`` given to
:func:`from_dlpack` raises ``AttributeError``; every other failure of the
library raises :class:`dlbridge.Error`, which carries ``status`` and
``status_name``.
"""

from typing import Any, Iterable, NamedTuple, Tuple, Union

from . import _glue

__all__ = [
    "DeviceInfo",
    "Error",
    "RefusalError",
    "Tensor",
    "device_info",
    "empty",
    "from_buffer",
    "from_dlpack",
    "live_exports",
    "__version__",
    # sharing across processes (_share.py) and the conformance checker
    "check",
    "share",
    "share_recv",
    "share_send",
    "shared_mappings",
    "withdraw_tickets",
]

__version__: str = _glue.version

Device = Tuple[int, int]


class Error(Exception):
    """A dlbridge call failed.

    ``status`` is the library's status number, ``status_name`` its constant
    name (e.g. ``"DLB_ERR_DELETED"``); ``str(error)`` is the library's message
    prefixed with that name.
    """

    status: int
    status_name: str
    message: str

    def __init__(self, status: int, message: str) -> None:
        self.status = int(status)
        self.status_name = _glue.status_name(self.status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


class RefusalError(Error, BufferError):
    """:func:`from_dlpack` was refused: the producer refused and no host copy
    could answer it, or dlbridge refused what it was given (a dtype it
    cannot establish, producer state DLPack cannot carry under
    ``copy=False``, a producer contradicting itself).

    A ``BufferError``, as the array API standard has consumers raise, and a
    :class:`dlbridge.Error` with its ``status_name``; the producer's own
    exception, where there is one, is ``__cause__`` and its words are in
    the message.
    """


# dlbridge.Tensor is the extension's own type (python/dlbridge/_tensor.c):
# its properties, __repr__ and __len__ are in C, and its instances are not
# tracked by the garbage collector, which keeps an exchange cheap.
Tensor = _glue.Tensor
_glue.register(Error, RefusalError)


def _dtype_name(dtype: Any) -> str:
    """The library's name for a dtype given as a name, a numpy dtype or scalar
    type, or a torch dtype (the library parses and checks the name)."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):  # numpy scalar types, Python's float/int/bool/complex
        name = dtype.__name__
    else:
        name = str(dtype)  # numpy dtype -> "float32"; torch dtype -> "torch.float32"
    if name.startswith("torch."):
        name = name[len("torch."):]
    return name


def empty(shape: Union[int, Iterable[int]], dtype: Any) -> Tensor:
    """A new zero-filled, compact row-major host tensor.

    shape: an int or a sequence of ints. dtype: a name ("float32",
    "bfloat16", "bool", ...), a numpy dtype or scalar type, or a torch dtype.
    The memory is 64-byte aligned and owned by the library; it lives until
    the tensor and every export made from it are gone.

    Raises :class:`Error`: ``DLB_ERR_UNSUPPORTED_DTYPE`` for a dtype the
    library does not know, ``DLB_ERR_MALFORMED`` for a negative extent,
    ``DLB_ERR_OUT_OF_MEMORY``.
    """
    dims = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    result: Tensor = _glue.empty(dims, _dtype_name(dtype))
    return result


class DeviceInfo(NamedTuple):
    """What the library knows about a DLPack device type."""

    device_type: int
    name: str  #: "cpu", "cuda", "cuda_host", ...
    host_readable: bool  #: the CPU reads the memory directly
    address: bool  #: data is an address (False: an opaque handle, e.g. OpenCL)
    has_streams: bool  #: the protocol's ``stream`` applies


def device_info(device_type: int) -> DeviceInfo:
    """The library's facts about a device type (``Tensor.device[0]``).

    Raises :class:`Error` (``DLB_ERR_UNSUPPORTED_DEVICE``) for a number
    DLPack does not define.
    """
    return DeviceInfo(*_glue.device_info(device_type))


# The calls below are the extension's own functions: no Python frame between
# the caller and C on the protocol's hot path. Their documentation is in C.
from_buffer = _glue.from_buffer
from_dlpack = _glue.from_dlpack
live_exports = _glue.live_exports



def __getattr__(name: str) -> Any:
    """dlbridge.check (the conformance checker, ``dlbridge.check(obj)``) is
    imported on first use, so that ``import dlbridge`` loads neither it nor
    ctypes."""
    if name == "check":
        import importlib

        return importlib.import_module(".check", __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


from ._share import share, share_recv, share_send, shared_mappings, withdraw_tickets  # noqa: E402,F401  sharing across processes
from . import _pickle  # noqa: E402,F401  Dask's serializer of tensors (registered when Dask is imported)
