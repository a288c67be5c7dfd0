"""``python -m tools.faults``: every fault family, one combined report (see run_all.py)."""

import sys

from tools.faults.run_all import main

sys.exit(main())
