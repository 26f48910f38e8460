"""What the interop matrix is expected to show: every failure it may have,
with the side at fault and why dlbridge cannot work around it, and every
copy that a consumer promising zero-copy hands back, with why.

An exchange has one of three outcomes: zero-copy (the consumer shares the
producer's memory), copy (a correct copy: the producer's values in other
memory) and fail (an error, or a check of values, lifetimes or writes that
failed). A failure the matrix shows that no rule here names fails the
tests, and so does a rule whose exchanges no longer fail; likewise a copy
by a zero-copy consumer that no copy rule names, and a copy rule whose
exchanges share memory now: the table is the record of how today's
frameworks meet each other, kept true by the tests.
"""

import fnmatch
import re

# reason id -> (side at fault, what the message says (a regex), why it fails,
# and why dlbridge cannot work around it when the exchange goes through
# dlbridge; None when going through dlbridge cures it).
REASONS = {
    "process-conflict": (
        "environment",
        r"cannot be imported into one process",
        "TensorFlow 2.21 and Paddle 3.3 cannot be loaded into one process: importing paddle after "
        "tensorflow crashes with SIGSEGV in protobuf while Paddle registers its operators.",
        "an exchange in memory needs both frameworks in one process; dlbridge cannot load them "
        "together either.",
    ),
    "object-consumer-given-capsule": (
        "consumer",
        r"has no attribute '__dlpack__'|must have __dlpack__ and __dlpack_device__",
        "numpy.from_dlpack, jax.dlpack.from_dlpack and array_api_strict.from_dlpack take only "
        "objects with __dlpack__ (as the array API standard says), so the bare capsule of a "
        "capsule-only producer (tf.experimental.dlpack.to_dlpack, paddle.utils.dlpack.to_dlpack) "
        "is refused.",
        None,
    ),
    "paddle-device-id-none": (
        "producer: Paddle",
        r"device_from_local_hardware_id\(\): incompatible function arguments",
        "Paddle's Tensor.__dlpack_device__() returns (DLDeviceType.kDLCPU, None): the device id "
        "must be an int (array API standard, __dlpack_device__), and JAX passes the None on to "
        "its device lookup, which raises TypeError.",
        None,
    ),
    "numpy-readonly-legacy": (
        "consumer: tvm-ffi",
        r"Cannot export readonly array since signalling readonly is unsupported",
        "tvm_ffi.from_dlpack asks numpy for a legacy (unversioned) capsule, which cannot say the "
        "memory is read-only, so numpy refuses to export its read-only array (BufferError); "
        "dlbridge asks for a versioned capsule and hands tvm-ffi one.",
        None,
    ),
    "legacy-consumer-read-only": (
        "consumer: TensorFlow",
        r"Cannot export readonly array since signalling readonly",
        "tf.experimental.dlpack.from_dlpack takes only legacy capsules, which have no read-only "
        "flag, and asks for them with __dlpack__() (copy=None); numpy refuses to export its "
        "read-only arrays in them (BufferError) rather than copy; dlbridge hands TensorFlow a "
        "writable copy, as the array API standard allows with copy=None.",
        None,
    ),
    "jax-compact-strides": (
        "consumer: JAX",
        r"Only DLPack tensors with trivial \(compact\) striding are supported",
        "jax.dlpack.from_dlpack takes only compact layouts (a permutation of a contiguous buffer); "
        "a strided view (every second column) is refused with JaxRuntimeError UNIMPLEMENTED.",
        "dlbridge hands the consumer the producer's memory as it is (zero-copy); a compact copy "
        "is the consumer's to make.",
    ),
    "tf-compact-strides": (
        "consumer: TensorFlow",
        r"Invalid strides array from DLPack",
        "tf.experimental.dlpack.from_dlpack takes only row-major compact tensors; strided and "
        "transposed views are refused (InvalidArgumentError).",
        "dlbridge hands the consumer the producer's memory as it is (zero-copy); a compact copy "
        "is the consumer's to make.",
    ),
    "tf-consumer-float8": (
        "consumer: TensorFlow",
        r"Unsupported Type Codes: (10|12)",
        "TensorFlow's importer knows no float8 DLPack codes (kDLFloat8_e4m3fn = 10, "
        "kDLFloat8_e5m2 = 12), although TensorFlow has both dtypes.",
        "the dtype is what it is; dlbridge cannot relabel it for the consumer.",
    ),
    "tf-producer-float8": (
        "producer: TensorFlow",
        r"DT_FLOAT8_E\w+ is not supported by dlpack",
        "TensorFlow refuses to export its float8 tensors (DLPack 0.8 and later has codes for "
        "both), and raises InvalidArgumentError where the array API standard asks for "
        "BufferError. dlbridge.from_dlpack of the tensor object takes the refusal as any other "
        "and copies the tensor through its __array__() (an ml_dtypes float8 array).",
        "tf.experimental.dlpack.to_dlpack itself refuses: there is no capsule, and no object "
        "to ask for a host copy.",
    ),
    "pyarrow-bit-packed-bool": (
        "producer: pyarrow",
        r"Bit-packed boolean data type not supported by DLPack",
        "Arrow stores booleans one bit each, which DLPack cannot describe; pyarrow refuses with "
        "ArrowTypeError (the array API standard asks for BufferError). dlbridge.from_dlpack "
        "takes the refusal as any other and copies the array through its __array__() (one byte "
        "per value).",
        None,
    ),
    "paddle-uint16-is-bfloat16": (
        "Paddle",
        r"result has dtype bfloat16, want uint16|does not support the dtype 'bfloat16'",
        "Paddle has no uint16 of its own (it once stored bfloat16 as uint16): paddle.to_tensor of a "
        "numpy uint16 array makes a tensor that Paddle exports with the bfloat16 DLPack code, and "
        "a uint16 tensor paddle.utils.dlpack.from_dlpack takes in says it is paddle.bfloat16: "
        "the values arrive relabelled.",
        "dlbridge receives bfloat16 from Paddle and cannot know it was meant as uint16, and "
        "Paddle names the uint16 it is given bfloat16.",
    ),
    # -- JAX's refused dtypes (issue 33) --
    "jax-string-array": (
        "producer: JAX",
        r"This operation is implemented for a PjRt-compatible backend only",
        "JAX holds a string array in IFRT's BasicStringArray, not a PjRt buffer, and its "
        "exporter raises JaxRuntimeError (the array API standard asks for BufferError).",
        "its host copy is a numpy StringDType array, which DLPack cannot describe: dlbridge "
        "names the refusal (DLB_ERR_UNSUPPORTED_DTYPE) with JAX's words.",
    ),
    "jax-producer-subbyte": (
        "producer: JAX",
        r"XLA type [SU][24] has no DLPack equivalent",
        "JAX 0.12 refuses to export int4, uint4, int2 and uint2 arrays (JaxRuntimeError "
        "UNIMPLEMENTED), although DLPack 1.1 describes them; dlbridge.from_dlpack copies them "
        "one element per byte (the padded sub-byte layout).",
        None,
    ),
    "consumer-subbyte": (
        "consumer: numpy, JAX, Paddle, array_api_strict, torch, mlx",
        r"Unsupported dtype in DLTensor|unsupported DLPack (unsigned )?integer width|"
        r"Unsupported DLDataType.bits|Unsupported kU?Int bits [24]|Cannot convert array to mlx",
        "these importers know no integers of 2 or 4 bits, packed or padded (torch 2 has int4 "
        "and int2 dtypes, but its from_dlpack takes none of them).",
        "the consumer refuses the dtype itself.",
    ),
    "legacy-consumer-padded-subbyte": (
        "consumer: TensorFlow, tvm-ffi, onnxruntime",
        r"padded to a byte each, and a legacy DLManagedTensor has no flag",
        "these consumers ask for legacy capsules, which cannot carry DLPack 1.1's "
        "IS_SUBBYTE_TYPE_PADDED flag; dlbridge refuses the legacy export "
        "(DLB_ERR_UNSUPPORTED_DTYPE) rather than let the bytes be read as packed elements.",
        "a padded sub-byte tensor cannot be described in a legacy capsule.",
    ),
    "array-api-strict-dtypes": (
        "consumer: array_api_strict",
        r"The array_api_strict namespace does not support the dtype",
        "array_api_strict accepts only the standard's dtypes: no float16, bfloat16 or float8.",
        "the consumer refuses the dtype itself.",
    ),
}

