"""The cffi cdef shipped in the package: checked against the real header,
then used through cffi's ABI mode."""

import os
import re
import shutil
import subprocess

import pytest

cffi = pytest.importorskip("cffi")

import dlbridge  # noqa: E402
from dlbridge._cdef import CDEF, STRUCTS, library_path  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "include", "dlbridge", "dlbridge.h")
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")

needs_cc = pytest.mark.skipif(CC is None or not os.path.exists(HEADER),
                              reason="needs a C compiler and the source tree's header")


@pytest.fixture(scope="module")
def ffi_lib():
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi, ffi.dlopen(library_path())


# ---------------------------------------------------------------------------
# (a) the cdef against the header
# ---------------------------------------------------------------------------


def _normalise_type(text):
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s*\*\s*", "*", text)
    return text


def _drop_name(param):
    param = _normalise_type(param)
    if param in ("void", "..."):
        return param
    m = re.match(r"^(.*?[\w*])\s*\b([A-Za-z_]\w*)$", param)
    if m and m.group(1) not in ("const", "struct", "unsigned", "signed"):
        return _normalise_type(m.group(1))
    return param


def _functions(c_text):
    """name -> (return type, (parameter types...)) for every dlb_ function
    declaration in preprocessed C text."""
    c_text = re.sub(r"/\*.*?\*/", " ", c_text, flags=re.S)
    c_text = re.sub(r"^\s*#.*$", " ", c_text, flags=re.M)
    c_text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", c_text)
    found = {}
    for decl in c_text.split(";"):
        decl = " ".join(decl.split())
        m = re.search(r"^(?:.*[}])?\s*([\w\s\*]+?)\b(dlb_\w+)\s*\(([^()]*)\)$", decl)
        if not m:
            continue
        ret, name, params = m.groups()
        ret = _normalise_type(ret.replace("extern", ""))
        found[name] = (ret, tuple(_drop_name(p) for p in params.split(",")))
    return found


def _preprocessed_header():
    return subprocess.run([CC, "-E", "-P", "-I", os.path.join(ROOT, "include"), HEADER],
                          check=True, capture_output=True, text=True).stdout


@needs_cc
def test_cdef_declares_every_function_of_the_header_with_the_same_types():
    header = _functions(_preprocessed_header())
    cdef = _functions(CDEF)
    assert len(header) > 30
    assert set(cdef) == set(header)
    for name in header:
        assert cdef[name] == header[name], name


def test_every_cdef_function_is_in_the_library(ffi_lib):
    ffi, lib = ffi_lib
    for name in _functions(CDEF):
        assert getattr(lib, name) is not None


@needs_cc
def test_struct_layouts_and_constants_match_the_header(ffi_lib, tmp_path):
    ffi, lib = ffi_lib
    lines = []
    expected = []
    for struct in STRUCTS:
        lines.append('printf("%%zu\\n", sizeof(%s));' % struct)
        expected.append(("sizeof", struct, ffi.sizeof(struct)))
        for field, _ in ffi.typeof(struct).fields:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (struct, field))
            expected.append(("offsetof", struct + "." + field, ffi.offsetof(struct, field)))
    for name, value in re.findall(r"^#define (\w+) (\d+)$", CDEF, flags=re.M):
        lines.append('printf("%%llu\\n", (unsigned long long)(%s));' % name)
        expected.append(("value", name, int(value)))
        assert getattr(lib, name) == int(value)
    enum_names = re.findall(r"\b((?:kDL|DLB_COPY_)\w+) = \d+", CDEF)
    for name in enum_names:
        lines.append('printf("%%llu\\n", (unsigned long long)(%s));' % name)
        expected.append(("value", name, getattr(lib, name)))
    source = tmp_path / "layout.c"
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <dlbridge/dlbridge.h>\n"
        "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([CC, "-std=c99", "-I", os.path.join(ROOT, "include"), str(source), "-o",
                    str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert len(got) == len(expected)
    for (kind, what, want), value in zip(expected, got):
        assert int(value) == want, (kind, what)


# ---------------------------------------------------------------------------
# (b) the library through cffi's ABI mode
# ---------------------------------------------------------------------------


def _cpu(ffi):
    return ffi.new("DLDevice*", {"device_type": 1, "device_id": 0})[0]


def _dtype(ffi, code, bits):
    return ffi.new("DLDataType*", {"code": code, "bits": bits, "lanes": 1})[0]


