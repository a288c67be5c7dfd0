"""The archived sessions of a store, of every agent (Claude Code, Codex, Gemini CLI, opencode:
:mod:`continuity.agents.table`): what ``continuity sessions`` lists."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from continuity import frames as fr
from continuity.agents.table import AGENTS, agent_of_session, is_subagent, known_agents
from continuity.caches.catalog import CatalogRow, catalog_view, current_rows
from continuity.caches.session_file import SessionInfo, session_info, stamp
from continuity.store.base import BaseStore, Thread

__all__ = [
    "SessionInfo",
    "list_sessions",
    "previous_session",
    "session_info",
    "session_rows",
    "write_context_file",
]


def _info(thread: Thread) -> SessionInfo | None:
    first = next(iter(thread.read(to_seq=0)), None)
    if not isinstance(first, fr.ThreadCreated) or first.meta.get("source") != "claude-code":
        return None
    last = thread.tail(1, types=["message_appended"])
    last_ms = last[0].ts_ms if last else first.ts_ms
    return SessionInfo(
        thread_id=thread.id,
        project=first.meta.get("project", ""),
        git_branch=first.meta.get("git_branch", ""),
        started=stamp(first.ts_ms),
        last_active=stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=first.parent_thread_id,
        title=first.title,
        first_ms=first.ts_ms,
    )


def session_rows(store: BaseStore, *, include_agents: bool = False) -> list[CatalogRow]:
    """The catalog rows of every agent's sessions (and sub-agents' with ``include_agents``),
    in thread id order; the first problem of a thread that may be one of them is raised."""
    prefixes = tuple(a.thread_prefix for a in known_agents())
    view = catalog_view(store, sessions_file=True)

    def wanted(tid: str) -> bool:
        return tid.startswith(prefixes) and (include_agents or ".agent-" not in tid)

    view.raise_first(tid for tid in view.problems if wanted(tid))
    return [
        r
        for r in view.rows
        if r.created
        and agent_of_session(r.thread_id, r.source) is not None
        and (include_agents or not is_subagent(r.thread_id, r.parent_thread_id))
    ]


def list_sessions(
    store: BaseStore,
    *,
    include_agents: bool = False,
    agent: str | None = None,
    project: str | None = None,
    usage: bool = False,
) -> list[SessionInfo]:
    """Every archived session of every agent (or of the agent named ``agent``, by its name in
    :mod:`continuity.agents.table`; of the project folder ``project``), most recently active
    last, with message and compaction counts (from the store catalog,
    :mod:`continuity.caches.catalog`); with ``usage``, how full each one's context was."""
    found = [
        s
        for s in map(session_info, session_rows(store, include_agents=include_agents))
        if (agent is None or s.agent == agent) and (project is None or s.project == project)
    ]
    found.sort(key=lambda s: (s.last_active_ms, s.thread_id))
    return _with_usage(store, found) if usage else found


def _with_usage(store: BaseStore, found: list[SessionInfo]) -> list[SessionInfo]:
    """``found`` with each session's context usage (a read of its log's tail each)."""
    from continuity.rolling.settings import read_settings
    from continuity.rolling.usage import session_usage

    settings = read_settings(store.local_dir)
    out = []
    for s in found:
        used = session_usage(
            store.thread(s.thread_id), windows=settings.windows, default=settings.window
        )
        out.append(
            s
            if used is None
            else msgspec.structs.replace(s, context_tokens=used.tokens, context_window=used.window)
        )
    return out


def previous_session(store: BaseStore, project: str, *, exclude: str) -> SessionInfo | None:
    """The most recently active other session of ``project`` (no caches touched: the rows of
    the store catalog that still describe their logs are read, never brought up to date; the
    other threads' first and last frames are read from their logs)."""

    def wanted(tid: str) -> bool:
        return tid != exclude and tid.startswith("cc-") and ".agent-" not in tid

    found = current_rows(store, project=project)
    rows, others = found if found is not None else ([], store.threads())
    candidates = [
        msgspec.structs.replace(session_info(r), messages=0, compactions=0)
        for r in rows
        if wanted(r.thread_id) and r.created and r.source == "claude-code"
    ]
    for tid in others:
        if wanted(tid):
            info = _info(store.thread(tid))
            if info is not None:
                candidates.append(info)
    best: SessionInfo | None = None
    for info in candidates:
        if info.project != project:
            continue
        if best is None or (info.last_active_ms, info.thread_id) > (
            best.last_active_ms,
            best.thread_id,
        ):
            best = info
    return best


