"""Probes of what an export is: the device query, legacy and versioned
capsules and their tensors, max_version. Each probe is registered with
the rules it reports (see _registry)."""

from typing import Any, Dict, List, Optional, Tuple

from ._native import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    LEGACY,
    VALIDATE_STRIDES_REQUIRED,
    VERSIONED,
    Export,
    native,
)
from ._registry import PROBE_RULES, finding, probe
from ._report import FAIL, PASS, SKIP, Finding
from ._subject import (
    MAX_VERSION,
    kDLCPU,
    _STD,
    _LEGACY_ONLY,
    _exc,
    Subject,
    release,
    _skip_all,
    _check_tensor,
    _alignment_note,
    _same_memory,
    _offset_text,
)


@probe("device", {
        "device.query": (
            "__dlpack_device__() gives (device_type, device_id) for a device DLPack defines",
            _STD + ", array.__dlpack_device__: returns a tuple (device_type, device_id) in DLPack "
            "format; dlpack.h, DLDeviceType: the device types DLPack defines",
        ),
})
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




@probe("legacy", {
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
            "read-only memory is not shared through the legacy struct, which cannot mark it (the "
            "export is refused, or a copy)",
            "dlpack.h 1.0, DLPACK_FLAG_BITMASK_READ_ONLY: only DLManagedTensorVersioned can say "
            "a tensor is read only; a legacy consumer may write to what it gets",
        ),
})
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
        rest = _skip_all(tuple(PROBE_RULES["legacy"])[1:5], "no legacy export to inspect")
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
            return out + _skip_all(tuple(PROBE_RULES["legacy"])[1:], "no legacy tensor to inspect")

        ok, text, summary = _check_tensor(exp, own)
        if not ok:
            out.append(finding("legacy.tensor", FAIL, text))
            return out + _skip_all(tuple(PROBE_RULES["legacy"])[2:], "the tensor did not validate")
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
        elif own["readonly"]:
            out.append(finding("legacy.zero_copy", PASS, "read-only memory (%s): a copy, since the legacy "
                               "struct cannot mark the memory read-only" % own["readonly_from"]))
        else:
            out.append(finding("legacy.zero_copy", FAIL, "the data is at " + _offset_text(summary, own)))

        out.append(_values(s, exp, summary))

        if own["readonly"] is None:
            out.append(finding("legacy.read_only", SKIP, "the object exposes no read-only state "
                               "(buffer protocol, __array_interface__ or readonly attribute)"))
        elif own["readonly"] and same is False:
            out.append(finding("legacy.read_only", PASS, "read-only memory (%s): the legacy export is a "
                               "copy, the consumer's own" % own["readonly_from"]))
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




@probe("versioned", {
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
})
def probe_versioned(s: Subject) -> List[Finding]:
    own = s.own()
    out: List[Finding] = []
    exp, err = s.export(max_version=MAX_VERSION)
    if err is not None:
        if isinstance(err, TypeError):
            s._protocol = ("legacy-only", _LEGACY_ONLY)
            return _skip_all(tuple(PROBE_RULES["versioned"]), _LEGACY_ONLY)
        if isinstance(err, BufferError):
            out.append(finding("versioned.capsule", PASS, "refused with " + _exc(err)))
        else:
            out.append(finding("versioned.capsule", FAIL, "__dlpack__(max_version=(1, 3)) raised %s, "
                               "not BufferError" % _exc(err)))
        return out + _skip_all(tuple(PROBE_RULES["versioned"])[1:], "no versioned export to inspect")
    try:
        if exp.name == LEGACY:
            out.append(finding("versioned.capsule", PASS, 'a legacy "dltensor" capsule (allowed: the '
                               "consumer checks what it got)"))
            return out + _skip_all(tuple(PROBE_RULES["versioned"])[1:], "the producer answered with a legacy capsule")
        if exp.name != VERSIONED:
            out.append(finding("versioned.capsule", FAIL, "__dlpack__(max_version=(1, 3)) returned %s"
                               % exp.name_text))
            return out + _skip_all(tuple(PROBE_RULES["versioned"])[1:], "no versioned tensor to inspect")
        if not exp.managed:
            out.append(finding("versioned.capsule", FAIL, 'the "dltensor_versioned" capsule holds NULL'))
            return out + _skip_all(tuple(PROBE_RULES["versioned"])[1:], "no versioned tensor to inspect")
        major, minor = exp.version
        if major != 1:
            out.append(finding("versioned.capsule", FAIL, "version %d.%d, but the consumer asked for "
                               "at most 1.3" % (major, minor)))
            return out + _skip_all(tuple(PROBE_RULES["versioned"])[1:], "a major version the checker cannot read")
        note = "" if exp.has_destructor else "; the capsule has no destructor"
        out.append(finding("versioned.capsule", PASS, '"dltensor_versioned", version %d.%d%s'
                           % (major, minor, note)))

        ok, text, summary = _check_tensor(exp, own)
        if not ok:
            out.append(finding("versioned.tensor", FAIL, text))
            return out + _skip_all(tuple(PROBE_RULES["versioned"])[2:], "the tensor did not validate")
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


@probe("max_version", {
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
})
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
