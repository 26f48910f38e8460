"""Probes of what a consumer may ask for: copy=, dl_device=, stream=.
Each probe is registered with the rules it reports (see _registry)."""

from typing import Any, Dict, List, Optional

from ._native import (
    FLAG_IS_COPIED,
    VERSIONED,
    Export,
    native,
)
from ._registry import finding, probe
from ._report import FAIL, PASS, SKIP, Finding
from ._probes_export import _versioned_tensor
from ._subject import (
    MAX_VERSION,
    kDLCPU,
    kDLCUDA,
    kDLVulkan,
    _STD,
    _exc,
    Subject,
    release,
    _numel,
    _skip_all,
    _same_memory,
    _offset_text,
)


@probe("copy", {
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
})
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


@probe("dl_device", {
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
})
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


@probe("stream", {
        "stream.cpu": (
            "a stream on a CPU tensor is refused",
            _STD + ", array.__dlpack__, stream: on CPU and other device types without streams, "
            "only None is accepted",
        ),
})
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
