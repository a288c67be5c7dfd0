"""Hostile hook input: malformed payloads and hostile transcripts given to ``continuity hook``.

    python -m tools.faults.hooks [--payloads 2000] [--big-mb 200] [--big-calls 3] [--jobs 2]
                                 [--scale F] [--seed S] [--json] [--keep]

``--payloads`` calls of ``continuity hook <event>`` (every event of
``continuity/agents/claude_code/hooks.py``, Claude Code's names, unknown names and no name at all),
each a fresh process reading one hostile payload on stdin, drawn from these categories:

* input that is not JSON (garbage, a cut payload, trailing bytes, invalid UTF-8, NUL bytes), not
  an object, empty, nested 100,000 deep, or huge (17 MB of input, a 10 MB prompt, 200,000 keys);
* fields of the wrong type (numbers, lists, objects, null, huge integers, lone surrogates, 1 MB
  strings) in every field the hooks read;
* ``transcript_path`` naming a directory, a FIFO, a binary file, a ``--big-mb`` MB transcript, a
  ``--big-mb`` MB file that is one line without a newline, a ``--big-mb``/4 MB single line, a
  symlink loop, a dangling symlink, ``/proc/self/mem``, ``/dev/zero``, a path with a NUL byte, a
  5,000-character path, a relative path, nothing;
* ids with ``../`` (in ``session_id``, in the transcript's name and in its lines' ``sessionId``
  and ``agentId``, in ``agent_transcript_path``);
* transcripts with hostile lines (wrong types, broken JSON, a 2 MB line, deep nesting, invalid
  UTF-8) mixed with valid ones, transcripts whose last line is unterminated, empty transcripts,
  and the real ones of ``../shared/fixtures/claude-code/`` (when present);
* a store whose ``claude-code.json`` is not JSON or holds wrong types or absurd limits.

The calls on the ``--big-mb`` files are ``--big-calls`` each (the rest of the calls are cheap).
Every call must exit 0 within its hook's timeout (the ``timeout`` continuity installs it with;
30 s for the events it does not install), print no traceback, and print on stdout nothing, one
complete JSON document, or (``pre-compact`` only) plain text that does not start with ``{``.
Afterwards ``verify`` must pass on every store the hooks wrote to, and no file may have been
created outside them (ids with ``../`` carry the marker ``EVIL`` to find any).
"""

from __future__ import annotations

import json
import os
import random
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tools.bench._common import continuity_command, median, percentile
from tools.bench.bench_hooks import child_env
from tools.faults._common import (
    CC_FIXTURES,
    Examples,
    FamilyResult,
    Proc,
    Table,
    cli,
    family_parser,
    finish,
    log,
    run,
    scaled,
    scratch,
    start,
)

__all__ = ["main", "run_family"]

EVENTS: Final = (
    "session-start",
    "user-prompt-submit",
    "pre-tool-use",
    "post-tool-use",
    "pre-compact",
    "post-compact",
    "stop",
    "subagent-stop",
    "session-end",
    "notification",
)
CLAUDE_NAMES: Final = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "stop": "Stop",
    "subagent-stop": "SubagentStop",
    "session-end": "SessionEnd",
    "notification": "Notification",
}
DEFAULT_TIMEOUT: Final = 30.0
"""The timeout assumed for the events continuity does not install (Claude Code's own default is
600 s, its UserPromptSubmit default 30 s)."""
MARK: Final = "EVIL"
_MB: Final = 1_000_000


def hook_timeouts() -> dict[str, float]:
    """Each event's timeout in seconds: what ``continuity install`` gives it."""
    from continuity.agents.claude_code.install import HOOKS

    out = {event: DEFAULT_TIMEOUT for event in EVENTS}
    for _name, slug, _matcher, timeout in HOOKS:
        out[slug] = float(timeout)
    return out


@dataclass(slots=True)
class Case:
    category: str
    label: str
    args: list[str]
    stdin: bytes
    store: Path
    event: str | None
    """The event the hook should resolve to (None when none can be resolved)."""


@dataclass(slots=True)
class CategoryCounts:
    calls: int = 0
    bad_exit: int = 0
    timed_out: int = 0
    over_timeout: int = 0
    bad_stdout: int = 0
    tracebacks: int = 0
    multiline_stderr: int = 0
    json_out: int = 0
    text_out: int = 0
    reported: int = 0
    """Calls that reported an error on stderr (and exited 0, as they should)."""
    seconds: list[float] = field(default_factory=list)


