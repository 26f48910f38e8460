"""Every Python allocation of the extension's entry points failing in turn
(CPython's _testcapi.set_nomemory): each call either succeeds or raises,
MemoryError or an error of its own, never returns NULL without an
exception or a result with one set (CPython's SystemError), never
crashes, and leaves no export or producer tensor behind. Two modes per
call: only the k-th allocation fails, and every allocation from the k-th
on fails (so that the error paths' own allocations fail too), for k = 0, 1,
2, ... until the call has run 8 times in a row as it does unhindered.
The library's own allocations are failed by tests/reliability
(allocation-failure injection)."""

import array
import copy
import gc
import os
import pickle
import sys

import pytest

import dlbridge

np = pytest.importorskip("numpy")
_testcapi = pytest.importorskip("_testcapi")
if not hasattr(_testcapi, "set_nomemory"):
    pytest.skip("this interpreter's _testcapi cannot fail allocations", allow_module_level=True)
if "vgpreload" in os.environ.get("LD_PRELOAD", ""):
    # Thousands of calls each: minutes under valgrind (stage 21), which
    # checks the same entry points without failures.
    pytest.skip("too slow under valgrind", allow_module_level=True)


def outcome(call):
    """The type of what `call` raises (None: nothing)."""
    try:
        call()
    except BaseException as e:  # noqa: B902
        return type(e)
    return None


def under_failing_allocations(call, mode, name=""):
    """Runs `call` with the k-th allocation (or all from it on) failing,
    k = 0, 1, ...; returns how many runs ended otherwise than the call does
    without failures (returning, or raising its own error). Fails on a
    SystemError."""
    normal = outcome(call)
    k = 0
    in_a_row = 0
    raised = 0
    while in_a_row < 8:
        assert k < 4000, "%s never ran 8 times in a row without failing" % name
        error = None
        _testcapi.set_nomemory(k, k + 1 if mode == "one" else 0)
        try:
            call()
        except BaseException as e:  # noqa: B902 (MemoryError, dlbridge.Error, BufferError, ...)
            error = e
        _testcapi.remove_mem_hooks()
        if type(error) is normal or (error is None and normal is None):
            in_a_row += 1
        else:
            in_a_row = 0
            raised += 1
            # A C function's NULL without an exception, or a result with one
            # set: the extension's bug. (CPython 3.11 itself raises "error
            # return without exception set" when it cannot make a Python
            # function's frame: not the extension's.)
            assert not (isinstance(error, SystemError) and "error return without" not in str(error)), (
                "%s, allocation %d (%s): %r" % (name, k, mode, error))
            assert isinstance(error, (MemoryError, dlbridge.Error, BufferError, ValueError, TypeError,
                                      RuntimeError, AttributeError, pickle.PicklingError, OSError)), (
                "%s: %r" % (name, error))
        error = None
        k += 1
    return raised


class Refuser:
    """A 1.x producer refusing its plain export (BufferError), cured by a
    host copy when asked for one, or through __array__."""

    def __init__(self, values, copy_ok=False):
        self.values = values  # made before allocations fail: numpy itself does not survive that everywhere
        self.shape = self.values.shape
        self.dtype = self.values.dtype
        self.copy_ok = copy_ok

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.copy_ok and dl_device == (1, 0) and copy is True:
            return dlbridge.from_buffer(self.values.copy()).__dlpack__(max_version=max_version)
        raise BufferError("cannot export this")

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None):
        return self.values.copy()


class Interface:
    """Refuses DLPack; offers only __array_interface__ (a strided view)."""

    def __init__(self):
        self.keep = strided
        self.__array_interface__ = strided_interface
        self.shape = strided_shape
        self.dtype = strided.dtype

    def __dlpack__(self, **kwargs):
        raise BufferError("no")

    def __dlpack_device__(self):
        return (1, 0)


class Legacy:
    """A producer of before DLPack 1.0: __dlpack__ takes only stream."""

    def __init__(self):
        self.t = base

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


base = np.arange(12, dtype=np.float32).reshape(3, 4)
strided = base[:, ::2]
strided_interface = strided.__array_interface__
strided_shape = strided.shape
two = np.array([1.0, 2.0], dtype=np.float32)
column = np.array([[1.0], [2.0]], dtype=np.float32)
tensor = dlbridge.from_dlpack(base, copy=True)
read_only = base.copy()
read_only.flags.writeable = False
payload4 = pickle.dumps(tensor, protocol=4)