def _named(ffi, lib, name):
    """A dtype by name, as the library parses it (the cdef lists no codes)."""
    out = ffi.new("DLDataType*")
    assert lib.dlb_dtype_from_name(name.encode(), out) == 0
    return out[0]


def test_alloc_export_import_through_cffi(ffi_lib):
    ffi, lib = ffi_lib
    shape = ffi.new("int64_t[2]", [2, 3])
    buf = ffi.new("dlb_buffer**")
    assert lib.dlb_buffer_alloc(_cpu(ffi), _named(ffi, lib, "float32"), 2, shape, buf) == 0
    view = ffi.new("DLTensor*")
    assert lib.dlb_buffer_dltensor(buf[0], view) == 0
    assert view.ndim == 2 and list(view.shape[0:2]) == [2, 3] and list(view.strides[0:2]) == [3, 1]
    data = ffi.cast("float*", view.data)
    for i in range(6):
        data[i] = i * 1.5
    assert lib.dlb_buffer_nbytes(buf[0]) == 24

    start = lib.dlb_live_exports()
    out = ffi.new("DLManagedTensorVersioned**")
    assert lib.dlb_export_versioned(buf[0], ffi.NULL, out) == 0
    mt = out[0]
    assert (mt.version.major, mt.version.minor) == (1, 3)
    assert mt.dl_tensor.data == view.data
    assert lib.dlb_live_exports() == start + 1

    imported = ffi.new("dlb_buffer**")
    assert lib.dlb_import_versioned(mt, ffi.NULL, imported) == 0
    assert lib.dlb_buffer_flags(imported[0]) & lib.DLB_BUFFER_IMPORTED
    iview = ffi.new("DLTensor*")
    assert lib.dlb_buffer_dltensor(imported[0], iview) == 0
    assert ffi.cast("float*", iview.data)[5] == 7.5

    legacy = ffi.new("DLManagedTensor**")
    options = ffi.new("dlb_export_options*")
    lib.dlb_export_options_init(options)
    options.copy = lib.DLB_COPY_ALWAYS
    assert lib.dlb_export_legacy(imported[0], options, legacy) == 0
    assert legacy[0].dl_tensor.data != view.data
    assert ffi.cast("float*", legacy[0].dl_tensor.data)[4] == 6.0
    assert lib.dlb_live_exports() == start + 2
    lib.dlb_managed_free_legacy(legacy[0])
    assert lib.dlb_live_exports() == start + 1

    lib.dlb_buffer_release(buf[0])  # the import still holds the export
    assert lib.dlb_live_exports() == start + 1
    lib.dlb_buffer_release(imported[0])
    assert lib.dlb_live_exports() == start


def test_wrap_with_a_cffi_release_callback(ffi_lib):
    ffi, lib = ffi_lib
    calls = []

    @ffi.callback("void(void*)")
    def release(ctx):
        calls.append(int(ffi.cast("intptr_t", ctx)))

    memory = ffi.new("int16_t[4]", [1, 2, 3, 4])
    shape = ffi.new("int64_t[1]", [4])
    view = ffi.new("DLTensor*")
    view.data = memory
    view.device = _cpu(ffi)
    view.ndim = 1
    view.dtype = _named(ffi, lib, "int16")
    view.shape = shape
    buf = ffi.new("dlb_buffer**")
    assert lib.dlb_buffer_wrap(view, lib.DLB_BUFFER_READ_ONLY, release,
                               ffi.cast("void*", 77), buf) == 0
    legacy = ffi.new("DLManagedTensor**")
    # The legacy struct cannot say READ_ONLY: a copy (no reference on the
    # memory), refused when copying is forbidden.
    never = ffi.new("dlb_export_options*")
    lib.dlb_export_options_init(never)
    never.copy = lib.DLB_COPY_NEVER
    assert lib.dlb_export_legacy(buf[0], never, legacy) == lib.DLB_ERR_READ_ONLY
    assert lib.dlb_export_legacy(buf[0], ffi.NULL, legacy) == 0
    assert legacy[0].dl_tensor.data != memory
    lib.dlb_managed_free_legacy(legacy[0])
    versioned = ffi.new("DLManagedTensorVersioned**")
    assert lib.dlb_export_versioned(buf[0], ffi.NULL, versioned) == 0
    assert versioned[0].flags & lib.DLPACK_FLAG_BITMASK_READ_ONLY
    lib.dlb_buffer_release(buf[0])
    assert calls == []  # the export still uses the memory
    lib.dlb_managed_free_versioned(versioned[0])
    assert calls == [77]


