"""Segments: a thread cut into its tasks and topics, deterministically (ADR 0056).

A **turn** is a prompt (a user message with text of the user's, not a tool result nor the
agent's own meta text) and everything up to the next one. Each turn has features: the files
its tools touched (``file_path``, ``path``… of a tool call), the commands it ran (their first
word), and its prompt's terms (stemmed words of four letters or more that are not common).

A turn starts a new **segment** when it shares nothing distinctive with the current one: no
file, and none of its distinctive prompt terms among the segment's terms. A term is distinctive
unless it was in half of the turns before or more, once there are four (prefix-only: so a
boundary, once drawn, never moves as the thread grows). A turn with no distinctive feature at
all ("yes", "go on") continues the segment. Nothing is tuned on a corpus: the rule is "a new
topic is one that shares nothing with the current".

A segment's **topic** is its first prompt's first line (and its main files); it is
**mentioned** by a later turn that touches one of its files or whose prompt says two of its
top terms or one of its files' names; it **looks completed** when a later segment started
and its last answer neither asks a question nor follows a failed tool call, or when its last
answer says it is done. :func:`segment_turns` works on :class:`Turn` features alone, so the
cache (:mod:`.cache`) keeps only those.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.tokens import estimate_text

__all__ = ["Segment", "Turn", "is_prompt", "segment_turns", "terms_of", "turns_of"]

_WORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9]{3,}")
_PATH_KEYS: Final = ("file_path", "path", "notebook_path", "filePath", "absolute_path")
_COMMAND_KEYS: Final = ("command", "cmd")
_COMMON: Final = frozenset(
    [
        "about",
        "after",
        "again",
        "also",
        "because",
        "been",
        "before",
        "being",
        "both",
        "could",
        "does",
        "doing",
        "done",
        "each",
        "even",
        "every",
        "first",
        "from",
        "good",
        "have",
        "here",
        "just",
        "know",
        "last",
        "like",
        "look",
        "make",
        "many",
        "more",
        "most",
        "much",
        "must",
        "need",
        "next",
        "only",
        "other",
        "over",
        "please",
        "really",
        "right",
        "same",
        "should",
        "some",
        "still",
        "such",
        "sure",
        "take",
        "than",
        "that",
        "them",
        "then",
        "there",
        "these",
        "they",
        "thing",
        "things",
        "think",
        "this",
        "those",
        "through",
        "very",
        "want",
        "well",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "okay",
        "thanks",
        "thank",
        "let",
        "lets",
        "going",
        "can't",
        "don't",
        "it's",
        "into",
        "onto",
        "upon",
        "also",
        "file",
        "files",
        "code",
        "line",
        "lines",
        "work",
        "works",
        "working",
        "check",
    ]
)
_DONE: Final = re.compile(
    r"\b(done|fixed|finished|complete[sd]?|all (?:tests )?pass(?:ed|ing)?|committed|merged|"
    r"resolved|works now|implemented)\b",
    re.IGNORECASE,
)
_TOP_TERMS: Final = 5
_FEW: Final = 4  # turns before a term can be too common to tell topics apart
_TOPIC_CHARS: Final = 90
_PROMPT_CHARS: Final = 4_000


class Turn(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One turn's features (what the cache keeps)."""

    index: int
    """0-based turn number (turn 0 may be what came before the first prompt)."""
    from_seq: int
    to_seq: int
    messages: int
    tokens: int
    prompt: str
    """The prompt's words, wrappers removed, on one line (at most 200 characters)."""
    terms: list[str]
    files: list[str]
    commands: list[str]
    asks: bool = False
    """The turn's last answer ends with a question."""
    failed: bool = False
    """The turn's last tool result was an error."""
    says_done: bool = False
    """The turn's last answer says the work is done."""


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """A task or topic of the thread."""

    segment_id: str
    topic: str
    from_seq: int
    to_seq: int
    first_turn: int
    last_turn: int
    messages: int
    tokens: int
    """The estimated tokens of its messages (the original, for the warm tier's ratio)."""
    files: list[str]
    terms: list[str]
    last_mentioned_turn: int
    turns_since_mentioned: int
    completed: bool
    why: str
    """Why it looks completed or not, and why it started (one short phrase each)."""


def _stem(word: str) -> str:
    from continuity.retrieval.stem import stem

    return stem(word.lower())


def terms_of(text: str) -> list[str]:
    """The distinct content terms of ``text``, stemmed, in order of first use."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        low = w.lower()
        if low in _COMMON:
            continue
        seen.setdefault(_stem(low), None)
    return list(seen)


def _text(blocks: Iterable[fr.ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, fr.TextBlock))


def _prompt(m: fr.MessageAppended) -> str:
    """The user's own words in ``m`` (Claude Code's wrappers and noise lines removed), or ""
    when it is no prompt: a tool's result, the agent's own meta text, an interruption note."""
    # Imported here: the rules compile 14 patterns, and every prompt hook imports this module
    # (the reminder's queue) though most never segment anything (issue 43)
    from continuity.context.transcript_rules import is_meta, prompt_text

    if m.role != "user" or is_meta(m.meta) or m.meta.get("synthetic") == "true":
        return ""
    if any(isinstance(b, fr.ToolResultBlock) for b in m.content):
        return ""
    return prompt_text(_text(m.content), _PROMPT_CHARS)


def is_prompt(m: fr.MessageAppended) -> bool:
    """Whether ``m`` starts a turn: a prompt in the user's own words."""
    return bool(_prompt(m))