# --- transcripts ----------------------------------------------------------------------------


class Lines:
    """Claude Code transcript lines: valid ones, and hostile variants of them."""

    def __init__(self, rng: random.Random, session: str, cwd: str) -> None:
        self.rng = rng
        self.session = session
        self.cwd = cwd
        self.parent: str | None = None
        self.n = 0

    def _base(self, kind: str) -> dict[str, Any]:
        self.n += 1
        uid = str(uuid.UUID(int=self.rng.getrandbits(128)))
        line = {
            "type": kind,
            "uuid": uid,
            "parentUuid": self.parent,
            "sessionId": self.session,
            "timestamp": f"2026-01-05T10:{self.n // 60 % 60:02d}:{self.n % 60:02d}Z",
            "cwd": self.cwd,
            "version": "2.1.39",
            "gitBranch": "main",
            "isSidechain": False,
        }
        self.parent = uid
        return line

    def user(self, text: str) -> dict[str, Any]:
        line = self._base("user")
        line["message"] = {"role": "user", "content": text}
        return line

    def assistant(self, text: str) -> dict[str, Any]:
        line = self._base("assistant")
        line["requestId"] = f"req_{self.n:012d}"
        line["message"] = {
            "id": f"msg_{self.n:012d}",
            "model": "claude-opus",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return line

    def tool_pair(self) -> list[dict[str, Any]]:
        tool_id = f"toolu_{self.n:012d}"
        call = self._base("assistant")
        call["requestId"] = f"req_{self.n:012d}"
        call["message"] = {
            "id": f"msg_{self.n:012d}",
            "role": "assistant",
            "model": "claude-opus",
            "content": [
                {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}
            ],
        }
        result = self._base("user")
        result["message"] = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "a\nb\n"}],
        }
        return [call, result]

    def compaction(self) -> list[dict[str, Any]]:
        boundary = self._base("system")
        boundary["subtype"] = "compact_boundary"
        boundary["compactMetadata"] = {"trigger": "auto", "preTokens": 150_000}
        summary = self.user("This session is being continued from a previous conversation.")
        summary["isCompactSummary"] = True
        return [boundary, summary]

    def valid(self) -> list[dict[str, Any]]:
        pick = self.rng.random()
        if pick < 0.4:
            return [self.user(f"please fix bug {self.n}")]
        if pick < 0.75:
            return [self.assistant(f"fixed bug {self.n}")]
        if pick < 0.95:
            return self.tool_pair()
        return self.compaction()

    def hostile(self) -> bytes:
        """One hostile line (with its newline)."""
        rng = self.rng
        pick = rng.randrange(9)
        if pick == 0:
            return b'{"type": "user", "message": {"content": "cut'[: rng.randrange(5, 40)] + b"\n"
        if pick == 1:
            return (
                bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" ")
                + b"\n"
            )
        if pick == 2:
            return b"[" * 50_000 + b"]" * 50_000 + b"\n"
        if pick == 3:
            line = self.user("x" * 2_000_000)
            return json.dumps(line).encode() + b"\n"
        if pick == 4:
            return b'{"type":"user","message":{"role":"user","content":"\xff\xfe bad utf8"}}\n'
        if pick == 5:
            return rng.choice([b"null", b"42", b'"a string"', b"[]", b"{}", b"true"]) + b"\n"
        line = rng.choice(self.valid())
        _poison(line, rng)
        return json.dumps(line, allow_nan=True).encode() + b"\n"


def _poison(obj: dict[str, Any], rng: random.Random) -> None:
    """Replace one field (at any depth) by a hostile value."""
    target: Any = obj
    while True:
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            return
        key = rng.choice(keys)
        inner = target[key]
        if isinstance(inner, dict | list) and inner and rng.random() < 0.6:
            target = inner
            continue
        target[key] = _hostile_value(rng)
        return


def _hostile_value(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            0,
            -1,
            10**30,
            1.5,
            float("nan"),
            True,
            "",
            [],
            {},
            [1, "two", None],
            {"nested": {"deep": [1, 2, {}]}},
            "../../" + MARK,
            "x" * 100_000,
            "\u0000nul",
            "emoji \U0001f600 rtl \u202e",
        ]
    )


