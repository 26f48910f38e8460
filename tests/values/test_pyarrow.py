"""pyarrow through every route of the value oracle (frameworks.py, oracle.py)."""

import pytest

import frameworks
import oracle

FW = frameworks.require("pyarrow")


@pytest.mark.parametrize("case", frameworks.named_cases(FW), ids=str)
def test_named_case(case):
    frameworks.check_case(FW, case)


@frameworks.property_test(FW, examples=30)
def test_random_case(case):
    frameworks.check_case(FW, case)


@pytest.mark.parametrize("type_", ["int32", "uint8", "bool", "float16", "float32", "float64"])
def test_nulls_are_refused_by_name_or_copied_as_pyarrow_gives_them(type_):
    """An array with a null over a stored value (7): every entry point
    refuses naming a dlbridge status, or copies what pyarrow's own
    __array__ makes of it (NaN at the null), never the stored value."""
    import dlbridge
    import numpy as np
    import pyarrow as pa

    full = pa.array(np.array([1, 7, 0], dtype=type_))
    x = pa.Array.from_buffers(full.type, 3, [pa.py_buffer(bytes([0b101]))] + full.buffers()[1:])
    assert x.null_count == 1 and full[1].as_py()  # 7, or True
    for how, take in [("from_dlpack", lambda: dlbridge.from_dlpack(x)),
                      ("copy=True", lambda: dlbridge.from_dlpack(x, copy=True)),
                      ("copy=False", lambda: dlbridge.from_dlpack(x, copy=False)),
                      ("device=(1, 0)", lambda: dlbridge.from_dlpack(x, device=(1, 0))),
                      ("share", lambda: dlbridge.share(x))]:
        try:
            t = take()
        except BufferError as e:
            assert "DLB_ERR_" in str(e), (how, str(e))
            continue
        # read from the tensor's memory, against pyarrow's own __array__
        own = np.asarray(x)
        got = oracle.read_tensor(t).array()
        assert own.dtype.kind == "f" and t.dtype == str(own.dtype), (how, t.dtype, own.dtype)
        np.testing.assert_array_equal(got.view(own.dtype), own, err_msg=how)
        assert got.view(own.dtype)[0] == 1 and np.isnan(got.view(own.dtype)[1]), (how, got)
        del t, got
