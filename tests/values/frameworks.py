"""The frameworks as the value oracle sees them, one small adapter each: how
it makes a tensor of given values and layout, what it says its values are
(its own host copy of a resolved copy: the truth), where its memory is,
and how it consumes a DLPack producer. Plus the cases (dtype, layout,
values) and the check of one case over every route (oracle.py).

numpy 1.24 and torch 1.13 are Debian's; the others are the peer
environment's (scripts/peers-env). TensorFlow and Paddle crash when both are
imported into one process: scripts/test.d/47-values.sh runs their test files
in processes of their own.
"""

import importlib
import os
import sys
import zlib

import numpy as np

import oracle
from oracle import BITS, NotApplicable, PeerFault, Values, ml_dtypes

# ------------------------------------------------------------------ cases


class Case:
    """A dtype (and byte order), a base shape, the view ops that make the
    layout, and the seed of the values."""

    def __init__(self, fw, dtype, layout, shape, ops, seed, order="="):
        self.fw, self.dtype, self.layout, self.shape, self.ops = fw, dtype, layout, tuple(shape), list(ops)
        self.seed, self.order = seed, order

    def __str__(self):
        bo = {"=": "", "<": "<", ">": ">"}[self.order]
        return "%s %s%s %s" % (self.fw, bo, self.dtype, self.layout)


NAMED_LAYOUTS = [
    ("C", (4, 6), []),
    ("F", (4, 6), [("fortran",)]),
    ("slice", (4, 6), [("index", (slice(1, None), slice(None, None, 2)))]),
    ("reversed", (4, 6), [("index", (slice(None, None, -1), slice(None, None, -2)))]),
    ("transposed", (4, 6), [("perm", (1, 0))]),
    ("broadcast", (4, 6), [("index", (0,)), ("broadcast", (3, 6))]),
    ("0-d", (4, 6), [("index", (1, 2))]),
    ("zero-size", (4, 6), [("index", (slice(0, 0),))]),
    ("offset", (4, 6), [("index", (slice(1, None),))]),
    ("unaligned", (4, 6), [("unaligned",)]),
    ("1-d", (7,), []),
    ("3-d", (2, 3, 4), [("perm", (2, 0, 1))]),
]
# torch's own views: overlapping windows, unfold, narrow, a tensor that
# requires grad (its __dlpack__ refuses; dlbridge's routes must not give
# a wrong value)
TORCH_VIEWS = [
    ("as_strided overlap", (4, 6), [("as_strided", (3, 4), (2, 1))]),
    ("unfold", (4, 6), [("unfold", 1, 3, 2)]),
    ("narrow", (4, 6), [("narrow", 1, 2, 3)]),
    ("expand 3-d", (4, 6), [("index", (slice(1, 2),)), ("broadcast", (2, 3, 6))]),
    ("requires_grad", (4, 6), [("requires_grad",)]),
]
# torch's lazy states that DLPack cannot carry
TORCH_STATES = [
    ("conj", (4, 6), [("conj",)]),
    ("neg", (4, 6), [("neg",)]),
    ("conj().imag", (4, 6), [("conj",), ("imag",)]),
    ("conj slice", (4, 6), [("conj",), ("index", (slice(1, None), slice(None, None, 2)))]),
]

# pyarrow arrays with a validity bitmap: nulls at 1 and 4 of 7 over the
# values stored beneath them (what a reader past validity would see), a
# slice that keeps nulls (the bitmap at an offset), a slice between them
# (a bitmap, no null), every element null. pyarrow's own __dlpack__ refuses
# nulls; what its __array__ makes of them (NaN for floats, float64 for
# integers, objects for bool) is its own values
PYARROW_NULLS = [
    ("nulls", (7,), [("nulls", (1, 4))]),
    ("nulls offset", (7,), [("nulls", (1, 4)), ("index", (slice(1, None),))]),
    ("nulls sliced off", (7,), [("nulls", (1, 4)), ("index", (slice(2, 4),))]),
    ("all null", (7,), [("nulls", tuple(range(7)))]),
]


def _seed(*parts):
    return zlib.crc32(" ".join(str(p) for p in parts).encode())


def orders_of(fw, dtype):
    """The byte orders of fw's cases of dtype: big-endian too where fw has
    byte orders (numpy), for every dtype of more than a byte and every
    ml_dtypes dtype: numpy calls a one-byte ml_dtypes dtype with '>'
    non-native (its own bool, int8 and uint8 have no byte order: '>' is
    a no-op for them, and they have none)."""
    if not fw.byte_orders or (BITS[dtype] <= 8 and dtype in oracle.NUMPY_DTYPES):
        return ["="]
    return ["=", ">"]


def named_cases(fw):
    """Every dtype of fw with every named layout (and both byte orders where
    fw has them)."""
    cases = []
    layouts = NAMED_LAYOUTS + (TORCH_STATES + TORCH_VIEWS if fw.name == "torch" else [])
    layouts += PYARROW_NULLS if fw.name == "pyarrow" else []
    for dtype in fw.dtypes():
        for order in orders_of(fw, dtype):
            for layout, shape, ops in layouts:
                if not fw.has_layout(layout, dtype):
                    continue
                cases.append(Case(fw.name, dtype, layout, shape, ops, _seed(fw.name, dtype, layout), order))
    return cases