# --- torch 2, mlx, onnxruntime (issue 34) ------------------------------------
REASONS.update({
    "ort-consumer-dtypes": (
        "consumer: onnxruntime",
        r"GetOrtValueDataType.*Unsupported code (5|6|10|12)\b|DLDataType contains unknown type_code=5",
        "OrtValue.from_dlpack knows no kDLComplex (5), kDLBool (6) or float8 (10, 12) DLPack codes, "
        "although ONNX has complex, bool and float8 element types: it raises RuntimeError (ValueError "
        "for complex from tvm-ffi, checked in its Python layer).",
        "the dtype is what it is; dlbridge cannot relabel it for the consumer.",
    ),
    "ort-compact-only": (
        "consumer: onnxruntime",
        r"ORT only supports contiguous tensor",
        "OrtValue.from_dlpack takes only compact row-major tensors; strided and transposed views are "
        "refused with RuntimeError.",
        "dlbridge hands the consumer the producer's memory as it is (zero-copy); a compact copy "
        "is the consumer's to make.",
    ),
    "ort-legacy-read-only": (
        "consumer: onnxruntime",
        r"Cannot export readonly array since signalling readonly",
        "OrtValue.from_dlpack asks for legacy capsules (`__dlpack__()`), which cannot say the memory "
        "is read-only: numpy refuses its read-only arrays (BufferError); dlbridge hands onnxruntime "
        "a writable copy instead (see legacy-read-only-copy).",
        None,
    ),
    "ort-producer-bool-as-uint8": (
        "producer: onnxruntime",
        r"result has dtype uint8, want bool",
        "OrtValue.__dlpack__ exports a bool tensor with the uint8 code (kDLUInt, 8 bits) instead of "
        "kDLBool (DLPack 0.8 and later): consumers receive uint8.",
        "dlbridge receives uint8 from onnxruntime and cannot know it was bool.",
    ),
    "ort-producer-float8": (
        "producer: onnxruntime",
        r"GetDlpackDataType.*Unexpected data type of (17|19)",
        "OrtValue.__dlpack__ refuses its float8 tensors (ONNX types 17 and 19; DLPack has codes for "
        "both) with RuntimeError, where the array API standard asks for BufferError.",
        "its host copy (OrtValue.numpy()) holds the float8 bytes as uint8, and its data_type() names "
        "an element type dlbridge cannot establish: dlbridge refuses (DLB_ERR_UNSUPPORTED_DTYPE) "
        "rather than hand the bytes over relabelled.",
    ),
    "mlx-consumer-hides-refusal": (
        "consumer: mlx",
        r"from_dlpack\(\): incompatible function arguments",
        "mx.from_dlpack reports an exception of the producer's __dlpack__ as nanobind's TypeError "
        "\"incompatible function arguments\", without the producer's words.",
        None,
    ),
    "mlx-consumer-narrows-64-bit": (
        "consumer: mlx",
        r"mlx result has dtype (float32|complex64), want (float64|complex128)",
        "mx.from_dlpack turns float64 into float32 (and complex128 into complex64: mlx has no "
        "complex128) without an error: the consumer gets other values of another dtype than the "
        "producer's; mlx has float64 arrays on the CPU (mx.array(..., dtype=mx.float64)).",
        "the consumer converts the dtype itself.",
    ),
    "mlx-consumer-float8": (
        "consumer: mlx",
        r"Cannot convert array to mlx",
        "mlx has no float8 dtypes: mx.from_dlpack refuses them (ValueError).",
        "the consumer refuses the dtype itself.",
    ),
    "byte-offset-ignored": (
        "consumer: Paddle, onnxruntime",
        r"result has other values than the producer's",
        "paddle.utils.dlpack.from_dlpack and OrtValue.from_dlpack ignore DLTensor.byte_offset: mlx "
        "exports its views (a 0-d element, a slice past the first row) as the base pointer plus a "
        "byte_offset, and these consumers read from the base pointer, so they see other elements "
        "than the producer's. dlbridge folds the offset into the data pointer of what it exports.",
        None,
    ),
    "byte-offset-refused": (
        "consumer: TensorFlow, torch",
        r"Unsupported byte_offset \(\d+\) from DLPack, must be zero|Expected zero byte_offset",
        "tf.experimental.dlpack.from_dlpack refuses any non-zero DLTensor.byte_offset "
        "(InvalidArgumentError), and torch.from_dlpack refuses it for a 0-d tensor (ValueError: "
        "\"Expected zero byte_offset\"); mlx exports its views with one. "
        "dlbridge folds the offset into the data pointer of what it exports.",
        None,
    ),
})
# -----------------------------------------------------------------------------

