"""The five tools as plain functions over an :class:`~.archive.Archive` (no SDK here).

Each takes the call's arguments (a JSON object) and returns a :class:`~.archive.ToolResult`,
or raises :class:`~.archive.ToolError` with one line. :func:`call_tool` dispatches by name and
turns the library's errors into that line too. Every result's text and data are redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from continuity import frames as fr
from continuity.agents.table import agent_for_source, agent_label, agent_named, known_agent_names
from continuity.caches.catalog import CatalogRow
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, ContinuityError
from continuity.mcp_server.archive import (
    Archive,
    ToolError,
    ToolResult,
    arg_int,
    arg_str,
    make_cursor,
    open_cursor,
    parse_time,
    stamp,
)
from continuity.mcp_server.excerpts import cut_point, head, snippet
from continuity.mcp_server.turns import CAP, render_frame
from continuity.retrieval.documents import NOTE_KINDS, note_text
from continuity.retrieval.ranking import Hit
from continuity.store.base import Thread
from continuity.tokens import estimate_text

__all__ = ["TOOL_FUNCTIONS", "call_tool", "read", "remember", "restore", "search", "sessions"]

_SNIPPET: Final = 200
_MAX_RANKED: Final = 2_000
_AROUND_BEFORE: Final = 3
_LATEST: Final = 30
_MAX_TEXT: Final = 20_000


def _line(text: str) -> str:
    return " ".join(text.split())


def _position(pos: dict[str, Any], key: str) -> int:
    value = pos.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ToolError("the cursor is damaged: call again without it")
    return value


# --- search -------------------------------------------------------------------------------------


def _label(h: Hit, kind: str) -> str:
    if h.kind == "message":
        return h.role or "message"
    return kind


def _kind(frame: fr.Frame | None, h: Hit) -> str:
    """A hit's kind as ``read`` names it: an agent's note is a ``decision`` or a ``note``, as
    it was recorded (search indexes both as notes)."""
    if isinstance(frame, fr.RecordAppended) and frame.kind in NOTE_KINDS:
        return frame.kind.rpartition(".")[2]
    return h.kind


_BY_MEANING: Final = "found by meaning: no word of the query matched"


def _hit_line(n: int, h: Hit, shown: tuple[str, str]) -> str:
    snippet, kind = shown
    leads = []
    if h.covers:
        leads.append(f"summary of #{h.covers[0]}–#{h.covers[1]}")
    if h.parent_thread_id:
        leads.append(f"subagent of {h.parent_thread_id}")
    if h.also:
        leads.append("same reply at " + ", ".join(f"#{s}" for s in h.also[:5]))
    if h.retracted:
        leads.append("retracted")
    if not h.terms:
        leads.append(_BY_MEANING)
    tail = f" ({'; '.join(leads)})" if leads else ""
    return f"{n}. {h.thread_id} #{h.seq} {stamp(h.ts_ms)} {_label(h, kind)}: {snippet}{tail}"


def _hit_data(h: Hit, shown: tuple[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "thread": h.thread_id,
        "seq": h.seq,
        "time_ms": h.ts_ms,
        "kind": shown[1],
        "role": h.role,
        "snippet": shown[0],
        "matched": h.terms,
    }
    if h.covers:
        data["covers"] = h.covers
    if h.parent_thread_id:
        data["parent_thread"] = h.parent_thread_id
    if h.also:
        data["also"] = h.also
    return data


def _said(frame: fr.Frame, summary: str | None) -> str:
    """What a frame says, its line breaks kept (a key's lines are redacted as written): the
    fields search indexes (:mod:`continuity.retrieval.documents`), one after another."""
    parts: list[str] = []
    if isinstance(frame, fr.MessageAppended):
        for b in frame.content:
            if isinstance(b, fr.TextBlock | fr.ThinkingBlock | fr.ProviderBlock):
                parts.append(b.text)
            elif isinstance(b, fr.ToolUseBlock):
                parts.append(b.name)
                parts += [v for v in b.input.values() if isinstance(v, str)]
            elif isinstance(b, fr.ToolResultBlock):
                parts.append(b.text)
    elif isinstance(frame, fr.ObservationRecorded):
        parts.append(frame.text)
    elif isinstance(frame, fr.RecordAppended):
        parts.append(note_text(frame))
    elif summary is not None:
        parts.append(summary)
    return "\n".join(parts)


def _shown(archive: Archive, h: Hit) -> tuple[str, str]:
    """A hit's snippet made again from its frame's text, redacted before it is cut (the
    search's own snippet is cut from the text as written: its edges may split a secret), and
    its kind as ``read`` names it."""
    from continuity.retrieval.documents import summary_text

    try:
        frame = next(_frames(archive.store.thread(h.thread_id), h.seq, h.seq), None)
        summary = None if frame is None else summary_text(archive.store, frame)
    except (ContinuityError, OSError):
        frame = None
    if frame is None:  # the search read it a moment ago: its snippet, without its edges
        text = archive.clean(h.snippet)
        return _line(text[text.find(" ") + 1 : text.rfind(" ")] if " " in text else ""), h.kind
    text = _line(snippet(_said(frame, summary), h.terms, archive.clean))
    if len(text) > _SNIPPET:
        text = head(text, _SNIPPET, archive.clean)[0] + "…"
    return text, _kind(frame, h)


def search(archive: Archive, args: dict[str, Any]) -> ToolResult:
    """The store's search (lexical, fused with the configured model), one line a hit."""
    from continuity.errors import InvalidQuery
    from continuity.retrieval.search import Embedding, search as run_search

    query = arg_str(args, "query")
    if query is None or not query.strip():
        raise ToolError("query is empty: give words, a path, a command or an error text")
    scope = arg_str(args, "scope", choices=("project", "session", "all")) or "project"
    agent = _agent(arg_str(args, "agent"))
    named = arg_str(args, "thread")
    since = arg_str(args, "since")
    until = arg_str(args, "until")
    limit = arg_int(args, "limit", lo=1, hi=50) or 8
    listing = {k: args.get(k) for k in ("query", "scope", "agent", "thread", "since", "until")}
    listing["limit"] = limit
    cursor = arg_str(args, "cursor")
    offset = _position(open_cursor(cursor, "search", listing), "o") if cursor else 0
    since_ms = parse_time(since, "since") if since else None
    until_ms = parse_time(until, "until") if until else None
    thread_id: str | None = None
    if named is not None:
        thread_id = archive.thread(named).id
    elif scope == "session":
        thread_id = archive.thread(None).id
    project = archive.project if scope == "project" and thread_id is None else None

    def wanted(h: Hit) -> bool:
        if since_ms is not None and h.ts_ms < since_ms:
            return False
        return until_ms is None or h.ts_ms < until_ms

    need = offset + limit + 1
    k = need
    damage: list[str] = []
    while True:
        try:
            hits = run_search(
                archive.store,
                query,
                thread=thread_id,
                project=project,
                agent=agent,
                k=k,
                embedder=archive.embedder(),
                on_damage=damage.append,
                embedding=Embedding(budget=archive.embed_budget),
            )
        except InvalidQuery as exc:
            raise ToolError(f"{exc}: give words, a path, a command or an error text") from None
        kept = [h for h in hits if wanted(h)]
        if len(kept) >= need or len(hits) < k or k >= _MAX_RANKED:
            break
        k = min(k * 4, _MAX_RANKED)
    page = kept[offset : offset + limit]
    shown = [_shown(archive, h) for h in page]
    more = len(kept) > offset + limit
    where = (
        f"thread {thread_id}"
        if thread_id is not None
        else f"project {project}"
        if project is not None
        else "the whole archive"
    )
    next_cursor = make_cursor("search", listing, {"o": offset + limit}) if more else None
    if not page:
        text = f"No hits for {query!r} in {where}" + (" past this page." if offset else ".")
        if not offset:
            text += " Try other words, scope all, or a wider time range."
    else:
        first = f"Hits {offset + 1}–{offset + len(page)} for {query!r} in {where} (UTC):"
        lines = [first, *(_hit_line(offset + i + 1, h, shown[i]) for i, h in enumerate(page))]
        lines.append("read {thread, seq} shows the turns around a hit.")
        if next_cursor:
            lines.append(f"More: search again with cursor {next_cursor!r}.")
        text = "\n".join(lines)
    for what in damage:
        text += f"\nwarning: {what}"
    listed = [_hit_data(h, s) for h, s in zip(page, shown, strict=True)]
    data = {"hits": listed, "next_cursor": next_cursor}
    return ToolResult(archive.clean(text), archive.clean_data(data))


# --- read ---------------------------------------------------------------------------------------


def _frames(thread: Thread, start: int, end: int) -> Iterator[fr.Frame]:
    """Frames ``start..end`` through the offset index (straight to the line), else the log."""
    index = ThreadIndex.current(thread)
    if index is not None:
        return index.read(start, end)
    return iter(thread.read(from_seq=start, to_seq=end))


def _fit(text: str, budget: int) -> int:
    """How many characters of ``text`` fit ``budget`` tokens (at least 1)."""
    chars = max(1, budget * 4)
    while chars > 1 and estimate_text(text[:chars]) > budget:
        chars = chars * 3 // 4
    return chars


def _between_tokens(text: str, chars: int) -> int:
    """``chars`` moved back to the whitespace before the token it would split (a page of a
    long text ends between tokens), if that is close; at least 1."""
    return max(1, cut_point(text, chars)) if chars < len(text) else len(text)


def _range(archive: Archive, thread: Thread, args: dict[str, Any], last: int) -> tuple[int, int]:
    """The seqs ``read`` shows: around ``seq``, ``from_seq..to_seq``, or the latest."""
    seq = arg_int(args, "seq", lo=0)
    from_seq = arg_int(args, "from_seq", lo=0)
    to_seq = arg_int(args, "to_seq", lo=0)
    if seq is not None and (from_seq is not None or to_seq is not None):
        raise ToolError("give seq (read around it) or from_seq/to_seq (a range), not both")
    for name, value in (("seq", seq), ("from_seq", from_seq)):
        if value is not None and value > last:
            raise ToolError(f"{name} {value} is past the end of thread {thread.id} (last {last})")
    if seq is not None:
        return max(0, seq - _AROUND_BEFORE), last
    if from_seq is not None or to_seq is not None:
        start = from_seq or 0
        end = last if to_seq is None else min(to_seq, last)
        if end < start:
            raise ToolError(f"from_seq {start} is after to_seq {to_seq}")
        return start, end
    return max(0, last - _LATEST), last


def read(archive: Archive, args: dict[str, Any]) -> ToolResult:
    """A thread's frames as turns within a token budget, or an artifact's text, paged."""
    max_tokens = arg_int(args, "max_tokens", lo=200, hi=20_000) or 2_000
    artifact = arg_str(args, "artifact")
    cursor = arg_str(args, "cursor")
    if artifact is not None:
        return _read_artifact(archive, artifact.strip(), max_tokens, cursor)
    thread = archive.thread(arg_str(args, "thread"))
    head = thread.head()
    if head is None:
        raise ToolError(f"thread {thread.id} is empty")
    last = head.seq
    start, end = _range(archive, thread, args, last)
    whole = start == end  # one frame asked for: shown whole, paged by characters
    target = arg_int(args, "seq", lo=0)
    listing = {k: args.get(k) for k in ("seq", "from_seq", "to_seq")}
    listing.update(thread=thread.id, max_tokens=max_tokens)
    skip = 0
    if cursor:
        pos = open_cursor(cursor, "read", listing)
        start, skip = _position(pos, "s"), _position(pos, "c")
        if start > end:
            raise ToolError("the cursor is past the range: call again without it")
    # the header names the seqs shown, known once the page is made: its longest form counts
    used = estimate_text(f"Thread {thread.id}, seqs #{end}–#{end} of #0–#{last} (UTC):") + 30
    lines: list[str] = []
    shown: list[int] = []
    next_pos: dict[str, int] | None = None
    for frame in _frames(thread, start, end):
        entry = render_frame(frame, archive.store, cap=None if whole else CAP, clean=archive.clean)
        if entry is None:
            continue
        entry = archive.clean(entry)[skip:]
        if frame.seq == target:
            entry = "▶ " + entry
        cost = estimate_text(entry) + 1
        if used + cost > max_tokens:
            if not lines:  # one entry larger than the page: this part of it, then the rest
                chars = _between_tokens(entry, _fit(entry, max_tokens - used))
                lines.append(entry[:chars] + " …")
                shown.append(frame.seq)
                next_pos = {"s": frame.seq, "c": skip + chars}
            else:
                next_pos = {"s": frame.seq}
            break
        lines.append(entry)
        shown.append(frame.seq)
        used += cost
        skip = 0
    next_cursor = make_cursor("read", listing, next_pos) if next_pos else None
    if not lines:
        lines.append("(nothing to show here: only bookkeeping frames)")
    if next_cursor:
        lines.append(f"More: read again with cursor {next_cursor!r}.")
    data = {
        "thread": thread.id,
        "from_seq": shown[0] if shown else start,
        "to_seq": shown[-1] if shown else end,
        "last_seq": last,
        "next_cursor": next_cursor,
    }
    if shown:
        part = f" (#{shown[-1]} in part)" if next_pos and "c" in next_pos else ""
        span = f"seqs #{shown[0]}–#{shown[-1]}{part}"
    else:
        span = f"nothing to show in seqs #{start}–#{end}"
    header = f"Thread {thread.id}, {span} of #0–#{last} (UTC):"
    return ToolResult("\n".join([header, *lines]), data)


def _artifact_text(archive: Archive, artifact: str) -> str:
    import msgspec

    from continuity.summary import decode_summary

    try:
        data = archive.store.artifacts.get(artifact)
    except (ArtifactNotFound, KeyError):
        raise ToolError(f"no artifact {artifact!r} in the archive") from None
    except ArtifactCorrupt as exc:
        raise ToolError(f"artifact {artifact} is damaged: {_line(str(exc))}") from None
    except (ValueError, ContinuityError) as exc:
        raise ToolError(f"{artifact!r} is not an artifact id: {_line(str(exc))}") from None
    if b"\x00" in data[:4096]:
        raise ToolError(f"artifact {artifact} holds {len(data):,} bytes of binary data")
    try:
        return decode_summary(data).text
    except (ValueError, msgspec.DecodeError):  # not a summary: its text as it is
        return data.decode("utf-8", "replace")


def _read_artifact(
    archive: Archive, artifact: str, max_tokens: int, cursor: str | None
) -> ToolResult:
    listing = {"artifact": artifact, "max_tokens": max_tokens}
    start = _position(open_cursor(cursor, "read", listing), "c") if cursor else 0
    text = archive.memo.get(("artifact", artifact))
    if text is None:  # the pages of one artifact come one after another: decoded once
        text = archive.clean(_artifact_text(archive, artifact))
        archive.memo.clear()
        archive.memo[("artifact", artifact)] = text
    if start > len(text):
        raise ToolError("the cursor is past the artifact's end: call again without it")
    header = f"Artifact {artifact}, {len(text):,} chars"
    rest = text[start:]
    chars = _between_tokens(rest, _fit(rest, max_tokens - estimate_text(header) - 30))
    end = start + chars
    next_cursor = make_cursor("read", listing, {"c": end}) if end < len(text) else None
    header += f", chars {start:,}–{end:,}:"
    body = [header, rest[:chars]]
    if next_cursor:
        body.append(f"More: read again with cursor {next_cursor!r}.")
    data = {"artifact": artifact, "chars": len(text), "from": start, "to": end}
    data["next_cursor"] = next_cursor
    return ToolResult("\n".join(body), data)


# --- sessions -----------------------------------------------------------------------------------


def _title(archive: Archive, row: CatalogRow) -> str:
    """The session's title, else its first prompt (cut), else ""."""
    if row.title:
        return _line(row.title)[:80]
    thread = archive.store.thread(row.thread_id)
    for frame in thread.read(to_seq=40, types=["message_appended"]):
        if (
            isinstance(frame, fr.MessageAppended)
            and frame.role == "user"
            and frame.meta.get("is_meta") != "true"
        ):
            text = " ".join(b.text for b in frame.content if isinstance(b, fr.TextBlock))
            if text.strip() and not text.lstrip().startswith("<"):
                line = _line(text)
                return line[:80] + ("…" if len(line) > 80 else "")
    return ""


def _agent(name: str | None) -> str | None:
    """The agent an ``agent`` argument names (any of its names in
    :mod:`continuity.agents.table`), as its name; :class:`ToolError` listing the agents when it
    names none."""
    if name is None:
        return None
    found = agent_named(name)
    if found is None:
        raise ToolError(f"unknown agent {name!r}: the agents are {known_agent_names()}")
    return found.name


def _agent_name(source: str) -> str:
    found = agent_for_source(source)
    return found.name if found is not None else source


def _context_usage(archive: Archive, thread_id: str) -> tuple[int, int] | None:
    """The session's context tokens and window at its latest answer (ADR 0056), or None."""
    from continuity.rolling.settings import read_settings
    from continuity.rolling.usage import session_usage

    settings = read_settings(archive.store.local_dir)
    found = session_usage(
        archive.store.thread(thread_id), windows=settings.windows, default=settings.window
    )
    return None if found is None else (found.tokens, found.window)


def sessions(archive: Archive, args: dict[str, Any]) -> ToolResult:
    """The project's (or every) session, most recently active first."""
    scope = arg_str(args, "scope", choices=("project", "all")) or "project"
    agent = _agent(arg_str(args, "agent"))
    limit = arg_int(args, "limit", lo=1, hi=100) or 10
    listing = {"scope": scope, "agent": agent, "limit": limit}
    cursor = arg_str(args, "cursor")
    offset = _position(open_cursor(cursor, "sessions", listing), "o") if cursor else 0
    rows = archive.session_rows(
        project=archive.project if scope == "project" else None, agent=agent
    )
    current = archive.current()
    page = rows[offset : offset + limit]
    more = len(rows) > offset + limit
    next_cursor = make_cursor("sessions", listing, {"o": offset + limit}) if more else None
    where = f"project {archive.project}" if scope == "project" else "the whole archive"
    if not page:
        text = f"No sessions in {where}" + (" past this page." if offset else ".")
        if scope == "project" and not offset:
            text += " Try scope all."
    else:
        lines = [f"Sessions {offset + 1}–{offset + len(page)} of {len(rows)} in {where} (UTC):"]
        items = []
        for row in page:
            last = row.last_message_ms if row.last_message_ms is not None else row.last_active_ms
            title = _title(archive, row)
            mark = " (current)" if row.thread_id == current else ""
            used = _context_usage(archive, row.thread_id)
            lines.append(
                f"- {row.thread_id}{mark} · {agent_label(row.source)}"
                + (f" · “{title}”" if title else "")
                + f" · {stamp(row.first_ms)} → {stamp(last)} · {row.frames:,} frames, "
                f"{row.messages:,} messages, {row.compactions} compactions"
                + (f" · context {used[0]:,} of {used[1]:,} tokens" if used else "")
                + (f" · {row.project}" if scope == "all" and row.project else "")
            )
            items.append(
                {
                    "thread": row.thread_id,
                    "agent": _agent_name(row.source),
                    "title": title,
                    "project": row.project,
                    "started_ms": row.first_ms,
                    "last_active_ms": last,
                    "frames": row.frames,
                    "messages": row.messages,
                    "compactions": row.compactions,
                    "context_tokens": used[0] if used else None,
                    "context_window": used[1] if used else None,
                    "current": row.thread_id == current,
                }
            )
        if next_cursor:
            lines.append(f"More: sessions again with cursor {next_cursor!r}.")
        text = "\n".join(lines)
        return ToolResult(
            archive.clean(text),
            archive.clean_data({"sessions": items, "next_cursor": next_cursor}),
        )
    return ToolResult(text, {"sessions": [], "next_cursor": None})


# --- restore ------------------------------------------------------------------------------------


def restore(archive: Archive, args: dict[str, Any]) -> ToolResult:
    """What the session's last compaction dropped, packed as the SessionStart restore is."""
    from continuity.agents.base.restore import RESTORE_MAX_CHARS, restore_context
    from continuity.context.sources import open_source

    thread = archive.thread(arg_str(args, "thread"))
    compactions = [
        c for c in open_source(thread).checkpoints() if c.cut_rule_id.startswith("claude_code")
    ]
    text = restore_context(thread, max_chars=RESTORE_MAX_CHARS, log=False)
    if not compactions:
        text = (
            "This session has not been compacted: what follows is what the archive extracts "
            "from it so far.\n\n" + text
        )
    data = {"thread": thread.id, "compactions": len(compactions)}
    return ToolResult(archive.clean(text), data)


# --- remember -----------------------------------------------------------------------------------


def remember(archive: Archive, args: dict[str, Any]) -> ToolResult:
    """A decision or note as a record, or the agent's summary of a stretch as a checkpoint."""
    text = arg_str(args, "text")
    if text is None or not text.strip():
        raise ToolError("text is empty: say what to record")
    if len(text) > _MAX_TEXT:
        raise ToolError(f"text is {len(text):,} chars; at most {_MAX_TEXT:,}")
    if "\x00" in text:
        raise ToolError("text holds NUL characters")
    kind = arg_str(args, "kind", choices=("decision", "note", "summary")) or "note"
    from_seq = arg_int(args, "from_seq", lo=0)
    to_seq = arg_int(args, "to_seq", lo=0)
    thread = archive.thread(arg_str(args, "thread"))
    clean = archive.clean(text.strip())
    if kind != "summary":
        if from_seq is not None or to_seq is not None:
            raise ToolError("from_seq and to_seq are for kind summary")
        from continuity.context.records import record

        seq = record(thread, f"continuity.{kind}", {"text": clean, "by": "agent"})
        said = f"Recorded the {kind} at #{seq} of {thread.id}: search and restore will show it."
        return ToolResult(said, {"thread": thread.id, "seq": seq, "kind": kind})
    from continuity.rolling.warm import clean_list

    segment = arg_str(args, "segment") or ""
    if segment and to_seq is None:
        from continuity.rolling.cache import thread_segments

        found = next((s for s in thread_segments(thread) if s.segment_id == segment), None)
        if found is None:
            raise ToolError(f"no segment {segment!r} in thread {thread.id}")
        from_seq, to_seq = found.from_seq, found.to_seq
    if to_seq is None:
        raise ToolError("a summary needs to_seq: the last seq it covers (from_seq: the first)")
    keys = (
        [archive.clean(d) for d in clean_list(args.get("key_decisions"))],
        [archive.clean(f) for f in clean_list(args.get("key_files"))],
    )
    return _remember_summary(archive, thread, clean, from_seq or 0, to_seq, segment, keys)


def _remember_summary(
    archive: Archive,
    thread: Thread,
    text: str,
    from_seq: int,
    to_seq: int,
    segment: str = "",
    keys: tuple[list[str], list[str]] = ([], []),
) -> ToolResult:
    """The agent's summary of ``from_seq..to_seq`` as a cumulative checkpoint through
    ``to_seq``: what came before ``from_seq`` is the summary through ``from_seq - 1`` (an
    earlier checkpoint's, brought up to there by the default summarizer), then the agent's."""
    import msgspec

    from continuity.context.compaction import (
        commit_checkpoint,
        default_summarizer,
        pair_safe_cut,
        plan_checkpoint,
    )
    from continuity.context.sources import open_source
    from continuity.errors import InvalidCutRule
    from continuity.summary import SummaryContent

    head = thread.head()
    last = -1 if head is None else head.seq
    if to_seq > last:
        raise ToolError(f"to_seq {to_seq} is past the end of thread {thread.id} (last {last})")
    if from_seq > to_seq:
        raise ToolError(f"from_seq {from_seq} is after to_seq {to_seq}")
    src = open_source(thread)
    cut = pair_safe_cut(src, to_seq)
    try:
        plan = plan_checkpoint(thread, cut, src)
    except InvalidCutRule as exc:
        raise ToolError(f"cannot summarize up to #{to_seq}: {exc}") from None
    before = ""
    if from_seq > 0:
        try:
            base = plan_checkpoint(thread, from_seq - 1, src)
        except InvalidCutRule:  # no message before from_seq: nothing to carry
            base = None
        if base is not None:
            before = default_summarizer(None).summarize(base.base, base.messages).text.strip()
    from continuity.rolling.warm import record_compressed, summary_body

    body = f"## #{from_seq}–#{cut}, summarized by the agent\n{summary_body(text, *keys)}"
    content = SummaryContent(text=f"{before}\n\n{body}" if before else body)
    frame = commit_checkpoint(
        thread,
        msgspec.structs.replace(plan, base_entry=None, base=None),
        content,
        produced_by="agent (continuity mcp remember)",
    )
    # the warm tier's record: what it covers and what it saved (ADR 0056)
    warm = record_compressed(
        thread,
        from_seq=from_seq,
        to_seq=cut,
        checkpoint_id=frame.checkpoint_id,
        text=text,
        key_decisions=keys[0],
        key_files=keys[1],
        segment_id=segment,
    )
    moved = f" (to_seq moved to #{cut}: a summary never splits a tool call from its result)"
    said = (
        f"Recorded your summary of #{from_seq}–#{cut} as checkpoint {frame.checkpoint_id} at "
        f"#{frame.seq} of {thread.id}{moved if cut != to_seq else ''}: compiles start from it."
    )
    said += (
        f" It compresses ~{warm.original_tokens:,} tokens to ~{warm.compressed_tokens:,}"
        f" ({warm.ratio:.0%})."
        if warm.original_tokens
        else ""
    )
    data = {
        "thread": thread.id,
        "seq": frame.seq,
        "kind": "summary",
        "to_seq": cut,
        "original_tokens": warm.original_tokens,
        "compressed_tokens": warm.compressed_tokens,
        "ratio": warm.ratio,
    }
    return ToolResult(said, data)


# --- dispatch -----------------------------------------------------------------------------------

TOOL_FUNCTIONS: Final[dict[str, Callable[[Archive, dict[str, Any]], ToolResult]]] = {
    "search": search,
    "read": read,
    "sessions": sessions,
    "restore": restore,
    "remember": remember,
}


def call_tool(archive: Archive, name: str, args: dict[str, Any] | None) -> ToolResult:
    """Run tool ``name``; :class:`ToolError` (one line) for anything the call cannot do."""
    tool = TOOL_FUNCTIONS.get(name)
    if tool is None:
        raise ToolError(f"no tool {name!r}: the tools are {', '.join(TOOL_FUNCTIONS)}")
    given = dict(args or {})
    unknown = _unknown(name, given)
    if unknown:
        raise ToolError(f"{name} takes no argument {', '.join(sorted(unknown))}")
    try:
        return tool(archive, given)
    except ToolError:
        raise
    except ContinuityError as exc:
        raise ToolError(_line(str(exc)) or type(exc).__name__) from None
    except OSError as exc:
        raise ToolError(_line(f"the archive could not be read: {exc}")) from None


def _unknown(name: str, args: Iterable[str]) -> set[str]:
    from continuity.mcp_server.schemas import TOOLS

    props = next(t["inputSchema"]["properties"] for t in TOOLS if t["name"] == name)
    return set(args) - set(props)