def consumer_cases():
    """The cases of dlbridge tensors handed to consumers: numpy's values in
    every dtype and layout, native byte order (the other is the producer
    side's: test_numpy.py)."""
    return [c for c in named_cases(ALL["numpy"]) if c.order == "="]


def draw_case(d, fw):
    """A random case: dtype, byte order, 0 to 4 dimensions of 0 to 5,
    sliced with steps (negative too), permuted, broadcast, values."""
    dtype = d.sampled_from(fw.dtypes())
    orders = orders_of(fw, dtype)
    order = d.sampled_from(orders) if len(orders) > 1 else "="
    ndim = d.integers(0, 4)
    shape = [d.integers(0, 5) for _ in range(ndim)]
    ops, names = [], []
    if fw.name == "numpy" and d.integers(0, 3) == 0:
        ops.append(("unaligned",))
        names.append("unaligned")
    if ndim:
        key = []
        for n in shape:
            step = d.sampled_from([1, 1, 2, -1, -2] if fw.negative_steps else [1, 1, 2])
            start = d.integers(0, max(n - 1, 0))
            key.append(slice(n - 1 - start if step < 0 else start, None, step))
        ops.append(("index", tuple(key)))
        names.append("[%s]" % ",".join("%s::%s" % (k.start, k.step) for k in key))
    if ndim > 1 and d.integers(0, 1):
        perm = tuple(d.permutation(ndim))
        ops.append(("perm", perm))
        names.append("perm%s" % (perm,))
    if d.integers(0, 3) == 0:
        ops.append(("lead", d.integers(1, 3)))
        names.append("broadcast%s" % (ops[-1][1],))
    if fw.name == "torch" and d.integers(0, 3) == 0:
        state = d.sampled_from(["neg"] + (["conj"] if dtype.startswith("complex") else []))
        if fw.has_layout(state, dtype):
            ops.append((state,))
            names.append(state)
    return Case(fw.name, dtype, "%s %s" % (shape, " ".join(names)), shape, ops, d.integers(0, 2 ** 31), order)


class SeededDraw:
    def __init__(self, seed):
        import random

        self.rng = random.Random(seed)

    def integers(self, lo, hi):
        return self.rng.randint(lo, hi)

    def sampled_from(self, seq):
        return self.rng.choice(list(seq))

    def permutation(self, n):
        p = list(range(n))
        self.rng.shuffle(p)
        return p


class HypothesisDraw:
    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integers(self, lo, hi):
        return self.data.draw(self.st.integers(lo, hi))

    def sampled_from(self, seq):
        return self.data.draw(self.st.sampled_from(list(seq)))

    def permutation(self, n):
        return self.data.draw(self.st.permutations(range(n)))


try:
    import hypothesis
except ImportError:  # the peer environment pins no hypothesis: a seeded generator draws instead
    hypothesis = None


def property_test(fw, examples, draw=None):
    """A test over `examples` random cases of fw: hypothesis's (fixed seed,
    no database) where it is installed, else a seeded generator's."""
    import pytest

    draw = draw or (lambda d: draw_case(d, fw))

    def decorate(body):
        if hypothesis is not None:
            from hypothesis import HealthCheck, given, settings, strategies as st

            @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
            @given(st.data())
            def test(data):
                body(draw(HypothesisDraw(data)))
        else:
            @pytest.mark.parametrize("example", range(examples))
            def test(example):
                body(draw(SeededDraw(_seed(fw.name, example))))
        test.__name__ = body.__name__
        return test

    return decorate


