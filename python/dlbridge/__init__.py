"""dlbridge: DLPack tensors with correct lifetimes, from Python.

A thin ctypes layer over libdlbridge. Tensors speak the DLPack protocol of
the array API standard in both directions::

    import dlbridge, numpy as np, torch
    t = dlbridge.from_buffer(bytearray(16))          # or dlbridge.empty((2, 3), "float32")
    a = np.from_dlpack(t); g = torch.from_dlpack(t)  # zero-copy views of the same memory
    back = dlbridge.from_dlpack(g)                   # and back again, zero-copy

The hot calls (export, import, releasing a handle, reading metadata) are
CPython builtins from the library's ``dlb_py_method_table()``; the rest, and
everything when that table is missing (or ``DLBRIDGE_NO_BUILTINS`` is set),
goes through ctypes.

Errors: failures of an export (``__dlpack__``) raise ``BufferError`` with the
library's status name and message, as the protocol asks; invalid protocol
arguments raise ``TypeError`` / ``ValueError``; every other failure of the
library raises :class:`dlbridge.Error`, which carries ``status`` and
``status_name``.
"""

import ctypes as _ct

from . import _lib

__all__ = [
    "Error",
    "Tensor",
    "empty",
    "from_buffer",
    "from_dlpack",
    "live_exports",
    "__version__",
]

__version__ = _lib.pydll.dlb_version_string().decode("ascii")

_P = _lib.pydll
_C = _lib.cdll
_export_capsule = _lib.export_capsule
_import_capsule = _lib.import_capsule
_release = _lib.buffer_release
_c_void_p = _ct.c_void_p
_object_new = object.__new__

# DLPack version this binding asks producers for.
_MAX_VERSION = (1, 3)

_HOST_READABLE = (_lib.kDLCPU, _lib.kDLCUDAHost, _lib.kDLROCMHost, _lib.kDLCUDAManaged)


class Error(Exception):
    """A dlbridge call failed.

    ``status`` is the library's status number, ``status_name`` its constant
    name (e.g. ``"DLB_ERR_DELETED"``); ``str(error)`` is the library's message
    prefixed with that name.
    """

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = _P.dlb_status_name(self.status).decode("ascii")
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


_B = _lib.builtins
_FAST = _B is not None
if _FAST:
    _b_export = _B["export"]
    _b_import = _B["import_capsule"]
    _b_wrap = _B["wrap_buffer"]
    _b_own = _B["own"]
    _b_handle = _B["handle"]
    _b_meta = _B["meta"]
    _B["set_error_type"](Error)  # failures in the builtins raise Error(status, message)


def _last_error(status):
    message = _P.dlb_last_error_message().decode("utf-8", "replace")
    return Error(status, message)


def _check(status):
    if status != 0:
        raise _last_error(status)


# (code, bits, lanes) -> name, filled as dtypes are met.
_dtype_names = {}


def _dtype_name(dtype):
    key = (dtype.code, dtype.bits, dtype.lanes)
    name = _dtype_names.get(key)
    if name is None:
        out = _ct.create_string_buffer(64)
        _check(_P.dlb_dtype_name(dtype, out, 64))
        name = out.value.decode("ascii")
        _dtype_names[key] = name
    return name


