"""``delete`` leaves nothing that names the session (issue 40 item 5): a session archived through
each agent's hooks (Claude Code, Codex, Gemini CLI) and ingest (opencode) leaves file cursors,
seen notes, session states and live-session notes in the adapters' cache folders; after
``continuity delete`` (or :func:`forget_threads`) no file under the store or those folders
holds its session id, thread id, transcript path or message ids — on both backends. Another
session's notes stay (a control: the search finds what is there)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from continuity.cli.app import app
from continuity.maintenance.forget import forget_threads
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from tools.faults.ingest import make_db, make_session

if TYPE_CHECKING:
    from tests.support.pg import PgStores

GONE = "0a11ce00-0000-4000-8000-0000000000aa"
KEPT = "0b0b0000-0000-4000-8000-0000000000bb"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def _write(folder: Path, fmt: str, sid: str) -> tuple[Path, list[str]]:
    """A session file of ``fmt`` in ``sid``; its path and the ids its lines carry."""
    session = make_session(fmt, 6, random.Random(sid), sid)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / session.name
    path.write_bytes(b"\n".join(session.lines) + b"\n")
    text = path.read_text()
    ids = [sid[:24] + f"{i:012d}" for i in range(6)] if fmt == "claude-code" else []
    ids += [f"g-{sid[:8]}-{i:06d}" for i in range(6)] if fmt == "gemini" else []
    assert all(i in text for i in ids)
    return path, ids


def _hooks(store: BaseStore, root: Path, sid: str) -> dict[str, list[str]]:
    """Run each agent's hooks for session ``sid`` (opencode: its ingest); per thread, what
    names it: the session id, the thread id, the transcript and the message ids."""
    from continuity.agents.claude_code.hooks import run_hook as claude_hook
    from continuity.agents.codex.hooks import run_hook as codex_hook
    from continuity.agents.gemini.hooks import run_hook as gemini_hook
    from continuity.agents.opencode.ingest import ingest_source

    cwd = str(root / "proj")
    named: dict[str, list[str]] = {}
    path, ids = _write(root / "claude" / sid, "claude-code", sid)
    payload: dict[str, Any] = {"session_id": sid, "transcript_path": str(path), "cwd": cwd}
    for event in ("session-start", "user-prompt-submit", "post-tool-use", "stop"):
        claude_hook(store, event, {**payload, "prompt": "hi", "source": "startup"})
    named[f"cc-{sid}"] = [sid, str(path), *ids]
    path, ids = _write(root / "codex" / sid, "codex", sid)
    payload = {"session_id": sid, "transcript_path": str(path), "cwd": cwd}
    for event in ("session-start", "user-prompt-submit", "pre-compact", "stop"):
        codex_hook(store, event, payload)
    named[f"codex-{sid}"] = [sid, str(path), *ids]
    path, ids = _write(root / "gemini" / sid, "gemini", sid)
    payload = {"session_id": sid, "transcript_path": str(path), "cwd": cwd}
    for event in ("SessionStart", "BeforeAgent", "AfterAgent"):
        gemini_hook(store, event, payload)
    named[f"gemini-{sid}"] = [sid, str(path), *ids]
    db = root / "opencode" / sid / "opencode.db"
    db.parent.mkdir(parents=True)
    tag = sid[:8]
    where = make_db(db, 1, 4, random.Random(sid), tag)
    report = ingest_source(store, db, final=True)
    (tid,) = report.threads
    named[tid] = [f"ses_{tag}0000", str(db), *(m for m, _ in where.values())]
    return named


def _holders(folders: list[Path], needles: list[str], *, but: set[str]) -> dict[str, list[str]]:
    """Each needle, with the files under ``folders`` that hold it (in name or bytes)."""
    found: dict[str, list[str]] = {}
    for folder in folders:
        for f in folder.rglob("*"):
            if not f.is_file() or f.name in but:
                continue
            data = f.read_bytes()
            for n in needles:
                if n.encode() in data or n in f.name:
                    found.setdefault(n, []).append(str(f.relative_to(folder)))
    return found


def _check(store: BaseStore, folders: list[Path], root: Path, delete: Any) -> None:
    gone = _hooks(store, root, GONE)
    kept = _hooks(store, root, KEPT)
    assert set(gone) | set(kept) <= set(store.threads())
    needles = sorted({n for tid, names in gone.items() for n in (tid, *names)})
    # Today's leftovers are real: before the delete, the notes name the session.
    assert _holders(folders, needles, but=set())
    delete(list(gone))
    # The tombstones say which threads were deleted (ADR 0040): the store's own record.
    left = _holders(folders, needles, but={"tombstones.jsonl"})
    assert left == {}, left
    still = _holders(folders, [KEPT], but=set())
    assert still, "the other session's notes went too"
    assert set(kept) <= set(store.threads())


def test_delete_leaves_no_note_of_the_session_on_a_folder_store(tmp_path: Path) -> None:
    where = tmp_path / "store"
    store = Store(where, create=True, durable=False)

    def delete(threads: list[str]) -> None:
        for tid in threads:
            result = CliRunner().invoke(app, ["--store", str(where), "delete", tid, "--yes"])
            assert result.exit_code == 0, result.output

    _check(store, [where], tmp_path / "src", delete)


@pytest.fixture
def pg(pg_stores: PgStores) -> Iterator[PgStores]:
    yield pg_stores


def test_delete_leaves_no_note_of_the_session_on_postgresql(pg: PgStores, tmp_path: Path) -> None:
    store = pg.open(tmp_path / "s")
    local = store.local_dir
    assert local is not None

    def delete(threads: list[str]) -> None:
        forget_threads(store, threads)

    _check(store, [local], tmp_path / "src", delete)