def source(dtype, shape, seed):
    """Values for a case: a compact native numpy array of dtype's carrier
    (numpy's own dtype, else the unsigned integer of its width; sub-byte
    integers as int8 / uint8 values in range), every bit pattern drawn."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape)) if shape else 1
    bits = BITS[dtype]
    raw = rng.integers(0, 256, size=count * max(1, bits // 8), dtype=np.uint8)
    if dtype == "bool":
        return (raw & 1).astype(bool).reshape(shape)
    if bits < 8:
        v = raw & ((1 << bits) - 1)
        if dtype.startswith("int"):
            return np.where(v >= 1 << (bits - 1), v.astype(np.int16) - (1 << bits), v).astype(np.int8).reshape(shape)
        return v.reshape(shape)
    return raw.view(oracle.carrier(dtype)).reshape(shape)


def as_numpy(carrier_arr, dtype):
    """The carrier array as a numpy array of dtype (ml_dtypes for the dtypes
    numpy lacks); NotApplicable without ml_dtypes."""
    nd = oracle.numpy_dtype(dtype)
    if nd is None:
        raise NotApplicable("numpy has no %s here (no ml_dtypes)" % dtype)
    if nd == carrier_arr.dtype:
        return carrier_arr
    if BITS[dtype] < 8 and (dtype.startswith("int") or dtype.startswith("uint")):
        return carrier_arr.astype(nd)
    return carrier_arr.view(nd)


# ------------------------------------------------------------------ adapters


class Framework:
    """What the oracle needs of a framework; subclasses fill it in."""

    name = "?"
    module = None  # the import whose absence makes the framework missing
    byte_orders = False
    negative_steps = True
    exclusive = False  # cannot share a process with another exclusive one

    def load(self):
        return importlib.import_module(self.module)

    def dtypes(self):
        return list(self.DTYPES)

    def has_layout(self, layout, dtype):
        return layout != "unaligned"

    def make(self, arr, dtype):
        """A compact tensor of the carrier array's values as dtype."""
        raise NotImplementedError

    def op(self, x, op):
        """One view op: ("index", key), ("perm", perm), ("broadcast", shape),
        ("lead", n) (a new leading axis of n), ("fortran",), ..."""
        kind = op[0]
        if kind == "index":
            return x[op[1]]
        if kind == "perm":
            return self.transpose(x, op[1])
        if kind == "broadcast":
            return self.broadcast(x, op[1])
        if kind == "lead":
            return self.broadcast(x, (op[1],) + tuple(x.shape))
        if kind == "fortran":
            return self.fortran(x)
        raise NotApplicable("%s has no %s" % (self.name, kind))

    def fortran(self, x):
        perm = tuple(reversed(range(len(x.shape))))
        return self.transpose(self.contiguous(self.transpose(x, perm)), perm)

    def contiguous(self, x):
        return x

    def build(self, case):
        arr = source(case.dtype, case.shape, case.seed)
        x = self.make(arr, case.dtype)
        for op in case.ops:
            x = self.op(x, op)
        return x

    def own(self, x):
        """The framework's own values of x (a resolved host copy)."""
        raise NotImplementedError

    def span(self, x):
        """The bytes x's elements occupy, or None."""
        return generic_span(x)

    consumes = True

    def consume(self, producer):
        raise NotApplicable("%s consumes no DLPack" % self.name)

    def consumer_fault(self, route, expected, got):
        """A known fault of this framework's consumer that explains `got`."""
        return None

    def producer_fault(self, route, expected, got):
        """A known fault of this framework's own export that explains `got`
        arriving by `route`."""
        return None


def generic_span(x):
    """The span of the memory x's own __dlpack__ names (its capsule is read
    in place, then dropped: the capsule's destructor frees it)."""
    try:
        cap = x.__dlpack__()
    except Exception:  # noqa: BLE001
        return None
    try:
        return oracle.capsule_span(cap)
    finally:
        del cap


def negates(got, expected):
    """Whether got holds -expected, as numbers (NaN is NaN whatever its sign)."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    a, b = got.array(), expected.array()
    if got.dtype == "bfloat16":  # the top half of a float32
        a, b = [(x.astype(np.uint32) << 16).view(np.float32) for x in (a, b)]
    if got.dtype == "complex32":  # pairs of float16
        a, b = a.view(np.float16), b.view(np.float16)
    if got.dtype.startswith(("int", "uint")):
        return bool(np.array_equal(-a, b))
    return bool(np.array_equal(-a, b, equal_nan=True))


def _relabel(expected, got, was, now):
    """The producer's `was` arrives labelled `now`, the same bits."""
    return (expected.dtype == was and got.dtype == now and got.shape == expected.shape
            and got.data == expected.data)


class NumpyFW(Framework):
    name, module = "numpy", "numpy"
    byte_orders = True

    def dtypes(self):
        return [d for d in oracle.ALL_DTYPES if oracle.numpy_dtype(d) is not None]

    def has_layout(self, layout, dtype):
        return True

    def make(self, arr, dtype):
        return as_numpy(arr, dtype)

    def build(self, case):
        arr = source(case.dtype, case.shape, case.seed)
        x = as_numpy(arr, case.dtype)
        if case.order == ">":
            x = x.astype(x.dtype.newbyteorder(">"))
        for op in case.ops:
            x = self.op(x, op)
        return x

    def op(self, x, op):
        if op[0] == "unaligned":
            # the same values one byte past an aligned address
            raw = np.zeros(x.nbytes + 1 + x.itemsize, np.uint8)
            y = np.frombuffer(raw.data, x.dtype, count=x.size, offset=1).reshape(x.shape)
            y[...] = x
            return y
        if op[0] == "index" and all(isinstance(k, int) for k in op[1]):
            return x[op[1] + (Ellipsis,)]  # a 0-d view, not a scalar
        return super().op(x, op)

    def transpose(self, x, perm):
        return x.transpose(perm)

    def broadcast(self, x, shape):
        return np.broadcast_to(x, shape)

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def own(self, x):
        return Values.of_array(np.array(x, copy=True))

    def span(self, x):
        return oracle.numpy_span(np.asarray(x))

    def consume(self, producer):
        return np.from_dlpack(producer)


