"""``continuity search`` before typer: the well-formed command line, parsed by hand.

A search from a fresh process at a million messages has about 300 ms; typer, click and building
the whole command tree take 60–70 ms of them. ``__main__`` hands a command line whose command is
``search`` to :func:`fast_search` first. It runs only what it recognises exactly — ``--store``
before the command, one query, ``--thread``, ``--project``, ``--agent`` naming a known agent,
``--k`` within its range, ``--json`` — and returns None for anything else (help, a bad
value, an unknown or repeated option, ``--model``, a model named by ``CONTINUITY_MODEL`` or
the store's ``search.json``)
and for any error, so that the typer command (:mod:`.search_commands`) runs instead and
owns every message, usage error and exit code. Both print through :func:`print_hits`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from continuity.cli._display import format_ts, hit_leads, recovery_line
from continuity.errors import ContinuityError

if TYPE_CHECKING:
    from continuity.retrieval.search import Hit
    from continuity.store.base import BaseStore

__all__ = [
    "K_MAX",
    "NO_EXACT_WORD",
    "fast_search",
    "hit_agents",
    "parse",
    "print_hits",
    "progress_on_stderr",
]

K_MAX = 1000
NO_EXACT_WORD = (
    "note: no word of the query is in these hits as written: they match other forms of its "
    "words (a stem) or its meaning (the model)"
)
_FLAGS = {"--json": "json"}
_VALUED = {"--thread": "thread", "--project": "project", "--agent": "agent", "--k": "k"}


@dataclass(slots=True, kw_only=True)
class SearchArgs:
    """A plain search's arguments (a dataclass, not a msgspec Struct: the search command's
    module imports this one, and so does the root's help; msgspec is imported to print)."""

    store: str | None = None
    query: str
    thread: str | None = None
    project: str | None = None
    agent: str | None = None
    k: int = 10
    json: bool = False


def parse(argv: list[str]) -> SearchArgs | None:
    """The search a command line (without the program name) asks for, or None when it is
    not a plain well-formed ``search`` command line."""
    seen: dict[str, str | bool] = {}
    i = 0
    if argv[:1] == ["--store"] and len(argv) > 1:
        seen["store"] = argv[1]
        i = 2
    elif argv and argv[0].startswith("--store="):
        seen["store"] = argv[0].removeprefix("--store=")
        i = 1
    if argv[i : i + 1] != ["search"]:
        return None
    positional: list[str] = []
    rest = argv[i + 1 :]
    j = 0
    while j < len(rest):
        arg = rest[j]
        j += 1
        if arg == "--":
            positional += rest[j:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            key: str = _FLAGS[name]
            found: str | bool = True
        elif name in _VALUED:
            key = _VALUED[name]
            if not eq:
                if j >= len(rest):
                    return None
                value = rest[j]
                j += 1
            found = value
        else:
            return None  # --help, -h, an unknown option, a typo: typer says what is wrong
        if key in seen:
            return None
        seen[key] = found
    if len(positional) != 1:
        return None
    k = seen.pop("k", "10")
    assert isinstance(k, str)
    if not re.fullmatch(r"[0-9]+", k) or not 1 <= int(k) <= K_MAX:
        return None
    if "agent" in seen and not _known_agent(seen):
        return None  # typer says which agents there are
    return SearchArgs(**seen, query=positional[0], k=int(k))  # type: ignore[arg-type]


def _known_agent(seen: dict[str, str | bool]) -> bool:
    """Whether ``--agent`` names a known agent (then its name replaces it)."""
    from continuity.agents.table import agent_named

    known = agent_named(str(seen["agent"]))
    if known is not None:
        seen["agent"] = known.name
    return known is not None


def fast_search(argv: list[str]) -> int | None:
    """Run a well-formed ``search`` command line and return its exit code; None to leave it
    (and any error it meets) to the typer command."""
    args = parse(argv)
    if args is None or os.environ.get("CONTINUITY_MODEL"):  # a model: the typer command fuses
        return None
    from continuity.paths import resolve_store_location
    from continuity.retrieval.search import search
    from continuity.retrieval.settings import read_search_settings
    from continuity.store.locate import open_store

    damage: list[str] = []
    try:
        with open_store(
            resolve_store_location(args.store),
            on_recovery=lambda rec: print(recovery_line(rec), file=sys.stderr),
        ) as store:
            if read_search_settings(store).model:
                return None  # the store's model: the typer command fuses
            hits = search(
                store,
                args.query,
                thread=args.thread,
                project=args.project,
                agent=args.agent,
                k=args.k,
                on_damage=damage.append,
                progress=progress_on_stderr(),
            )
            agents = hit_agents(store, hits) if args.json else None
    except (ContinuityError, OSError):
        return None  # the typer command runs it again and reports the error its way
    try:
        print_hits(hits, args.query, as_json=args.json, write=print, agents=agents)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): quiet, exit 1, as click does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    for what in damage:  # an answer with a known gap is shown with the gap named
        print(f"warning: {what}", file=sys.stderr)
    return 0


