"""Tensors shared with other processes (Linux).

The work is libdlbridge's (``include/dlbridge/share.h``), called by the
extension (``python/dlbridge/_share.c``): the shared memory, the
descriptor's format and its checks, the socket framing. This module is the
Python side of it, and teaches :mod:`multiprocessing` to pass tensors by
sharing.

* :func:`share` returns a tensor in shared memory for any DLPack producer:
  the same memory when it is shared already, else one copy.
* :func:`share_send` / :func:`share_recv` pass a tensor over a connected
  Unix socket; the other side may be a C or Rust program using
  ``dlb_share_send`` / ``dlb_share_recv``.
* ``multiprocessing`` queues, pipes and pools (``ForkingPickler``) carry a
  ``dlbridge.Tensor`` as its memory file, with every start method: the
  receiving process maps the same memory, and writes are seen both ways.
  The pickle holds the library's ticket for the memory file, which this
  process keeps until the receiver takes it (docs/sharing.md). A
  tensor that is not in shared memory yet is a copy for the receiver
  either way: one of at most 64 KiB travels as its bytes, a larger one is
  copied once into shared memory. One the library cannot issue a ticket
  for travels as its bytes too, and one that cannot be read at all (a
  deleted tensor) as an :class:`Unreceived`: an item is never dropped. A ticket that cannot be opened
  unpickles as an :class:`Unreceived`, which raises :class:`dlbridge.Error`
  when used: unpickling never raises in multiprocessing's threads. A
  multiprocessing child waits at its exit (up to :data:`EXIT_WAIT`
  seconds) until its tickets were opened; :func:`withdraw_tickets` takes
  unopened ones back.
  CUDA device memory of dlbridge's CUDA backend travels instead as its
  CUDA IPC handles (a description without a file): the receiver opens the
  same device memory, ordered after the producer's last write. It must be
  another process (CUDA refuses a handle in the one that made it), and the
  producer keeps the tensor alive until the receiver has released it.
* Plain :func:`pickle.dumps` (and :mod:`copy`) copies a tensor's elements
  into the bytes, as for any array: bytes may leave the machine, a memory
  file cannot. :func:`pickle.loads` gives a new host tensor with them.
  Protocol 5 with a ``buffer_callback`` (Ray, Dask) takes the elements out
  of band instead (``_pickle.c``, docs/engines.md).

``import dlbridge`` imports neither ctypes nor multiprocessing: the
reducer is registered when ``multiprocessing.reduction`` is imported,
before or after dlbridge.
"""

import os
import sys
from typing import Any, NoReturn, Optional, Sequence, Tuple

from . import Error, Tensor, _glue
from . import from_dlpack as _from_dlpack

__all__ = ["share", "share_send", "share_recv", "shared_mappings", "open_shared",
           "descriptor", "withdraw_tickets", "Unreceived", "EXIT_WAIT"]


def descriptor(tensor: Tensor, *, copy: bool = False, read_only: bool = False) -> Tuple[int, bytes]:
    """``(fd, description)`` for ``tensor``: a new file descriptor that the
    caller owns and closes (-1 for CUDA device memory, whose description
    names it by CUDA IPC handle), and the description's bytes.

    Memory that is not shared raises :class:`dlbridge.Error`
    (``DLB_ERR_NOT_ZERO_COPY``) unless ``copy`` is true, when it is copied
    once into new shared memory.
    """
    return _glue.share_descriptor(tensor, copy=copy, read_only=read_only)


def open_shared(fd: int, description: bytes, *, read_only: bool = False) -> Tensor:
    """The tensor a descriptor describes, mapped in this process. ``fd`` is
    borrowed: it stays the caller's, who may close it right after."""
    return _glue.open_shared(fd, bytes(description), read_only=read_only)


def share(obj: Any) -> Tensor:
    """A :class:`dlbridge.Tensor` in shared memory with ``obj``'s elements.

    ``obj`` is a Tensor or any DLPack producer (numpy, torch, ...). When its
    memory is shared memory already (a tensor made here, or a framework's
    view of one) the result is the same memory, without a copy; otherwise
    the elements are copied once into a new memory file. CUDA device memory
    of dlbridge's CUDA backend is returned as it is: it is shared by CUDA
    IPC handle.
    """
    tensor = obj if isinstance(obj, Tensor) else _from_dlpack(obj)
    if _glue.is_shared(tensor):
        return tensor
    # The copy's own mapping, kept (not a descriptor reopened): the pages
    # stay as the copy left them (docs/sharing.md, "A copy's pages").
    return _glue.share_copy(tensor, read_only=tensor.readonly)


def _fileno(sock: Any) -> int:
    return sock if isinstance(sock, int) else int(sock.fileno())


def share_send(sock: Any, obj: Any) -> None:
    """Sends ``obj`` (shared first with :func:`share` when it is not) over a
    connected Unix socket (a ``socket.socket`` or a file descriptor)."""
    _glue.share_send(_fileno(sock), share(obj))


def share_recv(sock: Any) -> Optional[Tensor]:
    """The next tensor from a connected Unix socket, mapped here; None at the
    end of the stream."""
    return _glue.share_recv(_fileno(sock))


def shared_mappings() -> int:
    """Shared-memory mappings the library holds in this process."""
    return _glue.shared_mappings()


# ---------------------------------------------------------------------------
# multiprocessing: a Tensor travels as its memory file
# ---------------------------------------------------------------------------


def withdraw_tickets() -> int:
    """Takes back every ticket this process issued that no receiver has
    opened yet (``dlb_share_ticket_withdraw``): their memory files are
    closed here, and unpickling them gives a ``dlbridge._share.Unreceived``. For
    instance after ``Pool.terminate()``, whose unstarted tasks' tickets
    would otherwise stay until this process exits, or until it holds half
    its file descriptor limit in them (then the oldest go). Returns how
    many were withdrawn."""
    return _glue.share_ticket_withdraw(None)


