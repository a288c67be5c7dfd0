"""OpenAI Codex CLI: its rollouts into the archive, its hooks, and its install.

- :mod:`.rollout` reads rollout lines into items; :mod:`.ingest` appends them to the session's
  thread (``codex-<session id>``), incrementally and idempotently; :mod:`.hooks` runs
  ``continuity hook <event> --agent codex``; :mod:`.install` writes Codex's ``hooks.json``.
- :func:`detect` and :func:`ingest_paths` are what ``continuity ingest --agent codex`` calls: a
  path is a rollout file (``.jsonl`` or ``.jsonl.zst``) or a folder searched for them
  (``$CODEX_HOME``, its ``sessions/`` or ``archived_sessions/``, or any folder below).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from continuity.agents.codex.ingest import IngestReport
    from continuity.store.base import BaseStore

__all__ = ["codex_home", "detect", "ingest_paths", "rollouts"]


def codex_home() -> Path:
    """``$CODEX_HOME``, or ``~/.codex``."""
    home = os.environ.get("CODEX_HOME")
    return Path(home).expanduser() if home else Path.home() / ".codex"


def _is_rollout(path: Path) -> bool:
    name = path.name
    return name.startswith("rollout-") and (name.endswith(".jsonl") or name.endswith(".jsonl.zst"))


def detect(path: Path) -> bool:
    """Whether ``path`` is a Codex rollout, or a folder holding Codex sessions."""
    if path.is_file():
        if _is_rollout(path):
            return True
        try:
            with open(path, "rb") as f:
                head = f.read(256)
        except OSError:
            return False
        return b'"type":"session_meta"' in head.replace(b" ", b"")
    return path.is_dir() and (
        (path / "sessions").is_dir()
        or (path / "archived_sessions").is_dir()
        or any(True for _ in rollouts([path]))
    )


def rollouts(paths: Iterable[Path]) -> Iterator[Path]:
    """The rollout files of ``paths`` (files as given; folders searched), a ``.jsonl.zst``
    only when there is no plain ``.jsonl`` of the same name (Codex reads the plain one then)."""
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            names = set(files)
            for name in sorted(files):
                if not _is_rollout(Path(name)):
                    continue
                if name.endswith(".zst") and name[: -len(".zst")] in names:
                    continue
                yield Path(root) / name


def ingest_paths(
    store: BaseStore, paths: Iterable[Path] | None = None, *, final: bool = False
) -> list[IngestReport]:
    """Ingest the rollouts of ``paths`` (default: ``$CODEX_HOME``'s ``sessions`` and
    ``archived_sessions``); one report per file."""
    from continuity.agents.codex.ingest import ingest_rollout

    if paths is None:
        home = codex_home()
        paths = [home / "sessions", home / "archived_sessions"]
        paths = [p for p in paths if p.is_dir()]
    return [ingest_rollout(store, p, final=final) for p in rollouts(paths)]