def deleted_then_used():
    # _glue.empty, not dlbridge.empty, whose shape conversion makes a
    # generator expression's frame (GENERATOR_FRAMES).
    t = dlbridge._glue.empty((2,), "float32")
    t.delete()
    try:
        t.__dlpack__(max_version=(1, 0))
    except BufferError:
        pass


CALLS = {
    "empty": lambda: dlbridge._glue.empty((3, 4), "float32"),
    "empty of a bad dtype": lambda: dlbridge._glue.empty((2,), "float3"),
    "from_dlpack numpy": lambda: dlbridge.from_dlpack(base),
    "from_dlpack numpy, copy": lambda: dlbridge.from_dlpack(base, copy=True),
    "from_dlpack numpy, no copy": lambda: dlbridge.from_dlpack(base, copy=False),
    "from_dlpack numpy, CPU device": lambda: dlbridge.from_dlpack(base, device=(1, 0)),
    "from_dlpack numpy, transposed": lambda: dlbridge.from_dlpack(base.T, copy=True),
    "from_dlpack numpy, read-only": lambda: dlbridge.from_dlpack(read_only),
    "from_dlpack a tensor (exchange table)": lambda: dlbridge.from_dlpack(tensor),
    "from_dlpack a tensor, copy": lambda: dlbridge.from_dlpack(tensor, copy=True),
    "from_dlpack a legacy producer": lambda: dlbridge.from_dlpack(Legacy()),
    "from_dlpack, cured by a host copy": lambda: dlbridge.from_dlpack(Refuser(two, copy_ok=True)),
    "from_dlpack, cured through __array__": lambda: dlbridge.from_dlpack(Refuser(column)),
    "from_dlpack, cured through __array_interface__": lambda: dlbridge.from_dlpack(Interface()),
    "from_dlpack, cure forbidden": lambda: dlbridge.from_dlpack(Refuser(two), copy=False),
    "from_dlpack of a non-producer": lambda: dlbridge.from_dlpack(object()),
    "__dlpack__ versioned": lambda: tensor.__dlpack__(max_version=(1, 0)),
    "__dlpack__ legacy": lambda: tensor.__dlpack__(),
    "__dlpack__ copy to the CPU": lambda: tensor.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=True),
    "__dlpack__ bad arguments": lambda: tensor.__dlpack__(max_version="x"),
    "properties": lambda: (tensor.shape, tensor.strides, tensor.dtype, tensor.device, tensor.readonly,
                           tensor.data_ptr, tensor.copied, repr(tensor), tensor.__dlpack_device__()),
    "delete, then export": deleted_then_used,
    "from_buffer": lambda: dlbridge.from_buffer(bytearray(16)),
    "from_buffer of an array.array": lambda: dlbridge.from_buffer(array.array("h", [1, 2, 3])),
    "numpy of a tensor": lambda: np.from_dlpack(tensor),
    "pickle protocol 5": lambda: pickle.dumps(tensor, protocol=5),
    "pickle protocol 4": lambda: pickle.dumps(tensor, protocol=4),
    "unpickle protocol 4": lambda: pickle.loads(payload4),
    "deepcopy": lambda: copy.deepcopy(tensor),  # not on 3.12 and later: see GENERATOR_FRAMES
    "device_info": lambda: dlbridge._glue.device_info(2),
    "status names and live exports": lambda: (dlbridge._glue.status_name(10), dlbridge.live_exports()),
}


# CPython 3.12 and 3.13 crash (SIGSEGV in their own traceback code) when
# making a generator expression's frame fails; copy.deepcopy makes one
# (copy._reconstruct). Calls that go through such Python code run under
# failing allocations only on the interpreters that survive it.
GENERATOR_FRAMES = {"deepcopy"} if sys.version_info >= (3, 12) else set()


payload = dlbridge._glue.tensor_payload(tensor)
pickle_header = (1, 2, 32, 1, (3, 4), (4, 1), False)
pickle_bytes = bytes(48)


class CallableDlpack:
    """A __dlpack__ without a readable signature (an object with __call__)."""

    def __call__(self, **kwargs):
        if kwargs:
            raise TypeError("unexpected keyword argument 'max_version'")
        return base.__dlpack__()


class Unreadable:
    __dlpack__ = CallableDlpack()

    def __dlpack_device__(self):
        return (1, 0)