def write_transcript(path: Path, lines: Lines, n: int, hostile: float, tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for _ in range(n):
            if lines.rng.random() < hostile:
                f.write(lines.hostile())
            else:
                for line in lines.valid():
                    f.write(json.dumps(line).encode() + b"\n")
        f.write(tail)
    return path


def _big_transcript(path: Path, megabytes: int, rng: random.Random) -> Path:
    """A valid transcript of about ``megabytes`` MB (turns of a few kB)."""
    lines = Lines(rng, path.stem, "/work/app")
    target = megabytes * _MB
    with open(path, "wb") as f:
        written = 0
        while written < target:
            chunk = b"".join(
                json.dumps(x).encode() + b"\n"
                for x in (lines.user("run the tests " + "t" * 1_500), *lines.tool_pair())
            )
            f.write(chunk)
            written += len(chunk)
    return path


def _one_line(path: Path, nbytes: int, newline: bool) -> Path:
    """A file that is one line of ``nbytes`` (a JSON object cut, or whole with ``newline``)."""
    head = b'{"type":"user","uuid":"u-big","sessionId":"s","message":{"role":"user","content":"'
    body_len = max(0, nbytes - len(head) - 4)
    with open(path, "wb") as f:
        f.write(head)
        block = b"y" * _MB
        left = body_len
        while left > 0:
            f.write(block[: min(left, _MB)])
            left -= _MB
        if newline:
            f.write(b'"}}\n')
    return path


# --- the setting ----------------------------------------------------------------------------


@dataclass(slots=True)
class Setting:
    work: Path
    store: Path
    config_stores: dict[str, Path]
    files: dict[str, str]
    """Hostile transcript paths by name."""
    big: dict[str, str]
    """The expensive ones (``--big-mb``)."""
    fixtures: list[Path]
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def fresh(self, name: str) -> Path:
        with self.lock:
            self.counter += 1
            n = self.counter
        return self.work / "tx" / f"{n:05d}-{name}"


_CONFIGS: Final = {
    "not-json": b"{ this is not json",
    "array": b"[1, 2, 3]",
    "wrong-types": b'{"restore_max_chars": "lots", "recall_on_prompt": "yes"}',
    "negative": b'{"restore_max_chars": -5, "recall_max_chars": -1, "recall_on_prompt": true}',
    "zero": b'{"restore_max_chars": 0, "recall_max_chars": 0, "recall_on_prompt": true}',
    "huge": b'{"restore_max_chars": 1000000000000, "recall_on_prompt": true}',
    "binary": b"\x00\xff\xfe\x01 binary",
    "empty": b"",
}


def _prepare(work: Path, big_mb: int, rng: random.Random) -> Setting:
    files_dir = work / "files"
    files_dir.mkdir(parents=True)
    store = work / "store"
    if not cli(store, "init").ok:
        raise SystemExit("hooks: continuity init failed")
    config_stores = {}
    for name, data in _CONFIGS.items():
        s = work / f"store-config-{name}"
        cli(s, "init")
        (s / "claude-code.json").write_bytes(data)
        config_stores[name] = s
    adir = files_dir / "a-directory.jsonl"
    adir.mkdir()
    fifo = files_dir / "fifo.jsonl"
    os.mkfifo(fifo)
    binary = files_dir / "binary.jsonl"
    binary.write_bytes(bytes(rng.getrandbits(8) for _ in range(200_000)))
    loop = files_dir / "loop.jsonl"
    os.symlink(loop, loop)
    a, b = files_dir / "a.jsonl", files_dir / "b.jsonl"
    os.symlink(b, a)
    os.symlink(a, b)
    dangling = files_dir / "dangling.jsonl"
    os.symlink(files_dir / "nowhere.jsonl", dangling)
    empty = files_dir / "empty.jsonl"
    empty.write_bytes(b"")
    unreadable = files_dir / "unreadable.jsonl"
    unreadable.write_bytes(b'{"type":"user"}\n')
    unreadable.chmod(0)
    files = {
        "directory": str(adir),
        "fifo": str(fifo),
        "binary file": str(binary),
        "symlink loop": str(loop),
        "symlink cycle a->b->a": str(a),
        "dangling symlink": str(dangling),
        "empty file": str(empty),
        "unreadable file": str(unreadable),
        "/proc/self/mem": "/proc/self/mem",
        "/dev/zero": "/dev/zero",
        "/": "/",
        "NUL in path": str(files_dir / "nul\u0000.jsonl"),
        "5,000-character path": str(files_dir / ("p" * 5_000 + ".jsonl")),
        "relative path": "relative/none.jsonl",
        "tilde path": "~/.claude/projects/none.jsonl",
        "empty string": "",
        "missing file": str(files_dir / "missing.jsonl"),
        "a URL": "https://example.com/x.jsonl",
    }
    log(f"hooks: writing the {big_mb} MB files")
    big_session = str(uuid.UUID(int=rng.getrandbits(128)))
    big = {
        f"{big_mb} MB transcript": str(
            _big_transcript(files_dir / f"{big_session}.jsonl", big_mb, rng)
        ),
        f"{big_mb} MB line without a newline": str(
            _one_line(files_dir / "one-line.jsonl", big_mb * _MB, newline=False)
        ),
        f"{max(1, big_mb // 4)} MB single line": str(
            _one_line(files_dir / "big-line.jsonl", max(1, big_mb // 4) * _MB, newline=True)
        ),
    }
    fixtures = sorted(CC_FIXTURES.rglob("*.jsonl")) if CC_FIXTURES.is_dir() else []
    return Setting(work, store, config_stores, files, big, fixtures)


# --- payloads -------------------------------------------------------------------------------


def _payload(event: str, transcript: str, rng: random.Random, session: str) -> dict[str, Any]:
    p: dict[str, Any] = {
        "session_id": session,
        "transcript_path": transcript,
        "cwd": "/work/app",
        "hook_event_name": CLAUDE_NAMES[event],
    }
    if event == "session-start":
        p["source"] = rng.choice(["startup", "resume", "clear", "compact", "fork", "bogus"])
    elif event == "user-prompt-submit":
        p["prompt"] = rng.choice(["fix the tests", "", "where is the retry logic?", "💥" * 50])
    elif event in ("pre-tool-use", "post-tool-use"):
        p.update(tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="toolu_1")
        if event == "post-tool-use":
            p["tool_response"] = {"stdout": "a\nb", "stderr": ""}
    elif event == "pre-compact":
        p.update(trigger=rng.choice(["manual", "auto"]), custom_instructions=None)
    elif event == "post-compact":
        p.update(trigger="auto", compact_summary="summary")
    elif event in ("stop", "subagent-stop"):
        p.update(stop_hook_active=False, last_assistant_message="done")
        if event == "subagent-stop":
            p.update(agent_id="a1", agent_transcript_path=transcript)
    elif event == "session-end":
        p["reason"] = "exit"
    return p


def _args(event: str, rng: random.Random) -> list[str]:
    """The hook's arguments: the event's name, Claude Code's name for it, none (the event then
    comes from ``hook_event_name``) or a bogus one."""
    pick = rng.random()
    if pick < 0.75:
        return [event]
    if pick < 0.9:
        return [CLAUDE_NAMES[event]]
    if pick < 0.95:
        return []
    return [rng.choice(["bogus", "SESSIONSTART", "pre_compact", "", "../x"])]


def resolve_event(args: list[str], payload: object) -> str | None:
    """The event a hook runs, as ``continuity hook`` decides it: its argument when that names
    one, else the payload's ``hook_event_name``."""
    by_claude = {v: k for k, v in CLAUDE_NAMES.items()}
    arg = args[0] if args else ""
    if arg in CLAUDE_NAMES:
        return arg
    if arg in by_claude:
        return by_claude[arg]
    named = payload.get("hook_event_name") if isinstance(payload, dict) else None
    return by_claude.get(named) if isinstance(named, str) else None


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=True).encode()


Builder = Callable[[Setting, random.Random], Case]


def _case(
    s: Setting,
    rng: random.Random,
    category: str,
    label: str,
    transcript: str,
    *,
    store: Path | None = None,
    mutate: Callable[[dict[str, Any]], None] | None = None,
    raw: bytes | None = None,
    session: str | None = None,
) -> Case:
    event = rng.choice(EVENTS)
    args = _args(event, rng)
    sid = session or (Path(transcript).stem if transcript else "s")
    payload = _payload(event, transcript, rng, sid)
    if mutate is not None:
        mutate(payload)
    data = raw if raw is not None else _encode(payload)
    resolved = resolve_event(args, payload if raw is None else None)
    return Case(category, label, args, data, store or s.store, resolved)


def _not_json(s: Setting, rng: random.Random) -> Case:
    good = _encode(_payload("stop", "/nope.jsonl", rng, "s"))
    variants = {
        "garbage bytes": bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2_000))),
        "a cut payload": good[: rng.randrange(1, len(good))],
        "trailing bytes": good + b" {}",
        "a BOM": b"\xef\xbb\xbf" + good,
        "invalid UTF-8": good.replace(b'"stop"', b'"st\xffop"'),
        "NUL bytes": good.replace(b":", b":\x00", 1),
        "single quotes": good.replace(b'"', b"'"),
        "NaN": b'{"session_id": NaN, "transcript_path": Infinity}',
        "two documents": good + b"\n" + good,
    }
    label = rng.choice(sorted(variants))
    return _case(s, rng, "not JSON", label, "", raw=variants[label])