class Unreceived:
    """What unpickling gives for a tensor whose ticket could not be opened
    (its sender exited, withdrew it, or it was opened already; the sender
    belongs to another user; the bytes are no ticket).

    Unpickling runs in threads of ``multiprocessing`` (a pool's result
    handler, a queue's reader) that an exception would end, hanging the
    pool, so it never raises: it returns this, which raises the
    :class:`dlbridge.Error` that opening raised (``error``) wherever a
    tensor is used: DLPack (``__dlpack__``, ``__dlpack_device__``) and a
    tensor's attributes (``shape``, ``dtype``, ...)."""

    __slots__ = ("error",)

    def __init__(self, error: Error) -> None:
        self.error = error

    def _raise(self) -> NoReturn:
        raise Error(self.error.status, self.error.message)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        self._raise()

    def __dlpack_device__(self) -> Tuple[int, int]:
        self._raise()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # probes for other protocols find nothing
            raise AttributeError(name)
        self._raise()

    def __reduce__(self) -> Any:
        self._raise()

    def __repr__(self) -> str:
        return "dlbridge.Unreceived(%s)" % (self.error,)


#: Seconds a multiprocessing child waits at its exit for its receivers to
#: open the tickets it sent (its memory files go when it exits).
EXIT_WAIT = 10.0
_exit_wait_armed = 0  # the pid whose exit waits


class _AfterFork:
    """multiprocessing's after-fork hook holds its owner weakly: this one."""


_AFTER_FORK = _AfterFork()


def _await_receivers() -> None:
    _glue.share_ticket_wait(EXIT_WAIT)


def _arm_exit_wait(_: Any = None) -> None:
    # A multiprocessing child's receiver is most often its parent, which may
    # read what the child sent after the child has returned (a pool worker
    # with maxtasksperchild, a process that puts its result on a queue and
    # ends): its exit waits for them, after multiprocessing has flushed its
    # queues (their finalizers come first). A parent's receivers are its
    # children, which multiprocessing has joined or terminated by then.
    # Armed when a fork or forkserver child starts (the after-fork hook), at
    # import in a spawned child (which runs no after-fork hook, and imports
    # dlbridge while it is still "inheriting", before it knows its parent),
    # or at once in a child that imports dlbridge later: a finalizer added
    # while multiprocessing runs them at exit would not run.
    global _exit_wait_armed
    from multiprocessing import process, util

    pid = os.getpid()
    child = process.parent_process() is not None or getattr(process.current_process(), "_inheriting", False)
    if _exit_wait_armed == pid or not child:
        return
    _exit_wait_armed = pid
    util.Finalize(None, _await_receivers, exitpriority=-100)


def _rebuild(ticket: bytes) -> Any:
    try:
        return _glue.share_ticket_open(ticket)
    except Error as e:
        return Unreceived(e)


# A tensor of at most this many bytes that is not in shared memory travels
# by value: the receiver gets a copy either way, and a small one costs less
# as bytes than as a memory file.
_BY_VALUE_MAX = 64 << 10


def _unsendable(status: int, message: str) -> "Unreceived":
    return Unreceived(Error(status, message))


def _reduce(tensor: Tensor) -> Tuple[Any, Tuple[Any, ...]]:
    # A ticket (dlb_share_ticket_issue): this process keeps the memory file
    # until the receiver takes it (docs/sharing.md); a CUDA tensor's names
    # its memory by CUDA IPC handle.
    if tensor.nbytes <= _BY_VALUE_MAX and tensor.device == (1, 0) and not _glue.is_shared(tensor):
        return _glue.tensor_from_payload, _glue.tensor_payload(tensor)  # the elements, copied
    # multiprocessing pickles a Queue's items in a feeder thread, which prints
    # an exception and drops the item: the receiver's get() would never
    # return. A tensor the library cannot issue a ticket for travels as its
    # elements' bytes instead; one that cannot be read at all (deleted) as
    # an Unreceived that raises the library's error where it is used.
    try:
        return _rebuild, (_glue.share_ticket(tensor),)
    except Error as ticket_error:
        try:
            return _glue.tensor_from_payload, _glue.tensor_payload(tensor)
        except Error as payload_error:
            return _unsendable, (payload_error.status,
                                 "the tensor could not be sent: %s (no ticket: %s)"
                                 % (payload_error.message, ticket_error.message))


# Plain pickling and the copy module call Tensor.__reduce_ex__ (_pickle.c:
# protocol 5 hands the memory out of band, earlier protocols copy the
# elements); ForkingPickler's own reducer (_reduce) comes first there.

_REDUCTION = "multiprocessing.reduction"


def _register(reduction: Any) -> None:
    from multiprocessing import util

    reduction.ForkingPickler.register(Tensor, _reduce)
    util.register_after_fork(_AFTER_FORK, _arm_exit_wait)
    _arm_exit_wait()


class _Loader:
    """Runs the loader of multiprocessing.reduction, then registers."""

    def __init__(self, loader: Any, hook: "_Hook") -> None:
        self._loader = loader
        self._hook = hook

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... of the real loader
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _register(module)
        self._hook.remove()


class _Hook:
    """A sys.meta_path finder that sees multiprocessing.reduction being
    imported; it finds nothing itself and leaves once it has registered."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname != _REDUCTION:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self)
                return spec
        return None

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


if _REDUCTION in sys.modules:
    _register(sys.modules[_REDUCTION])
else:
    sys.meta_path.insert(0, _Hook())