def _tool_features(m: fr.MessageAppended, files: dict[str, None], cmds: dict[str, None]) -> None:
    for b in m.content:
        if not isinstance(b, fr.ToolUseBlock):
            continue
        for key in _PATH_KEYS:
            v = b.input.get(key)
            if isinstance(v, str) and v.strip() and "\n" not in v and len(v) < 512:
                files.setdefault(v.strip(), None)
        for key in _COMMAND_KEYS:
            v = b.input.get(key)
            if isinstance(v, list):
                v = " ".join(str(x) for x in v)
            if isinstance(v, str) and v.split():
                cmds.setdefault(v.split()[0].rsplit("/", 1)[-1][:40], None)


def turns_of(messages: Sequence[fr.MessageAppended], first_index: int = 0) -> list[Turn]:
    """The turns of ``messages`` (in seq order), numbered from ``first_index``; the last may
    be unfinished (the caller recomputes it when more messages come)."""
    groups: list[list[fr.MessageAppended]] = []
    for m in messages:
        if not groups or is_prompt(m):
            groups.append([m])
        else:
            groups[-1].append(m)
    return [_turn(first_index + i, g) for i, g in enumerate(groups)]


def _turn(index: int, group: list[fr.MessageAppended]) -> Turn:
    files: dict[str, None] = {}
    cmds: dict[str, None] = {}
    tokens = 0
    last_answer = ""
    failed = False
    for m in group:
        _tool_features(m, files, cmds)
        tokens += m.tokens or estimate_text(_text(m.content))
        if m.role == "assistant":
            said = _text(m.content).strip()
            if said:
                last_answer = said
        for b in m.content:
            if isinstance(b, fr.ToolResultBlock):
                failed = b.is_error
    head = group[0]
    prompt = _prompt(head)
    first_line = prompt[:200]
    return Turn(
        index=index,
        from_seq=head.seq,
        to_seq=group[-1].seq,
        messages=len(group),
        tokens=tokens,
        prompt=first_line,
        terms=terms_of(prompt),
        files=list(files),
        commands=list(cmds),
        asks=last_answer.endswith("?"),
        failed=failed,
        says_done=bool(_DONE.search(last_answer[-400:])),
    )


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].lower()


def _boundaries(turns: Sequence[Turn]) -> list[tuple[int, str]]:
    """The index (into ``turns``) where each segment starts, and why."""
    starts: list[tuple[int, str]] = [(0, "the start")] if turns else []
    df: Counter[str] = Counter()
    seg_terms: set[str] = set()
    seg_files: set[str] = set()
    for i, t in enumerate(turns):
        if i > 0 and t.prompt:
            # common: in half the turns before (once there are a few): it tells no topic
            distinct = {w for w in t.terms if i < _FEW or df[w] * 2 < i}
            files = set(t.files)
            if (distinct or files) and not (distinct & seg_terms) and not (files & seg_files):
                named = {_basename(f) for f in seg_files} & set(t.prompt.lower().split())
                if not named:
                    starts.append((i, "a new topic: no file or term in common"))
                    seg_terms, seg_files = set(), set()
        seg_terms.update(t.terms)
        seg_files.update(t.files)
        df.update(set(t.terms))
    return starts


def _topic(turns: Sequence[Turn], files: Sequence[str]) -> str:
    prompt = next((t.prompt for t in turns if t.prompt), "") or "(before the first prompt)"
    line = " ".join(prompt.split())
    if len(line) > _TOPIC_CHARS:
        line = line[: _TOPIC_CHARS - 1] + "…"
    names = list(dict.fromkeys(_basename(f) for f in files))[:3]
    return f"{line} [{', '.join(names)}]" if names else line


def segment_turns(turns: Sequence[Turn]) -> list[Segment]:
    """The segments of a thread's turns (all of them, in order)."""
    starts = _boundaries(turns)
    out: list[Segment] = []
    current = turns[-1].index if turns else 0
    # each turn's words, files and terms as sets, once (every later segment looks at them)
    seen = [(set(t.prompt.lower().split()), set(t.files), set(t.terms)) for t in turns]
    for n, (start, why_start) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(turns)
        own = turns[start:end]
        files = list(dict.fromkeys(f for t in own for f in t.files))
        counts = Counter(w for t in own for w in t.terms)
        top = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:_TOP_TERMS]
        last = own[-1]
        mentioned = last.index
        file_set, names = set(files), {_basename(f) for f in files}
        top_set = set(top)
        for k in range(len(turns) - 1, end - 1, -1):  # the newest mention is the one wanted
            words, later_files, later_terms = seen[k]
            if (
                not file_set.isdisjoint(later_files)
                or len(top_set & later_terms) >= 2
                or not names.isdisjoint(words)
            ):
                mentioned = turns[k].index
                break
        closed = end < len(turns)
        if last.says_done:
            completed, why = True, "its last answer says done"
        elif not closed:
            completed, why = False, "the current topic"
        elif last.asks:
            completed, why = False, "its last answer asks a question"
        elif last.failed:
            completed, why = False, "its last tool call failed"
        else:
            completed, why = True, "a later topic began"
        out.append(
            Segment(
                segment_id=f"seg-{own[0].from_seq}",
                topic=_topic(own, files),
                from_seq=own[0].from_seq,
                to_seq=last.to_seq,
                first_turn=own[0].index,
                last_turn=last.index,
                messages=sum(t.messages for t in own),
                tokens=sum(t.tokens for t in own),
                files=files[:20],
                terms=top,
                last_mentioned_turn=mentioned,
                turns_since_mentioned=current - mentioned,
                completed=completed,
                why=f"{why_start}; {why}",
            )
        )
    return out