class DlbridgeFW(Framework):
    """dlbridge itself as a producer: numpy memory taken in zero-copy."""

    name, module = "dlbridge", "dlbridge"

    def dtypes(self):
        return NumpyFW().dtypes()

    def make(self, arr, dtype):
        import dlbridge

        return dlbridge.from_dlpack(as_numpy(arr, dtype))

    def build(self, case):
        import dlbridge

        return dlbridge.from_dlpack(NumpyFW().build(case))

    def own(self, x):
        return oracle.read_tensor(x)

    def span(self, x):
        return oracle.span_tensor(x)

    def consume(self, producer):
        import dlbridge

        return dlbridge.from_dlpack(producer)


_TORCH_BITS = {8: "uint8", 16: "int16", 32: "int32", 64: "int64"}
# the oracle's names of torch's dtypes where they differ: float4_e2m1fn_x2,
# two float4 in a byte, exported as float4_e2m1fn of 2 lanes
_TORCH_NAMES = {"float4_e2m1fnx2": "float4_e2m1fn_x2"}
_ORACLE_NAMES = {v: k for k, v in _TORCH_NAMES.items()}


class TorchFW(Framework):
    name, module = "torch", "torch"
    negative_steps = False

    def dtypes(self):
        import torch

        return [d for d in ["bool"] + oracle.INTEGERS + ["float16", "bfloat16", "float32", "float64", "complex32",
                                                           "complex64", "complex128"] + oracle.FLOAT8
                + ["float4_e2m1fnx2"]
                if isinstance(getattr(torch, _TORCH_NAMES.get(d, d), None), torch.dtype)]

    def has_layout(self, layout, dtype):
        if layout in ("conj", "conj().imag", "conj slice"):
            return dtype.startswith("complex")
        if layout == "neg":
            return (dtype.startswith(("int", "float", "complex", "bfloat")) and dtype not in oracle.FLOAT8
                    and dtype not in oracle.LANED)
        return layout not in ("unaligned", "reversed")

    def make(self, arr, dtype):
        import torch

        arr = np.ascontiguousarray(arr)
        if arr.dtype.kind == "u" and arr.itemsize > 1:
            arr = arr.view("i%d" % arr.itemsize)  # torch 1.13 takes no numpy uint16 and wider
        t = torch.from_numpy(arr)
        tdt = getattr(torch, _TORCH_NAMES.get(dtype, dtype))
        return t if t.dtype == tdt else t.view(tdt)

    def op(self, x, op):
        import torch

        if op[0] == "conj":
            return x.conj()
        if op[0] == "neg":
            return torch._neg_view(x)
        if op[0] == "imag":
            return x.imag
        if op[0] == "as_strided":
            return x.as_strided(op[1], op[2])
        if op[0] == "unfold":
            return x.unfold(op[1], op[2], op[3])
        if op[0] == "narrow":
            return x.narrow(op[1], op[2], op[3])
        if op[0] == "requires_grad":
            if (not (x.is_floating_point() or x.is_complex()) or self.dtype_name(x) in oracle.FLOAT8
                    or self.dtype_name(x) in oracle.LANED):
                raise NotApplicable("only floating tensors require grad")
            return x.detach().clone().requires_grad_(True)
        if op[0] == "index" and any(isinstance(k, slice) and (k.step or 1) < 0 for k in op[1]):
            raise NotApplicable("torch has no negative steps")
        return super().op(x, op)

    def transpose(self, x, perm):
        return x.permute(*perm)

    def broadcast(self, x, shape):
        return x.expand(*shape)

    def contiguous(self, x):
        return x.contiguous()

    def dtype_name(self, x):
        name = str(x.dtype).replace("torch.", "")
        return _ORACLE_NAMES.get(name, name)

    def own(self, x):
        import torch

        name = self.dtype_name(x)
        if name in oracle.LANED:  # its raw bytes (torch has no arithmetic on them)
            return Values.of_array(x.detach().view(torch.uint8).contiguous().numpy(), name)
        r = x.detach().resolve_conj().resolve_neg().contiguous()
        if name == "complex32":  # pairs of float16, each element's 4 bytes as one
            pairs = torch.view_as_real(r).contiguous().numpy()
            return Values.of_array(pairs.view(np.uint32).reshape(pairs.shape[:-1]), name)
        if name in oracle.NUMPY_DTYPES and name not in ("uint16", "uint32", "uint64"):
            return Values.of_array(r.numpy(), name)
        return Values.of_array(r.view(getattr(torch, _TORCH_BITS[BITS[name]])).numpy(), name)

    # routes that take torch's own __dlpack__ (not its exchange table)
    OWN_EXPORT = ("versioned capsule", "legacy capsule", "copy=True ignored", "cure: dl_device+copy")

    def producer_fault(self, route, expected, got):
        # Tensor.__dlpack__ exports a negative view (torch._neg_view,
        # z.conj().imag) as its stored memory, unnegated; behind a wrapper
        # dlbridge cannot ask the tensor is_neg()
        if route in self.OWN_EXPORT and negates(got, expected):
            return "torch's __dlpack__ exports a negative view unnegated"
        return None

    def span(self, x):
        if x.numel() == 0:
            return None
        return oracle.span_raw(x.data_ptr(), x.shape, x.stride(), BITS[self.dtype_name(x)])

    def consume(self, producer):
        import torch

        if torch.__version__ < "2" and any(s < 0 for s in getattr(producer, "strides", ())):
            raise PeerFault("torch 1.13 aborts the process on negative strides")
        return torch.from_dlpack(producer)


