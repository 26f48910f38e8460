"""The probes of the conformance checker and the rules they check.

A probe drives one part of an object's DLPack protocol and returns one
finding per rule it owns. Probes share nothing but the :class:`Subject`,
whose caches they may rebuild, so that after a crash the checker can carry on
with the next probe in a fresh process.
"""

import gc
import sys
import threading
import tracemalloc
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._check_native import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    LEGACY,
    VALIDATE_STRIDES_REQUIRED,
    VERSIONED,
    DeleterProbe,
    Export,
    buffer_address,
    native,
)
from ._check_report import FAIL, PASS, SKIP, WARN, Finding

# The DLPack version the checker asks producers for.
MAX_VERSION = (1, 3)

kDLCPU = 1
kDLCUDA = 2
kDLVulkan = 7

_STD = "array API standard"

# rule id -> (what it checks, the rule paraphrased and where it is written).
RULES = {
    "device.query": (
        "__dlpack_device__() gives (device_type, device_id) for a device DLPack defines",
        _STD + ", array.__dlpack_device__: returns a tuple (device_type, device_id) in DLPack "
        "format; dlpack.h, DLDeviceType: the device types DLPack defines",
    ),
    "legacy.capsule": (
        '__dlpack__() with no arguments gives a "dltensor" capsule, or raises BufferError',
        _STD + ', array.__dlpack__, max_version: None asks for the pre-1.0 ABI, a capsule named '
        '"dltensor" holding a DLManagedTensor (Data interchange mechanisms, DLPack); Raises: '
        "BufferError when the data cannot be exported",
    ),
    "legacy.tensor": (
        "the legacy tensor passes dlb_validate and has the object's shape",
        "dlpack.h, DLTensor: a dtype legal for its code, extents >= 0, strides in elements "
        "(NULL: compact row-major, before 1.2), data + byte_offset reaching every element "
        "without overflow",
    ),
    "legacy.device": (
        "the legacy tensor is on the device __dlpack_device__() names",
        _STD + ", array.__dlpack__, dl_device: None means the capsule is on the same device "
        "as self.__dlpack_device__()",
    ),
    "legacy.zero_copy": (
        "the default export is the object's own memory",
        _STD + ", array.__dlpack__, copy: None means reuse the existing memory buffer if "
        "possible (Data interchange mechanisms: zero-copy where possible)",
    ),
    "legacy.values": (
        "the legacy tensor's elements equal the object's (read through the buffer protocol)",
        _STD + ", Data interchange mechanisms: the consumer gets the producer's data; "
        "dlpack.h, DLTensor: element i is at data + byte_offset + sum(index * stride) * itemsize",
    ),
    "legacy.read_only": (
        "read-only memory is not exported through the legacy struct, which cannot mark it",
        "dlpack.h 1.0, DLPACK_FLAG_BITMASK_READ_ONLY: only DLManagedTensorVersioned can say "
        "a tensor is read only; a legacy consumer may write to what it gets",
    ),
    "versioned.capsule": (
        '__dlpack__(max_version=(1, 3)) gives "dltensor_versioned" of major 1, or a legacy capsule',
        _STD + ", array.__dlpack__, max_version: the capsule may be of that version or "
        "another, so the consumer checks; dlpack.h, DLPackVersion: a major the consumer does "
        "not know must not be read beyond flags",
    ),
    "versioned.tensor": (
        "the versioned tensor passes dlb_validate and has the object's shape",
        "dlpack.h, DLManagedTensorVersioned and DLTensor: a dtype legal for its code, "
        "extents >= 0, data + byte_offset reaching every element without overflow",
    ),
    "versioned.strides": (
        "a tensor of version 1.2 or later with ndim > 0 has strides",
        "dlpack.h 1.2, DLTensor.strides: can not be NULL if ndim != 0 (before 1.2, NULL "
        "meant compact row-major)",
    ),
    "versioned.device": (
        "the versioned tensor is on the device __dlpack_device__() names",
        _STD + ", array.__dlpack__, dl_device: None means the capsule is on the same device "
        "as self.__dlpack_device__()",
    ),
    "versioned.read_only": (
        "read-only memory is exported with DLPACK_FLAG_BITMASK_READ_ONLY",
        "dlpack.h, DLPACK_FLAG_BITMASK_READ_ONLY: the tensor is read only, and consumers "
        "must not write to it",
    ),
    "versioned.is_copied": (
        "IS_COPIED is set on the default export exactly when it is not the object's memory",
        "dlpack.h, DLPACK_FLAG_BITMASK_IS_COPIED: the tensor is a copy made by the producer, "
        "solely owned by the consumer; " + _STD + ", array.__dlpack__, copy: when a copy "
        "happens the flag must be set",
    ),
    "max_version.old": (
        "max_version=(0, 8) gives a legacy capsule or BufferError",
        _STD + ", array.__dlpack__, notes: a consumer of an older major gets the older ABI "
        "if the producer kept it, else BufferError",
    ),
    "max_version.newer": (
        "max_version=(1, 255) gives a capsule the consumer can read",
        _STD + ", array.__dlpack__, notes: when max_version is at or above the producer's "
        "own, or of the same major, the producer returns its own version",
    ),
    "copy.true": (
        "copy=True gives memory of its own, flagged IS_COPIED, holding the same values",
        _STD + ", array.__dlpack__, copy: True means the function must always copy, and "
        "when a copy happens DLPACK_FLAG_BITMASK_IS_COPIED must be set",
    ),
    "copy.false": (
        "copy=False gives the object's own memory, not flagged IS_COPIED",
        _STD + ", array.__dlpack__, copy: False means the function must never copy, and "
        "raise BufferError when a copy is needed",
    ),
    "dl_device.same": (
        "dl_device equal to __dlpack_device__() is accepted without a copy",
        _STD + ", array.__dlpack__, dl_device: the format is that of __dlpack_device__(); "
        "copy=None reuses the existing memory if possible",
    ),
    "dl_device.host": (
        "dl_device=(kDLCPU, 0) is accepted",
        _STD + ", array.__dlpack__, dl_device: a compliant library offers a way to export "
        "memory the Python interpreter can reach (kDLCPU)",
    ),
    "dl_device.other": (
        "a dl_device the producer cannot serve raises BufferError",
        _STD + ", array.__dlpack__, dl_device: if the device type cannot be handled by the "
        "producer, this function must raise BufferError",
    ),
    "stream.cpu": (
        "a stream on a CPU tensor is refused",
        _STD + ", array.__dlpack__, stream: on CPU and other device types without streams, "
        "only None is accepted",
    ),
    "lifetime.unconsumed": (
        "a capsule dropped unconsumed runs the deleter exactly once, through its destructor",
        _STD + ", Data interchange mechanisms, DLPack: the producer sets a PyCapsule "
        "destructor that calls the deleter while the capsule has its unused name; dlpack.h, "
        "deleter: called once, by the last owner",
    ),
    "lifetime.consumed": (
        "a capsule renamed used_* by a consumer does not run the deleter again",
        _STD + ", Data interchange mechanisms, DLPack: the consumer renames the capsule to "
        '"used_dltensor" / "used_dltensor_versioned" so that the destructor does not call '
        "the deleter; the consumer then calls it",
    ),
    "lifetime.refcount": (
        "the object's reference count returns to its starting value once exports are released",
        "dlpack.h, deleter: destructs the manager_ctx that holds the tensor, so every "
        "reference an export took is given back when its deleter runs",
    ),
    "lifetime.memory": (
        "exports released leave no Python memory behind (tracemalloc), each deleter run once; "
        "growth smaller than the tensor is a warning (a heuristic)",
        "dlpack.h, deleter: destructs the manager_ctx and the managed tensor itself",
    ),
    "lifetime.threads": (
        "exports made and released on several threads at once run each deleter once",
        "dlpack.h, deleter: called exactly once by whoever owns the tensor last, on any thread",
    ),
}


