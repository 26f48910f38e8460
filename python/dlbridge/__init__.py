"""dlbridge: DLPack tensors with correct lifetimes, from Python.

Tensors speak the DLPack protocol of the array API standard in both
directions::

    import dlbridge, numpy as np, torch
    t = dlbridge.from_buffer(bytearray(16))          # or dlbridge.empty((2, 3), "float32")
    a = np.from_dlpack(t); g = torch.from_dlpack(t)  # zero-copy views of the same memory
    back = dlbridge.from_dlpack(g)                   # and back again, zero-copy

The work is done in C: by libdlbridge (bundled with the package) and by the
package's extension module ``dlbridge._glue``, which holds every call that
touches Python objects (capsules, the buffer protocol, the protocol's
argument rules, releases that take the GIL).

Errors: failures of an export (``__dlpack__``) raise ``BufferError`` with the
library's status name and message, as the protocol asks; invalid protocol
arguments raise ``TypeError`` / ``ValueError``; an object without
``__dlpack__`` given to :func:`from_dlpack` raises ``AttributeError``; every
other failure of the library raises :class:`dlbridge.Error`, which carries
``status`` and ``status_name``.
"""

from typing import Any, Iterable, NamedTuple, Tuple, Union

from . import _glue

__all__ = [
    "DeviceInfo",
    "Error",
    "Tensor",
    "device_info",
    "empty",
    "from_buffer",
    "from_dlpack",
    "live_exports",
    "__version__",
]

__version__: str = _glue.version

Device = Tuple[int, int]
_Meta = Tuple[Tuple[int, ...], Tuple[int, ...], str, Device, int, bool, int]


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


class Tensor(_glue.TensorBase):
    """A reference to a dlbridge buffer; a producer and consumer of DLPack.

    Made by :func:`empty`, :func:`from_buffer` and :func:`from_dlpack`, not by
    calling the class. Dropping the tensor releases its reference (in C; the
    class has no ``__del__``). Metadata is read from the library once, on
    first use, and cached. ``strides`` are in elements, as DLPack counts them.

    ``__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)``
    exports a DLPack capsule: ``max_version`` None or with a major below 1
    gives a legacy ``"dltensor"`` capsule (refused with ``BufferError`` for
    read-only data, which the legacy struct cannot mark), a major of 1 or more
    a ``"dltensor_versioned"`` one; ``copy`` True always copies, False never
    (``BufferError`` when a copy is needed), None copies only when needed;
    ``dl_device`` is the consumer's ``(device_type, device_id)``; ``stream``
    must be None for host memory.

    CUDA memory (tensors taken in with :func:`from_dlpack` from a CUDA
    producer) remembers the stream of its last writer: ``stream`` reads it
    (None for other tensors), ``set_stream(s)`` records a new one after
    enqueueing work that writes the memory. Exports to a consumer's stream
    and copies to the host are ordered after that stream.
    """

    __slots__ = ()

    @property
    def shape(self) -> Tuple[int, ...]:
        """Extents, a tuple of ints."""
        return self._m[0]

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements (not bytes), a tuple of ints."""
        return self._m[1]

    @property
    def dtype(self) -> str:
        """numpy-style dtype name: "float32", "bfloat16", "bool", "complex64", ..."""
        return self._m[2]

    @property
    def device(self) -> Device:
        """(device_type, device_id), DLPack's numbering (CPU is (1, 0))."""
        return self._m[3]

    @property
    def data_ptr(self) -> int:
        """Address of the element at index (0, ..., 0): the buffer's data
        pointer plus its byte offset, as an int. A zero-size tensor has an
        address too (never NULL; DLPack consumers skip the deleter of a
        tensor whose data is NULL), which must not be read through."""
        return self._m[4]

    @property
    def readonly(self) -> bool:
        """True when the memory must not be written through exports."""
        return self._m[5]

    @property
    def nbytes(self) -> int:
        """Bytes the elements take when compact."""
        return self._m[6]

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._m[0])

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for extent in self._m[0]:
            n *= extent
        return n

    def __len__(self) -> int:
        shape = self._m[0]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __repr__(self) -> str:
        try:
            shape, _, dtype, device, _, readonly, _ = self._m
        except Error:
            return "dlbridge.Tensor(<deleted>)"
        extra = ", readonly=True" if readonly else ""
        if self.deleted:
            extra += ", deleted=True"
        return "dlbridge.Tensor(shape=%r, dtype=%s, device=%r%s)" % (shape, dtype, device, extra)

    def __reduce__(self) -> Any:
        # A copy would share the handle and release it twice.
        raise TypeError("dlbridge.Tensor cannot be pickled or copied; export it with DLPack")


_glue.register(Tensor, Error)


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

from . import check  # noqa: E402  dlbridge.check(obj) and python -m dlbridge.check