# Reasons whose dlbridge path is to be fixed in dlbridge itself. The rules
# that name them still expect failures today; when the fix lands the
# exchanges start to work, the tests say so, and the entry is removed here
# (one place to flip). Empty when nothing is waiting.
#
# The consumer-side host-copy cure (dlbridge.from_dlpack retrying with
# dl_device=CPU, copy=True, the buffer protocol, __array__ when a producer's
# __dlpack__ refuses, with any exception) is not among them: it is in, and
# the reasons it cures (tf-producer-float8 for the tensor object,
# pyarrow-bit-packed-bool, jax-producer-subbyte) name the direct path only.
PENDING = {}

_ALL = "*"
_PRODUCERS_OBJ = ["numpy", "jax", "tvm_ffi", "tensorflow", "paddle", "pyarrow", "array_api_strict",
                  "dlbridge"]
_CAPSULE_PRODUCERS = ["tensorflow-capsule", "paddle-capsule"]
_NON_STANDARD = ["float16/*", "bfloat16/*", "float8_*"]
_CONSUMERS_NOT_DLBRIDGE = ["numpy", "jax", "tvm_ffi", "tensorflow", "paddle", "array_api_strict", "torch",
                           "onnxruntime"]
_SUBBYTE = ["int4/*", "uint4/*", "int2/*"]

