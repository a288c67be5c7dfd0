"""Regenerate the generated files under ``contracts/`` from the code.

    python tools/gen_contracts.py          write every generated contract
    python tools/gen_contracts.py --check  exit 1 and list the files that differ from the code

To add a generated contract, append a :class:`Contract` to ``CONTRACTS``:
``tests/project/test_contracts.py`` then checks the committed file against the code as well.
Output is stable (JSON with sorted keys, two-space indent, ASCII only and a trailing newline),
so a diff shows only real schema changes.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["CONTRACTS", "Contract", "json_schema", "main", "stale_contracts", "write_contracts"]


@dataclass(frozen=True)
class Contract:
    """One generated file: its path relative to the repository root and how to render it."""

    path: str
    render: Callable[[], bytes]


def _resolve(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def json_schema(spec: str, *, title: str, description: str) -> Callable[[], bytes]:
    """A renderer for the JSON Schema msgspec generates for ``module:attr`` (a Struct or union)."""

    def render() -> bytes:
        schema: dict[str, Any] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": f"Generated from {spec} by tools/gen_contracts.py; do not edit by hand.",
            "title": title,
            "description": description,
        }
        schema.update(msgspec.json.schema(_resolve(spec)))
        return _dump(schema)

    return render


CONTRACTS: list[Contract] = [
    Contract(
        "contracts/event_frames.schema.json",
        json_schema(
            "continuity.frames:Frame",
            title="continuity event frame",
            description=(
                "One frame of a thread's log. On disk each line is this object's canonical JSON "
                "with `digest` spliced in as its last member; see contracts/event_frames.md."
            ),
        ),
    ),
    Contract(
        "contracts/context_bundle.schema.json",
        json_schema(
            "continuity.context.bundle:ContextBundle",
            title="continuity context bundle (context_bundle.v1)",
            description=(
                "What one compile selected: summaries and the recent window. Stored as an "
                "artifact (canonical msgspec JSON, defaults omitted) whose blake3 id is the "
                "bundle's id; see contracts/context_bundle.md."
            ),
        ),
    ),
    Contract(
        "contracts/summary.schema.json",
        json_schema(
            "continuity.summary:SummaryDoc",
            title="continuity summary artifact (summary.v1)",
            description=(
                "The summary a compaction checkpoint points at, stored as an artifact "
                "(canonical msgspec JSON, defaults omitted); see contracts/summary.md."
            ),
        ),
    ),
    Contract(
        "contracts/cache_manifest.schema.json",
        json_schema(
            "continuity.caches.thread_index:Manifest",
            title="continuity cache manifest (manifest.v1.json)",
            description=(
                "The watermarks of one thread's cache files; the commit point of every cache "
                "update. See contracts/caches.md."
            ),
        ),
    ),
    Contract(
        "contracts/cache_checkpoint_entry.schema.json",
        json_schema(
            "continuity.caches.thread_index:CheckpointEntry",
            title="continuity checkpoint index line (checkpoints.v1.jsonl)",
            description=(
                "One line of a thread's checkpoint index: the projection of one "
                "compaction_checkpoint_created frame. See contracts/caches.md."
            ),
        ),
    ),
]


def stale_contracts(root: Path, contracts: Sequence[Contract]) -> list[str]:
    """The paths whose committed bytes differ from the code's (missing files included)."""
    stale = []
    for c in contracts:
        target = root / c.path
        if not target.is_file() or target.read_bytes() != c.render():
            stale.append(c.path)
    return stale


def write_contracts(root: Path, contracts: Sequence[Contract]) -> list[str]:
    """Write every contract whose bytes changed; return their paths."""
    written = []
    for c in contracts:
        target = root / c.path
        data = c.render()
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(c.path)
    return written


def _diff(root: Path, contract: Contract) -> str:
    target = root / contract.path
    old = target.read_text(encoding="utf-8") if target.is_file() else ""
    new = contract.render().decode("utf-8")
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{contract.path} (committed)",
        tofile=f"{contract.path} (from the code)",
    )
    return "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file differs"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_contracts(ROOT, CONTRACTS)
        if not stale:
            return 0
        by_path = {c.path: c for c in CONTRACTS}
        for path in stale:
            print(_diff(ROOT, by_path[path]) or f"{path}: missing", end="")
        print(
            f"\n{len(stale)} contract file(s) differ from the code: {', '.join(stale)}\n"
            "run `python tools/gen_contracts.py` and commit the result",
            file=sys.stderr,
        )
        return 1
    for path in write_contracts(ROOT, CONTRACTS):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:  # run as a script from anywhere, without installing
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