def _not_object(s: Setting, rng: random.Random) -> Case:
    label, data = rng.choice(
        [
            ("a list", b"[]"),
            ("a string", b'"hello"'),
            ("a number", b"42"),
            ("null", b"null"),
            ("true", b"true"),
            ("a list of the payload", b'[{"session_id": "s"}]'),
            ("empty input", b""),
            ("whitespace", b"  \n\t\n"),
        ]
    )
    return _case(s, rng, "not an object / empty", label, "", raw=data)


def _deep(s: Setting, rng: random.Random) -> Case:
    depth = 100_000
    label, data = rng.choice(
        [
            ("[ nested 100,000 deep", b"[" * depth + b"]" * depth),
            ("{ nested 100,000 deep", b'{"a":' * depth + b"1" + b"}" * depth),
            ("deep value in a payload", b'{"session_id":' + b"[" * depth + b"]" * depth + b"}"),
        ]
    )
    return _case(s, rng, "nested deep", label, "", raw=data)


def _huge(s: Setting, rng: random.Random) -> Case:
    pick = rng.randrange(3)
    if pick == 0:
        prompt = "p" * (17 * _MB)
        return _case(
            s,
            rng,
            "huge input",
            "17 MB prompt (over the 16 MB read)",
            "/nope.jsonl",
            mutate=lambda p: p.update(prompt=prompt),
        )
    if pick == 1:
        prompt = "q" * (10 * _MB)
        return _case(
            s,
            rng,
            "huge input",
            "10 MB prompt",
            "/nope.jsonl",
            mutate=lambda p: p.update(prompt=prompt),
        )
    keys = {f"k{i}": i for i in range(200_000)}
    return _case(
        s, rng, "huge input", "200,000 keys", "/nope.jsonl", mutate=lambda p: p.update(keys)
    )


