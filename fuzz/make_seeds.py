#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (small, hand-made inputs
that reach each target's interesting paths). The byte formats are those the
targets read with fuzz::Reader; see the comments next to each builder.

Run from the repository root: python3 fuzz/make_seeds.py
Files are overwritten; seed-* reach the targets' paths, regress-* are the
minimal inputs of bugs the targets found.
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# pick_dtype indices (fuzz_common.hpp table)
DT = {"i8": 0, "i16": 1, "i32": 2, "i64": 3, "u8": 4, "f16": 5, "f32": 6, "f64": 7,
      "bf16": 8, "c64": 9, "c128": 10, "bool": 11, "f8": 12, "f6": 13, "f4": 14,
      "f4x2": 15, "f32x4": 16, "i8x3": 17, "f16x2": 18, "f6x4": 19,
      "i4": 20, "u2": 21, "u4x2": 22, "i2x3": 23}
# pick_device indices: 0 CPU, 5 CUDAHost, 6 CUDAManaged, 7 ROCMHost, 8 CUDA, 9 ROCM
DEV = {"cpu": 0, "cuda_host": 5, "managed": 6, "rocm_host": 7, "cuda": 8, "rocm": 9}


def ext(v):
    """An extent (Reader::extent(false)): one byte for 0..15, else raw."""
    return bytes([v]) if 0 <= v < 16 else raw64(v)


def sext(v):
    """A stride (Reader::extent(true)): one byte for -4..11, else raw."""
    return bytes([v + 4]) if -4 <= v < 12 else raw64(v)


def raw64(v):
    return bytes([0xF0]) + struct.pack("<q", v)


def ndim_byte(n):
    assert 0 <= n < 8
    return bytes([n])


def export_opts(struct_size=40, copy=0, has_target=0, dev_type=1, dev_id=0, stream=0, flags=0, fix=0):
    return struct.pack("<QiiiiqQ", struct_size, copy, has_target, dev_type, dev_id, stream, flags) + bytes([fix])


# exercise() ops: nops byte, then codes; code%7: 0 versioned export, 1 legacy
# export, 2 to_host, 3 delete, 4 retain/release, 5 drop an export (+index
# byte), 6 re-import an export (+index byte). Bit 0x80 on 0/1: options follow.
def ops(*codes):
    out = bytes([len(codes)])
    for c in codes:
        out += c if isinstance(c, bytes) else bytes([c])
    return out


EXPORT_V, EXPORT_L, TO_HOST, DELETE, RETAIN, DROP, REIMPORT = 0, 1, 2, 3, 4, 5, 6
DROP0, REIMPORT0 = bytes([DROP, 0]), bytes([REIMPORT, 0])  # with the index byte


def opt_export(versioned, **kw):
    return bytes([(0 if versioned else 1) | 0x80]) + export_opts(**kw)


