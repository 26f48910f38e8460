"""The interop matrix: every producer against every consumer, directly and
through dlbridge, over a range of dtypes and layouts.

    python tests/interop/matrix.py [--json OUT] [--pairs PRODUCER:CONSUMER,...]

runs with the peer interpreter (scripts/peers-env) and PYTHONPATH=<build>/python
and writes one JSON document: for every (producer, consumer, case) the
outcome of the direct exchange, ``consumer.from_dlpack(producer_tensor)``,
and of the exchange through dlbridge,
``consumer.from_dlpack(dlbridge.from_dlpack(producer_tensor))``, each
"zero-copy", "copy", "fail" (with the exception or the failed check),
"n/a" (the producer cannot make that case) or "crash" (the worker died in it).

An exchange works when the consumer's result (and dlbridge's tensor on the
way) has the producer's dtype, shape and values, read by the value oracle
(tests/values/oracle.py: each framework's own values of what it holds,
never through another DLPack consumer); when a write into the producer's
memory shows through every view that shares it; and when, after everything
is dropped, the producer's tensor is freed (every deleter ran) and
dlbridge.live_exports() is back at its start value. It is "zero-copy" when
the consumer's result shares the producer's memory (or has no elements),
else "copy": a correct copy, which expectations.py names where a consumer
promises zero-copy.

TensorFlow and Paddle cannot be imported into one process (the second
import crashes in protobuf registration), so the pairs run in three worker
processes: the pairs with TensorFlow, the pairs with Paddle, the rest. A
worker that crashes is restarted after the case it died in.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
# The value oracle (tests/values/oracle.py) reads what arrives: each
# framework's own values of its result (tests/values/frameworks.py),
# compared with the producer's, and the memory spans that tell a zero-copy
# from a copy.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "values"))

from oracle import NotApplicable  # noqa: E402  one class: the adapters raise it too

PRODUCERS = ["numpy", "jax", "tvm_ffi", "tensorflow", "tensorflow-capsule", "paddle",
             "paddle-capsule", "pyarrow", "array_api_strict", "dlbridge"]
CONSUMERS = ["numpy", "jax", "tvm_ffi", "tensorflow", "paddle", "array_api_strict", "dlbridge"]

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "complex64", "complex128"]
LAYOUTS = ["0-d", "zero-size", "strided", "transposed", "offset", "readonly"]
LAYOUT_DTYPES = ["float32", "complex64"]

# Every dtype contiguous, every layout with two dtypes.
CASES = (["%s/contiguous" % d for d in DTYPES]
         + ["%s/%s" % (d, layout) for layout in LAYOUTS for d in LAYOUT_DTYPES])

# -- JAX's refused dtypes (issue 33): arrays JAX holds but does not export,
# made by the JAX producer only (n/a for the others): a string array
# (JaxRuntimeError "PjRt-compatible backend only") and the sub-byte
# integers ("XLA type S4 has no DLPack equivalent"), which dlbridge copies
# one element per byte (DLPack 1.1's padded sub-byte layout).
JAX_REFUSED_CASES = ["string/contiguous", "int4/contiguous", "uint4/contiguous", "int2/contiguous"]
CASES = CASES + JAX_REFUSED_CASES

# Consumers whose from_dlpack promises to share the producer's host memory
# (for every layout they accept): a copy they hand back is a correct copy
# only where expectations.COPY_RULES names why.
ZERO_COPY_CONSUMERS = {"numpy", "tvm_ffi", "dlbridge", "array_api_strict"}

# Frameworks that cannot be loaded into one process with each other.
EXCLUSIVE = ("tensorflow", "paddle")

# --- torch 2, mlx, onnxruntime (issue 34) -----------------------------------
# torch: torch.Tensor objects, and torch.utils.dlpack.to_dlpack's bare
# (legacy) capsules; mlx: mx.array, consumed by mx.from_dlpack; onnxruntime:
# OrtValue (dense row-major tensors only), consumed by OrtValue.from_dlpack.
# They load beside every other framework here; their pairs with the frameworks
# of the base group run in a worker of their own.
PRODUCERS += ["torch", "torch-capsule", "mlx", "onnxruntime"]
CONSUMERS += ["torch", "mlx", "onnxruntime"]
# Both promise to share the producer's memory (torch.from_dlpack;
# OrtValue.from_dlpack: "No data is copied"); mx.from_dlpack only "when possible".
ZERO_COPY_CONSUMERS |= {"torch", "onnxruntime"}
NEW_FRAMEWORKS = ("torch", "mlx", "onnxruntime")
# -----------------------------------------------------------------------------


def framework(name):
    """'tensorflow-capsule' -> 'tensorflow'."""
    return name.split("-")[0]


def group_of(producer, consumer):
    names = {framework(producer), framework(consumer)}
    for g in EXCLUSIVE:
        if g in names:
            return g
    if names & set(NEW_FRAMEWORKS):
        return "torch-mlx-ort"
    return "base"


def all_pairs():
    return [(p, c) for p in PRODUCERS for c in CONSUMERS]


# ------------------------------------------------------------------ worker side




class CheckFailed(Exception):
    """A check of the result failed (values, zero-copy, writes, deleters)."""


def _np():
    import numpy as np

    return np


_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _base(dtype):
    """A 4 x 6 array of `dtype` with distinct-ish small values."""
    np = _np()
    import ml_dtypes  # noqa: F401  registers bfloat16 and the float8 types

    values = (np.arange(24, dtype=np.float64).reshape(4, 6) % 7) - 2
    if dtype == "bool":
        return (np.arange(24).reshape(4, 6) % 3) == 0
    if dtype.startswith("uint"):
        values = np.abs(values)
    if dtype.startswith("complex"):
        return (values + 1j * (values[::-1] + 0.5)).astype(dtype)
    dt = getattr(ml_dtypes, dtype) if dtype in _ML_DTYPES else getattr(np, dtype)
    return values.astype(dt)


def _numpy_layout(a, layout):
    """The numpy view a layout names (views share `a`'s memory)."""
    if layout == "contiguous":
        return a
    if layout == "0-d":
        return a[1, 2, ...]
    if layout == "zero-size":
        return a[0:0]
    if layout == "strided":
        return a[:, ::2]
    if layout == "transposed":
        return a.T
    if layout == "offset":
        return a[1:]
    if layout == "readonly":
        v = a.view()
        v.flags.writeable = False
        return v
    raise ValueError(layout)


def _framework_layout(x, layout, transpose):
    """The same layout made with a framework's own indexing (copies or views)."""
    if layout == "contiguous":
        return x
    if layout == "0-d":
        return x[1, 2]
    if layout == "zero-size":
        return x[0:0, ...]
    if layout == "strided":
        return x[:, ::2]
    if layout == "transposed":
        return transpose(x)
    if layout == "offset":
        return x[1:, ...]
    raise NotApplicable("the framework has no read-only tensors")


def _make_jax_refused(producer, case):
    """The JAX_REFUSED_CASES, as make() returns them."""
    np = _np()
    if producer != "jax":
        raise NotApplicable("a case of JAX's refused dtypes")
    import jax
    import jax.numpy as jnp

    dtype = case.split("/")[0]
    if dtype == "string":
        values = np.array(["ab", "cd", "e"], dtype=np.dtypes.StringDType())
        x = jax.device_put(values, jax.devices()[0])
        return x, values, x, None
    values = (np.arange(24).reshape(4, 6) % (4 if dtype.endswith("2") else 16))
    if not dtype.startswith("u"):
        values = values - (2 if dtype.endswith("2") else 8)
    x = jnp.asarray(values, getattr(jnp, dtype))
    return x, np.asarray(x).copy(), x, None


def make(producer, case):
    """(tensor or capsule to hand over, expected numpy array, root object whose
    freeing proves every deleter ran (or None), numpy array whose memory the
    tensor shares and may be written (or None))."""
    np = _np()
    if case in JAX_REFUSED_CASES:
        return _make_jax_refused(producer, case)
    dtype, layout = case.split("/")
    base = _base(dtype)
    expected = _numpy_layout(base, layout)
    fw = framework(producer)
    if fw in ("numpy", "dlbridge", "tvm_ffi"):
        view = _numpy_layout(base, layout)
        if fw == "numpy":
            return view, expected.copy(), view, view
        if fw == "dlbridge":
            import dlbridge

            return dlbridge.from_dlpack(view), expected.copy(), view, view
        import tvm_ffi

        try:
            t = tvm_ffi.from_dlpack(view)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("tvm_ffi.from_dlpack(numpy %s): %s: %s" % (case, type(e).__name__, e))
        return t, expected.copy(), view, view
    if fw == "jax":
        import jax.numpy as jnp

        x = _framework_layout(jnp.asarray(base), layout, lambda t: t.T)
        return x, expected.copy(), x, None
    if fw == "array_api_strict":
        import array_api_strict as xp

        try:
            x = xp.asarray(base)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("array_api_strict.asarray(%s): %s" % (dtype, e))
        x = _framework_layout(x, layout, lambda t: t.T)
        return x, expected.copy(), x, None
    if fw == "tensorflow":
        import tensorflow as tf

        try:
            x = tf.constant(base)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("tf.constant(%s): %s" % (dtype, e))
        x = _framework_layout(x, layout, tf.transpose)
        if producer == "tensorflow-capsule":
            return tf.experimental.dlpack.to_dlpack(x), expected.copy(), x, None
        return x, expected.copy(), x, None
    if fw == "paddle":
        import paddle

        try:
            if dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                # to_tensor takes no ml_dtypes array: cast from float32 (exact here).
                x = paddle.to_tensor(base.astype(np.float32)).astype(dtype)
            else:
                x = paddle.to_tensor(base)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("paddle.to_tensor(%s): %s" % (dtype, " ".join(str(e).split())[:120]))
        x = _framework_layout(x, layout, lambda t: t.T)
        if producer == "paddle-capsule":
            return paddle.utils.dlpack.to_dlpack(x), expected.copy(), x, None
        return x, expected.copy(), x, None
    if fw == "pyarrow":
        import pyarrow as pa

        flat = base.ravel()
        if layout not in ("contiguous", "offset", "zero-size"):
            raise NotApplicable("pyarrow arrays are one-dimensional and contiguous")
        try:
            arr = pa.array(flat)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("pyarrow.array(%s): %s" % (dtype, e))
        if layout == "offset":
            arr, expected = arr.slice(1), flat[1:]
        elif layout == "zero-size":
            arr, expected = arr.slice(0, 0), flat[0:0]
        else:
            expected = flat
        return arr, np.array(expected, copy=True), arr, None
    if fw in NEW_FRAMEWORKS:
        return _make_new(producer, fw, dtype, layout, base, expected)
    raise ValueError(producer)


# --- torch 2, mlx, onnxruntime producers (issue 34) --------------------------

# numpy dtype name -> the type of the same size whose bits torch.from_numpy
# and OrtValue take for the dtypes numpy itself lacks.
_CARRIER = {"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
# ONNX TensorProto element types of those dtypes.
_ONNX_TYPES = {"bfloat16": 16, "float8_e4m3fn": 17, "float8_e5m2": 19}


def _make_new(producer, fw, dtype, layout, base, expected):
    np = _np()
    if fw == "torch":
        import torch

        # torch.from_numpy shares base's memory and its storage keeps base
        # alive: base's weak reference proves every deleter ran.
        if dtype in _CARRIER:
            t = torch.from_numpy(base.view(_CARRIER[dtype])).view(getattr(torch, dtype))
        else:
            t = torch.from_numpy(base)
        x = _framework_layout(t, layout, lambda v: v.t())
        writable = _numpy_layout(base, layout)
        if producer == "torch-capsule":
            return torch.utils.dlpack.to_dlpack(x), expected.copy(), base, writable
        return x, expected.copy(), base, writable
    if fw == "mlx":
        import mlx.core as mx

        if dtype.startswith("float8") or dtype == "complex128":
            raise NotApplicable("mlx has no %s" % dtype)
        # mx.array makes float32 of float64 unless told the dtype.
        x = mx.array(base, dtype=getattr(mx, dtype if dtype != "bool" else "bool_"))
        x = _framework_layout(x, layout, lambda v: v.T)
        mx.eval(x)
        return x, expected.copy(), None, None
    if fw == "onnxruntime":
        import onnxruntime as ort

        if layout in ("strided", "transposed", "readonly"):
            raise NotApplicable("an OrtValue is a dense row-major tensor and cannot be read-only")
        view = _numpy_layout(base, layout)
        try:
            if dtype in _ONNX_TYPES:
                x = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                    np.ascontiguousarray(view).view(_CARRIER[dtype]), _ONNX_TYPES[dtype])
            else:
                x = ort.OrtValue.ortvalue_from_numpy(view)
        except Exception as e:  # noqa: BLE001
            raise NotApplicable("OrtValue.ortvalue_from_numpy(%s): %s" % (dtype, " ".join(str(e).split())[:120]))
        # The OrtValue keeps the numpy array it was made over.
        return x, expected.copy(), None, view
    raise ValueError(producer)

# -----------------------------------------------------------------------------


def _is_capsule(x):
    return type(x).__name__ == "PyCapsule"


def consume(consumer, x):
    """consumer.from_dlpack(x); capsule-only consumers get x's capsule."""
    if consumer == "numpy":
        return _np().from_dlpack(x)
    if consumer == "jax":
        import jax

        return jax.dlpack.from_dlpack(x)
    if consumer == "tvm_ffi":
        import tvm_ffi

        return tvm_ffi.from_dlpack(x)
    if consumer == "tensorflow":
        import tensorflow as tf

        # Takes capsules only: a producer object is asked for its capsule.
        return tf.experimental.dlpack.from_dlpack(x if _is_capsule(x) else x.__dlpack__())
    if consumer == "paddle":
        import paddle

        return paddle.utils.dlpack.from_dlpack(x)
    if consumer == "array_api_strict":
        import array_api_strict as xp

        return xp.from_dlpack(x)
    if consumer == "dlbridge":
        import dlbridge

        return dlbridge.from_dlpack(x)
    # --- torch 2, mlx, onnxruntime consumers (issue 34) ---
    if consumer == "torch":
        import torch

        return torch.from_dlpack(x)
    if consumer == "mlx":
        import mlx.core as mx

        return mx.from_dlpack(x)
    if consumer == "onnxruntime":
        import onnxruntime as ort

        return ort.OrtValue.from_dlpack(x)
    raise ValueError(consumer)


def _adapter(name):
    import frameworks

    return frameworks.ALL[framework(name)]


def _values(who, obj):
    """The oracle's Values of a result, as its framework says them."""
    import oracle

    try:
        return _adapter(who).own(obj)
    except oracle.NotApplicable as e:
        raise CheckFailed("the %s result cannot be read: %s" % (who, e))


def _span(who, obj):
    """The memory of a producer's tensor or a consumer's result, or None."""
    import oracle

    if _is_capsule(obj):
        return oracle.capsule_span(obj)
    return _adapter(who).span(obj)


def _bump(writable):
    """Writes a new value into the first element."""
    np = _np()
    idx = (0,) * writable.ndim
    if writable.dtype == np.bool_:
        writable[idx] = not writable[idx]
    else:
        writable[idx] = writable[idx] + writable.dtype.type(1)


def _check_views(views, expected, producer_span, writable):
    """Checks the values of every view against the producer's and that a
    write into the producer's memory shows through each view that shares it;
    the outcome, "zero-copy" (the consumer's result shares the producer's
    memory, or has no elements) or "copy". Holds no reference after."""
    import oracle

    want = oracle.Values.of_array(expected)
    shared = []
    for who, v in views:
        got = _values(who, v)
        if got.dtype != want.dtype:
            raise CheckFailed("%s result has dtype %s, want %s" % (who, got.dtype, want.dtype))
        diff = oracle.compare(want, got)
        if diff is not None:
            raise CheckFailed("%s result has other values than the producer's: %s" % (who, diff))
        if oracle.overlap(producer_span, _span(who, v)):
            shared.append((who, v))
    last = views[-1]
    outcome = "zero-copy" if any(v is last[1] for _w, v in shared) or not expected.size else "copy"
    # JAX arrays are immutable, and JAX keeps the host copy it made once:
    # its view of memory written under it is not asked
    shared = [(who, v) for who, v in shared if who != "jax"]
    if writable is not None and writable.size and writable.flags.writeable and shared:
        _bump(writable)
        want = oracle.Values.of_array(writable)
        for who, v in shared:
            if oracle.compare(want, _values(who, v)) is not None:
                raise CheckFailed("a write into the producer's memory is not seen through "
                                  "the %s view that shares it" % who)
    return outcome


def run_case(producer, consumer, case, via):
    """'zero-copy' or 'copy', or raises (NotApplicable, CheckFailed, or the
    exchange's error)."""
    import dlbridge

    start_exports = dlbridge.live_exports()
    x, expected, root, writable = make(producer, case)
    try:
        ref = weakref.ref(root)
    except TypeError:
        ref = None
    producer_span = _span(producer, x)
    views = []
    if via:
        mid = dlbridge.from_dlpack(x)
        views.append(("dlbridge", mid))
        result = consume(consumer, mid)
        del mid
    else:
        result = consume(consumer, x)
    views.append((consumer, result))
    del x

    outcome = _check_views(views, expected, producer_span, writable)
    del views, result, writable, root
    if (ref is not None and ref() is not None) or dlbridge.live_exports() != start_exports:
        gc.collect()  # only when reference counting alone did not free everything
    if ref is not None and ref() is not None:
        raise CheckFailed("the producer's tensor is still alive after every view was "
                          "dropped (a deleter did not run)")
    if dlbridge.live_exports() != start_exports:
        raise CheckFailed("dlbridge.live_exports() is %d, was %d before the exchange"
                          % (dlbridge.live_exports(), start_exports))
    return outcome


def _outcome(producer, consumer, case, via):
    try:
        return {"status": run_case(producer, consumer, case, via)}
    except NotApplicable as e:
        return {"status": "n/a", "reason": str(e)}
    except CheckFailed as e:
        return {"status": "fail", "error": "CheckFailed", "reason": str(e)}
    except Exception as e:  # noqa: BLE001
        return {"status": "fail", "error": type(e).__name__,
                "reason": " ".join(str(e).split())[:400]}


def worker(tasks_file, out_file):
    """Runs the tasks (one 'producer consumer case' per line), appending a
    'start' line before each and its result after, so a crash can be told."""
    with open(tasks_file) as f:
        tasks = [line.split() for line in f if line.strip()]
    with open(out_file, "a", buffering=1) as out:
        for producer, consumer, case in tasks:
            out.write(json.dumps({"start": [producer, consumer, case]}) + "\n")
            out.flush()
            rec = {"producer": producer, "consumer": consumer, "case": case,
                   "direct": _outcome(producer, consumer, case, False),
                   "dlbridge": _outcome(producer, consumer, case, True)}
            out.write(json.dumps(rec) + "\n")


# ------------------------------------------------------------------ parent side


def _versions(python):
    code = r"""
import json, importlib
out = {}
for name, mod in [("numpy", "numpy"), ("jax", "jax"), ("jaxlib", "jaxlib"), ("ml_dtypes", "ml_dtypes"),
                  ("tvm_ffi", "tvm_ffi"), ("pyarrow", "pyarrow"), ("array_api_strict", "array_api_strict"),
                  ("tensorflow", "tensorflow"), ("paddle", "paddle"), ("torch", "torch"), ("mlx", "mlx"),
                  ("onnxruntime", "onnxruntime"), ("dlbridge", "dlbridge")]:
    try:
        import importlib.metadata as md
        dist = {"tensorflow": "tensorflow_cpu", "paddle": "paddlepaddle", "tvm_ffi": "apache-tvm-ffi",
                "dlbridge": None}.get(name, name)
        out[name] = md.version(dist) if dist else importlib.import_module(mod).__version__
    except Exception as e:
        out[name] = None
print(json.dumps(out))
"""
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        return {}


def _run_group(python, tasks, workdir, name, env):
    """Runs tasks in worker processes until all have a result; a case a worker
    died in is recorded as a crash and the worker restarted after it."""
    results = []
    remaining = list(tasks)
    restarts = 0
    out_file = os.path.join(workdir, "%s.jsonl" % name)
    while remaining:
        tasks_file = os.path.join(workdir, "%s.tasks" % name)
        with open(tasks_file, "w") as f:
            for t in remaining:
                f.write(" ".join(t) + "\n")
        if os.path.exists(out_file):
            os.remove(out_file)
        proc = subprocess.run([python, os.path.abspath(__file__), "--worker", tasks_file, out_file],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started, done = None, []
        with open(out_file) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "start" in rec:
                    started = tuple(rec["start"])
                else:
                    done.append(rec)
                    started = None
        results.extend(done)
        finished = {(r["producer"], r["consumer"], r["case"]) for r in done}
        remaining = [t for t in remaining if tuple(t) not in finished]
        if proc.returncode != 0 or remaining:
            tail = " ".join(proc.stderr.strip().splitlines()[-1:])[:300]
            if started is None:
                if not remaining:
                    break
                started = tuple(remaining[0])
            reason = "the worker process died (exit %d): %s" % (proc.returncode, tail)
            crash = {"status": "crash", "reason": reason}
            p, c, case = started
            results.append({"producer": p, "consumer": c, "case": case,
                            "direct": crash, "dlbridge": crash})
            remaining = [t for t in remaining if tuple(t) != started]
            restarts += 1
            if restarts > 20:
                for p, c, case in remaining:
                    results.append({"producer": p, "consumer": c, "case": case,
                                    "direct": crash, "dlbridge": crash})
                break
    return results


def run_matrix(python=None, pairs=None, cases=None, jobs=3):
    """Runs the matrix; returns the JSON document as a dict."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    python = python or sys.executable
    pairs = pairs or all_pairs()
    cases = cases or CASES
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("JAX_ENABLE_X64", "1")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    groups = {}
    results = []
    blocked = "tensorflow and paddle cannot be imported into one process (importing paddle " \
              "after tensorflow crashes in protobuf's registration of paddle's operators)"
    for p, c in pairs:
        names = {framework(p), framework(c)}
        if set(EXCLUSIVE) <= names:
            for case in cases:
                rec = {"status": "fail", "error": "ProcessConflict", "reason": blocked}
                results.append({"producer": p, "consumer": c, "case": case,
                                "direct": rec, "dlbridge": rec})
            continue
        groups.setdefault(group_of(p, c), []).extend([p, c, case] for case in cases)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="dlbridge-interop-") as workdir:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_group, python, tasks, workdir, name, env)
                       for name, tasks in sorted(groups.items())]
            for fut in futures:
                results.extend(fut.result())
    order = {(p, c): i for i, (p, c) in enumerate(all_pairs())}
    case_order = {case: i for i, case in enumerate(CASES)}
    results.sort(key=lambda r: (order.get((r["producer"], r["consumer"]), 0),
                                case_order.get(r["case"], 0)))
    return {"python": python, "versions": _versions(python), "seconds": round(time.time() - t0, 1),
            "producers": PRODUCERS, "consumers": CONSUMERS, "cases": list(cases),
            "results": results}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT", help="write the result here (default: standard output)")
    ap.add_argument("--pairs", help="PRODUCER:CONSUMER,... (default: all)")
    ap.add_argument("--cases", help="DTYPE/LAYOUT,... (default: all)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",")] if args.pairs else None
    cases = args.cases.split(",") if args.cases else None
    doc = run_matrix(pairs=pairs, cases=cases)
    text = json.dumps(doc, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
