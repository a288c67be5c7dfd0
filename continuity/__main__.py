"""``python -m continuity`` and the ``continuity`` console script."""

from __future__ import annotations

import sys


def main() -> None:
    # The hook path is latency-critical: dispatch it before typer, rich or numpy are imported.
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not {"-h", "--help"} & set(sys.argv[2:]):
        from continuity.claude_code.hooks import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    from continuity.cli import app

    app()


if __name__ == "__main__":
    main()