class JaxFW(Framework):
    name, module = "jax", "jax"

    def load(self):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax

        jax.config.update("jax_enable_x64", True)
        return jax

    def dtypes(self):
        import jax.numpy as jnp

        return [d for d in oracle.ALL_DTYPES if hasattr(jnp, d) and d not in ("float6_e2m3fn", "float6_e3m2fn")]

    def make(self, arr, dtype):
        import jax.numpy as jnp

        return jnp.asarray(as_numpy(arr, dtype))

    def transpose(self, x, perm):
        return x.transpose(perm)

    def broadcast(self, x, shape):
        import jax.numpy as jnp

        return jnp.broadcast_to(x, shape)

    def own(self, x):
        return Values.of_array(np.array(x, copy=True))

    def span(self, x):
        if x.size == 0:
            return None
        try:
            p = x.unsafe_buffer_pointer()
        except Exception:  # noqa: BLE001
            return None
        return (p, p + x.nbytes)

    def consume(self, producer):
        import jax

        return jax.dlpack.from_dlpack(producer)


class TensorflowFW(Framework):
    name, module = "tensorflow", "tensorflow"
    exclusive = True
    DTYPES = ["bool"] + oracle.INTEGERS + ["float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                                            "float8_e4m3fn", "float8_e5m2", "int4", "uint4"]

    def load(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        return importlib.import_module("tensorflow")

    def make(self, arr, dtype):
        import tensorflow as tf

        return tf.constant(as_numpy(arr, dtype))

    def transpose(self, x, perm):
        import tensorflow as tf

        return tf.transpose(x, perm)

    def broadcast(self, x, shape):
        import tensorflow as tf

        return tf.broadcast_to(x, shape)

    def own(self, x):
        return Values.of_array(np.array(x.numpy(), copy=True))

    def span(self, x):
        import tensorflow as tf

        try:
            return oracle.capsule_span(tf.experimental.dlpack.to_dlpack(x))
        except Exception:  # noqa: BLE001
            return None

    def consume(self, producer):
        import tensorflow as tf

        # takes capsules only: the producer is asked for its (legacy) capsule
        return tf.experimental.dlpack.from_dlpack(producer.__dlpack__())


class PaddleFW(Framework):
    name, module = "paddle", "paddle"
    exclusive = True
    DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
              "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"]

    def make(self, arr, dtype):
        import paddle

        if dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            # paddle.to_tensor takes no ml_dtypes array: the bits, then a view
            return paddle.to_tensor(arr).view(getattr(paddle, dtype))
        return paddle.to_tensor(arr)

    def transpose(self, x, perm):
        return x.transpose(list(perm))

    def broadcast(self, x, shape):
        return x.expand(list(shape))

    def own(self, x):
        name = str(x.dtype).replace("paddle.", "")
        try:
            arr = x.numpy()
        except MemoryError as e:
            if any(s < 0 for s in x.strides):
                raise PeerFault("paddle imports negative strides and cannot read them back (%s)"
                                % " ".join(str(e).split())[:80])
            raise
        return Values.of_array(np.array(arr, copy=True), name)

    def consume(self, producer):
        import paddle

        return paddle.utils.dlpack.from_dlpack(producer)

    def consumer_fault(self, route, expected, got):
        if _relabel(expected, got, "uint16", "bfloat16"):
            return "paddle imports uint16 as bfloat16"
        return None

    def producer_fault(self, route, expected, got):
        # its __array__ (.numpy()) gives the bits of bfloat16 and float8
        # tensors as uint16 and int8: a producer of only __array__ says so
        if route == "cure: __array__":
            for was, now in (("bfloat16", "uint16"), ("float8_e4m3fn", "int8"), ("float8_e5m2", "int8")):
                if _relabel(expected, got, was, now):
                    return "paddle's __array__ gives %s bits as %s" % (was, now)
        return None


class PyarrowFW(Framework):
    """pyarrow arrays: one-dimensional; the named layouts 1-d, offset (a
    slice) and zero-size, and the layouts with nulls (PYARROW_NULLS)."""

    name, module = "pyarrow", "pyarrow"
    consumes = False
    DTYPES = ["bool"] + oracle.INTEGERS + ["float16", "float32", "float64"]

    def has_layout(self, layout, dtype):
        return layout in ("1-d", "offset", "zero-size") + tuple(name for name, _s, _o in PYARROW_NULLS)

    def make(self, arr, dtype):
        import pyarrow as pa

        return pa.array(np.ascontiguousarray(arr).ravel())

    def op(self, x, op):
        if op[0] == "nulls":
            # the same buffers, with a validity bitmap that makes op[1] null
            import pyarrow as pa

            valid = np.ones(len(x), bool)
            valid[list(op[1])] = False
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
            return pa.Array.from_buffers(x.type, len(x), [bitmap] + x.buffers()[1:], offset=x.offset)
        if op[0] == "index" and len(op[1]) == 1 and op[1][0].step is None:
            s = op[1][0]
            start = s.start or 0
            stop = len(x) if s.stop is None else s.stop
            return x.slice(start, stop - start)
        raise NotApplicable("a pyarrow array is one-dimensional and contiguous")

    def own(self, x):
        arr = np.array(x.to_numpy(zero_copy_only=False), copy=True)
        if arr.dtype == object:  # a bool array with nulls: True, None, False; no tensor holds them
            return Values("objects (bool with nulls)", arr.shape, b"")
        return Values.of_array(arr)

    def span(self, x):
        if x.null_count:  # its __dlpack__ refuses: the span of its values buffer
            if len(x) == 0 or x.type.bit_width % 8:
                return None
            item = x.type.bit_width // 8
            data = x.buffers()[1].address + x.offset * item
            return (data, data + len(x) * item)
        return generic_span(x)


class PyarrowTensorFW(Framework):
    """pyarrow.Tensor over a numpy view (Tensor.from_numpy keeps its
    strides): every named layout pyarrow takes. Its values are numpy's of
    the view it was made from (to_numpy() gives them back); its
    __dlpack__(copy=True) of a strided tensor is pyarrow 26's wrong copy,
    which dlbridge must not pass on."""

    name, module = "pyarrow Tensor", "pyarrow"
    consumes = False
    DTYPES = oracle.INTEGERS + ["float16", "float32", "float64"]

    def build(self, case):
        import pyarrow as pa

        view = NumpyFW().build(case)
        if not view.dtype.isnative:
            raise NotApplicable("pyarrow.Tensor: native byte order only")
        try:
            return pa.Tensor.from_numpy(view)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("pyarrow.Tensor.from_numpy(numpy %s): %s" % (case, e))

    def own(self, x):
        return Values.of_array(np.array(x.to_numpy(), copy=True))

    def span(self, x):
        return generic_span(x)


class MlxFW(Framework):
    name, module = "mlx", "mlx.core"
    DTYPES = ["bool"] + oracle.INTEGERS + ["float16", "bfloat16", "float32", "float64", "complex64"]

    def make(self, arr, dtype):
        import mlx.core as mx

        mdt = getattr(mx, "bool_" if dtype == "bool" else dtype)
        if dtype == "bfloat16":
            return mx.array(arr).view(mdt)
        x = mx.array(arr, dtype=mdt)
        mx.eval(x)
        return x

    def transpose(self, x, perm):
        return x.transpose(list(perm))

    def broadcast(self, x, shape):
        import mlx.core as mx

        return mx.broadcast_to(x, shape)

    def contiguous(self, x):
        import mlx.core as mx

        return mx.contiguous(x)

    def own(self, x):
        import mlx.core as mx

        name = str(x.dtype).replace("mlx.core.", "")
        name = "bool" if name == "bool_" else name
        if name == "bfloat16":
            return Values.of_array(np.array(x.view(mx.uint16)), name)
        return Values.of_array(np.array(x, copy=True), name)

    def consume(self, producer):
        import mlx.core as mx

        return mx.from_dlpack(producer)

    def consumer_fault(self, route, expected, got):
        # mx.from_dlpack narrows float64 to float32 and complex128 to
        # complex64 (the values rounded), without a word
        for wide, narrow in (("float64", "float32"), ("complex128", "complex64")):
            if (expected.dtype, got.dtype) == (wide, narrow) and got.shape == expected.shape:
                if Values.of_array(expected.array().astype(narrow)).data == got.data:
                    return "mx.from_dlpack narrows %s to %s" % (wide, narrow)
        return None


_ORT_TYPES = {"float": "float32", "double": "float64", "float16": "float16", "bool": "bool",
              "float8e4m3fn": "float8_e4m3fn", "float8e5m2": "float8_e5m2", "bfloat16": "bfloat16",
              "float4e2m1": "float4_e2m1fn"}
_ONNX_CODES = {"bfloat16": 16, "float8_e4m3fn": 17, "float8_e5m2": 19, "float4_e2m1fn": 23}


class OnnxruntimeFW(Framework):
    """OrtValues: dense row-major tensors (a view is made compact first)."""

    name, module = "onnxruntime", "onnxruntime"
    DTYPES = ["bool"] + oracle.INTEGERS + ["float16", "float32", "float64", "float8_e4m3fn"]

    def make(self, arr, dtype):
        import onnxruntime as ort

        arr = np.ascontiguousarray(arr)
        if dtype in _ONNX_CODES:
            return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr, _ONNX_CODES[dtype])
        return ort.OrtValue.ortvalue_from_numpy(arr)

    def build(self, case):
        # its views are numpy's, made compact: an OrtValue has no strides
        view = NumpyFW.op_all(source(case.dtype, case.shape, case.seed), case.ops)
        self._keep = view
        return self.make(view, case.dtype)

    def dtype_name(self, x):
        t = x.data_type()[len("tensor("):-1]
        return _ORT_TYPES.get(t, t)

    def own(self, x):
        try:
            return Values.of_array(np.array(x.numpy(), copy=True), self.dtype_name(x))
        except RuntimeError:  # "No corresponding Numpy type" (bfloat16): its memory, as it describes it
            return oracle.read_raw(x.data_ptr(), x.shape(), None, self.dtype_name(x))

    def span(self, x):
        if 0 in x.shape():
            return None
        return (x.data_ptr(), x.data_ptr() + x.tensor_size_in_bytes())

    def consume(self, producer):
        import onnxruntime as ort

        return ort.OrtValue.from_dlpack(producer)

    def producer_fault(self, route, expected, got):
        if _relabel(expected, got, "bool", "uint8"):
            return "OrtValue.__dlpack__ exports bool as uint8"
        # its __array__ (.numpy()) gives float8 bits as uint8: a producer of
        # only __array__ says so (the OrtValue itself names its element type)
        if route == "cure: __array__" and _relabel(expected, got, "float8_e4m3fn", "uint8"):
            return "OrtValue.numpy() gives float8 bits as uint8"
        return None


