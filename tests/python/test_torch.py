"""Exchanges with torch in both directions: Debian's torch 1.13 (legacy DLPack
protocol) and, in the peer environment's run, torch 2."""

import ctypes
import gc
import weakref

import pytest

np = pytest.importorskip("numpy")

import dlbridge

torch = pytest.importorskip("torch")

torch1_only = pytest.mark.skipif(int(torch.__version__.split(".")[0]) >= 2,
                                 reason="asserts torch 1.13's behaviour; torch %s is newer" % torch.__version__)

TORCH_DTYPES = [
    "int8", "int16", "int32", "int64", "uint8",
    "float16", "bfloat16", "float32", "float64",
    "complex64", "complex128",
]


def sample(name, shape=(3, 4)):
    dt = getattr(torch, name)
    t = (torch.arange(12) % 5 + 1).reshape(shape)
    if dt.is_complex:
        return (t.to(torch.float64) + 1j).to(dt)
    return t.to(dt)


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_to_dlbridge_to_torch_every_dtype(name):
    g = sample(name)
    t = dlbridge.from_dlpack(g)
    assert t.dtype == name
    assert t.shape == tuple(g.shape)
    assert t.strides == tuple(g.stride())
    assert t.data_ptr == g.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == g.dtype
    assert back.data_ptr() == g.data_ptr()
    assert torch.equal(back, g)


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_dlbridge_empty_to_torch_every_dtype(name):
    t = dlbridge.empty((4, 2), getattr(torch, name))
    assert t.dtype == name
    g = torch.from_dlpack(t)
    assert g.dtype == getattr(torch, name)
    assert g.data_ptr() == t.data_ptr
    assert bool((g == 0).all())


@torch1_only
def test_torch_cannot_export_bool_and_dlbridge_copies_it():
    # torch 1.13 refuses with RuntimeError ("Bool type is not supported by
    # dlpack"): a refusal the cure answers through torch's __array__.
    g = torch.tensor([True, False, True])
    with pytest.raises(RuntimeError, match="Bool"):
        g.__dlpack__()
    t = dlbridge.from_dlpack(g)
    assert t.copied and t.dtype == "bool" and t.shape == (3,)
    assert ctypes.string_at(t.data_ptr, 3) == bytes([1, 0, 1])
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY: Tensor.__dlpack__ raised RuntimeError: .*Bool"):
        dlbridge.from_dlpack(g, copy=False)


@torch1_only
def test_torch_cannot_import_bool():
    # torch 1.13 knows neither kDLBool (6) nor how to read a uint8 as bool.
    with pytest.raises(RuntimeError):
        torch.from_dlpack(dlbridge.empty((3,), "bool"))


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2, reason="torch 1.13 has no kDLBool")
def test_torch_2_exchanges_bool_both_ways():
    g = torch.tensor([True, False, True])
    t = dlbridge.from_dlpack(g)
    assert t.dtype == "bool" and t.data_ptr == g.data_ptr()
    back = torch.from_dlpack(dlbridge.from_dlpack(np.array([False, True])))
    assert back.dtype == torch.bool and back.tolist() == [False, True]


def test_writes_seen_both_ways():
    g = torch.zeros(2, 3)
    t = dlbridge.from_dlpack(g)
    g[1, 2] = 5.0
    assert np.from_dlpack(t)[1, 2] == 5.0
    h = torch.from_dlpack(t)
    h[0, 0] = -1.0
    assert g[0, 0].item() == -1.0
    assert h.data_ptr() == g.data_ptr()


def test_dlbridge_to_torch_write_seen_by_numpy():
    t = dlbridge.empty((5,), "float64")
    a = np.from_dlpack(t)
    g = torch.from_dlpack(t)
    g += 2.5
    assert a.tolist() == [2.5] * 5


def _views():
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    return {
        "transposed": base.permute(2, 0, 1),
        "sliced": base[1:, ::2, 1:4],
        "size1": base[1:2, :, 3:4],
        "zero_size": base[:, 2:2, :],
        "zero_d": torch.tensor(2.5),
        "expanded": torch.arange(3.0).expand(4, 3),
    }


@pytest.mark.parametrize("kind", list(_views()))
def test_torch_views_round_trip(kind):
    v = _views()[kind]
    t = dlbridge.from_dlpack(v)
    assert t.shape == tuple(v.shape)
    if v.numel():
        # Kept as torch wrote them. torch 1.13 writes 1 as the stride of
        # size-1 dimensions and rewrites those of zero-size tensors.
        for n, a, b in zip(v.shape, t.strides, v.stride()):
            if n > 1:
                assert a == b
        assert t.data_ptr == v.data_ptr()
    if v.numel() == 0:
        # torch gives zero-size tensors a NULL data pointer, and torch 1.13's
        # importer never calls the deleter of a tensor whose data is NULL
        # (a leak in torch): check the numpy side only.
        assert t.data_ptr == 0
        assert np.from_dlpack(t).shape == tuple(v.shape)
        return
    back = torch.from_dlpack(t)
    assert back.shape == v.shape
    assert torch.equal(back, v)
    if v.numel():
        assert back.data_ptr() == v.data_ptr()
        # torch's importer rewrites the strides of size-1 dimensions.
        for n, a, b in zip(v.shape, back.stride(), v.stride()):
            if n > 1:
                assert a == b
    np.testing.assert_array_equal(np.from_dlpack(t), v.numpy())


def test_negative_strides_kept_for_consumers():
    # torch 1.13 aborts the process (an uncaught C++ error) when handed
    # negative strides, so they are checked through numpy only.
    from conftest import require_negative_strides

    require_negative_strides()
    a = np.arange(6.0)[::-1]
    t = dlbridge.from_dlpack(a)
    assert t.strides == (-1,)
    assert t.data_ptr == a.__array_interface__["data"][0]
    assert np.from_dlpack(t).tolist() == a.tolist()


def test_torch_tensor_kept_alive_by_import():
    g = torch.arange(4.0)
    ref = weakref.ref(g)
    t = dlbridge.from_dlpack(g)
    del g
    gc.collect()
    # torch's capsule holds the storage, not the Python object: the data
    # must still be right.
    assert torch.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0]
    del t
    gc.collect()
    assert ref() is None


def test_torch_consumes_dlbridge_capsule_once():
    t = dlbridge.empty((3,), "float32")
    cap = t.__dlpack__()
    g = torch.utils.dlpack.from_dlpack(cap)
    assert g.data_ptr() == t.data_ptr
    with pytest.raises(Exception):
        torch.utils.dlpack.from_dlpack(cap)  # consumed: refused, no double free
    del cap
    gc.collect()
    assert dlbridge.live_exports() == 1
    del g
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_from_buffer_bytearray_to_torch():
    ba = bytearray(range(8))
    g = torch.from_dlpack(dlbridge.from_buffer(ba))
    assert g.dtype == torch.uint8
    g[0] = 200
    assert ba[0] == 200
