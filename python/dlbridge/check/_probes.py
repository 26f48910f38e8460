"""Every probe, in report order: importing this module registers them."""

from . import _probes_export, _probes_request, _probes_lifetime  # noqa: F401  (registration order)
from ._registry import PROBES, RULES, Probe, finding  # noqa: F401
from ._subject import MAX_VERSION, Subject  # noqa: F401