_FIELDS: Final = (
    "session_id",
    "transcript_path",
    "cwd",
    "hook_event_name",
    "source",
    "prompt",
    "trigger",
    "custom_instructions",
    "agent_transcript_path",
    "agent_id",
    "tool_input",
    "tool_response",
    "stop_hook_active",
    "reason",
)


def _wrong_types(s: Setting, rng: random.Random) -> Case:
    transcript = str(s.fresh("types") / f"{uuid.uuid4()}.jsonl")
    write_transcript(Path(transcript), Lines(rng, Path(transcript).stem, "/w"), 20, 0.0)
    chosen = rng.sample(_FIELDS, rng.randrange(1, 4))
    values = {f: _hostile_value(rng) for f in chosen}
    if rng.random() < 0.2:
        values[rng.choice(chosen)] = "\ud800 lone surrogate"
    label = ", ".join(f"{k}={_short(v)}" for k, v in values.items())
    return _case(s, rng, "wrong types", label, transcript, mutate=lambda p: p.update(values))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 40 else text[:37] + "…"


def _paths(s: Setting, rng: random.Random) -> Case:
    label = rng.choice(sorted(s.files))
    return _case(s, rng, "hostile transcript_path", label, s.files[label])


def _big(label: str) -> Builder:
    def build(s: Setting, rng: random.Random) -> Case:
        return _case(s, rng, f"big file: {label}", label, s.big[label])

    return build


