"""Every probe, in report order: importing this module registers them."""

from . import _probes_export, _probes_request, _probes_lifetime  # noqa: F401  (registration order)
from ._registry import PROBES as PROBES, RULES as RULES, Probe as Probe, finding as finding
from ._subject import MAX_VERSION as MAX_VERSION, Subject as Subject