# (reason, path: "direct" | "dlbridge" | "both", producers, consumers, cases):
# the exchanges named fail for that reason. Producers, consumers and cases
# are lists of shell patterns.
RULES = [
    ("process-conflict", "both", ["tensorflow*"], ["paddle"], [_ALL]),
    ("process-conflict", "both", ["paddle*"], ["tensorflow"], [_ALL]),
    ("object-consumer-given-capsule", "direct", _CAPSULE_PRODUCERS,
     ["numpy", "jax", "array_api_strict"], [_ALL]),
    ("paddle-device-id-none", "direct", ["paddle"], ["jax"], [_ALL]),
    ("numpy-readonly-legacy", "direct", ["numpy"], ["tvm_ffi"], ["*/readonly"]),
    ("legacy-consumer-read-only", "direct", ["numpy"], ["tensorflow"], ["*/readonly"]),
    ("jax-compact-strides", "both", ["numpy", "tvm_ffi", "dlbridge", "array_api_strict", "paddle*"],
     ["jax"], ["*/strided"]),
    ("tf-compact-strides", "both", ["numpy", "tvm_ffi", "dlbridge", "array_api_strict"],
     ["tensorflow"], ["*/strided", "*/transposed"]),
    ("tf-consumer-float8", "both", _PRODUCERS_OBJ + _CAPSULE_PRODUCERS, ["tensorflow"],
     ["float8_*"]),
    ("tf-producer-float8", "direct", ["tensorflow"], _CONSUMERS_NOT_DLBRIDGE, ["float8_*"]),
    ("tf-producer-float8", "both", ["tensorflow-capsule"], [_ALL], ["float8_*"]),
    ("pyarrow-bit-packed-bool", "direct", ["pyarrow"], _CONSUMERS_NOT_DLBRIDGE, ["bool/*"]),
    ("paddle-uint16-is-bfloat16", "both", ["paddle*"], [_ALL], ["uint16/*"]),
    ("paddle-uint16-is-bfloat16", "both", [_ALL], ["paddle"], ["uint16/*"]),
    ("array-api-strict-dtypes", "both", [_ALL], ["array_api_strict"], _NON_STANDARD),
    # -- JAX's refused dtypes (issue 33) --
    ("jax-string-array", "both", ["jax"], [_ALL], ["string/*"]),
    ("jax-producer-subbyte", "direct", ["jax"], _CONSUMERS_NOT_DLBRIDGE, _SUBBYTE),
    ("consumer-subbyte", "dlbridge", ["jax"], ["numpy", "jax", "paddle", "array_api_strict", "torch", "mlx"],
     _SUBBYTE),
    ("legacy-consumer-padded-subbyte", "dlbridge", ["jax"], ["tensorflow", "tvm_ffi", "onnxruntime"], _SUBBYTE),
]