def _dotdot(s: Setting, rng: random.Random) -> Case:
    folder = s.fresh("dotdot")
    pick = rng.randrange(5)
    if pick == 0:
        session = f"../../{MARK}-{rng.getrandbits(16)}"
        path = write_transcript(folder / "t.jsonl", Lines(rng, session, "/w"), 10, 0.0)
        return _case(
            s, rng, "ids with ../", "sessionId ../ in the lines", str(path), session=session
        )
    if pick == 1:
        path = write_transcript(folder / "..jsonl", Lines(rng, "..", "/w"), 10, 0.0)
        return _case(s, rng, "ids with ../", "a transcript named ..jsonl", str(path))
    if pick == 2:
        sub = folder / "sess" / "subagents"
        lines = Lines(rng, "sess", "/w")
        path = write_transcript(sub / f"agent-..{MARK}.jsonl", lines, 10, 0.0)
        return _case(s, rng, "ids with ../", "agent-..EVIL.jsonl subagent", str(path))
    if pick == 3:
        path = write_transcript(folder / "t.jsonl", Lines(rng, "t", "/w"), 10, 0.0)
        dotted = str(folder / ".." / folder.name / "t.jsonl")

        def agent(p: dict[str, Any]) -> None:
            p.update(
                agent_id=f"../../{MARK}",
                agent_transcript_path=str(folder / ".." / ".." / f"{MARK}.jsonl"),
                session_id=f"../{MARK}",
            )

        return _case(s, rng, "ids with ../", "../ in every id and path", dotted, mutate=agent)
    lines = Lines(rng, "t", "/w")
    rows = [lines.user("hi"), lines.assistant("hello")]
    for r in rows:
        r["agentId"] = f"../../{MARK}"
        r["isSidechain"] = True
        r["uuid"] = f"../{MARK}/{r['uuid']}"
    path = folder / "t.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return _case(s, rng, "ids with ../", "agentId and uuid with ../", str(path))


def _hostile_lines(s: Setting, rng: random.Random) -> Case:
    folder = s.fresh("lines")
    session = str(uuid.UUID(int=rng.getrandbits(128)))
    path = write_transcript(folder / f"{session}.jsonl", Lines(rng, session, "/w"), 40, 0.3)
    return _case(
        s, rng, "hostile transcript lines", "valid lines mixed with hostile ones", str(path)
    )


def _unterminated(s: Setting, rng: random.Random) -> Case:
    folder = s.fresh("unterminated")
    session = str(uuid.UUID(int=rng.getrandbits(128)))
    lines = Lines(rng, session, "/w")
    whole = json.dumps(lines.user("the last line, whole")).encode()
    label, tail = rng.choice(
        [
            ("last line cut", whole[: rng.randrange(1, len(whole))]),
            ("last line whole, no newline", whole),
            ("last line garbage, no newline", b"\xff\xfe garbage"),
        ]
    )
    n = 0 if rng.random() < 0.2 else rng.randrange(1, 30)
    path = write_transcript(folder / f"{session}.jsonl", lines, n, 0.0, tail)
    return _case(s, rng, "unterminated last line", f"{label} after {n} lines", str(path))


def _real(s: Setting, rng: random.Random) -> Case:
    if not s.fixtures:
        return _hostile_lines(s, rng)
    source = rng.choice(s.fixtures)
    folder = s.fresh("real")
    path = folder / source.name
    path.parent.mkdir(parents=True)
    data = source.read_bytes()
    cut = rng.choice([len(data), rng.randrange(len(data) + 1)])
    path.write_bytes(data[:cut])
    label = f"{source.parent.name}/{source.name}" + ("" if cut == len(data) else " cut")
    return _case(s, rng, "real transcripts", label, str(path))


def _configs(s: Setting, rng: random.Random) -> Case:
    name = rng.choice(sorted(s.config_stores))
    folder = s.fresh("config")
    session = str(uuid.UUID(int=rng.getrandbits(128)))
    lines = Lines(rng, session, "/w")
    path = write_transcript(folder / f"{session}.jsonl", lines, 30, 0.0)
    with open(path, "ab") as f:
        for line in lines.compaction():
            f.write(json.dumps(line).encode() + b"\n")
    return _case(s, rng, "hostile claude-code.json", name, str(path), store=s.config_stores[name])


CHEAP: Final[tuple[tuple[Builder, int], ...]] = (
    (_not_json, 3),
    (_not_object, 2),
    (_deep, 1),
    (_huge, 1),
    (_wrong_types, 4),
    (_paths, 4),
    (_dotdot, 2),
    (_hostile_lines, 3),
    (_unterminated, 2),
    (_real, 2),
    (_configs, 2),
)


# --- judging one call -----------------------------------------------------------------------


