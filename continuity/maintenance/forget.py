"""Forgetting: ``continuity delete`` and ``prune`` (ADR 0040).

The log is append-only: nothing rewrites a frame. Forgetting is the one exception, and it is
whole-thread: a thread goes with everything derived from it, and a tombstone says it went.

:func:`forget_thread` asks the store to delete the thread's log (with the derived rows a server
keeps beside it; :meth:`~continuity.store.base.BaseStore.delete_thread` writes the tombstone
first), then removes what the layers above keep: the thread's cache folder and job locks, its
catalog row, the store-wide search index (dropped: the next search builds it again without the
thread's words) and its vectors in every model's cache; the notes the agents' hooks and
ingests keep for its session (:func:`drop_session_notes`: file cursors, seen notes, session
states, the live-session notes); then the artifacts its frames referenced that no remaining
thread holds (a scan of every remaining log's bytes for each id, and of every stored artifact
for deltas built on it: when in doubt an artifact stays).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from continuity.store.base import BaseStore, DeletionReport, Thread, deletion_facts

__all__ = [
    "DeletionPlan",
    "Forgotten",
    "drop_session_notes",
    "forget_threads",
    "parse_duration",
    "plan_deletion",
    "session_names",
    "stale_threads",
]

_UNITS: Final = {"d": 1, "w": 7, "m": 30, "y": 365}
_DURATION: Final = re.compile(r"([0-9]{1,6})([dwmy])")
DAY_MS: Final = 86_400_000


def parse_duration(text: str) -> int:
    """Milliseconds of a duration such as ``90d``, ``12w``, ``6m`` (30 days), ``1y`` (365);
    ValueError for anything else."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(
            f"bad duration {text!r}: use a whole number and d, w, m or y (90d, 12w, 6m, 1y)"
        )
    return int(found[1]) * _UNITS[found[2]] * DAY_MS


class DeletionPlan(NamedTuple):
    """What deleting a thread would remove."""

    thread_id: str
    frames: int
    bytes: int
    artifacts: list[str]
    """Artifacts its frames reference that no other thread holds (they would go)."""
    kept: list[str]
    """Artifacts it references that another thread (or a delta) still needs."""


class Forgotten(NamedTuple):
    """What :func:`forget_threads` did for one thread."""

    report: DeletionReport
    artifacts: list[str]
    kept: list[str]


def _thread_facts(thread: Thread) -> tuple[int, int, set[str]]:
    n, size, refs, maybe = deletion_facts(line for _s, line in thread.stored_lines())
    store = thread.store
    return n, size, refs | {a for a in maybe if store.artifacts.exists(a)}


def _split(
    store: BaseStore, candidates: set[str], others: Iterable[str]
) -> tuple[list[str], list[str]]:
    """(removable, kept) of ``candidates``: kept when a log in ``others``' scope holds the id
    or a stored artifact is a delta of it."""
    held = store.referenced(candidates) if others else set()
    held |= store.artifacts.delta_bases(candidates - held)
    present = {a for a in candidates if store.artifacts.exists(a)}
    return sorted(present - held), sorted(held & candidates)


def plan_deletion(store: BaseStore, thread_ids: Sequence[str]) -> list[DeletionPlan]:
    """What deleting ``thread_ids`` would remove (nothing is removed). An artifact shared only
    by threads being deleted goes; one any other thread references stays."""
    going = set(thread_ids)
    facts = {tid: _thread_facts(store.existing_thread(tid)) for tid in thread_ids}
    candidates = set().union(*(f[2] for f in facts.values())) if facts else set()
    # The scan of the remaining threads: those not going (a plan deletes nothing to scan by).
    held: set[str] = set()
    remaining = {c.encode() for c in candidates}
    for tid in store.stored_thread_ids():
        if tid in going or not remaining:
            continue
        for _seq, line in store.thread(tid).stored_lines():
            hit = {n for n in remaining if n in line}
            remaining -= hit
            held |= {h.decode() for h in hit}
    held |= store.artifacts.delta_bases(candidates - held)
    plans = []
    for tid in thread_ids:
        n, size, refs = facts[tid]
        present = sorted(a for a in refs if a not in held and store.artifacts.exists(a))
        plans.append(DeletionPlan(tid, n, size, present, sorted(refs & held)))
    return plans


def _drop_file_caches(store: BaseStore, thread_ids: Sequence[str]) -> None:
    """The caches kept as files for the deleted threads, and the store-wide ones' entries."""
    cache = store.cache_dir
    if cache is None:
        return
    from continuity.rolling.cache import drop_turns

    for tid in thread_ids:
        shutil.rmtree(cache / "threads" / tid, ignore_errors=True)
        drop_turns(store, tid)  # the rolling context manager's (ADR 0056)
        for lock in (cache / "jobs").glob(f"{tid}.*.lock") if (cache / "jobs").is_dir() else ():
            lock.unlink(missing_ok=True)
    from continuity.caches.catalog import catalog_view
    from continuity.retrieval.store_index import drop_store_search
    from continuity.retrieval.vectors import forget_vectors

    drop_store_search(store)
    forget_vectors(store, thread_ids)
    with contextlib.suppress(Exception):  # a cache: the next listing writes it either way
        catalog_view(store)  # rewritten without the deleted threads' rows