# --- torch 2, mlx, onnxruntime (issue 34) ------------------------------------
RULES += [
    ("object-consumer-given-capsule", "direct", ["torch-capsule"], ["numpy", "jax", "array_api_strict"],
     [_ALL]),
    ("jax-compact-strides", "both", ["torch*", "mlx"], ["jax"], ["*/strided"]),
    ("tf-compact-strides", "both", ["torch*", "mlx"], ["tensorflow"], ["*/strided", "*/transposed"]),
    ("tf-consumer-float8", "both", ["torch*"], ["tensorflow"], ["float8_*"]),
    ("ort-consumer-dtypes", "both", [_ALL], ["onnxruntime"], ["complex*", "float8_*"]),
    # an OrtValue of bool hands OrtValue.from_dlpack its own element type
    ("ort-consumer-dtypes", "direct", ["numpy", "jax", "tvm_ffi", "tensorflow*", "paddle*", "pyarrow",
                                       "array_api_strict", "dlbridge", "torch*", "mlx"], ["onnxruntime"],
     ["bool/*"]),
    ("ort-consumer-dtypes", "dlbridge", [_ALL], ["onnxruntime"], ["bool/*"]),
    # JAX and TensorFlow index into compact copies; the others export views.
    ("ort-compact-only", "both", ["numpy", "tvm_ffi", "dlbridge", "array_api_strict", "paddle*", "torch*",
                                  "mlx"], ["onnxruntime"], ["*/strided", "*/transposed"]),
    ("ort-legacy-read-only", "direct", ["numpy"], ["onnxruntime"], ["*/readonly"]),
    # OrtValue.from_dlpack of an OrtValue keeps its bool element type
    ("ort-producer-bool-as-uint8", "direct", ["onnxruntime"], ["numpy", "jax", "tvm_ffi", "tensorflow", "paddle",
                                                               "array_api_strict", "dlbridge", "torch", "mlx"],
     ["bool/*"]),
    ("ort-producer-bool-as-uint8", "dlbridge", ["onnxruntime"], [_ALL], ["bool/*"]),
    ("ort-producer-float8", "both", ["onnxruntime"], [_ALL], ["float8_*"]),
    ("mlx-consumer-narrows-64-bit", "both", [_ALL], ["mlx"], ["float64/*", "complex128/*"]),
    ("mlx-consumer-float8", "both", [_ALL], ["mlx"], ["float8_*"]),
    ("byte-offset-ignored", "direct", ["mlx"], ["paddle", "onnxruntime"], ["*/0-d", "*/offset"]),
    ("byte-offset-refused", "direct", ["mlx"], ["tensorflow"], ["*/0-d", "*/offset"]),
    ("byte-offset-refused", "direct", ["mlx"], ["torch"], ["*/0-d"]),
    ("mlx-consumer-hides-refusal", "direct", ["jax"], ["mlx"], _SUBBYTE + ["string/*"]),
    ("mlx-consumer-hides-refusal", "direct", ["tensorflow", "onnxruntime"], ["mlx"], ["float8_*"]),
    ("mlx-consumer-hides-refusal", "direct", ["pyarrow"], ["mlx"], ["bool/*"]),
]
# -----------------------------------------------------------------------------