def _parse_dtype(dtype):
    """A DLDataType from a name, a numpy dtype or scalar type, or a torch dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):  # numpy scalar types, Python's float/int/bool/complex
        name = dtype.__name__
    else:
        name = str(dtype)  # numpy dtype -> "float32"; torch dtype -> "torch.float32"
    if name.startswith("torch."):
        name = name[len("torch."):]
    out = _lib.DLDataType()
    _check(_P.dlb_dtype_from_name(name.encode("ascii", "replace"), _ct.byref(out)))
    return out


class Tensor:
    """A reference to a dlbridge buffer; a producer and consumer of DLPack.

    Made by :func:`empty`, :func:`from_buffer` and :func:`from_dlpack`, not by
    calling the class. Metadata is read from the library once, on first use,
    and cached. ``strides`` are in elements, as DLPack counts them.
    """

    # _o owns the buffer reference: with the builtins, an owner capsule whose
    # C destructor releases the handle when the tensor is dropped (no
    # __del__); without them, a ctypes.c_void_p that __del__ releases.
    __slots__ = ("_o", "_meta", "__weakref__")

    def __init__(self, *args, **kwargs):
        self._o = None
        raise TypeError(
            "dlbridge.Tensor is made by dlbridge.empty(), dlbridge.from_buffer() "
            "or dlbridge.from_dlpack()"
        )

    # -- metadata ------------------------------------------------------------

    if _FAST:

        @property
        def _h(self):
            """The dlb_buffer* as an int (valid while the tensor lives)."""
            return _b_handle(self._o)

        def _load(self):
            meta = _b_meta(self._o)
            self._meta = meta
            return meta

    else:

        @property
        def _h(self):
            """The dlb_buffer* as a ctypes.c_void_p (valid while the tensor lives)."""
            return self._o

        def _load(self):
            t = _lib.DLTensor()
            h = self._o
            _check(_P.dlb_buffer_dltensor(h, _ct.byref(t)))
            ndim = t.ndim
            shape = tuple(t.shape[:ndim]) if ndim else ()
            strides = tuple(t.strides[:ndim]) if ndim else ()
            flags = _P.dlb_buffer_flags(h)
            meta = (
                shape,
                strides,
                _dtype_name(t.dtype),
                (t.device.device_type, t.device.device_id),
                (t.data or 0) + t.byte_offset,
                bool(flags & _lib.DLB_BUFFER_READ_ONLY),
                _P.dlb_buffer_nbytes(h),
            )
            self._meta = meta
            return meta

    def _m(self):
        meta = self._meta
        return meta if meta is not None else self._load()

    @property
    def shape(self):
        """Extents, a tuple of ints."""
        return self._m()[0]

    @property
    def strides(self):
        """Strides in elements (not bytes), a tuple of ints."""
        return self._m()[1]

    @property
    def dtype(self):
        """numpy-style dtype name: "float32", "bfloat16", "bool", "complex64", ..."""
        return self._m()[2]

    @property
    def device(self):
        """(device_type, device_id), DLPack's numbering (CPU is (1, 0))."""
        return self._m()[3]

    @property
    def data_ptr(self):
        """Address of the element at index (0, ..., 0), as an int (0 when empty)."""
        return self._m()[4]

    @property
    def readonly(self):
        """True when the memory must not be written through exports."""
        return self._m()[5]

    @property
    def nbytes(self):
        """Bytes the elements take when compact."""
        return self._m()[6]

    @property
    def ndim(self):
        return len(self._m()[0])

    @property
    def size(self):
        n = 1
        for extent in self._m()[0]:
            n *= extent
        return n

    @property
    def deleted(self):
        """True once :meth:`delete` was called."""
        return bool(_P.dlb_buffer_flags(self._h) & _lib.DLB_BUFFER_DELETED)

    def __len__(self):
        shape = self._m()[0]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __repr__(self):
        if self._meta is None and self.deleted:
            return "dlbridge.Tensor(<deleted>)"
        shape, _, dtype, device, _, readonly, _ = self._m()
        extra = ", readonly=True" if readonly else ""
        if self.deleted:
            extra += ", deleted=True"
        return "dlbridge.Tensor(shape=%r, dtype=%s, device=%r%s)" % (shape, dtype, device, extra)

    # -- lifetime ------------------------------------------------------------

    def delete(self):
        """Deletes (donates) the buffer: later exports raise BufferError.

        Exports made before stay valid until their consumers drop them. The
        metadata properties keep working.
        """
        if self._meta is None:
            self._load()
        _check(_P.dlb_buffer_delete(self._h))

    if not _FAST:

        def __del__(self, _release=_release):
            h = self._o
            if h is not None:
                _release(h)

    def __reduce__(self):
        # A copy would share the handle and release it twice.
        raise TypeError("dlbridge.Tensor cannot be pickled or copied; export it with DLPack")

    # -- the DLPack protocol ---------------------------------------------------

    def __dlpack_device__(self):
        return self._m()[3]

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the tensor as a DLPack capsule (array API standard).

        max_version None or with a major below 1: a legacy "dltensor" capsule
        (refused with BufferError for read-only data, which the legacy struct
        cannot mark); major >= 1: a "dltensor_versioned" capsule. copy: True
        always copies, False never (BufferError when a copy is needed), None
        copies only when needed. dl_device: the consumer's (type, id).
        stream: on a CPU tensor only None is allowed (ValueError otherwise:
        it is a bad argument, not data that cannot be exported).
        """
        if stream is None and max_version is None and dl_device is None and copy is None:
            if _FAST:
                return _b_export(self._o)
            return _export_capsule(self._o, None, 0)
        return self._dlpack_with(stream, max_version, dl_device, copy)

    def _dlpack_with(self, stream, max_version, dl_device, copy):
        versioned = 0
        if max_version is not None:
            try:
                major, _minor = max_version
                major = int(major)
            except (TypeError, ValueError):
                raise TypeError("max_version must be a (major, minor) tuple, not %r" % (max_version,))
            versioned = 1 if major >= 1 else 0
        policy = _lib.DLB_COPY_IF_NEEDED
        if copy is not None:
            if copy is True:
                policy = _lib.DLB_COPY_ALWAYS
            elif copy is False:
                policy = _lib.DLB_COPY_NEVER
            else:
                raise TypeError("copy must be True, False or None, not %r" % (copy,))
        has_device = 0
        device_type = device_id = 0
        if dl_device is not None:
            try:
                device_type, device_id = dl_device
                device_type = int(device_type)
                device_id = int(device_id)
            except (TypeError, ValueError):
                raise TypeError("dl_device must be a (device_type, device_id) tuple, not %r"
                                % (dl_device,))
            has_device = 1
        if stream is not None:
            own_type = self._m()[3][0]
            if own_type == _lib.kDLCPU:
                raise ValueError("stream must be None for a CPU tensor, not %r" % (stream,))
            if not isinstance(stream, int):
                raise TypeError("stream must be an int, not %r" % (stream,))
            if stream == 0 and own_type in (_lib.kDLCUDA, _lib.kDLROCM):
                raise ValueError("stream 0 is not allowed (use 1 or 2)")
        if _FAST:
            return _b_export(self._o, versioned, policy, has_device, device_type, device_id,
                             stream, 0)
        options = _lib.ExportOptions()
        _P.dlb_export_options_init(_ct.byref(options))
        options.copy = policy
        options.has_target_device = has_device
        options.target_device.device_type = device_type
        options.target_device.device_id = device_id
        if stream is not None:
            options.stream = stream
        return _export_capsule(self._o, _ct.byref(options), versioned)


def _from_owner(owner):
    """A Tensor owning `owner` (see Tensor._o)."""
    t = _object_new(Tensor)
    t._o = owner
    t._meta = None
    return t


def _new_tensor(h):
    """A Tensor taking over the reference in `h`, a c_void_p a ctypes call filled."""
    if _FAST:
        return _from_owner(_b_own(h.value))
    return _from_owner(h)


def empty(shape, dtype):
    """A new zero-filled, compact row-major host tensor.

    shape: an int or a sequence of ints. dtype: a name ("float32",
    "bfloat16", "bool", ...), a numpy dtype or scalar type, or a torch dtype.
    """
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    ndim = len(shape)
    dt = _parse_dtype(dtype)
    dims = (_ct.c_int64 * max(ndim, 1))(*shape)
    h = _c_void_p()
    _check(_C.dlb_buffer_alloc(_lib.DLDevice(_lib.kDLCPU, 0), dt, ndim, dims, _ct.byref(h)))
    return _new_tensor(h)


def from_buffer(obj):
    """A zero-copy Tensor over an object with the Python buffer protocol.

    bytes give a read-only tensor; bytearray, memoryview (of writable memory)
    and array.array writable ones. The object's buffer stays exported (for
    a bytearray: it cannot be resized) until the tensor and the last export
    made from it are gone.
    """
    if _FAST:
        return _from_owner(_b_wrap(obj))
    h = _c_void_p()
    _check(_lib.wrap_buffer(obj, _ct.byref(h)))
    return _from_owner(h)


def live_exports():
    """Managed tensors exported by the library whose deleter has not yet run."""
    return _P.dlb_live_exports()


# Producer types whose __dlpack__ refused max_version (pre-1.0 protocol).
_legacy_producers = set()


def _import(capsule):
    if _FAST:
        return _from_owner(_b_import(capsule))
    h = _c_void_p()
    status = _import_capsule(capsule, None, h)
    if status != 0:
        raise _last_error(status)
    return _from_owner(h)


def _to_host_copy(tensor):
    h = _c_void_p()
    _check(_C.dlb_buffer_to_host(tensor._h, _ct.byref(h)))
    return _new_tensor(h)


def from_dlpack(obj, *, device=None, copy=None):
    """A Tensor over what any DLPack producer (numpy, torch, dlbridge) exports.

    Asks for a versioned capsule (``max_version=(1, 3)``) and falls back to
    the legacy call when the producer does not take ``max_version``. Also
    takes a DLPack capsule itself. device: the (device_type, device_id) the
    result must be on; copy: True always copies (through the library's copy
    engine when the producer could not be asked), False never copies
    (BufferError when a copy would be needed), None copies only when needed.
    """
    producer = type(obj)
    if device is None and copy is None and producer in _legacy_producers:
        # The hot path, inlined: one call into the producer, one into C.
        if _FAST:
            owner = _b_import(obj.__dlpack__())
            t = _object_new(Tensor)
            t._o = owner
            t._meta = None
            return t
        h = _c_void_p()
        status = _import_capsule(obj.__dlpack__(), None, h)
        if status != 0:
            raise _last_error(status)
        t = _object_new(Tensor)
        t._o = h
        t._meta = None
        return t

    if device is not None:
        try:
            dev = tuple(device)
            if len(dev) != 2:
                raise ValueError
            device = (int(dev[0]), int(dev[1]))
        except (TypeError, ValueError):
            raise TypeError("device must be a (device_type, device_id) tuple, not %r" % (device,))
    if copy is not None and copy is not True and copy is not False:
        raise TypeError("copy must be True, False or None, not %r" % (copy,))

    method = getattr(obj, "__dlpack__", None)
    if method is None:
        # A capsule straight from a to_dlpack() function.
        if producer.__name__ == "PyCapsule":
            tensor = _import(obj)
            return _to_host_copy(tensor) if copy else tensor
        raise TypeError("%s does not implement the DLPack protocol" % producer.__name__)

    if producer not in _legacy_producers:
        kwargs = {"max_version": _MAX_VERSION}
        if device is not None:
            kwargs["dl_device"] = device
        if copy is not None:
            kwargs["copy"] = copy
        try:
            capsule = method(**kwargs)
        except TypeError:
            # Pre-1.0 producer (numpy < 2.1, torch < 2.4): no keywords but stream.
            _legacy_producers.add(producer)
        else:
            return _import(capsule)

    # The legacy protocol: the producer cannot be asked for a copy or a
    # device, so both are done here.
    need_copy = copy is True
    if device is not None:
        source = tuple(obj.__dlpack_device__())
        if source != device:
            if device[0] == _lib.kDLCPU and source[0] in _HOST_READABLE:
                if copy is False:
                    raise BufferError(
                        "moving from device %r to %r needs a copy and copy=False" % (source, device)
                    )
                need_copy = True
            else:
                raise BufferError("cannot move a tensor from device %r to %r" % (source, device))
    tensor = _import(method())
    if need_copy:
        return _to_host_copy(tensor)
    return tensor

from . import check  # noqa: E402  dlbridge.check(obj) and python -m dlbridge.check
