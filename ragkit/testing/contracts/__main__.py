"""``python -m ragkit.testing.contracts``: the kit's report (``report.py``)."""

import sys

from ragkit.testing.contracts.report import main

sys.exit(main())
