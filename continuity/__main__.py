"""``python -m continuity`` and the ``continuity`` console script."""

from __future__ import annotations

import os
import sys


def _without_typing_extensions() -> bool:
    """Keep typing_extensions out of a process that runs no typer: msgspec imports it when it is
    installed (typer brings it) only to prefer its get_type_hints, and falls back to typing's;
    on Python >= 3.11 ours work with either. 2-15 ms of a fresh process. True if blocked here."""
    if "typing_extensions" in sys.modules:
        return False
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    return True


def main() -> None:
    # numpy's OpenBLAS starts a thread per core when it loads (60 ms of a 2-core machine's
    # start-up); the CLI's few small products never use them. A user's setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The hook path is latency-critical: dispatch it before typer, rich or numpy are imported.
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not {"-h", "--help"} & set(sys.argv[2:]):
        _without_typing_extensions()
        from continuity.claude_code.hooks import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    if "search" in sys.argv[1:4]:
        # Latency-critical too: a plain search runs before typer is imported (60-70 ms).
        blocked = _without_typing_extensions()
        from continuity.cli.fast_search import fast_search

        code = fast_search(sys.argv[1:])
        if code is not None:
            sys.exit(code)
        if blocked:  # typer needs it: the typer command runs after all
            del sys.modules["typing_extensions"]
    from continuity.cli.app import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