def judge_stdout(stdout: bytes, event: str | None) -> str:
    """What is wrong with a hook's stdout (empty if nothing): it must be nothing, one complete
    JSON object, or (pre-compact) plain text not starting with ``{``."""
    text = stdout.strip()
    if not text:
        return ""
    if text.startswith(b"{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            return f"starts with {{ but is not one JSON document ({exc}): {stdout[:120]!r}"
        if not isinstance(doc, dict):
            return f"JSON that is not an object: {stdout[:120]!r}"
        return ""
    if event == "pre-compact":
        return ""
    return f"plain text on stdout for {event}: {stdout[:120]!r}"


def run_family(
    *,
    payloads: int = 2_000,
    big_mb: int = 200,
    big_calls: int = 3,
    jobs: int = 2,
    seed: int | None = None,
    keep: bool = False,
) -> FamilyResult:
    started = time.perf_counter()
    seed, rng = start("hooks", seed)
    result = FamilyResult(
        "hooks",
        {"payloads": payloads, "big_mb": big_mb, "big_calls": big_calls, "seed": seed},
    )
    examples = Examples()
    timeouts = hook_timeouts()
    counts: dict[str, CategoryCounts] = {}
    by_event: dict[str, list[float]] = {}
    lock = threading.Lock()
    with scratch("hooks", keep) as work:
        setting = _prepare(work, big_mb, rng)
        builders: list[Builder] = []
        for label in setting.big:
            builders += [_big(label)] * big_calls
        cheap = [b for b, weight in CHEAP for _ in range(weight)]
        while len(builders) < payloads:
            builders.append(rng.choice(cheap))
        builders = builders[:payloads]
        rng.shuffle(builders)
        seeds = [rng.getrandbits(32) for _ in builders]
        before = _marked_files(work)
        log(f"hooks: {len(builders)} hook calls on {jobs} workers")
        done = [0]

        def one(i: int) -> None:
            case = builders[i](setting, random.Random(seeds[i]))
            limit = timeouts.get(case.event or "", DEFAULT_TIMEOUT)
            p = run(
                [*continuity_command(), "hook", *case.args],
                env=child_env(case.store),
                stdin=case.stdin,
                timeout=limit + 10,
                cwd=work,
            )
            _judge(case, p, limit, seeds[i], counts, by_event, examples, lock)
            with lock:
                done[0] += 1
                if done[0] % 200 == 0:
                    log(f"hooks: {done[0]} of {len(builders)} calls")

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, range(len(builders))))

        stores = [setting.store, *setting.config_stores.values()]
        verify_bad = []
        for store in stores:
            v = cli(store, "verify")
            if not v.ok:
                verify_bad.append(store.name)
                examples.add(
                    "verify fails on a store the hooks wrote to",
                    f"{store.name}: {v.describe(200)} {v.stdout.decode(errors='replace')[-400:]}",
                )
        escaped = sorted(_marked_files(work) - before)
        for e in escaped:
            examples.add("file created outside the store", e)
        for f in setting.files.values():  # the unreadable file's mode, for the cleanup
            p = Path(f)
            if p.name == "unreadable.jsonl":
                p.chmod(stat.S_IRUSR | stat.S_IWUSR)

    _report(result, counts, by_event, timeouts, verify_bad, escaped, len(stores))
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result


def _marked_files(work: Path) -> set[str]:
    """Paths with the ``../`` marker in their name outside the files the family wrote and the
    stores (a thread may well be named after a hostile id), in the scratch folder and in the
    folder that holds it."""
    found = set()
    for p in work.rglob(f"*{MARK}*"):
        top = p.relative_to(work).parts[0]
        if top not in ("tx", "files") and not top.startswith("store"):
            found.add(str(p))
    for p in work.parent.glob(f"*{MARK}*"):
        found.add(str(p))
    return found


def _judge(
    case: Case,
    p: Proc,
    limit: float,
    seed: int,
    counts: dict[str, CategoryCounts],
    by_event: dict[str, list[float]],
    examples: Examples,
    lock: threading.Lock,
) -> None:
    what = f"[{case.category}: {case.label}; seed {seed}] `continuity hook {' '.join(case.args)}`"
    stdout_problem = judge_stdout(p.stdout, case.event) if not p.timed_out else ""
    with lock:
        c = counts.setdefault(case.category, CategoryCounts())
        c.calls += 1
        c.seconds.append(p.seconds)
        by_event.setdefault(case.event or "(none)", []).append(p.seconds)
        err = p.stderr.decode(errors="replace")
        if p.timed_out:
            c.timed_out += 1
            examples.add(f"{case.category}: timed out", f"{what}: killed after {p.seconds:.0f} s")
        elif p.seconds > limit:
            c.over_timeout += 1
            examples.add(
                f"{case.category}: slower than the hook timeout",
                f"{what}: {p.seconds:.1f} s > {limit:.0f} s",
            )
        if not p.timed_out and p.code != 0:
            c.bad_exit += 1
            examples.add(f"{case.category}: exit {p.code}", f"{what}: {err.strip()[-300:]}")
        if p.traceback:
            c.tracebacks += 1
            last = err.strip().splitlines()[-1] if err.strip() else ""
            examples.add(f"{case.category}: traceback", f"{what}: {last[:300]}")
        if stdout_problem:
            c.bad_stdout += 1
            examples.add(f"{case.category}: bad stdout", f"{what}: {stdout_problem}")
        if err.strip().count("\n") > 0:
            c.multiline_stderr += 1
        out = p.stdout.strip()
        c.json_out += out.startswith(b"{")
        c.text_out += bool(out) and not out.startswith(b"{")
        c.reported += bool(err.strip())


def _report(
    result: FamilyResult,
    counts: dict[str, CategoryCounts],
    by_event: dict[str, list[float]],
    timeouts: dict[str, float],
    verify_bad: list[str],
    escaped: list[str],
    stores: int,
) -> None:
    result.tables.append(
        Table(
            "hook calls by category",
            [
                "category",
                "calls",
                "exit != 0",
                "timed out",
                "over timeout",
                "bad stdout",
                "tracebacks",
                "multi-line stderr",
                "errors reported",
                "JSON out",
                "text out",
                "max s",
            ],
            [
                [
                    name,
                    c.calls,
                    c.bad_exit,
                    c.timed_out,
                    c.over_timeout,
                    c.bad_stdout,
                    c.tracebacks,
                    c.multiline_stderr,
                    c.reported,
                    c.json_out,
                    c.text_out,
                    max(c.seconds),
                ]
                for name, c in sorted(counts.items())
            ],
        )
    )
    result.tables.append(
        Table(
            "wall time by event (s)",
            ["event", "calls", "p50", "p90", "max", "timeout"],
            [
                [
                    event,
                    len(t),
                    median(t),
                    percentile(t, 90),
                    max(t),
                    timeouts.get(event, DEFAULT_TIMEOUT),
                ]
                for event, t in sorted(by_event.items())
            ],
        )
    )
    total = sum(c.calls for c in counts.values())
    result.notes.append(
        "timeouts are those `continuity install claude-code` writes; events it does not "
        f"install are held to {DEFAULT_TIMEOUT:.0f} s. multi-line stderr is reported, not "
        "judged (the README promises one line)"
    )

    def tally(attr: str) -> int:
        return sum(getattr(c, attr) for c in counts.values())

    result.check("every call exits 0", tally("bad_exit") == 0, f"{tally('bad_exit')} of {total}")
    slow = tally("timed_out") + tally("over_timeout")
    slowest = max((max(c.seconds) for c in counts.values()), default=0.0)
    result.check(
        "every call ends within its hook timeout",
        slow == 0,
        f"{slow} of {total} too slow; slowest {slowest:.1f} s",
    )
    result.check(
        "stdout is nothing, one complete JSON document or pre-compact text",
        tally("bad_stdout") == 0,
        f"{tally('bad_stdout')} of {total}",
    )
    result.check("no traceback", tally("tracebacks") == 0, f"{tally('tracebacks')} of {total}")
    result.check(
        "verify passes on every store the hooks wrote to",
        not verify_bad,
        f"{len(verify_bad)} of {stores} fail: {', '.join(verify_bad)}" if verify_bad else "",
    )
    result.check(
        "no file created outside the store", not escaped, f"{len(escaped)}" if escaped else ""
    )


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--payloads", type=int, default=2_000, help="hook calls")
    parser.add_argument("--big-mb", type=int, default=200, help="size of the big files (MB)")
    parser.add_argument("--big-calls", type=int, default=3, help="calls on each big file")
    args = parser.parse_args(argv)
    result = run_family(
        payloads=scaled(args.payloads, args.scale),
        big_mb=args.big_mb,
        big_calls=args.big_calls,
        jobs=args.jobs,
        seed=args.seed,
        keep=args.keep,
    )
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