def _numpy_ops(arr, ops):
    np_fw = NumpyFW()
    for op in ops:
        arr = np_fw.op(arr, op)
    return arr


NumpyFW.op_all = staticmethod(_numpy_ops)


class TvmFfiFW(Framework):
    """tvm_ffi.Tensor: made by tvm_ffi.from_dlpack of a numpy view (it has no
    constructor of its own); its values read from its own data pointer,
    shape, strides and dtype."""

    name, module = "tvm_ffi", "tvm_ffi"

    def dtypes(self):
        return [d for d in NumpyFW().dtypes() if BITS[d] >= 8]

    def build(self, case):
        import tvm_ffi

        view = NumpyFW().build(case)
        if not view.dtype.isnative:
            raise NotApplicable("tvm_ffi takes its tensors from DLPack: native byte order only")
        try:
            return tvm_ffi.from_dlpack(view)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("tvm_ffi.from_dlpack(numpy %s): %s" % (case, e))

    def own(self, x):
        address, shape, strides, dtype = self._fields(x)
        return oracle.read_raw(address, shape, strides, dtype)

    def _fields(self, x):
        try:
            dtype = str(x.dtype)
        except ValueError:  # "DLDataType contains unknown type_code=5": it names no complex
            cap = x._to_dlpack_versioned()  # its own description of itself, read in place
            dtype = oracle.dltensor_dtype(oracle.capsule_tensor(cap)[0])
            del cap
        return x.data_ptr(), tuple(x.shape), tuple(x.strides), dtype

    def span(self, x):
        address, shape, strides, dtype = self._fields(x)
        return oracle.span_raw(address, shape, strides, BITS[dtype])

    def consume(self, producer):
        import tvm_ffi

        return tvm_ffi.from_dlpack(producer)