_SHORTEST_NAME: Final = 6
"""A session id or transcript path shorter than this is not searched for (it could be part of
anything); the thread id always is."""


def session_names(store: BaseStore, thread_ids: Sequence[str]) -> list[str]:
    """What names the sessions of ``thread_ids`` in an agent's notes: each thread id, and from
    its first frame the transcript it came from and, for a session's own thread (not a
    subagent's, whose session id is its parent's), the session id."""
    from continuity import frames as fr

    names: dict[str, None] = {}
    for tid in thread_ids:
        names[tid] = None
        try:
            first = next(iter(store.thread(tid).read(to_seq=0)), None)
        except Exception:  # gone or damaged: its id is still a name
            continue
        if not isinstance(first, fr.ThreadCreated):
            continue
        found = [first.meta.get("transcript", "")]
        if first.parent_thread_id is None:
            found.append(first.meta.get("session_id", ""))
        names.update((n, None) for n in found if len(n) >= _SHORTEST_NAME)
    return list(names)


def _agent_cache_folders(store: BaseStore) -> list[Path]:
    """The adapters' cache folders (``<cache>/<agent name or source>``, where
    :func:`continuity.agents.base.ingest.cache_dir` puts them: this layer sits below the agents
    wing) and the live-session notes' folder."""
    from continuity.agents.table import known_agents
    from continuity.caches.live_session import live_folder

    live = live_folder(store)
    if live is None:
        return []
    base = live.parent
    folders = {live, *(base / n for a in known_agents() for n in (a.name, a.source))}
    return sorted(f for f in folders if f.is_dir())


def drop_session_notes(store: BaseStore, names: Sequence[str]) -> list[Path]:
    """Remove every note an agent's hooks or ingest keep that holds one of ``names`` (from
    :func:`session_names`), in its name or its bytes: file cursors (with their lock file),
    seen notes, session states, the live-session notes that would still name a deleted thread
    as current. They are caches: a cursor lost costs a re-read, and a re-read of a deleted
    session appends nothing (its thread is tombstoned). The files removed."""
    import msgspec

    needles = set()
    for name in names:
        needles.add(name.encode("utf-8", "surrogatepass"))
        needles.add(msgspec.json.encode(name)[1:-1])  # as a JSON string holds it
    removed: list[Path] = []
    for folder in _agent_cache_folders(store):
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.suffix == ".lock":
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            named = os.fsencode(path.name)
            if any(n in data or n in named for n in needles):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
                with contextlib.suppress(FileNotFoundError):
                    path.with_suffix(".lock").unlink()
    return removed


def forget_threads(
    store: BaseStore, thread_ids: Sequence[str], *, reason: str = "delete"
) -> list[Forgotten]:
    """Delete each of ``thread_ids`` (the store's part, under its write lock, tombstone
    first), then the caches, the agents' notes of their sessions and the artifacts no
    remaining thread references. A thread whose deletion was cut short (a tombstone, pieces
    left) is finished."""
    names = session_names(store, thread_ids)
    reports = [store.delete_thread(tid, reason=reason) for tid in thread_ids]
    _drop_file_caches(store, thread_ids)
    drop_session_notes(store, names)
    candidates = set().union(*(r.artifacts for r in reports)) if reports else set()
    removable, kept = _split(store, candidates, store.stored_thread_ids())
    gone = {a for a in removable if store.artifacts.delete(a)}
    return [
        Forgotten(
            r,
            sorted(gone & set(r.artifacts)),
            sorted(set(kept) & set(r.artifacts)),
        )
        for r in reports
    ]


def stale_threads(
    store: BaseStore,
    older_than_ms: int,
    *,
    now_ms: int,
    agent: str | None = None,
    project: str | None = None,
) -> list[tuple[str, int]]:
    """(thread id, last activity) of every thread whose last frame is older than
    ``older_than_ms`` (of ``agent``'s sessions, in ``project``), oldest first."""
    from continuity.agents.table import agent_named, agent_of_session
    from continuity.caches.catalog import catalog_view

    wanted = None
    if agent is not None:
        wanted = agent_named(agent)
        if wanted is None:
            raise ValueError(f"no agent named {agent!r}")
    cutoff = now_ms - older_than_ms
    found = []
    for row in catalog_view(store).rows:
        if row.last_active_ms >= cutoff:
            continue
        if wanted is not None and agent_of_session(row.thread_id, row.source) != wanted:
            continue
        if project is not None and row.project != project:
            continue
        found.append((row.thread_id, row.last_active_ms))
    return sorted(found, key=lambda x: (x[1], x[0]))