def test_error_calls_through_cffi(ffi_lib):
    ffi, lib = ffi_lib
    lib.dlb_clear_last_error()
    assert lib.dlb_last_error_code() == lib.DLB_OK
    assert ffi.string(lib.dlb_last_error_message()) == b""
    shape = ffi.new("int64_t[1]", [-3])
    buf = ffi.new("dlb_buffer**")
    status = lib.dlb_buffer_alloc(_cpu(ffi), _named(ffi, lib, "float32"), 1, shape, buf)
    assert status == lib.DLB_ERR_MALFORMED
    assert buf[0] == ffi.NULL  # out untouched
    assert lib.dlb_last_error_code() == status
    assert b"-3" in ffi.string(lib.dlb_last_error_message())
    assert ffi.string(lib.dlb_status_name(status)) == b"DLB_ERR_MALFORMED"
    assert ffi.string(lib.dlb_status_name(12345)) == b"DLB_UNKNOWN_STATUS"
    for code in range(lib.DLB_STATUS_COUNT):
        assert ffi.string(lib.dlb_status_name(code)).startswith(b"DLB_")
    assert lib.dlb_dtype_check(_dtype(ffi, 99, 8)) == lib.DLB_ERR_UNSUPPORTED_DTYPE
    lib.dlb_clear_last_error()
    assert lib.dlb_last_error_code() == lib.DLB_OK
    assert ffi.string(lib.dlb_version_string()).decode() == dlbridge.__version__
    assert lib.dlb_version_number() == 100


def test_deleted_buffer_through_cffi(ffi_lib):
    ffi, lib = ffi_lib
    shape = ffi.new("int64_t[1]", [4])
    buf = ffi.new("dlb_buffer**")
    assert lib.dlb_buffer_alloc(_cpu(ffi), _named(ffi, lib, "uint8"), 1, shape, buf) == 0
    assert lib.dlb_buffer_delete(buf[0]) == 0
    out = ffi.new("DLManagedTensorVersioned**")
    assert lib.dlb_export_versioned(buf[0], ffi.NULL, out) == lib.DLB_ERR_DELETED
    assert lib.dlb_buffer_flags(buf[0]) & lib.DLB_BUFFER_DELETED
    lib.dlb_buffer_release(buf[0])


def test_ctypes_declarations_agree_with_the_cdef(ffi_lib):
    import ctypes

    from dlbridge import _lib

    ffi, lib = ffi_lib
    for cls, name in [(_lib.DLDevice, "DLDevice"), (_lib.DLDataType, "DLDataType"),
                      (_lib.DLTensor, "DLTensor"), (_lib.DLPackVersion, "DLPackVersion"),
                      (_lib.DLManagedTensor, "DLManagedTensor"),
                      (_lib.DLManagedTensorVersioned, "DLManagedTensorVersioned"),
                      (_lib.ExportOptions, "dlb_export_options"),
                      (_lib.ImportOptions, "dlb_import_options")]:
        assert ctypes.sizeof(cls) == ffi.sizeof(name), name
        for field, *_ in cls._fields_:
            assert getattr(cls, field).offset == ffi.offsetof(name, field), (name, field)
    for name in dir(_lib):
        if name.startswith("DLB_"):
            assert getattr(_lib, name) == getattr(lib, name), name
        elif name.startswith("kDL"):
            # A device type the ctypes layer names must be the one the
            # library's device table gives that name.
            info = ffi.new("dlb_device_info*", {"struct_size": ffi.sizeof("dlb_device_info")})
            assert lib.dlb_device_type_info(getattr(_lib, name), info) == 0, name
            assert ffi.string(info.name).decode().replace("_", "") == name[3:].lower(), name


# ---------------------------------------------------------------------------
# (c) facts and decisions asked of the library, not kept in the cdef
# ---------------------------------------------------------------------------


def test_cdef_keeps_no_device_or_dtype_list():
    assert "kDL" not in CDEF
    # The only enum left is the copy policy, which is the library's own.
    assert re.findall(r"typedef enum (\w*)", CDEF) == ["dlb_copy_policy"]