def write_context_file(
    store: BaseStore, known: Mapping[str, tuple[int | None, int | None]]
) -> None:
    """Write the context file (:data:`~continuity.caches.listing.CONTEXT_FILE`) of a folder
    store whose sessions file is current, unless the one there is: what ``sessions --context``
    prints, with and without ``--json``, and each session's usage for the filters. ``known``:
    the usage (tokens, window) already read of some sessions, by thread id; a session whose
    catalog row is unchanged keeps the usage of the file before; the others' logs are read
    (their last messages). Nothing for another store, or when anything is not as it was
    checked: the context is read from the logs again next time."""
    import contextlib
    from pathlib import Path

    from continuity._fs import atomic_write
    from continuity._text import context_used, render_sessions
    from continuity.caches.listing import (
        CONTEXT_FILE,
        CONTEXT_PARTS,
        context_key,
        context_prefix,
        current_sessions,
        encode_parts,
        sessions_parts,
        unescape,
        usage_of,
        with_usage,
    )

    root = getattr(store, "root", None)
    if not isinstance(root, Path) or store.cache_dir is None or known_agents() != AGENTS:
        return
    found = current_sessions(root, "keys", "table", "json", "checks", with_header=True)
    key = context_key(root)
    if found is None or key is None:
        return
    keys, table, lines, checks = (part.decode().split("\n")[:-1] for part in found[:4])
    prefix = context_prefix(found[4], key)
    side = store.cache_dir / CONTEXT_FILE
    try:
        old = side.read_bytes()
    except OSError:
        old = b""
    if sessions_parts(old, prefix, CONTEXT_PARTS) is not None:
        return
    reuse: dict[str, tuple[str, str]] = {}
    head = old.split(b"\n", 1)[0].split(b" ")
    if len(head) == 4 + len(CONTEXT_PARTS) and head[3].decode(errors="replace") == key:
        before = sessions_parts(old, b" ".join(head[:4]) + b" ", CONTEXT_PARTS)
        if before is not None:
            with contextlib.suppress(UnicodeDecodeError, ValueError):
                for line in before[-1].decode().split("\n")[:-1]:
                    check, tokens, window = line.split("\t")
                    reuse[check] = (tokens, window)
    settings = None
    usage: list[str] = []
    shown: list[tuple[str, str, str]] = []
    json: list[bytes] = []
    for keyed, row, line, check in zip(keys, table, lines, checks, strict=True):
        tid, head_text, named = (unescape(f) for f in row.split("\t"))
        got = reuse.get(check)
        if got is None:
            if tid in known:
                figures = known[tid]
            else:
                if settings is None:
                    from continuity.rolling.settings import read_settings

                    settings = read_settings(store.local_dir)
                from continuity.rolling.usage import session_usage

                used = session_usage(
                    store.thread(tid), windows=settings.windows, default=settings.window
                )
                figures = (None, None) if used is None else (used.tokens, used.window)
            got = (
                "-" if figures[0] is None else str(figures[0]),
                "-" if figures[1] is None else str(figures[1]),
            )
        tokens, window = got
        usage.append(f"{check}\t{tokens}\t{window}\n")
        who, sub, _project = keyed.split("\t")
        if sub == "0":
            spliced = with_usage(line.encode(), tokens, window)
            if spliced is None:
                return
            json.append(spliced + b"\n")
            used_text = context_used(usage_of(tokens), usage_of(window))
            shown.append((unescape(who), tid, head_text + used_text + named))
    text = render_sessions(shown) + "\n" if shown else "no sessions archived yet\n"
    parts = [text.encode(), b"".join(json), "".join(usage).encode()]
    with contextlib.suppress(OSError):  # a cache: the next listing reads the logs again
        atomic_write(side, encode_parts(prefix, parts), durable=False)
