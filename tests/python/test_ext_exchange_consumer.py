"""from_dlpack as a consumer of another producer's DLPack C exchange table
(_exchange.c), with tables written here in ctypes whose functions
misbehave: a tensor that is not given, one the library refuses, and a
producer with torch's is_conj() / is_neg() whose table cannot carry the
bits (test_ext_exchange_cuda.py: current_work_stream). Every tensor a
table hands over is freed exactly once, whatever becomes of it."""

import ctypes as ct
import struct

import pytest

import dlbridge
from ext_tables import FAIL, KDLCOMPLEX, HandMade, producer_type


def values_of(t):
    data = bytes(dlbridge._glue.tensor_payload(t)[0])
    return struct.unpack("=%dd" % (len(data) // 8), data)


def test_a_table_that_gives_no_tensor_is_malformed():
    cls = producer_type(lambda obj: None)
    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(cls())
    assert info.value.status_name == "DLB_ERR_MALFORMED"
    assert "managed_tensor_from_py_object_no_sync gave no tensor" in str(info.value)


def test_a_table_tensor_taken_in_is_freed_with_the_result():
    made = HandMade((1.0, 2.5))
    cls = producer_type(lambda obj: made)
    t = dlbridge.from_dlpack(cls())
    assert t.shape == (2,) and t.dtype == "float64" and t.data_ptr == ct.addressof(made.memory)
    assert made.freed == 0
    del t
    assert made.freed == 1


@pytest.mark.parametrize("major, ndim, status", [(1, -1, "DLB_ERR_INVALID_ARGUMENT"), (2, 1, "DLB_ERR_VERSION")])
def test_a_table_tensor_the_library_refuses_is_freed_once(major, ndim, status):
    made = HandMade(major=major, ndim=ndim)
    cls = producer_type(lambda obj: made)
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(cls())
    assert info.value.status_name == status, str(info.value)
    assert made.freed == 1


def test_bits_a_table_cannot_carry_are_resolved_by_the_producer():
    """A real-valued tensor: is_neg() asked (never is_conj(), which cannot
    change a real value); set, the table's tensor is freed and the
    producer's resolve_neg() is taken in as a copy."""
    made = HandMade((1.0, -2.0))
    asked = []

    def is_neg(self):
        asked.append("is_neg")
        return True

    def is_conj(self):
        asked.append("is_conj")
        return True

    def negated(self):
        """A new dlbridge tensor (a producer with a table of its own), -x."""
        return dlbridge.from_buffer((ct.c_double * 2)(*(-v for v in made.memory)))

    cls = producer_type(lambda obj: made, is_neg=is_neg, is_conj=is_conj,
                        resolve_neg=negated, resolve_conj=lambda self: self)
    t = dlbridge.from_dlpack(cls())
    assert asked == ["is_neg"] and made.freed == 1
    assert t.copied and t.shape == (2,) and values_of(t) == (-1.0, 2.0)
    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(cls(), copy=False)
    assert info.value.status_name == "DLB_ERR_NOT_ZERO_COPY" and "negative bit" in str(info.value)
    assert made.freed == 2


def test_a_complex_tensor_is_asked_for_both_bits():
    made = HandMade((1.0, 2.0, 3.0, 4.0), code=KDLCOMPLEX)
    asked = []

    def query(name, answer):
        def ask(self):
            asked.append(name)
            return answer
        return ask

    cls = producer_type(lambda obj: made, is_conj=query("is_conj", False), is_neg=query("is_neg", False))
    t = dlbridge.from_dlpack(cls())
    assert sorted(asked) == ["is_conj", "is_neg"] and t.dtype == "complex128" and t.shape == (2,)
    assert not t.copied and made.freed == 0
    del t
    assert made.freed == 1


def test_a_bit_query_that_runs_out_of_memory_frees_the_tensor():
    made = HandMade()

    def is_neg(self):
        raise MemoryError("no room to ask")

    cls = producer_type(lambda obj: made, is_neg=is_neg)
    with pytest.raises(MemoryError, match="no room to ask"):
        dlbridge.from_dlpack(cls())
    assert made.freed == 1


def test_a_table_that_fails_without_an_exception():
    """Refused without a word: a BufferError says so; with no __dlpack__ to
    ask instead, that is the answer."""
    cls = producer_type(lambda obj: FAIL)
    with pytest.raises(BufferError, match="managed_tensor_from_py_object_no_sync failed without an exception"):
        dlbridge.from_dlpack(cls())


class TableLookupFails(type):
    """A metaclass whose classes' table attribute raises what is not an
    AttributeError (the current name, or only the earlier one)."""

    only_old = False

    @property
    def __dlpack_c_exchange_api__(cls):
        if cls.only_old:
            raise AttributeError("no current table")
        raise RuntimeError("the table cannot be read")

    @property
    def __c_dlpack_exchange_api__(cls):
        raise RuntimeError("the earlier table cannot be read")


def test_a_table_lookup_that_raises_is_the_answer():
    cls = TableLookupFails("Producer", (), {"__dlpack__": lambda self, **kw: None})
    with pytest.raises(RuntimeError, match="the table cannot be read"):
        dlbridge.from_dlpack(cls())
    old = TableLookupFails("OldProducer", (), {"only_old": True, "__dlpack__": lambda self, **kw: None})
    with pytest.raises(RuntimeError, match="the earlier table cannot be read"):
        dlbridge.from_dlpack(old())


def test_a_real_tensor_asks_no_conjugate_bit():
    """is_conj() alone cannot change a real value: nothing is asked, and the
    table's tensor comes in as it is."""
    made = HandMade((2.0, 3.0))
    asked = []

    def is_conj(self):
        asked.append("is_conj")
        return True

    t = dlbridge.from_dlpack(producer_type(lambda obj: made, is_conj=is_conj)())
    assert asked == [] and not t.copied and values_of(t) == (2.0, 3.0)


def test_a_resolution_with_a_table_of_its_own_is_not_asked_again():
    """resolve_neg() gives an object of a table type that has the queries
    too: its tensor is the resolution (a copy), asked once afterwards."""
    made = HandMade((1.0, -2.0))
    resolution = HandMade((-1.0, 2.0))
    asked = []

    def query(name, answer):
        def ask(self):
            asked.append((name, answer))
            return answer
        return ask

    resolved_type = producer_type(lambda obj: resolution, is_neg=query("resolved.is_neg", False))
    cls = producer_type(lambda obj: made, is_neg=query("is_neg", True), resolve_neg=lambda self: resolved_type())
    t = dlbridge.from_dlpack(cls())
    assert t.copied and values_of(t) == (-1.0, 2.0)
    assert asked == [("is_neg", True), ("resolved.is_neg", False)]
    assert made.freed == 1
    del t
    assert resolution.freed == 1
