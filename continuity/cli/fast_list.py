"""``continuity threads`` before typer: a folder store's listing answered by one stat a log.

The typer command opens every log of the store to check the catalog's rows against it
(:mod:`continuity.caches.catalog`) and imports the machinery to catch a row up: at 10,000
threads, most of its CPU. ``__main__`` hands a command line whose command is ``threads`` to
:func:`fast_threads` first. It runs only the plain form (``--store`` before or after the
command, nothing else) on a folder store whose listing file vouches for every log as it is now
(:func:`~continuity.caches.listing.current_listing`: one stat a log, no log opened), and prints
the lines the last full listing rendered (one function renders both). For anything else
(``--json``, help, a URL, a store whose logs changed since the last full listing, any error)
it returns None and the typer command runs, catches up and writes the listing file again.
"""

from __future__ import annotations

import os
import sys

__all__ = [
    "fast_sessions",
    "fast_stats",
    "fast_threads",
    "parse_command",
    "parse_store",
    "sessions_from_file",
]


def parse_store(argv: list[str], command: str) -> tuple[str | None] | None:
    """``(--store's value or None,)`` when ``argv`` (without the program name) is ``command``
    with at most a ``--store`` before or after it (the last one wins, as in typer); None for
    any other command line."""
    store: str | None = None
    seen_command = False
    words = iter(argv)
    for arg in words:
        if arg == "--store":
            value = next(words, None)
            if value is None:
                return None
            store = value
        elif arg.startswith("--store="):
            store = arg.removeprefix("--store=")
        elif arg == command and not seen_command:
            seen_command = True
        else:
            return None
    return (store,) if seen_command else None


def parse_command(
    argv: list[str], command: str, flags: tuple[str, ...] = (), valued: tuple[str, ...] = ()
) -> dict[str, str | bool] | None:
    """The options of ``argv`` (without the program name) when it is ``command`` with at most
    a ``--store`` before or after it and, after it, ``flags`` (``--json``: True) and options
    with a value (``--agent X`` or ``--agent=X``; the last one wins, as in typer); None for
    any other command line (help, another option, a word more)."""
    found: dict[str, str | bool] = {}
    seen_command = False
    words = iter(argv)
    for arg in words:
        name, eq, value = arg.partition("=")
        if name == "--store" or (seen_command and name in valued):
            if not eq:
                given = next(words, None)
                if given is None:
                    return None
                value = given
            found[name] = value
        elif seen_command and arg in flags:
            found[arg] = True
        elif arg == command and not seen_command:
            seen_command = True
        else:
            return None
    return found if seen_command else None