class ArrayApiStrictFW(Framework):
    """array_api_strict (the interop matrix's): a numpy array inside."""

    name, module = "array_api_strict", "array_api_strict"
    DTYPES = ["bool"] + oracle.INTEGERS + ["float32", "float64", "complex64", "complex128"]

    def make(self, arr, dtype):
        import array_api_strict as xp

        return xp.asarray(arr)

    def transpose(self, x, perm):
        import array_api_strict as xp

        return xp.permute_dims(x, perm)

    def broadcast(self, x, shape):
        import array_api_strict as xp

        return xp.broadcast_to(x, shape)

    def own(self, x):
        return Values.of_array(np.array(x._array, copy=True))

    def span(self, x):
        return oracle.numpy_span(x._array)

    def consume(self, producer):
        import array_api_strict as xp

        return xp.from_dlpack(producer)


HAND_LAYOUTS = [
    ("C", (4, 6), {}),
    ("null strides", (4, 6), {"strides": None}),
    ("F", (4, 6), {"strides": "F"}),
    ("reversed", (4, 6), {"strides": (-6, -1)}),
    ("transposed reversed", (4, 6), {"strides": (-1, 4)}),
    ("broadcast", (3, 6), {"strides": (0, 1)}),
    ("byte_offset 3", (4, 6), {"byte_offset": 3}),
    ("0-d, NULL shape", (), {"null_shape": True}),
    ("0-d", (), {}),
    ("zero-size", (0, 4), {}),
    ("read-only", (4, 6), {"readonly": True}),
    ("legacy", (4, 6), {"legacy": True}),
    ("legacy, null strides", (4, 6), {"legacy": True, "strides": None}),
]


class HandMadeFW(Framework):
    """oracle.HandMade: a producer written with ctypes, for what no framework
    makes: every DLPack dtype code, sub-byte elements packed and padded,
    byte_offset, NULL strides and shapes."""

    name, module = "ctypes", "ctypes"

    def dtypes(self):
        return list(oracle.ALL_DTYPES)

    def build(self, case):
        params = dict(case.ops[0][1])
        values = Values.of_array(source(case.dtype, case.shape, case.seed), case.dtype)
        return oracle.HandMade(values, **params)

    def own(self, x):
        return x.values

    def span(self, x):
        return oracle.span_raw(x.data + x.byte_offset, x.shape, x.strides, BITS[x.values.dtype], x.padded)


