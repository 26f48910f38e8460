"""Producers that lie, through every entry point: a ctypes producer
(oracle.HandMade) whose capsule says something false about one field, a
deleter that fails, a __dlpack_device__ that disagrees with the capsule.
Every outcome is the producer's true values (zero-copy or copied) or a
refusal that names the library's status; never a wrong value, never an
unnamed refusal, and the producer's deleter runs exactly once (the
session's fixture checks HandMade.live and live_exports() after each test).
The C exchange table's managed_tensor_to_py_object_no_sync takes the same
lying tensors straight from C."""

import ctypes

import numpy as np
import pytest

import oracle

BIG = 2 ** 62

# field -> how the lie is told to the managed tensor (m) and its DLTensor (t)
LIES = {
    "ndim 65": lambda m, t: setattr(t, "ndim", 65),
    "ndim -1": lambda m, t: setattr(t, "ndim", -1),
    "dtype code 99": lambda m, t: setattr(t.dtype, "code", 99),
    "dtype bits 0": lambda m, t: setattr(t.dtype, "bits", 0),
    "dtype lanes 0": lambda m, t: setattr(t.dtype, "lanes", 0),
    "dtype bits 12": lambda m, t: setattr(t.dtype, "bits", 12),
    "shape[0] -3": lambda m, t: t.shape.__setitem__(0, -3),
    "shape[0] 2^62": lambda m, t: t.shape.__setitem__(0, BIG),
    "strides[0] 2^62": lambda m, t: t.strides.__setitem__(0, BIG),
    "strides[1] -2^62": lambda m, t: t.strides.__setitem__(1, -BIG),
    "byte_offset 2^62": lambda m, t: setattr(t, "byte_offset", BIG),
    "data NULL": lambda m, t: setattr(t, "data", None),
    "device type 99": lambda m, t: setattr(t.device, "device_type", 99),
    "device id -1": lambda m, t: setattr(t.device, "device_id", -1),
    "device CPU:3": lambda m, t: setattr(t.device, "device_id", 3),
    "version 2.0": lambda m, t: setattr(m.version, "major", 2),
    "version 0.9": lambda m, t: (setattr(m.version, "major", 0), setattr(m.version, "minor", 9)),
    "padded flag on int32": lambda m, t: setattr(m, "flags", m.flags | 4),
    "unknown flag bits": lambda m, t: setattr(m, "flags", m.flags | (1 << 40)),
}


class Liar(oracle.HandMade):
    """A hand-made producer whose versioned capsules tell one lie."""

    def __init__(self, values, lie, **kw):
        super().__init__(values, **kw)
        self.lie = lie

    def _capsule(self, versioned):
        capsule = super()._capsule(versioned)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        ptr = oracle._capsule_pointer(capsule, name)
        d = oracle._decls()
        m = (d.DLManagedTensorVersioned if versioned else d.DLManagedTensor).from_address(ptr)
        if versioned or not self.lie.startswith(("version", "padded", "unknown")):
            LIES[self.lie](m, m.dl_tensor)
        return capsule


class WrongDevice(oracle.HandMade):
    """__dlpack_device__ says another device than its capsules."""

    def __init__(self, values, says):
        super().__init__(values)
        self.says = says

    def __dlpack_device__(self):
        return self.says


def _values():
    return oracle.Values.of_array(np.arange(-12, 12, dtype=np.int32).reshape(4, 6) * 977)


def _named(e):
    import dlbridge

    return isinstance(e, dlbridge.Error) or "DLB_ERR_" in str(e)


def _entries():
    import dlbridge

    return [
        ("from_dlpack", lambda x: dlbridge.from_dlpack(x)),
        ("from_dlpack(copy=True)", lambda x: dlbridge.from_dlpack(x, copy=True)),
        ("from_dlpack(copy=False)", lambda x: dlbridge.from_dlpack(x, copy=False)),
        ("from_dlpack(device=(1, 0))", lambda x: dlbridge.from_dlpack(x, device=(1, 0))),
        ("legacy capsule", lambda x: dlbridge.from_dlpack(oracle.Legacy(x))),
    ]