def _write(data: bytes) -> int:
    """Print ``data`` (UTF-8) and return 0; 1 when the reader went away (``| head``): quiet,
    as click does."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _folder(given: str | bool | None) -> str | None:
    """The folder store's location ``--store`` (or the default) names; None for a URL or when
    stdout does not take the files' UTF-8 as it is."""
    from continuity.paths import is_store_url, resolve_store_location

    location = resolve_store_location(given if isinstance(given, str) else None)
    if is_store_url(location) or (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
        return None
    return str(location)


def fast_sessions(argv: list[str]) -> int | None:
    """Print ``continuity sessions`` (``--agents``, ``--agent``, ``--project``, ``--json``)
    from the sessions file (:func:`~continuity.caches.listing.current_sessions`) and return 0;
    None to leave the command line (``--context``, an agent only the registry knows, any
    error) to the typer command."""
    options = parse_command(
        argv, "sessions", ("--agents", "--json", "--context"), ("--agent", "--project")
    )
    if options is None:
        return None
    agent = options.get("--agent")
    name: str | None = None
    if isinstance(agent, str):
        from continuity.agents.table import agent_named

        known = agent_named(agent)
        if known is None:
            return None  # an installed package's agent, or an error: the typer command's
        name = known.name
    project = options.get("--project")
    folder = os.path.abspath(project) if isinstance(project, str) else None
    location = _folder(options.get("--store"))
    if location is None:
        return None
    return sessions_from_file(
        location,
        name,
        folder,
        every="--agents" in options,
        as_json="--json" in options,
        context="--context" in options,
        remember=True,
    )


def sessions_from_file(
    location: str,
    name: str | None,
    folder: str | None,
    *,
    every: bool,
    as_json: bool,
    context: bool,
    remember: bool = False,
) -> int | None:
    """Print what ``continuity sessions`` prints of the folder store at ``location`` (of the
    agent ``name``, the project ``folder``, sub-agents' too with ``every``) from its sessions
    file and return 0 (1: the reader went away); None when the file does not vouch for the
    store as it is now (or stdout does not take its UTF-8 as it is). ``remember``: see
    :func:`~continuity.caches.listing.current_sessions`."""
    if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
        return None
    from pathlib import Path

    from continuity.caches.listing import current_sessions

    if name is None and folder is None and not every:
        whole = "lines" if as_json else "text"
        shown = current_sessions(
            Path(location),
            *() if context else (whole,),
            context=(whole,) if context else (),
            remember=remember,
        )
        return None if shown is None else _write(shown[0])
    if name is not None and folder is None and not every and not context:
        part = "agents_json" if as_json else "agents"
        agents = current_sessions(Path(location), part, remember=remember)
        if agents is None:
            return None
        from continuity.caches.listing import agent_part

        of_agent = agent_part(agents[0], name)
        if of_agent:
            return _write(of_agent)
        if of_agent is not None:
            return _write(b"" if as_json else _nothing(name, None))
    found = current_sessions(
        Path(location),
        "keys",
        "json" if as_json else "table",
        context=("usage",) if context else (),
        remember=remember,
    )
    if found is None:
        return None
    keys, rows = found[:2]
    usage = found[2].decode().split("\n") if context else None
    lines = keys.decode().split("\n")[:-1]
    picked = _picked(lines, name, folder, every=every)
    if picked:
        out = _shown(lines, rows, usage, picked, as_json=as_json)
        return None if out is None else _write(out)
    return _write(b"" if as_json else _nothing(name, folder))


def _nothing(name: str | None, folder: str | None) -> bytes:
    """What ``sessions`` says when the agent ``name`` has no session (of the project
    ``folder``)."""
    from continuity.agents.table import agent_named

    known = agent_named(name) if name else None
    scope = "" if not name else f"{known.display if known is not None else name} "
    where = f" of {folder}" if folder else ""
    return f"no {scope}sessions{where} archived yet\n".encode()


def _picked(keys: list[str], name: str | None, folder: str | None, *, every: bool) -> list[int]:
    """The places of the sessions file's entries (``keys``: its lines of ``keys``) of the agent
    ``name`` (any), of the project ``folder`` (any), sub-agents' sessions too with ``every``."""
    from continuity.caches.listing import escape

    if folder is None and name is not None:  # the agent's column, then 0 or 1: a prefix
        prefix = escape(name) + ("\t" if every else "\t0\t")
        return [i for i, line in enumerate(keys) if line.startswith(prefix)]
    who_wanted = None if name is None else escape(name)
    wanted = None if folder is None else "\t" + escape(folder)
    picked = []
    for i, line in enumerate(keys):
        if wanted is not None and not line.endswith(wanted):
            continue
        who, sub, _project = line.split("\t", 2)
        if (who_wanted is None or who == who_wanted) and (every or sub == "0"):
            picked.append(i)
    return picked


def _shown(
    keys: list[str], rows: bytes, usage: list[str] | None, picked: list[int], *, as_json: bool
) -> bytes | None:
    """What ``sessions`` prints of the entries ``picked``: their JSON lines (``rows`` is the
    sessions file's ``json``) or their table (``rows``: its ``table``); with the context file's
    ``usage``, what ``--context`` adds. None when a line is not as expected."""
    from continuity.caches.listing import unescape, usage_of, with_usage

    if as_json:
        lines = rows.split(b"\n")
        if usage is None:
            return b"".join([lines[i] + b"\n" for i in picked])
        out = []
        for i in picked:
            _check, tokens, window = usage[i].split("\t")
            spliced = with_usage(lines[i], tokens, window)
            if spliced is None:
                return None
            out.append(spliced + b"\n")
        return b"".join(out)
    from continuity._text import context_used, render_sessions

    text = rows.decode()
    table = text.split("\n")
    escaped = "\\" in text or any("\\" in keys[i] for i in picked)
    shown = []
    for i in picked:
        tid, head, named = table[i].split("\t")
        who = keys[i][: keys[i].index("\t")]
        if escaped:
            who, tid, head, named = unescape(who), unescape(tid), unescape(head), unescape(named)
        if usage is not None:
            _check, tokens, window = usage[i].split("\t")
            head += context_used(usage_of(tokens), usage_of(window))
        shown.append((who, tid, head + named))
    return (render_sessions(shown) + "\n").encode()


def fast_stats(argv: list[str]) -> int | None:
    """Print ``continuity stats`` (``--json``) from the sessions file's sums and a walk of the
    artifacts, cache and quarantine folders, and return 0; None to leave it to the typer
    command."""
    options = parse_command(argv, "stats", ("--json",))
    if options is None:
        return None
    location = _folder(options.get("--store"))
    if location is None:
        return None
    from pathlib import Path

    from continuity.caches.listing import (
        current_sessions,
        quarantined_count,
        store_artifacts,
        tree_bytes,
    )

    root = Path(location)
    found = current_sessions(root, "stats", remember=True)
    if found is None:
        return None
    artifacts = store_artifacts(root / "artifacts")
    quarantined = quarantined_count(root / "quarantine")
    if artifacts is None or quarantined is None:
        return None
    numbers, by_agent, by_thread, sessions = found[0].split(b"\n")
    threads, frames, messages, checkpoints, log_bytes, redactions, redacted = (
        int(n) for n in numbers.split()
    )
    cache_bytes = tree_bytes(root / "cache")
    if "--json" in options:
        # StoreStats' JSON (tests compare the bytes with the typer command's)
        return _write(
            f'{{"threads":{threads},"frames":{frames},"messages":{messages},'
            f'"checkpoints":{checkpoints},"log_bytes":{log_bytes},"artifacts":{artifacts[0]},'
            f'"artifact_bytes":{artifacts[1]},"cache_bytes":{cache_bytes},'
            f'"quarantined":{quarantined},"redactions":{redactions},'
            f'"redactions_by_thread":{by_thread.decode()},'
            f'"sessions_by_agent":{sessions.decode()}}}\n'.encode()
        )
    from continuity._text import render_stats
    from continuity.paths import describe_store

    counts = {
        "threads": threads,
        "frames": frames,
        "messages": messages,
        "checkpoints": checkpoints,
        "log_bytes": log_bytes,
        "artifacts": artifacts[0],
        "artifact_bytes": artifacts[1],
        "cache_bytes": cache_bytes,
        "quarantined": quarantined,
        "redactions": redactions,
        "redacted_threads": redacted,
    }
    fields = by_agent.decode().split("\t") if by_agent else []
    per_agent = [(fields[i], int(fields[i + 1])) for i in range(0, len(fields), 3)]
    names = {fields[i]: fields[i + 2] for i in range(0, len(fields), 3)}
    text = render_stats(describe_store(location), counts, per_agent, names.__getitem__)
    return _write((text + "\n").encode())


def fast_threads(argv: list[str]) -> int | None:
    """Print ``continuity threads`` and return 0; None to leave the command line (and any
    error) to the typer command."""
    parsed = parse_store(argv, "threads")
    if parsed is None:
        return None
    from continuity.paths import is_store_url, resolve_store_location

    (given,) = parsed
    location = resolve_store_location(given)
    if is_store_url(location):
        return None
    if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
        return None  # the listing file holds UTF-8: the typer command encodes its own way
    from pathlib import Path

    from continuity.caches.listing import current_listing

    listing = current_listing(Path(location))
    if listing is None:
        return None
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(listing)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): quiet, exit 1, as click does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