MORE_CALLS = {
    "tensor_from_pickle": lambda: dlbridge._glue.tensor_from_pickle(pickle_header, pickle_bytes),
    "tensor_from_pickle, refused": lambda: dlbridge._glue.tensor_from_pickle((1, 2, 32, 1, (3,), (1,), 0), b"x"),
    "tensor_from_payload": lambda: dlbridge._glue.tensor_from_payload(*payload),
    "tensor_payload": lambda: dlbridge._glue.tensor_payload(tensor),
    "from_dlpack of an unreadable __dlpack__": lambda: dlbridge.from_dlpack(Unreadable()),
    "from_buffer of a strided array": lambda: dlbridge.from_buffer(strided),
    "__dlpack__ with a stream": lambda: tensor.__dlpack__(stream=None, max_version=(1, 0)),
    "__dlpack__ with every keyword": lambda: tensor.__dlpack__(stream=None, max_version=(1, 3), dl_device=(1, 0),
                                                               copy=False),
}


@pytest.mark.parametrize("mode", ["one", "all"])
def test_failing_allocations_raise_and_leave_nothing_behind(mode):
    """Every call of CALLS, one after the other (one test per mode: the
    suite's per-test garbage collection would cost more than the calls)."""
    gc.collect()
    live = dlbridge.live_exports()
    quiet = {"status names and live exports", "tensor_payload"}
    for name, call in list(CALLS.items()) + list(MORE_CALLS.items()):
        if name in GENERATOR_FRAMES:
            continue
        raised = under_failing_allocations(call, mode, name)
        assert raised >= 1 or name in quiet, "%s never failed: the injection did not reach it" % name
    gc.collect()
    assert dlbridge.live_exports() == live


def test_shares_under_failing_allocations():
    """Sharing: copies into shared memory, descriptors, opening them, and a
    tensor through a socket pair; every file descriptor and mapping made is
    released (the mapping count comes back)."""
    share = pytest.importorskip("dlbridge._share")
    import socket

    glue = dlbridge._glue
    shared = share.share(base)
    fd, description = share.descriptor(shared)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def through_socket():
        glue.share_send(a.fileno(), shared)
        got = glue.share_recv(b.fileno())
        if got is None:
            raise EOFError

    calls = [lambda: glue.share_copy(tensor, read_only=True),
             lambda: os.close(glue.share_descriptor(tensor, copy=True)[0]),
             lambda: glue.is_shared(shared),
             lambda: glue.open_shared(fd, description, read_only=True),
             through_socket]
    gc.collect()
    live = dlbridge.live_exports()
    mappings = glue.shared_mappings()
    try:
        for mode in ("one", "all"):
            for call in calls:
                under_failing_allocations(call, mode)
        # Descriptors made by the successful runs are the caller's: the ones
        # of share_descriptor calls were dropped with their tuples.
        gc.collect()
        assert dlbridge.live_exports() == live
        assert glue.shared_mappings() == mappings
    finally:
        a.close()
        b.close()
        os.close(fd)


def test_a_producers_tensor_under_failing_allocations_is_always_released():
    """numpy's exports hold a reference on the array until their deleter
    runs: the array's reference count comes back to where it was."""
    import sys

    arr = np.arange(6.0)
    gc.collect()
    start = sys.getrefcount(arr)
    for mode in ("one", "all"):
        under_failing_allocations(lambda: dlbridge.from_dlpack(arr, copy=True), mode)
        under_failing_allocations(lambda: dlbridge.from_dlpack(arr), mode)
    gc.collect()
    assert sys.getrefcount(arr) == start



def test_the_extension_modules_setup_under_failing_allocations():
    """The module's setup (its types, the exchange capsule, its state) run
    again in fresh instances of dlbridge._glue with each allocation failing
    in turn: MemoryError each time, never a SystemError. In a child
    process: a second instance takes over the process's module state."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import importlib.util, _testcapi
        spec = importlib.util.find_spec("dlbridge._glue")
        import dlbridge
        failed = 0
        for k in range(400):
            error = None
            _testcapi.set_nomemory(k, k + 1)
            try:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except BaseException as e:
                error = e
            _testcapi.remove_mem_hooks()
            if error is not None:
                failed += 1
                if isinstance(error, SystemError) and "error return without" not in str(error):
                    raise SystemExit("allocation %d: %r" % (k, error))
        print(failed)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-500:]
    assert int(done.stdout.split()[-1]) >= 1
