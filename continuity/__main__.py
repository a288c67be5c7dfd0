"""``python -m continuity`` and the ``continuity`` console script."""

from __future__ import annotations


def main() -> None:
    from continuity.cli import app

    app()


if __name__ == "__main__":
    main()