_LEGACY_ONLY = "legacy protocol only (max_version= raised TypeError)"


def _exc(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if len(text) > 160:
        text = text[:157] + "..."
    return "%s: %s" % (type(e).__name__, text) if text else type(e).__name__


def finding(rule: str, status: str, detail: str) -> Finding:
    cite = RULES[rule][1]
    if status == FAIL:
        detail = "%s (rule: %s)" % (detail.rstrip("."), cite)
    return Finding(rule, status, detail, cite)


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


def probe_device(s: Subject) -> List[Finding]:
    try:
        d = s.obj.__dlpack_device__()
    except Exception as e:  # noqa: BLE001
        return [finding("device.query", FAIL, "__dlpack_device__() raised %s" % _exc(e))]
    if not isinstance(d, tuple) or len(d) != 2 or not all(isinstance(x, int) for x in d):
        return [finding("device.query", FAIL, "__dlpack_device__() returned %r, not a tuple of "
                        "two ints" % (d,))]
    status, text = native().device_known(int(d[0]), int(d[1]))
    if status != 0:
        return [finding("device.query", FAIL, "__dlpack_device__() returned %r: %s" % (d, text))]
    return [finding("device.query", PASS, "(%d, %d)" % (int(d[0]), int(d[1])))]


_LEGACY_RULES = ("legacy.capsule", "legacy.tensor", "legacy.device", "legacy.zero_copy",
                 "legacy.values", "legacy.read_only")


def probe_legacy(s: Subject) -> List[Finding]:
    own = s.own()
    out: List[Finding] = []
    exp, err = s.export()
    if err is not None:
        if isinstance(err, BufferError):
            out.append(finding("legacy.capsule", PASS, "refused with " + _exc(err)))
        else:
            out.append(finding("legacy.capsule", FAIL, "__dlpack__() raised %s, not BufferError"
                               % _exc(err)))
        rest = _skip_all(_LEGACY_RULES[1:5], "no legacy export to inspect")
        if own["readonly"]:
            rest.append(finding("legacy.read_only", PASS, "read-only memory (%s): the legacy export "
                                "was refused" % own["readonly_from"]))
        else:
            rest.append(finding("legacy.read_only", SKIP, "no legacy export to inspect"))
        return out + rest
    try:
        if exp.name == VERSIONED:
            out.append(finding("legacy.capsule", FAIL, '__dlpack__() with no max_version returned a '
                               '"dltensor_versioned" capsule; a consumer that did not ask for '
                               "one reads it as a DLManagedTensor"))
        elif exp.name != LEGACY:
            out.append(finding("legacy.capsule", FAIL, "__dlpack__() returned %s" % exp.name_text))
        elif not exp.managed:
            out.append(finding("legacy.capsule", FAIL, 'the "dltensor" capsule holds NULL'))
        else:
            note = "" if exp.has_destructor else "; the capsule has no destructor"
            out.append(finding("legacy.capsule", PASS, '"dltensor"' + note))
        if exp.name != LEGACY or not exp.managed:
            return out + _skip_all(_LEGACY_RULES[1:], "no legacy tensor to inspect")

        ok, text, summary = _check_tensor(exp, own)
        if not ok:
            out.append(finding("legacy.tensor", FAIL, text))
            return out + _skip_all(_LEGACY_RULES[2:], "the tensor did not validate")
        out.append(finding("legacy.tensor", PASS, text + _alignment_note(summary)))

        device = s.device()
        if device is None:
            out.append(finding("legacy.device", SKIP, "__dlpack_device__() failed"))
        elif summary["device"] != device:
            out.append(finding("legacy.device", FAIL, "the tensor is on %r, __dlpack_device__() says %r"
                               % (summary["device"], device)))
        else:
            out.append(finding("legacy.device", PASS, "%r" % (device,)))

        same = _same_memory(summary, own)
        if same is None:
            why = "empty tensor" if own["address"] is not None else "the object exposes no address"
            out.append(finding("legacy.zero_copy", SKIP, why))
        elif same:
            out.append(finding("legacy.zero_copy", PASS, "same address as %s" % own["address_from"]))
        else:
            out.append(finding("legacy.zero_copy", FAIL, "the data is at " + _offset_text(summary, own)))

        out.append(_values(s, exp, summary))

        if own["readonly"] is None:
            out.append(finding("legacy.read_only", SKIP, "the object exposes no read-only state "
                               "(buffer protocol, __array_interface__ or readonly attribute)"))
        elif own["readonly"]:
            out.append(finding("legacy.read_only", FAIL, "read-only memory (%s) was exported as a "
                               "legacy tensor, which consumers take as writable" % own["readonly_from"]))
        else:
            out.append(finding("legacy.read_only", PASS, "writable memory (%s)" % own["readonly_from"]))
        return out
    finally:
        release(exp)


def _values(s: Subject, exp: Export, summary: Dict[str, Any]) -> Finding:
    own = s.own()
    if not own["buffer"]:
        return finding("legacy.values", SKIP, "the object has no buffer protocol to compare with")
    if summary["device"][0] != kDLCPU:
        return finding("legacy.values", SKIP, "not a CPU tensor")
    got, why = native().compact_bytes(exp.tensor)
    if got is None:
        return finding("legacy.values", SKIP, "cannot read the tensor: " + why)
    try:
        with memoryview(s.obj) as view:
            expected = view.tobytes()
    except Exception as e:  # noqa: BLE001
        return finding("legacy.values", SKIP, "cannot read the object's buffer: " + _exc(e))
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        return finding("legacy.values", FAIL, "%d bytes read through the tensor differ from the "
                       "object's %d, first at byte %d" % (len(got), len(expected), first))
    return finding("legacy.values", PASS, "%d bytes equal" % len(got))


_VERSIONED_RULES = ("versioned.capsule", "versioned.tensor", "versioned.strides",
                    "versioned.device", "versioned.read_only", "versioned.is_copied")


def probe_versioned(s: Subject) -> List[Finding]:
    own = s.own()
    out: List[Finding] = []
    exp, err = s.export(max_version=MAX_VERSION)
    if err is not None:
        if isinstance(err, TypeError):
            s._protocol = ("legacy-only", _LEGACY_ONLY)
            return _skip_all(_VERSIONED_RULES, _LEGACY_ONLY)
        if isinstance(err, BufferError):
            out.append(finding("versioned.capsule", PASS, "refused with " + _exc(err)))
        else:
            out.append(finding("versioned.capsule", FAIL, "__dlpack__(max_version=(1, 3)) raised %s, "
                               "not BufferError" % _exc(err)))
        return out + _skip_all(_VERSIONED_RULES[1:], "no versioned export to inspect")
    try:
        if exp.name == LEGACY:
            out.append(finding("versioned.capsule", PASS, 'a legacy "dltensor" capsule (allowed: the '
                               "consumer checks what it got)"))
            return out + _skip_all(_VERSIONED_RULES[1:], "the producer answered with a legacy capsule")
        if exp.name != VERSIONED:
            out.append(finding("versioned.capsule", FAIL, "__dlpack__(max_version=(1, 3)) returned %s"
                               % exp.name_text))
            return out + _skip_all(_VERSIONED_RULES[1:], "no versioned tensor to inspect")
        if not exp.managed:
            out.append(finding("versioned.capsule", FAIL, 'the "dltensor_versioned" capsule holds NULL'))
            return out + _skip_all(_VERSIONED_RULES[1:], "no versioned tensor to inspect")
        major, minor = exp.version
        if major != 1:
            out.append(finding("versioned.capsule", FAIL, "version %d.%d, but the consumer asked for "
                               "at most 1.3" % (major, minor)))
            return out + _skip_all(_VERSIONED_RULES[1:], "a major version the checker cannot read")
        note = "" if exp.has_destructor else "; the capsule has no destructor"
        out.append(finding("versioned.capsule", PASS, '"dltensor_versioned", version %d.%d%s'
                           % (major, minor, note)))

        ok, text, summary = _check_tensor(exp, own)
        if not ok:
            out.append(finding("versioned.tensor", FAIL, text))
            return out + _skip_all(_VERSIONED_RULES[2:], "the tensor did not validate")
        out.append(finding("versioned.tensor", PASS, text + _alignment_note(summary)))

        if summary["ndim"] == 0:
            out.append(finding("versioned.strides", PASS, "ndim 0: strides may be NULL"))
        elif minor >= 2:
            status, text = native().check_tensor(exp.tensor, VALIDATE_STRIDES_REQUIRED)
            if status != 0:
                out.append(finding("versioned.strides", FAIL, "version 1.%d with ndim %d: %s"
                                   % (minor, summary["ndim"], text)))
            else:
                out.append(finding("versioned.strides", PASS, "version 1.%d: strides present" % minor))
        elif summary["strides"] is None:
            out.append(finding("versioned.strides", PASS, "version 1.%d: NULL strides, allowed "
                               "before 1.2" % minor))
        else:
            out.append(finding("versioned.strides", PASS, "strides present"))

        device = s.device()
        if device is None:
            out.append(finding("versioned.device", SKIP, "__dlpack_device__() failed"))
        elif summary["device"] != device:
            out.append(finding("versioned.device", FAIL, "the tensor is on %r, __dlpack_device__() "
                               "says %r" % (summary["device"], device)))
        else:
            out.append(finding("versioned.device", PASS, "%r" % (device,)))

        flagged = bool(exp.flags & FLAG_READ_ONLY)
        if own["readonly"] is None:
            out.append(finding("versioned.read_only", SKIP if not flagged else PASS,
                               "the object exposes no read-only state" if not flagged
                               else "READ_ONLY set"))
        elif own["readonly"] and not flagged:
            out.append(finding("versioned.read_only", FAIL, "read-only memory (%s) exported with "
                               "flags 0x%x, READ_ONLY unset" % (own["readonly_from"], exp.flags)))
        elif own["readonly"]:
            out.append(finding("versioned.read_only", PASS, "read-only memory, READ_ONLY set"))
        else:
            out.append(finding("versioned.read_only", PASS, "writable memory, READ_ONLY %s"
                               % ("set" if flagged else "unset")))

        copied = bool(exp.flags & FLAG_IS_COPIED)
        same = _same_memory(summary, own)
        if same is None:
            out.append(finding("versioned.is_copied", SKIP, "cannot compare with the object's "
                               "memory (%s); IS_COPIED %s" % (
                                   "empty tensor" if own["address"] is not None else "no address",
                                   "set" if copied else "unset")))
        elif same and copied:
            out.append(finding("versioned.is_copied", FAIL, "IS_COPIED set, yet the data is the "
                               "object's own memory (same address as %s)" % own["address_from"]))
        elif not same and not copied:
            out.append(finding("versioned.is_copied", FAIL, "IS_COPIED unset, yet the data is at "
                               + _offset_text(summary, own)))
        else:
            out.append(finding("versioned.is_copied", PASS, "IS_COPIED %s, data %s the object's "
                               "memory" % ("set" if copied else "unset", "in" if same else "outside")))
        return out
    finally:
        release(exp)


def probe_max_version(s: Subject) -> List[Finding]:
    legacy_only = s.legacy_only()
    if legacy_only:
        return _skip_all(("max_version.old", "max_version.newer"), legacy_only)
    out: List[Finding] = []
    exp, err = s.export(max_version=(0, 8))
    try:
        if err is not None:
            if isinstance(err, BufferError):
                out.append(finding("max_version.old", PASS, "refused with " + _exc(err)))
            else:
                out.append(finding("max_version.old", FAIL, "max_version=(0, 8) raised %s, not "
                                   "BufferError" % _exc(err)))
        elif exp.name == LEGACY:
            out.append(finding("max_version.old", PASS, 'a legacy "dltensor" capsule'))
        elif exp.name == VERSIONED:
            out.append(finding("max_version.old", FAIL, "max_version=(0, 8) got a versioned capsule "
                               "(version %s), which a 0.x consumer reads as a DLManagedTensor"
                               % (".".join(map(str, exp.version or ())),)))
        else:
            out.append(finding("max_version.old", FAIL, "max_version=(0, 8) got %s" % exp.name_text))
    finally:
        release(exp)
    exp, err = s.export(max_version=(1, 255))
    try:
        if err is not None:
            out.append(finding("max_version.newer", FAIL, "max_version=(1, 255) raised %s; a "
                               "consumer of the same major is served" % _exc(err)))
        elif exp.name == VERSIONED and exp.version and exp.version[0] == 1:
            out.append(finding("max_version.newer", PASS, "version %d.%d" % exp.version))
        elif exp.name == LEGACY:
            out.append(finding("max_version.newer", PASS, 'a legacy "dltensor" capsule'))
        elif exp.name == VERSIONED:
            out.append(finding("max_version.newer", FAIL, "max_version=(1, 255) got version %d.%d"
                               % exp.version))
        else:
            out.append(finding("max_version.newer", FAIL, "max_version=(1, 255) got %s" % exp.name_text))
    finally:
        release(exp)
    return out


def _versioned_tensor(s: Subject, exp: Export, rule: str,
                      what: str) -> Tuple[Dict[str, Any], Optional[Finding]]:
    """(summary, None) for a usable versioned export, or (None, finding)."""
    if exp.name != VERSIONED or not exp.managed or not exp.version or exp.version[0] != 1:
        detail = "%s returned %s" % (what, exp.name_text)
        if exp.name == LEGACY:
            detail += ", which cannot carry IS_COPIED or READ_ONLY"
        return {}, finding(rule, FAIL, detail)
    status, text = native().check_tensor(exp.tensor)
    if status != 0:
        return {}, finding(rule, FAIL, "%s: dlb_validate refused the tensor: %s" % (what, text))
    return exp.summary(), None


def probe_copy(s: Subject) -> List[Finding]:
    legacy_only = s.legacy_only()
    if legacy_only:
        return _skip_all(("copy.true", "copy.false"), legacy_only)
    own = s.own()
    out: List[Finding] = []
    base, base_err = s.export(max_version=MAX_VERSION)
    base_summary = None
    if base_err is None and base.name == VERSIONED and base.version and base.version[0] == 1:
        if native().check_tensor(base.tensor)[0] == 0:
            base_summary = base.summary()
    try:
        exp, err = s.export(max_version=MAX_VERSION, copy=True)
        try:
            if err is not None:
                out.append(finding("copy.true", FAIL, "copy=True raised %s; it must always copy"
                                   % _exc(err)))
            else:
                summary, bad = _versioned_tensor(s, exp, "copy.true", "copy=True")
                if bad is not None:
                    out.append(bad)
                else:
                    out.append(_copy_true(exp, summary, base, base_summary, own))
        finally:
            release(exp)

        exp, err = s.export(max_version=MAX_VERSION, copy=False)
        try:
            base_copied = base_summary is not None and bool(base.flags & FLAG_IS_COPIED)
            if err is not None:
                if isinstance(err, BufferError) and base_copied:
                    out.append(finding("copy.false", PASS, "refused with %s (the default export "
                                       "copies)" % _exc(err)))
                elif isinstance(err, TypeError):
                    out.append(finding("copy.false", FAIL, "max_version is accepted but copy= "
                                       "raised " + _exc(err)))
                else:
                    out.append(finding("copy.false", FAIL, "copy=False raised %s, though the "
                                       "default export needs no copy" % _exc(err)))
            else:
                summary, bad = _versioned_tensor(s, exp, "copy.false", "copy=False")
                if bad is not None:
                    out.append(bad)
                elif exp.flags & FLAG_IS_COPIED:
                    out.append(finding("copy.false", FAIL, "copy=False gave a tensor flagged IS_COPIED"))
                else:
                    same = _same_memory(summary, own)
                    if same is False:
                        out.append(finding("copy.false", FAIL, "copy=False gave data at "
                                           + _offset_text(summary, own)))
                    elif same:
                        out.append(finding("copy.false", PASS, "same address as %s" % own["address_from"]))
                    elif base_summary is not None and _numel(summary["shape"]) and \
                            summary["address"] != base_summary["address"]:
                        out.append(finding("copy.false", FAIL, "copy=False gave data at another "
                                           "address than the default export"))
                    else:
                        out.append(finding("copy.false", PASS, "IS_COPIED unset (the object's own "
                                           "address is not known)"))
        finally:
            release(exp)
    finally:
        release(base)
    return out


def _copy_true(exp: Export, summary: Dict[str, Any], base: Optional[Export],
               base_summary: Optional[Dict[str, Any]], own: Dict[str, Any]) -> Finding:
    if not exp.flags & FLAG_IS_COPIED:
        return finding("copy.true", FAIL, "copy=True gave flags 0x%x: IS_COPIED unset" % exp.flags)
    if _numel(summary["shape"]) == 0:
        return finding("copy.true", PASS, "IS_COPIED set (empty tensor)")
    if own["address"] is not None and summary["address"] == own["address"]:
        return finding("copy.true", FAIL, "copy=True gave the object's own memory (same address "
                       "as %s) flagged IS_COPIED" % own["address_from"])
    if base_summary is not None and summary["address"] == base_summary["address"]:
        return finding("copy.true", FAIL, "copy=True gave the same address as the default export")
    if summary["device"][0] != kDLCPU or base_summary is None or base is None:
        return finding("copy.true", PASS, "IS_COPIED set, memory of its own")
    got, why = native().compact_bytes(exp.tensor)
    want, why2 = native().compact_bytes(base.tensor)
    if got is None or want is None:
        return finding("copy.true", PASS, "IS_COPIED set, memory of its own (values not "
                       "compared: %s)" % (why or why2))
    if got != want:
        return finding("copy.true", FAIL, "copy=True holds other values than the default export "
                       "(%d bytes compared)" % len(want))
    return finding("copy.true", PASS, "IS_COPIED set, memory of its own, %d bytes equal" % len(got))


def probe_dl_device(s: Subject) -> List[Finding]:
    rules = ("dl_device.same", "dl_device.host", "dl_device.other")
    legacy_only = s.legacy_only()
    if legacy_only:
        return _skip_all(rules, legacy_only)
    device = s.device()
    if device is None:
        return _skip_all(rules, "__dlpack_device__() failed")
    own = s.own()
    out: List[Finding] = []
    exp, err = s.export(max_version=MAX_VERSION, dl_device=device)
    try:
        if err is not None:
            out.append(finding("dl_device.same", FAIL, "dl_device=%r (its own device) raised %s"
                               % (device, _exc(err))))
        else:
            summary, bad = _versioned_tensor(s, exp, "dl_device.same", "dl_device=%r" % (device,))
            if bad is not None:
                out.append(bad)
            elif summary["device"] != device:
                out.append(finding("dl_device.same", FAIL, "dl_device=%r gave a tensor on %r"
                                   % (device, summary["device"])))
            elif exp.flags & FLAG_IS_COPIED or _same_memory(summary, own) is False:
                out.append(finding("dl_device.same", FAIL, "dl_device=%r (its own device) made a copy"
                                   % (device,)))
            else:
                out.append(finding("dl_device.same", PASS, "%r accepted, no copy" % (device,)))
    finally:
        release(exp)

    if device[0] == kDLCPU:
        out.append(finding("dl_device.host", SKIP, "a CPU tensor: dl_device.same covers it"))
    else:
        exp, err = s.export(max_version=MAX_VERSION, dl_device=(kDLCPU, 0))
        try:
            if err is not None:
                out.append(finding("dl_device.host", FAIL, "dl_device=(1, 0) raised " + _exc(err)))
            else:
                summary, bad = _versioned_tensor(s, exp, "dl_device.host", "dl_device=(1, 0)")
                if bad is not None:
                    out.append(bad)
                elif summary["device"] != (kDLCPU, 0):
                    out.append(finding("dl_device.host", FAIL, "dl_device=(1, 0) gave a tensor on %r"
                                       % (summary["device"],)))
                else:
                    out.append(finding("dl_device.host", PASS, "(1, 0) accepted"))
        finally:
            release(exp)

    other = (kDLCUDA, 0) if device[0] != kDLCUDA else (kDLVulkan, 0)
    exp, err = s.export(max_version=MAX_VERSION, dl_device=other)
    try:
        if err is not None:
            if isinstance(err, BufferError):
                out.append(finding("dl_device.other", PASS, "%r refused with %s" % (other, _exc(err))))
            else:
                out.append(finding("dl_device.other", FAIL, "dl_device=%r raised %s, not BufferError"
                                   % (other, _exc(err))))
        else:
            summary, bad = _versioned_tensor(s, exp, "dl_device.other", "dl_device=%r" % (other,))
            if bad is not None:
                out.append(bad)
            elif summary["device"] != other:
                out.append(finding("dl_device.other", FAIL, "dl_device=%r was ignored: the tensor is "
                                   "on %r" % (other, summary["device"])))
            else:
                out.append(finding("dl_device.other", PASS, "%r served" % (other,)))
    finally:
        release(exp)
    return out


def probe_stream(s: Subject) -> List[Finding]:
    device = s.device()
    if device is None:
        return [finding("stream.cpu", SKIP, "__dlpack_device__() failed")]
    if device[0] != kDLCPU:
        return [finding("stream.cpu", SKIP, "device type %d: stream values are device-specific"
                        % device[0])]
    exp, err = s.export(stream=1)
    try:
        if err is None:
            return [finding("stream.cpu", FAIL, "stream=1 on a CPU tensor was accepted (a capsule "
                            "came back): the stream was ignored")]
        return [finding("stream.cpu", PASS, "stream=1 refused with " + _exc(err))]
    finally:
        release(exp)


# -- lifetimes -------------------------------------------------------------------


def _kinds(s: Subject) -> List[Tuple[str, Dict[str, Any]]]:
    """[(label, kwargs)] of the export kinds the producer speaks."""
    kinds: List[Tuple[str, Dict[str, Any]]] = [("legacy", {})]
    if s.protocol()[0] == "versioned":
        kinds.append(("versioned", {"max_version": MAX_VERSION}))
    return kinds


def _calls_text(n: int) -> str:
    return {0: "never", 1: "once", 2: "twice"}.get(n, "%d times" % n)


def probe_unconsumed(s: Subject) -> List[Finding]:
    parts: List[str] = []
    failed: List[str] = []
    for label, kwargs in _kinds(s):
        exp, err = s.export(**kwargs)
        if err is not None:
            parts.append("%s: refused (%s)" % (label, type(err).__name__))
            continue
        record, has_destructor = exp.record, exp.has_destructor
        if exp.name not in (LEGACY, VERSIONED):
            release(exp)
            parts.append("%s: not a DLPack capsule" % label)
            continue
        release(exp)
        del exp
        if record is None:
            parts.append("%s: NULL deleter (allowed)" % label)
            continue
        if record.calls != 1:
            why = " (the capsule has no destructor)" if not has_destructor else ""
            failed.append("%s capsule dropped unconsumed: deleter ran %s%s"
                          % (label, _calls_text(record.calls), why))
        else:
            parts.append("%s: deleter ran once" % label)
    if failed:
        return [finding("lifetime.unconsumed", FAIL, "; ".join(failed))]
    return [finding("lifetime.unconsumed", PASS if parts else SKIP, "; ".join(parts) or "no export")]


def probe_consumed(s: Subject) -> List[Finding]:
    parts: List[str] = []
    failed: List[str] = []
    for label, kwargs in _kinds(s):
        exp, err = s.export(**kwargs)
        if err is not None:
            parts.append("%s: refused (%s)" % (label, type(err).__name__))
            continue
        if exp.name not in (LEGACY, VERSIONED):
            release(exp)
            parts.append("%s: not a DLPack capsule" % label)
            continue
        record = exp.record
        exp.rename_used()
        release(exp)
        del exp
        if record is None:
            parts.append("%s: NULL deleter (allowed)" % label)
            continue
        by_destructor = record.calls
        s.deleters.call(record)  # the consumer is done with the tensor
        if by_destructor:
            failed.append("%s: the destructor of a capsule renamed used_* ran the deleter (%s), and "
                          "the consumer's call made it %s" % (label, _calls_text(by_destructor),
                                                              _calls_text(record.calls)))
        elif record.calls != 1:
            failed.append("%s: the consumer's deleter call counted %d" % (label, record.calls))
        else:
            parts.append("%s: destructor left it, consumer's call ran it once" % label)
    if failed:
        return [finding("lifetime.consumed", FAIL, "; ".join(failed))]
    return [finding("lifetime.consumed", PASS if parts else SKIP, "; ".join(parts) or "no export")]


class _Tally:
    """Deleter calls of released exports, counted without keeping them."""

    def __init__(self) -> None:
        self.exports = 0
        self.bad: Dict[int, int] = {}  # calls -> how many exports had that count

    def add(self, s: Subject, record: Any) -> None:
        s.deleters.forget(record)
        self.exports += 1
        if record.calls != 1:
            self.bad[record.calls] = self.bad.get(record.calls, 0) + 1

    def text(self) -> str:
        return ", ".join("%d ran %s" % (n, _calls_text(c)) for c, n in sorted(self.bad.items()))


def _cycle(s: Subject, kinds: List[Tuple[str, Dict[str, Any]]], tally: _Tally) -> None:
    """One export of each kind dropped unconsumed and one consumed."""
    for _label, kwargs in kinds:
        exp, err = s.export(**kwargs)
        if err is None:
            record = exp.record
            release(exp)
            exp = None
            if record is not None:
                tally.add(s, record)
        exp, err = s.export(**kwargs)
        if err is None and exp.name in (LEGACY, VERSIONED):
            record = exp.record
            exp.rename_used()
            release(exp)
            exp = None
            if record is not None:
                s.deleters.call(record)
                tally.add(s, record)
        elif err is None:
            release(exp)


def probe_refcount(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    gc.collect()
    before = sys.getrefcount(s.obj)
    tally = _Tally()
    for _ in range(25):
        _cycle(s, kinds, tally)
    gc.collect()
    after = sys.getrefcount(s.obj)
    if after != before:
        return [finding("lifetime.refcount", FAIL, "reference count %d before and %d after %d "
                        "exports released" % (before, after, tally.exports))]
    return [finding("lifetime.refcount", PASS, "unchanged after %d exports released" % tally.exports)]


# The memory probe measures three windows of cycles and takes the smallest
# growth: the checker's own bookkeeping grows in steps (a dict resized now
# and then) that show in one window, while a leak grows every window.
_MEMORY_WINDOWS = 3
_MEMORY_CYCLES = 50
_MEMORY_BYTES_PER_EXPORT = 4  # growth at or below this an export passes
# Growth cannot tell a leaked tensor from a producer's own record of each
# export (a dict entry, a log line: about 1 KB of Python memory) unless the
# tensor is larger than any such record: from this size on, an export that
# retains at least half its tensor's bytes fails; other growth is a warning.
_MEMORY_TENSOR_MIN_BYTES = 16 * 1024


def _tensor_nbytes(s: Subject) -> Optional[int]:
    """The bytes of the tensor one legacy export describes (None if unknown)."""
    exp, err = s.export()
    if err is not None:
        return None
    try:
        if not exp.tensor or native().check_tensor(exp.tensor)[0] != 0:
            return None
        summary = exp.summary()
        code, bits, lanes = summary["dtype"]
        if summary["shape"] is None:
            return None
        return _numel(summary["shape"]) * bits * lanes // 8
    finally:
        record = exp.record
        release(exp)
        if record is not None:
            s.deleters.forget(record)


def probe_memory(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    nbytes = _tensor_nbytes(s)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tally = _Tally()
    grown: List[int] = []
    try:
        for _ in range(10):  # warm caches
            _cycle(s, kinds, _Tally())
        for _ in range(_MEMORY_WINDOWS):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            window = _Tally()
            for _ in range(_MEMORY_CYCLES):
                _cycle(s, kinds, window)
            gc.collect()
            grown.append(tracemalloc.get_traced_memory()[0] - before)
            tally.exports += window.exports
            for calls, n in window.bad.items():
                tally.bad[calls] = tally.bad.get(calls, 0) + n
    finally:
        if started:
            tracemalloc.stop()
    n = tally.exports
    per_window = n // _MEMORY_WINDOWS
    if tally.bad:
        return [finding("lifetime.memory", FAIL, "of %d exports released, %s" % (n, tally.text()))]
    per_export = min(grown) / per_window if per_window else 0.0
    if per_export <= _MEMORY_BYTES_PER_EXPORT:
        return [finding("lifetime.memory", PASS, "%d exports released, each deleter once, no Python "
                        "memory retained" % n)]
    grew = ("Python memory grew by %s bytes in each of %d windows of %d exports released (about "
            "%.0f bytes an export" % ("/".join(map(str, grown)), len(grown), per_window, per_export))
    if nbytes is not None and nbytes >= _MEMORY_TENSOR_MIN_BYTES and per_export >= nbytes / 2:
        return [finding("lifetime.memory", FAIL, "%s, the tensor being %d bytes): each export's "
                        "tensor, or a copy of it, is never freed" % (grew, nbytes))]
    size = "%d-byte" % nbytes if nbytes is not None else "unknown-size"
    return [finding("lifetime.memory", WARN, "%s; the tensor being %s, growth this small cannot "
                    "tell a leak from the producer's own record of each export: a heuristic; check "
                    "with a tensor of %d bytes or more, where an export retaining half its tensor "
                    "fails)" % (grew, size, _MEMORY_TENSOR_MIN_BYTES))]


def probe_threads(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    gc.collect()
    before = sys.getrefcount(s.obj)
    tallies = [_Tally() for _ in range(4)]
    errors: List[Exception] = []

    def work(tally: _Tally) -> None:
        try:
            for _ in range(25):
                _cycle(s, kinds, tally)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in tallies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gc.collect()
    after = sys.getrefcount(s.obj)
    total = _Tally()
    for t in tallies:
        total.exports += t.exports
        for calls, n in t.bad.items():
            total.bad[calls] = total.bad.get(calls, 0) + n
    n = total.exports
    if errors:
        return [finding("lifetime.threads", FAIL, "an export on a thread raised " + _exc(errors[0]))]
    if total.bad:
        return [finding("lifetime.threads", FAIL, "of %d exports on 4 threads, %s" % (n, total.text()))]
    if after != before:
        return [finding("lifetime.threads", FAIL, "reference count %d before and %d after %d exports "
                        "on 4 threads" % (before, after, n))]
    return [finding("lifetime.threads", PASS, "%d exports on 4 threads, each deleter once" % n)]


# A probe: (name, function, the rules it reports).
Probe = Tuple[str, Callable[[Subject], List[Finding]], Tuple[str, ...]]

# In report order.
PROBES: Tuple[Probe, ...] = (
    ("device", probe_device, ("device.query",)),
    ("legacy", probe_legacy, _LEGACY_RULES),
    ("versioned", probe_versioned, _VERSIONED_RULES),
    ("max_version", probe_max_version, ("max_version.old", "max_version.newer")),
    ("copy", probe_copy, ("copy.true", "copy.false")),
    ("dl_device", probe_dl_device, ("dl_device.same", "dl_device.host", "dl_device.other")),
    ("stream", probe_stream, ("stream.cpu",)),
    ("unconsumed", probe_unconsumed, ("lifetime.unconsumed",)),
    ("consumed", probe_consumed, ("lifetime.consumed",)),
    ("refcount", probe_refcount, ("lifetime.refcount",)),
    ("memory", probe_memory, ("lifetime.memory",)),
    ("threads", probe_threads, ("lifetime.threads",)),
)

assert [r for p in PROBES for r in p[2]] == list(RULES), "PROBES and RULES disagree"