# --- copies ------------------------------------------------------------------
# reason id -> (side, why the exchange copies where the consumer promises to
# share the producer's memory (matrix.ZERO_COPY_CONSUMERS)). A copy by such a
# consumer that no rule below names fails the tests; a copy by another
# consumer (JAX, TensorFlow, Paddle, mlx) is its own choice.
COPY_REASONS = {
    "host-copy-cure": (
        "producer",
        "The producer refuses to export the tensor (jax-producer-subbyte, pyarrow-bit-packed-bool, "
        "tf-producer-float8 above); dlbridge.from_dlpack answers the refusal with a host copy (its "
        "cure: the producer's __array__()), which the consumer then shares.",
    ),
    "legacy-read-only-copy": (
        "consumer: onnxruntime",
        "OrtValue.from_dlpack asks for a legacy capsule, which cannot say the memory is read-only; "
        "dlbridge hands it a writable copy of read-only memory (numpy's read-only views, JAX's and "
        "pyarrow's immutable arrays, which they flag READ_ONLY in versioned capsules) rather than "
        "the memory itself, as the array API standard allows under copy=None.",
    ),
}

# (reason, path, producers, consumers, cases), as RULES: these exchanges copy.
COPY_RULES = [
    ("host-copy-cure", "both", ["jax"], [_ALL], _SUBBYTE),
    ("host-copy-cure", "both", ["pyarrow"], [_ALL], ["bool/*"]),
    ("host-copy-cure", "both", ["tensorflow"], [_ALL], ["float8_*"]),
    ("legacy-read-only-copy", "direct", ["dlbridge"], ["onnxruntime"], ["*/readonly"]),
    ("legacy-read-only-copy", "dlbridge", ["numpy", "dlbridge"], ["onnxruntime"], ["*/readonly"]),
    ("legacy-read-only-copy", "dlbridge", ["jax", "pyarrow"], ["onnxruntime"],
     ["*/contiguous", "*/0-d", "*/strided", "*/transposed", "*/offset"]),  # zero-size: nothing to copy
]
# -----------------------------------------------------------------------------

WORKS = ("zero-copy", "copy")


def _match(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _rules(table, producer, consumer, case, path):
    return [r for r in table
            if r[1] in (path, "both") and _match(producer, r[2]) and _match(consumer, r[3])
            and _match(case, r[4])]


def rules_for(producer, consumer, case, path):
    """The failure rules naming this exchange on this path ("direct" or "dlbridge")."""
    return _rules(RULES, producer, consumer, case, path)


def copy_rules_for(producer, consumer, case, path):
    """The copy rules naming this exchange on this path."""
    return _rules(COPY_RULES, producer, consumer, case, path)


def explain(producer, consumer, case, path, outcome):
    """The reason id of a failed outcome, or None when no rule names it with
    a message that matches."""
    text = outcome.get("reason", "")
    for rule in rules_for(producer, consumer, case, path):
        if re.search(REASONS[rule[0]][1], text):
            return rule[0]
    return None


def classify(doc, zero_copy_consumers=None):
    """Every exchange of a matrix document as (producer, consumer, case, path,
    status, reason id or None, expected: True/False). A failure's reason is
    a REASONS id; a copy's, where the consumer promises zero-copy, a
    COPY_REASONS id."""
    if zero_copy_consumers is None:
        import matrix

        zero_copy_consumers = matrix.ZERO_COPY_CONSUMERS
    rows = []
    for r in doc["results"]:
        producer, consumer, case = r["producer"], r["consumer"], r["case"]
        for path in ("direct", "dlbridge"):
            o = r[path]
            status = o["status"]
            reason = None
            if status in ("fail", "crash"):
                reason = explain(producer, consumer, case, path, o)
                expected = reason is not None
            elif status == "n/a":
                expected = True
            else:
                copies = copy_rules_for(producer, consumer, case, path)
                expected = not rules_for(producer, consumer, case, path)
                if consumer in zero_copy_consumers:
                    if status == "copy":
                        reason = copies[0][0] if copies else None
                        expected = expected and reason is not None
                    else:
                        expected = expected and not copies
            rows.append((producer, consumer, case, path, status, reason, expected))
    return rows