def progress_on_stderr(*, slow: float = 2.0, tty: bool | None = None) -> Callable[[int, int], None]:
    """A progress report for building or catching up the store-wide search index, on stderr:
    on a terminal a line rewritten in place once it is more than a few threads (or a second),
    elsewhere a line every few seconds once it has taken ``slow`` seconds; nothing for the
    usual catch-up of a thread or two."""
    import time

    started = time.monotonic()
    on_tty = sys.stderr.isatty() if tty is None else tty
    state = {"last": 0.0, "shown": False}

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        elapsed = now - started
        if on_tty:
            due = (total >= 100 or elapsed >= 1.0) and (now - state["last"] >= 0.25)
        else:
            due = elapsed >= slow and now - state["last"] >= 5.0
        finished = done >= total
        if not (due or (finished and state["shown"])):
            return
        state["last"], state["shown"] = now, True
        line = f"indexing threads for search: {done:,}/{total:,}"
        if on_tty:
            print(f"\r{line}\x1b[K", end="\n" if finished else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return report


def hit_agents(store: BaseStore, hits: Sequence[Hit]) -> dict[str, str]:
    """The agent (its name in :mod:`continuity.agents.table`; "" for none) of each hit's
    thread: its catalog row's source, found by bisection (a first frame read without one)."""
    from continuity.agents.table import agent_for_source
    from continuity.caches.catalog import source_of

    found: dict[str, str] = {}
    for h in hits:
        if h.thread_id not in found:
            agent = agent_for_source(source_of(store, h.thread_id))
            found[h.thread_id] = agent.name if agent is not None else ""
    return found


def print_hits(
    hits: Sequence[Hit],
    query: str,
    *,
    as_json: bool,
    write: Callable[[str], object],
    agents: Mapping[str, str] | None = None,
) -> None:
    """Hits as JSON lines (each with the ``agent`` of ``agents``, by thread), or two lines
    each (matched terms in bold on a terminal)."""
    import msgspec

    if as_json:
        for h in hits:
            line = msgspec.json.encode(h)
            if agents is not None:  # the hit's fields, then its agent's name
                line = (
                    line[:-1]
                    + b',"agent":'
                    + msgspec.json.encode(agents.get(h.thread_id, ""))
                    + b"}"
                )
            write(line.decode())
        return
    if not hits:
        write(f"no hits for {query!r}")
        return
    color = sys.stdout.isatty()
    for h in hits:
        snippet = highlight(h.snippet, h.terms) if color else h.snippet
        who = f" {h.role}" if h.role else ""
        gone = "  [retracted]" if h.retracted else ""
        leads = hit_leads(h.covers, h.parent_thread_id, h.also)
        write(
            f"{h.thread_id}  seq {h.seq}  {format_ts(h.ts_ms)}  {h.kind}{who}  "
            f"({h.score:.3f}){gone}{leads}"
        )
        write(f"    {snippet}")
    if not any(h.exact for h in hits):
        write(NO_EXACT_WORD)


def highlight(text: str, terms: list[str]) -> str:
    """Bold the matched terms (ANSI) for a terminal."""
    if not terms:
        return text
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.I)
    return pattern.sub(lambda m: f"\x1b[1m{m.group(0)}\x1b[22m", text)
