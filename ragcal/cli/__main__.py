"""``python -m ragcal.cli``: the ``ragcal`` command (what :func:`ragcal.numerics.reexec_pinned` restarts)."""

import sys

from . import main

sys.exit(main())