def _judge(ck, route, make, truth):
    """Runs one entry point: a refusal must name the status, a result must
    hold the producer's true values."""
    try:
        result = make()
    except Exception as e:  # noqa: BLE001
        ck.tally.add(route, "refused")
        ck.tally.errors[(route, type(e).__name__)] += 1
        if not _named(e):
            ck.problems.append("%s: an unnamed refusal: %s: %s" % (route, type(e).__name__, e))
        return
    try:
        if tuple(result.device) != (1, 0) and result.device[0] == 1:
            # host memory under another CPU device id, as the capsule said:
            # kept as said (DLPack does not forbid it); its values must hold
            got = oracle.read_raw(result.data_ptr, result.shape, result.strides, result.dtype,
                                  oracle.is_padded(result))
        else:
            got = oracle.read_tensor(result)
    except Exception as e:  # noqa: BLE001
        ck.tally.add(route, "wrong")
        ck.problems.append("%s: accepted, and its result cannot be read: %s: %s" % (route, type(e).__name__, e))
        return
    diff = oracle.compare(truth, got)
    if diff is not None:
        ck.tally.add(route, "wrong")
        ck.problems.append("%s: WRONG: %s" % (route, diff))
        return
    ck.tally.add(route, "copied" if result.copied else "zero-copy")


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_capsule_that_lies_about_one_field(lie):
    truth = _values()
    ck = oracle.Checker("liar: %s" % lie)
    for name, entry in _entries():
        x = Liar(truth, lie)
        _judge(ck, "liar (%s) -> %s" % (lie, name), lambda: entry(x), truth)
        del x
    ck.done()


@pytest.mark.parametrize("lie", sorted(LIES))
def test_the_exchange_tables_to_py_takes_a_lying_tensor_from_c(lie):
    """managed_tensor_to_py_object_no_sync owns the tensor whatever it says:
    its deleter runs once, and what it makes holds the true values or it
    fails with a named BufferError."""
    truth = _values()
    ck = oracle.Checker("liar to_py: %s" % lie)
    x = Liar(truth, lie)
    capsule = x.__dlpack__(max_version=(1, 3))
    ptr = oracle._capsule_pointer(capsule, b"dltensor_versioned")
    # the table owns it from here: the capsule is renamed so that it does not free it too
    oracle._capi("PyCapsule_SetName", ctypes.c_int, [ctypes.py_object, ctypes.c_char_p])(
        capsule, b"used_dltensor_versioned")
    cap, table, _from_py, _view = oracle._exchange_table()
    to_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))(table.to_py)
    decref = oracle._capi("Py_DecRef", None, [ctypes.c_void_p])

    def make():
        out = ctypes.c_void_p()
        if to_py(ptr, ctypes.byref(out)) != 0:
            raise AssertionError("to_py failed without an exception")
        obj = ctypes.cast(out.value, ctypes.py_object).value  # a reference of our own
        decref(out.value)  # the one to_py handed over
        return obj

    _judge(ck, "liar (%s) -> exchange table to_py (C)" % lie, make, truth)
    del capsule, x
    ck.done()


@pytest.mark.parametrize("says", [(2, 0), (1, 1), (4, 0), (99, 0)], ids=str)
def test_a_dlpack_device_that_disagrees_with_the_capsule(says):
    truth = _values()
    ck = oracle.Checker("__dlpack_device__ says %s" % (says,))
    for name, entry in _entries():
        x = WrongDevice(truth, says)
        _judge(ck, "__dlpack_device__ %s -> %s" % (says, name), lambda: entry(x), truth)
        del x
    ck.done()


_failing_calls = [0]


@oracle._DELETER
def _failing_delete(ptr):
    oracle._hand_delete(ptr)
    _failing_calls[0] += 1
    raise RuntimeError("the producer's deleter failed")


class FailingDeleter(oracle.HandMade):
    """A producer whose deleter raises (after freeing, as a careless one
    would): ctypes reports it as unraisable; nothing else may change."""

    def _capsule(self, versioned):
        capsule = super()._capsule(versioned)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        ptr = oracle._capsule_pointer(capsule, name)
        d = oracle._decls()
        m = (d.DLManagedTensorVersioned if versioned else d.DLManagedTensor).from_address(ptr)
        m.deleter = ctypes.cast(_failing_delete, ctypes.c_void_p).value
        return capsule


def test_a_deleter_that_fails_changes_no_value_and_runs_once(capsys):
    import gc

    truth = _values()
    ck = oracle.Checker("failing deleter")
    before = _failing_calls[0]
    exported = 0
    for name, entry in _entries():
        x = FailingDeleter(truth)
        _judge(ck, "failing deleter -> %s" % name, lambda: entry(x), truth)
        exported += 1
        del x
        gc.collect()
    ck.done()
    assert _failing_calls[0] - before >= 1
    assert oracle.HandMade.live == 0