def _device_table_through_cffi(ffi, lib):
    table = {}
    for code in range(-1, 256):
        info = ffi.new("dlb_device_info*", {"struct_size": ffi.sizeof("dlb_device_info")})
        status = lib.dlb_device_type_info(code, info)
        if status == lib.DLB_OK:
            assert info.device_type == code
            table[code] = (int(info.flags), ffi.string(info.name).decode())
        else:
            assert status == lib.DLB_ERR_UNSUPPORTED_DEVICE, code
            assert str(code).encode() in ffi.string(lib.dlb_last_error_message())
            assert info.name == ffi.NULL  # untouched
    return table


@needs_cc
def test_device_table_through_cffi_matches_a_c_program(ffi_lib, tmp_path):
    ffi, lib = ffi_lib
    source = tmp_path / "devices.c"
    source.write_text(
        "#include <stdio.h>\n#include <dlbridge/dlbridge.h>\n"
        "int main(void) {\n"
        "  for (int code = -1; code < 256; ++code) {\n"
        "    dlb_device_info info;\n"
        "    info.struct_size = sizeof info;\n"
        "    if (dlb_device_type_info(code, &info) == DLB_OK)\n"
        "      printf(\"%d %u %s\\n\", code, info.flags, info.name);\n"
        "  }\n"
        "  return 0;\n}\n")
    exe = tmp_path / "devices"
    libdir = os.path.dirname(library_path())
    subprocess.run([CC, "-std=c99", "-I", os.path.join(ROOT, "include"), str(source), "-o", str(exe),
                    library_path(), "-Wl,-rpath," + libdir], check=True)
    from_c = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        code, flags, name = line.split()
        from_c[int(code)] = (int(flags), name)
    table = _device_table_through_cffi(ffi, lib)
    assert table == from_c
    # DLPack defines 1..20 except 5 and 6.
    assert sorted(table) == [c for c in range(1, 21) if c not in (5, 6)]
    assert table[13] == (lib.DLB_DEVICE_KNOWN | lib.DLB_DEVICE_HOST_READABLE | lib.DLB_DEVICE_ADDRESS
                         | lib.DLB_DEVICE_HAS_STREAMS | lib.DLB_DEVICE_CUDA_BACKEND, "cuda_managed")
    cuda_kinds = sorted(code for code, (flags, _name) in table.items() if flags & lib.DLB_DEVICE_CUDA_BACKEND)
    assert cuda_kinds == [2, 3, 13]  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


def test_compact_strides_through_cffi(ffi_lib):
    ffi, lib = ffi_lib
    shape = ffi.new("int64_t[3]", [4, 1, 6])
    strides = ffi.new("int64_t[3]")
    assert lib.dlb_compact_strides(3, shape, strides) == 0
    assert list(strides) == [6, 6, 1]
    shape[1] = -2
    assert lib.dlb_compact_strides(3, shape, strides) == lib.DLB_ERR_INVALID_ARGUMENT
    assert list(strides) == [6, 6, 1]


def test_resolve_and_stream_rules_through_cffi(ffi_lib):
    ffi, lib = ffi_lib
    shape = ffi.new("int64_t[1]", [4])
    buf = ffi.new("dlb_buffer**")
    assert lib.dlb_buffer_alloc(_cpu(ffi), _named(ffi, lib, "float32"), 1, shape, buf) == 0
    options = ffi.new("dlb_export_options*")
    lib.dlb_export_options_init(options)
    out = ffi.new("dlb_buffer**")
    assert lib.dlb_buffer_resolve(buf[0], options, out) == 0
    assert out[0] == buf[0]
    assert lib.dlb_buffer_refcount(buf[0]) == 2
    lib.dlb_buffer_release(out[0])
    options.copy = lib.DLB_COPY_ALWAYS
    assert lib.dlb_buffer_resolve(buf[0], options, out) == 0
    assert out[0] != buf[0]
    assert lib.dlb_buffer_flags(out[0]) == lib.DLB_BUFFER_COPIED
    lib.dlb_buffer_release(out[0])
    # A literal stream 0 given for host memory is refused.
    options.copy = lib.DLB_COPY_IF_NEEDED
    options.flags = lib.DLB_EXPORT_STREAM_GIVEN
    exported = ffi.new("DLManagedTensorVersioned**")
    assert lib.dlb_export_versioned(buf[0], options, exported) == lib.DLB_ERR_INVALID_ARGUMENT
    assert b"host memory" in ffi.string(lib.dlb_last_error_message())
    assert lib.dlb_buffer_resolve(buf[0], options, out) == lib.DLB_ERR_INVALID_ARGUMENT
    lib.dlb_buffer_release(buf[0])
