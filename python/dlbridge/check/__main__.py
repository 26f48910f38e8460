"""``python -m dlbridge.check MODULE:EXPR``: see dlbridge.check.main."""

import sys

from . import main

sys.exit(main())
