"""What the probes share: the object under test (:class:`Subject`) and the
helpers that read an export against the object's own account of its memory.
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._native import (
    DeleterProbe,
    Export,
    buffer_address,
    native,
)
from ._registry import finding
from ._report import SKIP, Finding

MAX_VERSION = (1, 3)

kDLCPU = 1
kDLCUDA = 2
kDLVulkan = 7

_STD = "array API standard"

# rule id -> (what it checks, the rule paraphrased and where it is written).


_LEGACY_ONLY = "legacy protocol only (max_version= raised TypeError)"


def _exc(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return "%s: %s" % (type(e).__name__, text) if text else type(e).__name__


def _fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"


class Subject:
    """The object under test and what the probes learnt about it, per process."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.deleters = DeleterProbe()
        self._device: Optional[Tuple[int, int]] = None
        self._device_done = False
        self._own: Optional[Dict[str, Any]] = None
        self._protocol: Optional[Tuple[str, str]] = None

    # -- exports ----------------------------------------------------------------

    def export(self, **kwargs: Any) -> Tuple[Any, Optional[Exception]]:
        """(Export, None) or (None, exception) for ``obj.__dlpack__(**kwargs)``.

        The deleter of every tensor received is interposed at once."""
        try:
            capsule = self.obj.__dlpack__(**kwargs)
        except Exception as e:  # noqa: BLE001 - every refusal is data here
            return None, e
        exp = Export(capsule)
        exp.record = self.deleters.wrap(exp)
        return exp, None

    def device(self) -> Optional[Tuple[int, int]]:
        """__dlpack_device__() as (int, int), or None when it fails."""
        if not self._device_done:
            self._device_done = True
            try:
                d = self.obj.__dlpack_device__()
                self._device = (int(d[0]), int(d[1]))
            except Exception:  # noqa: BLE001
                self._device = None
        return self._device

    def own(self) -> Dict[str, Any]:
        """What the object says of its own memory, from the buffer protocol,
        __array_interface__, data_ptr and a readonly attribute."""
        own = self._own
        if own is None:
            own = self._own = _own_memory(self.obj)
        return own

    def protocol(self) -> Tuple[str, str]:
        """("versioned" | "legacy-only" | "refused", text): how the object
        answers ``__dlpack__(max_version=(1, 3))``."""
        state = self._protocol
        if state is None:
            exp, err = self.export(max_version=MAX_VERSION)
            if err is None:
                state = ("versioned", "")
                release(exp)
            elif isinstance(err, TypeError):
                state = ("legacy-only", _LEGACY_ONLY)
            else:
                state = ("refused", _exc(err))
            self._protocol = state
        return state

    def legacy_only(self) -> Optional[str]:
        state, text = self.protocol()
        return text if state == "legacy-only" else None


def release(exp: Optional[Export]) -> None:
    """Drops the checker's references to an export's capsule."""
    if exp is not None:
        exp.capsule = None


def _own_memory(obj: Any) -> Dict[str, Any]:
    own: Dict[str, Any] = {"address": None, "address_from": None, "readonly": None, "readonly_from": None,
           "shape": None, "buffer": False}
    got = buffer_address(obj)
    if got is not None:
        own["address"], own["readonly"] = got
        own["address_from"] = own["readonly_from"] = "the buffer protocol"
        own["buffer"] = True
    if own["address"] is None:
        try:
            ai = obj.__array_interface__
            address, readonly = ai["data"]
            own["address"] = int(address)
            own["readonly"] = bool(readonly)
            own["address_from"] = own["readonly_from"] = "__array_interface__"
        except Exception:  # noqa: BLE001
            pass
    if own["address"] is None:
        try:
            p = obj.data_ptr
            p = p() if callable(p) else p
            if isinstance(p, int):
                own["address"] = p
                own["address_from"] = "data_ptr"
        except Exception:  # noqa: BLE001
            pass
    if own["readonly"] is None:
        ro = getattr(obj, "readonly", None)
        if isinstance(ro, bool):
            own["readonly"] = ro
            own["readonly_from"] = "its readonly attribute"
    try:
        own["shape"] = tuple(int(x) for x in obj.shape)
    except Exception:  # noqa: BLE001
        pass
    return own


def _numel(shape: Optional[Sequence[int]]) -> int:
    n = 1
    for x in shape or ():
        n *= x
    return n


def _skip_all(rules: Sequence[str], why: str) -> List[Finding]:
    return [finding(r, SKIP, why) for r in rules]


def _check_tensor(exp: Export, own: Dict[str, Any],
                  flags: int = 0) -> Tuple[bool, str, Dict[str, Any]]:
    """(ok, text, summary) for the tensor of an export: dlb_validate, then the
    object's shape."""
    status, text = native().check_tensor(exp.tensor, flags)
    if status != 0:
        return False, "dlb_validate refused the tensor: " + text, {}
    s = exp.summary()
    n = native()
    desc = "%s %s, ndim %d" % (n.dtype_text(*s["dtype"]), _fmt_shape(s["shape"] or ()), s["ndim"])
    if s["strides"] is None and s["ndim"] > 0:
        desc += ", strides NULL"
    elif s["ndim"] > 0:
        desc += ", strides %s" % _fmt_shape(s["strides"])
    if s["byte_offset"]:
        desc += ", byte_offset %d" % s["byte_offset"]
    if own["shape"] is not None and tuple(s["shape"] or ()) != own["shape"]:
        return False, "shape %s, but the object's shape is %s" % (
            _fmt_shape(s["shape"] or ()), _fmt_shape(own["shape"])), s
    return True, desc, s


def _alignment_note(s: Dict[str, Any]) -> str:
    if not s["address"] or s["dtype"][1] < 8:
        return ""
    item = s["dtype"][1] * s["dtype"][2] // 8
    if item and s["address"] % item:
        return "; data + byte_offset not aligned to its %d-byte element" % item
    return "; element-aligned" if item > 1 else ""


def _same_memory(exp_summary: Dict[str, Any], own: Dict[str, Any]) -> Optional[bool]:
    """None when unknown (no own address, or an empty tensor); else bool."""
    if own["address"] is None or _numel(exp_summary["shape"]) == 0:
        return None
    return bool(exp_summary["address"] == own["address"])


def _offset_text(exp_summary: Dict[str, Any], own: Dict[str, Any]) -> str:
    return "%+d bytes from the object's own address (%s)" % (
        exp_summary["address"] - own["address"], own["address_from"])


# ----------------------------------------------------------------------------
# Probes
# ----------------------------------------------------------------------------
