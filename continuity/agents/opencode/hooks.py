"""``continuity hook <event> --agent opencode --session <id>``: what the opencode plugin runs.

opencode has no command hooks; its plugin (``plugin/continuity.js``) spawns this at session
events, in the background. It archives what is new in that session (from opencode's database,
read-only), exactly as ``continuity ingest --agent opencode --session <id>`` does, but through
the hook dispatch (``continuity/__main__.py``), which starts without the command line's stack
(typer, rich): about a tenth of a second less per event. Like every hook it never fails: an
error is one line on stderr and in the store's ``errors.log``, and the exit is 0; whatever was not
archived is archived by the next event, or by ``continuity ingest --agent opencode``.

``restore`` is the one event whose output is read: after archiving, it prints the restore of
what opencode's latest compaction dropped (nothing when the session never compacted). The
plugin awaits it in ``experimental.chat.messages.transform``, the hook opencode 1.18 calls with
the messages it is about to send to the model, and adds it after opencode's summary.
"""

from __future__ import annotations

import os
import sys

from continuity.paths import (
    StoreLocation,
    default_store_location,
    is_postgres_url,
    is_store_url,
    local_dir_of,
)

__all__ = ["main"]


def _session_of(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--session" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--session="):
            return arg.removeprefix("--session=")
    return None


def _restore(location: StoreLocation, session: str) -> str:
    """The restore of what opencode's latest compaction of ``session`` dropped ("" when it has
    not compacted): the plugin puts it after opencode's summary in what goes to the model."""
    from continuity.agents.base.restore import compacted, restore_context
    from continuity.agents.table import OPENCODE
    from continuity.store.locate import open_store

    store = open_store(location)
    try:
        thread = store.thread(OPENCODE.thread_id(session))
        if not thread.exists() or not compacted(thread):
            return ""
        return restore_context(thread)
    finally:
        store.close()


def _archive(location: StoreLocation, session: str) -> None:
    from continuity.agents.opencode.ingest import ingest_session
    from continuity.agents.opencode.source import default_sources, open_source
    from continuity.store.locate import open_store

    sources = default_sources()
    if not sources:
        raise FileNotFoundError("no opencode data (opencode.db or storage/) in its data folder")
    if is_postgres_url(location):
        # Bounded like every hook on a server (ADR 0041); a server marked or found down is
        # skipped: this session's next event archives what this one could not.
        from continuity.agents.base import guard
        from continuity.store import outage

        down = guard.server_down(str(location))
        if down is not None:
            message = f"PostgreSQL store not used ({down[0]}); the next event archives it"
            sys.stderr.write(f"continuity: {message}\n")
            if down[1]:  # news: one line in errors.log per failed try, not per skipped event
                outage.note_unreachable(local_dir_of(location), down[0])
                _log(location, "archive", message)
            return
        store = open_store(location, create=True, **outage.HOOK_STORE_OPTIONS)
    else:
        store = open_store(location, create=True)
    try:
        for path in sources:
            src = open_source(path)
            if src.session(session) is not None:
                ingest_session(store, src, session, final=False)
                return
    finally:
        store.close()
    raise LookupError(f"no opencode session {session!r} in {', '.join(map(str, sources))}")


def main(args: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    """Archive the session ``--session`` names; ``args`` is ``[event, --session, id]``
    (``stdin``: unused, the plugin sends nothing)."""
    event = args[0] if args else "?"
    location: StoreLocation | None = None
    try:
        location = store if store is not None else default_store_location()
        session = _session_of(args)
        if not session:
            raise ValueError("no --session: the opencode plugin names the session it reports")
        _archive(location, session)
        if event == "restore":  # the one event whose output is read (the plugin awaits it)
            text = _restore(location, session)
            if text:
                sys.stdout.buffer.write(text.encode("utf-8"))  # whatever the locale
                sys.stdout.flush()
    except Exception as exc:  # a hook never fails the session: report and exit 0
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        sys.stderr.write(f"continuity: {message}\n")
        if location is not None:
            _log(location, event, message)
        if os.environ.get("CONTINUITY_DEBUG"):
            import traceback

            traceback.print_exc()
    return 0


def _log(location: StoreLocation, event: str, message: str) -> None:
    from continuity.agents.base.hook import log_error

    log_error(local_dir_of(location), f"{event} (opencode)", message, server=is_store_url(location))
