"""``python -m tools.bench``: every benchmark, one combined report (see run_all.py)."""

from tools.bench.run_all import main

main()