def import_seed(versioned, ndim, shape, strides=None, dtype="f32", device="cpu", byte_offset=0,
                major=1, vflags=0, null_data=False, null_shape=False, the_ops=b"\x00", teardown=0):
    ctl = 0
    if strides is None:
        ctl |= 0x04
    if null_data:
        ctl |= 0x18
    if null_shape:
        ctl |= 0x43
    out = bytes([ctl])
    if versioned:
        out += bytes([0]) if major == 1 else bytes([0xE0]) + struct.pack("<II", major, 0)
        out += bytes([vflags])
    out += ndim_byte(ndim) + bytes([DT[dtype], DEV[device]])
    out += b"".join(ext(s) for s in shape) + b"".join(sext(s) for s in (strides or [0] * ndim))
    if byte_offset % 8 == 0 and byte_offset < 64:
        out += bytes([byte_offset // 8])
    else:
        out += bytes([0xF0]) + struct.pack("<Q", byte_offset)
    out += bytes([0x37])  # arena contents seed
    return out + the_ops + bytes([teardown])


def import_seeds(versioned):
    s = {}
    s["compact-2x3-f32"] = import_seed(versioned, 2, [2, 3], the_ops=ops(EXPORT_V, EXPORT_L, TO_HOST))
    s["transposed-i16"] = import_seed(versioned, 2, [3, 2], [1, 3], "i16", byte_offset=8,
                                      the_ops=ops(opt_export(True, copy=2), EXPORT_L, REIMPORT0))
    s["negative-strides"] = import_seed(versioned, 3, [2, 2, 3], [-6, 3, -1], "f64", byte_offset=16,
                                        the_ops=ops(opt_export(False, copy=2), EXPORT_V, DROP0))
    s["broadcast"] = import_seed(versioned, 2, [4, 5], [0, 1], "u8", the_ops=ops(EXPORT_V, TO_HOST), teardown=1)
    s["scalar"] = import_seed(versioned, 0, [], [], "c128", the_ops=ops(EXPORT_V, EXPORT_L))
    s["zero-size-null-data"] = import_seed(versioned, 2, [0, 7], None, "f16", null_data=True,
                                           the_ops=ops(EXPORT_V, opt_export(True, copy=2)))
    s["delete-then-export"] = import_seed(versioned, 1, [6], [1], "i32",
                                          the_ops=ops(EXPORT_V, DELETE, EXPORT_V, EXPORT_L), teardown=1)
    s["subbyte-f4"] = import_seed(versioned, 1, [9], None, "f4", the_ops=ops(opt_export(True, copy=2), TO_HOST))
    s["device-cuda"] = import_seed(versioned, 2, [2, 2], None, "f32", device="cuda",
                                   the_ops=ops(opt_export(True, copy=2), opt_export(True, has_target=1)))
    s["pinned-to-cpu"] = import_seed(versioned, 1, [5], None, "f32", device="cuda_host",
                                     the_ops=ops(opt_export(True, has_target=1), opt_export(False, copy=1)))
    s["reimport-chain"] = import_seed(versioned, 2, [2, 2], [2, 1], "i64",
                                      the_ops=ops(EXPORT_V, REIMPORT0, EXPORT_L, REIMPORT0))
    s["subbyte-i4-strided"] = import_seed(versioned, 2, [3, 2], [1, 3], "i4",
                                          the_ops=ops(opt_export(True, copy=2), TO_HOST, EXPORT_V))
    if versioned:
        # IS_SUBBYTE_TYPE_PADDED (vflags 4): uint2 and int2 x 3 padded to a
        # byte each, transposed; float32 with the flag (dropped).
        s["padded-u2-transposed"] = import_seed(True, 2, [3, 2], [1, 3], "u2", vflags=4,
                                                the_ops=ops(opt_export(True, copy=2), TO_HOST, EXPORT_L, EXPORT_V,
                                                            REIMPORT0))
        s["padded-i2x3"] = import_seed(True, 1, [5], None, "i2x3", vflags=4, the_ops=ops(EXPORT_V, TO_HOST))
        s["padded-f32"] = import_seed(True, 1, [3], None, "f32", vflags=4, the_ops=ops(EXPORT_V))
        s["read-only"] = import_seed(True, 1, [4], None, "f32", vflags=1,
                                     the_ops=ops(EXPORT_V, EXPORT_L, opt_export(False, flags=2)))
        s["major-2"] = import_seed(True, 1, [4], None, major=2)
        s["is-copied"] = import_seed(True, 1, [3], None, vflags=2, the_ops=ops(EXPORT_V))
    return s


def validate_seed(ndim, shape, strides=None, dtype="f32", device="cpu", data=1, byte_offset=0, flags=0,
                  wrap=True, null_tensor=False):
    ctl = (0x10 if wrap else 0) | (0x04 if strides is None else 0) | (0xC0 if null_tensor else 0)
    out = bytes([ctl])
    if null_tensor:
        out += struct.pack("<I", 0)
    out += ndim_byte(ndim) + (bytes([DT[dtype]]) if isinstance(dtype, str) else dtype) + bytes([DEV[device]])
    out += b"".join(ext(s) for s in shape) + b"".join(sext(s) for s in (strides or [0] * ndim))
    return out + bytes([data, byte_offset, flags])


def validate_seeds():
    return {
        "compact": validate_seed(2, [2, 3], flags=1),
        "strided-contiguous-flag": validate_seed(2, [2, 3], [1, 2], flags=1),
        "null-strides-required": validate_seed(2, [2, 3], None, flags=2),
        "negative-extent": validate_seed(1, [-3], [1]),
        "overflow": validate_seed(2, [1 << 40, 1 << 40], [1, 1]),
        "huge-stride-size1": validate_seed(2, [1, 4], [(1 << 62), 1]),
        "zero-size-null": validate_seed(3, [4, 0, 5], [7, -3, 9], data=0),
        "null-tensor": validate_seed(1, [2], [1], null_tensor=True),
        "bad-dtype": validate_seed(1, [2], [1], dtype=bytes([0xF0, 99, 32, 1, 0])),
        "scalar-f6": validate_seed(0, [], [], "f6"),
        "subbyte-i4-strided": validate_seed(2, [3, 2], [1, 3], "i4", flags=1),
        "subbyte-u4x2": validate_seed(1, [7], [1], "u4x2"),
    }


def export_seed(wrap, ndim, shape, strides=None, dtype="f32", byte_offset=0, read_only=False, the_ops=b"\x00",
                teardown=0, padded=False):
    ctl = (1 if wrap else 0) | (4 if strides is None else 0) | (8 if read_only else 0) | (0x10 if padded else 0)
    out = bytes([ctl]) + ndim_byte(ndim) + b"".join(ext(s) for s in shape)
    out += b"".join(sext(s) for s in (strides or [0] * ndim)) + bytes([DT[dtype]])
    if wrap:
        assert byte_offset % 4 == 0 and byte_offset < 64
        out += bytes([byte_offset // 4, 0x11])
    return out + the_ops + bytes([teardown])


def export_seeds():
    return {
        "alloc-2x3": export_seed(False, 2, [2, 3], the_ops=ops(EXPORT_V, EXPORT_L, opt_export(True, copy=2))),
        "alloc-scalar": export_seed(False, 0, [], dtype="c64", the_ops=ops(EXPORT_V, TO_HOST)),
        "alloc-zero": export_seed(False, 3, [2, 0, 4], dtype="bool", the_ops=ops(EXPORT_V, opt_export(False, copy=2))),
        "wrap-transposed": export_seed(True, 2, [3, 4], [1, 3], "f64", 8,
                                       the_ops=ops(opt_export(True, copy=2), EXPORT_L, REIMPORT0), teardown=1),
        "wrap-read-only": export_seed(True, 1, [5], None, "i32", read_only=True,
                                      the_ops=ops(EXPORT_V, EXPORT_L, opt_export(False, flags=2), DELETE, EXPORT_V)),
        "wrap-negative": export_seed(True, 2, [2, 3], [-3, -1], "i16", 12,
                                     the_ops=ops(opt_export(False, copy=2), TO_HOST, DROP0)),
        "wrap-small-struct": export_seed(True, 1, [4], None, "u8",
                                         the_ops=ops(opt_export(True, struct_size=8, copy=2),
                                                     opt_export(True, struct_size=200))),
        "wrap-stream": export_seed(True, 1, [4], None, "f16",
                                   the_ops=ops(opt_export(True, stream=2), opt_export(True, has_target=1, dev_type=2))),
        "alloc-i4": export_seed(False, 2, [3, 5], dtype="i4", the_ops=ops(EXPORT_V, EXPORT_L, TO_HOST)),
        "wrap-padded-u2": export_seed(True, 2, [2, 3], [1, 2], "u2", padded=True,
                                      the_ops=ops(opt_export(True, copy=2), EXPORT_L, TO_HOST, EXPORT_V, REIMPORT0)),
        "wrap-padded-u4x2": export_seed(True, 1, [4], None, "u4x2", padded=True, the_ops=ops(EXPORT_V)),
    }


def copy_seed(ndim, shape, strides=None, dtype="f32", byte_offset=0, dst=0, device=None):
    ctl = (2 if strides is None else 0) | (1 if device else 0)
    out = bytes([ctl]) + bytes([ndim])
    out += b"".join(ext(s) for s in shape) + b"".join(sext(s) for s in (strides or [0] * ndim))
    out += bytes([DT[dtype]])
    if device:
        out += bytes([DEV[device]])
    assert byte_offset % 2 == 0 and byte_offset < 64
    return out + bytes([byte_offset // 2, 0x5B, dst])


def copy_seeds():
    return {
        "compact": copy_seed(2, [3, 4]),
        "transposed": copy_seed(2, [4, 3], [1, 4], "i16"),
        "negative": copy_seed(3, [2, 3, 2], [-6, -2, 1], "f64", 8),
        "broadcast": copy_seed(3, [3, 1, 5], [0, 11, 1], "c128"),
        "tiled-like": copy_seed(4, [2, 2, 2, 3], [6, 1, 3, 12], "i8x3"),
        "short-dst": copy_seed(1, [7], [2], "i32", dst=1),
        "slack-dst": copy_seed(2, [2, 5], [10, 2], "u8", 2, dst=2),
        "subbyte-compact": copy_seed(1, [11], None, "f4"),
        "subbyte-strided": copy_seed(1, [5], [2], "f4"),
        "subbyte-i4-compact": copy_seed(2, [3, 3], [3, 1], "i4"),
        "subbyte-u2-strided": copy_seed(2, [3, 4], [1, 3], "u2"),
        "subbyte-i2x3": copy_seed(1, [5], None, "i2x3"),
        "device": copy_seed(1, [3], [1], device="cuda"),
        "zero-size": copy_seed(2, [0, 9], [3, 1], "f32x4"),
    }


def import_copy_seed(ndim, shape, strides=None, dtype="f32", byte_offset=0, legacy=False, at_end=False,
                     stray=False, device=None, minor=3):
    """fuzz_import_copy: ctl (0x01 legacy, 0x02 NULL strides, 0x04 span flush
    against the upper guard page, 0x08 ndim 0 with stray pointers, 0x10 a
    device follows), ndim, shape, strides, dtype, [device], byte_offset (one
    byte < 64, else 0xF0 and eight), the arena's contents byte, then the
    versioned struct's minor version."""
    ctl = (1 if legacy else 0) | (2 if strides is None else 0) | (4 if at_end else 0) | (8 if stray else 0)
    ctl |= 0x10 if device else 0
    out = bytes([ctl]) + ndim_byte(ndim)
    out += b"".join(ext(v) for v in shape) + b"".join(sext(v) for v in (strides or [0] * ndim))
    out += bytes([DT[dtype]]) + (bytes([DEV[device]]) if device else b"")
    out += bytes([byte_offset]) if byte_offset < 64 else bytes([0xF0]) + struct.pack("<Q", byte_offset)
    return out + bytes([0x5D]) + (b"" if legacy else bytes([minor]))


def import_copy_seeds():
    return {
        "compact-2x3-f32": import_copy_seed(2, [2, 3]),
        "transposed-legacy": import_copy_seed(2, [3, 4], [1, 3], "i16", 6, legacy=True),
        "negative-strides": import_copy_seed(3, [2, 3, 2], [-6, -2, 1], "f64", 40),
        "broadcast": import_copy_seed(2, [4, 5], [0, 1], "c64"),
        # Spans of megabytes and gigabytes over a page reservation, a few
        # elements each, flush against either guard page.
        "sparse-4gib": import_copy_seed(1, [3], [1 << 31], "i8"),
        "sparse-negative-at-end": import_copy_seed(2, [2, 2], [-(1 << 20), 1 << 12], "f32", at_end=True),
        "sparse-wide-lanes": import_copy_seed(1, [5], [1 << 14], "f32x4", at_end=True),
        "subbyte-i4-compact": import_copy_seed(2, [3, 3], [3, 1], "i4"),
        "subbyte-i2x3-reversed": import_copy_seed(1, [5], [-1], "i2x3", 8),
        "scalar-stray-pointers": import_copy_seed(0, [], [], "c128", stray=True),
        "zero-size-huge-offset": import_copy_seed(2, [0, 3], None, "f32", 1 << 63),
        "pinned": import_copy_seed(1, [6], None, "u8", device="cuda_host"),
    }


def regressions():
    """Minimal inputs of bugs the targets found (tests/reliability/test_fuzz_regressions.cpp)."""
    dev17 = bytes([0xF0]) + struct.pack("<Ii", 17, 0)
    return {
        "copy": {"negative-stride": copy_seed(1, [4], [-1], "i32")},
        "import_versioned": {
            "negative-stride": import_seed(True, 1, [4], [-1], "i32", the_ops=ops(opt_export(True, copy=2))),
            "null-data-offset": import_seed(True, 2, [0, 3], None, "f32", byte_offset=56, null_data=True,
                                            the_ops=ops(opt_export(True, copy=2), TO_HOST)),
            # A packed pair of float4 flagged IS_SUBBYTE_TYPE_PADDED: the flag
            # was dropped and the bytes read as packed; now refused
            # (tests/core/test_subbyte.cpp).
            "padded-float4x2": import_seed(True, 1, [4], None, "f4x2", vflags=4, the_ops=ops(EXPORT_V)),
            "stride-2-62": import_seed(True, 1, [2], [1 << 62], "u8", the_ops=ops(opt_export(True, copy=2), TO_HOST)),
            "byte-offset-2-63": import_seed(True, 1, [2], [1], "u8", byte_offset=1 << 63,
                                            the_ops=ops(opt_export(True, copy=2), TO_HOST)),
        },
        "import_legacy": {
            "stride-2-62": import_seed(False, 1, [2], [1 << 62], "u8", the_ops=ops(opt_export(True, copy=2), TO_HOST)),
        },
        "validate": {
            "device-beyond-enum": bytes([0x14, 1, DT["f32"]]) + dev17 + ext(2) + sext(0) + bytes([1, 0, 0]),
            "stride-2-62": validate_seed(1, [2], [1 << 62], "u8"),
        },
        # The crash of a producer's uint8 [2] with stride 2^62, and a byte_offset
        # of 2^63: both were accepted; copying the first read 2^62 bytes away
        # (tests/reliability/test_impossible_spans.cpp).
        "import_copy": {
            "stride-2-62": import_copy_seed(1, [2], [1 << 62], "u8"),
            "byte-offset-2-63": import_copy_seed(1, [2], [1], "u8", 1 << 63),
            "negative-stride-2-62": import_copy_seed(1, [2], [-(1 << 62)], "u8", legacy=True),
        },
        "export": {"zero-size-huge-extents": export_seed(True, 4, [4, 0, 1 << 62, 4], None, "i8",
                                                         the_ops=ops(EXPORT_V))},
    }


def main():
    sets = {
        "import_versioned": import_seeds(True),
        "import_legacy": import_seeds(False),
        "validate": validate_seeds(),
        "export": export_seeds(),
        "copy": copy_seeds(),
        "import_copy": import_copy_seeds(),
    }
    for target, seeds in sets.items():
        d = os.path.join(ROOT, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, "seed-" + name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds")
    for target, inputs in regressions().items():
        for name, data in inputs.items():
            with open(os.path.join(ROOT, target, "regress-" + name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