def hand_cases():
    """Every dtype with every hand-made layout; sub-byte ones packed and padded."""
    cases = []
    for dtype in oracle.ALL_DTYPES:
        for padded in ([False, True] if BITS[dtype] < 8 else [False]):
            for layout, shape, params in HAND_LAYOUTS:
                if padded and params.get("legacy"):
                    continue
                params = dict(params, padded=padded)
                cases.append(Case("ctypes", dtype, layout + (" padded" if padded else ""), shape,
                                  [("hand", params)], _seed("ctypes", dtype, layout, padded)))
    return cases


def draw_hand_case(d):
    dtype = d.sampled_from(oracle.ALL_DTYPES)
    ndim = d.integers(0, 3)
    shape = tuple(d.integers(0, 4) for _ in range(ndim))
    params = {"strides": tuple(d.integers(-7, 7) for _ in range(ndim)) if d.integers(0, 2) else
              d.sampled_from(["C", "F", None]),
              "byte_offset": d.integers(0, 9), "padded": BITS[dtype] < 8 and bool(d.integers(0, 1)),
              "readonly": bool(d.integers(0, 1))}
    params["legacy"] = not params["padded"] and not params["readonly"] and bool(d.integers(0, 1))
    return Case("ctypes", dtype, "%s %s" % (shape, params), shape, [("hand", params)], d.integers(0, 2 ** 31))


ALL = {fw.name: fw for fw in (NumpyFW(), DlbridgeFW(), TorchFW(), JaxFW(), TensorflowFW(), PaddleFW(),
                              PyarrowFW(), PyarrowTensorFW(), MlxFW(), OnnxruntimeFW(), TvmFfiFW(), HandMadeFW(),
                              ArrayApiStrictFW())}
PEERS = ["jax", "tensorflow", "paddle", "pyarrow", "mlx", "onnxruntime", "tvm_ffi"]


def peers_required():
    return bool(os.environ.get("DLBRIDGE_PEERS_REQUIRED"))


def require(name):
    """The adapter of a framework, loaded; a missing one skips the test file
    (fails it under DLBRIDGE_PEERS_REQUIRED, the peer environment's run,
    whose pins name every framework here). torch 2 is a peer; Debian's
    torch 1.13 is tested as it is."""
    import pytest

    fw = ALL[name]
    other = [o for o in ALL.values() if o.exclusive and o is not fw and o.module in sys.modules]
    if fw.exclusive and other:
        pytest.skip("%s cannot be imported beside %s (run its file in a process of its own, as "
                    "47-values.sh does)" % (name, other[0].name), allow_module_level=True)
    try:
        fw.load()
        if name != "numpy" and ml_dtypes is None and name in PEERS:
            raise ImportError("ml_dtypes")
    except ImportError as e:
        if peers_required():
            pytest.fail("%s pinned in python/requirements/peers.txt but missing: %s" % (name, e), pytrace=False)
        pytest.skip("%s missing here (%s): the peer environment's" % (name, e), allow_module_level=True)
    return fw


def consumers_here():
    """The consumers of DLPack that can be loaded into this process beside
    the others (not TensorFlow or Paddle: their own files test them)."""
    out = []
    for name in ("numpy", "torch", "jax", "mlx", "onnxruntime", "tvm_ffi"):
        try:
            ALL[name].load()
        except ImportError:
            continue
        out.append(ALL[name])
    return out


# ------------------------------------------------------------------ the check of one case


def check_case(fw, case, consumers=None):
    """fw's tensor for `case` over every route into dlbridge and on, each
    result compared with fw's own values."""
    ck = oracle.Checker(case)
    try:
        x = fw.build(case)
        expected = fw.own(x)
    except NotApplicable:
        oracle.TALLY.add("make", "n/a")
        return
    except Exception as e:  # noqa: BLE001  the framework cannot make the case (torch 1.13 has no
        # negative bfloat16 view, Paddle no float8 expand): nothing to hand over
        if fw.name in ("numpy", "dlbridge", "ctypes"):
            raise  # the oracle's own making: a bug here
        oracle.TALLY.add("make", "n/a")
        oracle.TALLY.errors[("make", "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:100]))] += 1
        return
    source = fw.span(x)
    oracle.check_producer(ck, x, expected, source, consumers or (), fault=fw.producer_fault)
    if fw.name == "numpy":
        oracle.check_numpy_memory(ck, x, expected)
    ck.done()


def check_consumer(fw, case):
    """A dlbridge tensor of numpy's values for `case` (zero-copy, or the
    cure's copy where numpy refuses) consumed by fw."""
    import dlbridge

    try:
        arr = NumpyFW().build(case)
    except NotApplicable:
        oracle.TALLY.add("make", "n/a")
        return
    expected = Values.of_array(arr)
    ck = oracle.Checker("%s -> dlbridge -> %s" % (case, fw.name))
    try:
        t = dlbridge.from_dlpack(arr)
    except Exception:  # noqa: BLE001  (the numpy route's refusals are numpy's file's)
        oracle.TALLY.add("make", "n/a")
        return
    oracle.consume_with(ck, fw, t, expected)
    ck.done()
