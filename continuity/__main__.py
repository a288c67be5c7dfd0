"""``python -m continuity`` and the ``continuity`` console script."""

from __future__ import annotations

import os
import sys


def main() -> None:
    # numpy's OpenBLAS starts a thread per core when it loads (60 ms of a 2-core machine's
    # start-up); the CLI's few small products never use them. A user's setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The hook path is latency-critical: dispatch it before typer, rich or numpy are imported.
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not {"-h", "--help"} & set(sys.argv[2:]):
        # msgspec imports typing_extensions when it is installed (typer brings it) only to
        # prefer its get_type_hints, and falls back to typing's; on Python >= 3.11 ours work
        # with either. Blocking it here saves 10-15 ms of every hook run.
        sys.modules.setdefault("typing_extensions", None)  # type: ignore[arg-type]
        from continuity.claude_code.hooks import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    if "search" in sys.argv[1:4]:
        # Latency-critical too: a plain search runs before typer is imported (60-70 ms).
        from continuity.cli.fast_search import fast_search

        code = fast_search(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from continuity.cli.app import app

    app()


if __name__ == "__main__":
    main()
