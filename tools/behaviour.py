"""A behaviour snapshot of the ``continuity`` command line, to prove a change changes nothing.

What it proves: two snapshots that ``diff`` equal mean that, on the same inputs (real agent
transcripts from ``/work/shared/fixtures``), every command below printed the same stdout and
stderr, exited with the same code, wrote the same installed files and archived the same frames.
A refactor that moves modules (``continuity/claude_code/`` into ``continuity/agents/``, …)
must leave the snapshot unchanged; any line of the diff is a behaviour it changed.

It runs the CLI only as subprocesses, ``python -m continuity ...`` with ``PYTHONPATH=<tree>``
(the root of a checkout: ``continuity`` is imported from that tree, which the snapshot's first
line shows), so it knows nothing of the package's layout and works on both sides of a
restructure. Every run gets the same environment: a fresh fake ``HOME`` and store under a fixed
work folder (wiped first), ``TZ=UTC``, ``COLUMNS=100``, no ``CONTINUITY_*`` / ``XDG_*``
variables. Covered, for Claude Code, Codex, Gemini CLI and opencode: ``ingest`` (files, folders,
defaults, again for idempotence), the hooks of each agent on copied transcripts that grow
between events, ``sessions`` (plain, ``--json``, ``--agent``, ``--agents``), ``search``
(``--k``, ``--json``, ``--agent``), ``log`` and ``compile --format text`` of one thread per
agent, ``threads``, ``stats``, ``verify``, ``install``/``uninstall`` of each agent (``--dry-run``
and real, with the files they write hashed), ``install mcp --client X --print``,
``demo --temp-store``, the help of the root and of several commands, and error cases. At the
end: a digest of every ``.jsonl`` log of the store (the archived frames themselves).

Usage (from the root of the checkout that holds this file, with its venv)::

    git worktree add --detach /work/wt-baseline <commit before the change>
    python -m tools.behaviour snapshot --tree /work/wt-baseline --out /tmp/before.txt
    python -m tools.behaviour snapshot --tree . --out /tmp/after.txt
    diff -u /tmp/before.txt /tmp/after.txt     # empty: no behaviour changed

Paths are printed as ``<W>`` (the work folder), ``<T>`` (the tree) and ``<VENV>`` (the
interpreter's prefix). What differs between two runs of the same tree is normalised, and
nothing else: the times the CLI takes from the clock during the run (:data:`CLOCK_STAMPS`, with
the head digests that chain over them, :data:`CHAINED_DIGEST`, and in the store's logs
``ts_ms`` and the digests after it) and the random names of ``demo`` (:data:`DEMO`). Two runs
of the same tree give identical files; that is the test of the normalisation.

Expected in a diff across a restructure and not a behaviour: ``install claude-code`` reports
how many modules of ``<T>/continuity`` it compiled, so adding or removing modules changes that
count. The opencode database is the tree's ``tests/data/opencode/opencode-1.18.33.db`` (the
fixtures hold none) unless ``--opencode-db`` names one; its sha256 is printed with the inputs.
"""

from __future__ import annotations

import argparse
import calendar
import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

FIXTURES: Final = Path("/work/shared/fixtures")
AGENTS_FX: Final = FIXTURES / "agents"
RECORDED: Final = AGENTS_FX / "recorded"
CLAUDE_FX: Final = FIXTURES / "claude-code"
DEFAULT_WORKDIR: Final = Path("/tmp/behaviour-run")
_GEMINI_PROJECT: Final = "fb8e242a6fbbb5c48a1d0be57a8a4cc934d33e0a1caf73ab5d4ecaa17269960c"
OPENCODE_DB: Final = Path("tests/data/opencode/opencode-1.18.33.db")
"""Relative to the tree (the fixtures hold no opencode database): its sha256 is printed with
the inputs, so two snapshots that read different databases say so."""
TIMEOUT_S: Final = 180
_MARKER: Final = ".behaviour-workdir"

_UUID: Final = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
"""A random (version 4) UUID: the fixtures' session ids are other versions or fixed text."""

CLOCK_STAMPS: Final[tuple[re.Pattern[str], ...]] = (
    # A UTC date and time to the minute or the second (`log`, `threads`, `sessions`: the time
    # of a frame the CLI stamped itself, such as compile's context selection, or an ingested
    # line that carries no time), when it falls within this run.
    re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?(?![\d:])"),
    # Epoch milliseconds (`threads --json`'s last_active_ms), when they fall within this run.
    re.compile(r"(?<![\w.])\d{13}(?![\w.])"),
)
"""Wall-clock times of this run: each match that overlaps [start of the run, now] (to its
precision: a millisecond, a second or a minute) becomes <now>; a time from a transcript (all
days before the run) is left as it is."""

CHAINED_DIGEST: Final = re.compile(r'"head_digest":"[0-9a-f]{64}"')
"""On a line that held a clock stamp (`threads --json`), the head digest of the thread: the
hash chain covers that stamp. Left as it is on every other line."""

DEMO: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # `demo --temp-store`'s folder: tempfile.mkdtemp("continuity-demo-") under TMPDIR (<W>/tmp),
    # 8 random characters.
    (re.compile(r"(<W>/tmp/continuity-demo-)[A-Za-z0-9_]{8}\b"), r"\1<rand>"),
    # Its checkpoint id (cc-<uuid>), and before its session id was fixed (demo-invoice-service)
    # its session and thread ids (cc-demo-<uuid>): uuid4.
    (re.compile(_UUID), "<uuid4>"),
    # The content addresses of the two artifacts that hold the thread id (the compaction
    # summary, the restored bundle); the other artifact's address stays checked.
    (
        re.compile(
            r"^(\s+)[0-9a-f]{16}…(?=\s+[\d.]+ KB\s+"
            r"(?:Claude's compaction summary|the restored context's bundle)$)",
            re.M,
        ),
        r"\1<artifact>…",
    ),
    # The restored bundle's hash, for the same reason.
    (re.compile(r"^(bundle\s+)[0-9a-f]{64}\b", re.M), r"\1<bundle>"),
)
"""What differs between two runs of `demo --temp-store` on the same tree: the names it draws at
random, and the hashes of what holds them."""


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


class Snapshot:
    """One run of every scenario against one tree; ``lines`` is the snapshot."""

    def __init__(self, tree: Path, workdir: Path, opencode_db: Path) -> None:
        self.tree = tree
        self.work = workdir
        self.home = workdir / "home"
        self.store = workdir / "store"
        self.cwd = workdir / "cwd"
        self.opencode_db = opencode_db
        self.lines: list[str] = []
        self.steps = 0
        self.started_ms = time.time_ns() // 1_000_000
        self.env = self._environment()

    # --- running ------------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        """A fresh environment (nothing inherited but PATH): no CONTINUITY_*, XDG_*, CODEX_HOME,
        GEMINI_* or CLAUDE_* variable of the caller can change what a command does."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TZ": "UTC",
            "COLUMNS": "100",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONPATH": str(self.tree),
            # Fixed, so that no output depends on the order of a set of strings.
            "PYTHONHASHSEED": "0",
            # Bytecode under <W>, fresh each run: `install claude-code` reports how many modules
            # it compiled, which would otherwise depend on what earlier runs left in the tree.
            "PYTHONPYCACHEPREFIX": str(self.work / "pycache"),
            "TMPDIR": str(self.work / "tmp"),
        }

    def prepare(self) -> None:
        """Wipe the work folder (only one this tool made, or an empty one) and make its parts."""
        if self.work.exists():
            if any(self.work.iterdir()) and not (self.work / _MARKER).is_file():
                raise SystemExit(f"{self.work} is not empty and not a work folder of this tool")
            shutil.rmtree(self.work)
        for folder in (self.home, self.cwd, self.work / "tmp", self.work / "proj"):
            folder.mkdir(parents=True)
        (self.work / _MARKER).write_text("python -m tools.behaviour wipes this folder\n")

    def normalise(self, text: str, extra: Sequence[tuple[re.Pattern[str], str]] = ()) -> str:
        subs = {
            str(self.work): "<W>",
            sys.prefix: "<VENV>",
            str(self.tree): "<T>",
        }
        for old in sorted(subs, key=len, reverse=True):  # the longest first: <VENV> in <T>
            text = text.replace(old, subs[old])
        for pattern, replacement in extra:
            text = pattern.sub(replacement, text)
        return "\n".join(self._unclocked(line) for line in text.split("\n"))

    def _unclocked(self, line: str) -> str:
        """``line`` with the times of this run (:data:`CLOCK_STAMPS`) as <now>, and then its
        head digest (:data:`CHAINED_DIGEST`)."""
        now_ms = time.time_ns() // 1_000_000
        stamped = False

        def clock(match: re.Match[str]) -> str:
            nonlocal stamped
            value = match.group(0)
            if value.isdigit():
                first = last = int(value)
            else:
                minute = value[:16].replace("T", " ")
                first = calendar.timegm(time.strptime(minute, "%Y-%m-%d %H:%M")) * 1000
                seconds = value[17:19]
                first += int(seconds) * 1000 if seconds else 0
                last = first + (999 if seconds else 59_999)
            if last >= self.started_ms and first <= now_ms:
                stamped = True
                return "<now>"
            return value

        for pattern in CLOCK_STAMPS:
            line = pattern.sub(clock, line)
        return CHAINED_DIGEST.sub('"head_digest":"<chained>"', line) if stamped else line

    def section(self, title: str, body: Sequence[str]) -> None:
        self.steps += 1
        self.lines.append(f"=== [{self.steps:03d}] {title}")
        self.lines.extend(body)
        self.lines.append("")

    def cli(
        self,
        args: Sequence[str],
        *,
        stdin: bytes | None = None,
        stdin_note: str = "",
        extra_env: dict[str, str] | None = None,
        extra: Sequence[tuple[re.Pattern[str], str]] = (),
    ) -> Result:
        """Run ``continuity <args>`` in an empty folder (``python -m`` puts the working folder
        first on sys.path: nothing there may shadow the tree) and record its section; ``extra``:
        normalisations of this command's output only."""
        argv = [sys.executable, "-m", "continuity", *args]
        env = {**self.env, **(extra_env or {})}
        proc = subprocess.run(
            argv,
            input=stdin if stdin is not None else b"",
            capture_output=True,
            cwd=self.cwd,
            env=env,
            timeout=TIMEOUT_S,
            check=False,
        )
        result = Result(
            proc.returncode,
            self.normalise(proc.stdout.decode("utf-8", "backslashreplace"), extra),
            self.normalise(proc.stderr.decode("utf-8", "backslashreplace"), extra),
        )
        shown = self.normalise("continuity " + shlex.join(args))
        body = [f"$ {shown}"]
        if extra_env:
            body.append(
                "env: " + self.normalise(shlex.join(f"{k}={v}" for k, v in extra_env.items()))
            )
        if stdin_note:
            body.append(f"stdin: {self.normalise(stdin_note)}")
        body.append(f"exit: {result.code}")
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            body.append(f"--- {name}")
            if text:
                body.extend(text.rstrip("\n").split("\n"))
                if not text.endswith("\n"):
                    body.append("(no newline at end)")
        self.section(shown, body)
        return result

    def with_store(self, *args: str, **kw: Any) -> Result:
        """``continuity --store <W>/store <args>``."""
        return self.cli(["--store", str(self.store), *args], **kw)

    # --- the snapshot -------------------------------------------------------------------------

    def run(self) -> None:
        self.prepare()
        self.header()
        self.inputs()
        self.help_pages()
        self.ingest_all()
        self.claude_hooks()
        self.codex_hooks()
        self.gemini_hooks()
        self.opencode_hooks()
        self.ingest_again()
        self.queries()
        self.installs()
        self.errors()
        self.demo()
        self.store_digest()

    def header(self) -> None:
        probe = subprocess.run(
            [sys.executable, "-c", "import continuity; print(continuity.__file__)"],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env,
            check=True,
        )
        where = Path(probe.stdout.strip()).resolve()
        if not where.is_relative_to(self.tree):
            raise SystemExit(f"continuity was imported from {where}, not from {self.tree}")
        self.lines.append(f"continuity imported from <T>/{where.relative_to(self.tree)}")
        self.lines.append("")
        self.cli(["--version"])

    def inputs(self) -> None:
        """The opencode database, copied to its data folder in the fake home (where the hook and
        ``ingest --agent opencode`` find it), and its hash. (The transcripts the hooks read are
        copied as each agent's hooks begin.)"""
        db = self.home / ".local/share/opencode/opencode.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(self.opencode_db, db)
        digest = hashlib.sha256(self.opencode_db.read_bytes()).hexdigest()
        self.section("inputs", [f"opencode database {digest}", f"fixtures {FIXTURES}"])

    def help_pages(self) -> None:
        self.cli(["--help"])
        self.cli([])
        for command in ("install", "ingest", "hook", "sessions", "search", "uninstall"):
            self.cli([command, "--help"])

    # --- ingest ---------------------------------------------------------------------------------

    def ingest_all(self) -> None:
        cc = CLAUDE_FX
        self.with_store(
            "ingest", str(cc / "spotter/short.jsonl"), str(cc / "spotter/tool_heavy.jsonl")
        )
        self.with_store(
            "ingest",
            "--agent",
            "claude-code",
            str(cc / "claude-code-log/edge_cases.jsonl"),
            str(cc / "agent-sessions/schema_drift.jsonl"),
            str(RECORDED / "claude_transcript_basic.jsonl"),
        )
        self.with_store("ingest", str(cc / "agent-sessions/subagent"))  # a folder, subagents
        self.with_store(
            "ingest", str(cc / "spotter/subagent.jsonl"), str(cc / "agent-sessions/small.jsonl")
        )
        self.with_store("ingest", str(cc / "claude-history/-Users-user-project"))  # empty files too
        cx = AGENTS_FX / "codex/localpush/sessions/2026/02/23"
        self.with_store(
            "ingest",
            "--agent",
            "codex",
            str(cx / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"),
            str(cx / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"),
            str(RECORDED / "codex_rollout_autocompact.jsonl"),
        )
        self.with_store(
            "ingest", "--agent", "codex", str(AGENTS_FX / "codex/agent-sessions/small.jsonl")
        )
        self.with_store(
            "ingest", "--agent", "codex", str(AGENTS_FX / "codex/agent-sessions")
        )  # none
        gm = AGENTS_FX / "gemini"
        self.with_store(
            "ingest",
            "--agent",
            "gemini",
            str(gm / "agent-sessions/jsonl_v040.jsonl"),
            str(RECORDED / "gemini_transcript_basic.jsonl"),
        )
        self.with_store(
            "ingest",
            "--agent",
            "gemini",
            str(gm / "codemie-code/tmp" / _GEMINI_PROJECT),
        )
        self.with_store("ingest", "--agent", "gemini", str(gm / "codemie-code/tmp"))  # both
        self.with_store("ingest", "--agent", "opencode", str(RECORDED / "opencode_export.json"))

    def ingest_again(self) -> None:
        """The same inputs again (nothing new), and each agent's default location (the fake
        home: the hooks' copies, the opencode database)."""
        self.with_store("ingest", str(CLAUDE_FX / "spotter/short.jsonl"))
        self.with_store("ingest", "--agent", "opencode", str(RECORDED / "opencode_export.json"))
        self.with_store("ingest")
        self.with_store("ingest", "--agent", "codex")
        self.with_store("ingest", "--agent", "gemini")
        self.with_store("ingest", "--agent", "opencode")
        self.with_store("ingest", "--agent", "opencode")

    # --- hooks ----------------------------------------------------------------------------------

    def _hook(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        agent: str | None = None,
        note: str,
        store_after: bool = False,
    ) -> None:
        args = ["hook", event] if event else ["hook"]
        if agent is not None:
            args += ["--agent", agent]
        args = (
            [*args, "--store", str(self.store)]
            if store_after
            else ["--store", str(self.store), *args]
        )
        shown = {k: v for k, v in payload.items() if k in ("transcript_path", "source", "trigger")}
        self.cli(
            args,
            stdin=json.dumps(payload).encode(),
            stdin_note=f"{note} {json.dumps(shown, sort_keys=True)}",
        )

    def claude_hooks(self) -> None:
        projects = self.home / ".claude/projects/-home-dev-proj"
        projects.mkdir(parents=True)
        # 1. The recorded session, its payloads as Claude Code sent them (CamelCase argv; an
        # event continuity does not know, PostToolBatch).
        basic = projects / "77839fa9-5da8-495a-846c-24ee566da81f.jsonl"
        shutil.copyfile(RECORDED / "claude_transcript_basic.jsonl", basic)
        for i, (argv, payload) in enumerate(_recorded_hooks("claude_hooks_basic.jsonl"), 1):
            payload["transcript_path"] = str(basic)
            self._hook(argv, payload, note=f"claude_hooks_basic.jsonl line {i}")
        # 2. A session with an MCP call and a compaction, the transcript growing between events,
        # the events by their slugs; then a recall on the prompt, a subagent, a resume.
        sid = "5b53a36a-46da-46d7-b0bc-c77263d0c4f2"
        path = projects / f"{sid}.jsonl"
        lines = (RECORDED / "claude_transcript_mcp_compact.jsonl").read_bytes().splitlines(True)
        base = {"session_id": sid, "transcript_path": str(path), "cwd": "/home/dev/proj"}
        tool = {"tool_name": "mcp__echo__echo", "tool_input": {"text": "ECHO"}}
        stages: list[tuple[int, list[tuple[str, dict[str, Any]]]]] = [
            (0, [("session-start", {"source": "startup"})]),
            (3, [("user-prompt-submit", {"prompt": "Please CALL_MCP now"})]),
            (20, [("pre-tool-use", tool)]),
            (24, [("post-tool-use", {**tool, "tool_response": "ECHO"})]),
            (35, [("stop", {"stop_hook_active": False}), ("stop", {"stop_hook_active": False})]),
            (39, [("pre-compact", {"trigger": "manual", "custom_instructions": ""})]),
            (
                len(lines),
                [
                    ("post-compact", {"trigger": "manual"}),
                    ("session-start", {"source": "compact"}),
                    ("user-prompt-submit", {"prompt": "What did the MCP server say?"}),
                    ("notification", {"message": "Claude is waiting for your input"}),
                ],
            ),
        ]
        for count, events in stages:
            _write_lines(path, lines[:count])
            for event, extra in events:
                note = f"claude_transcript_mcp_compact.jsonl, first {count} lines"
                payload = {**base, "hook_event_name": _camel(event), **extra}
                self._hook(event, payload, note=note, store_after=event == "stop")
        sub = path.with_suffix("") / "subagents" / "agent-a0ad4f44468bdf20d.jsonl"
        sub.parent.mkdir(parents=True)
        sub_fx = CLAUDE_FX / "agent-sessions/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f"
        shutil.copyfile(sub_fx / "subagents/agent-a0ad4f44468bdf20d.jsonl", sub)
        payload = {**base, "hook_event_name": "SubagentStop", "agent_transcript_path": str(sub)}
        self._hook("subagent-stop", payload, note="with a subagent transcript")
        stop = {**base, "hook_event_name": "Stop"}
        full = {"CONTINUITY_HOOK_FULL": "1"}  # the full path of an event the fast path takes
        self.cli(
            ["--store", str(self.store), "hook", "stop"],
            stdin=json.dumps(stop).encode(),
            stdin_note="nothing new",
            extra_env=full,
        )
        (self.store / "claude-code.json").write_text('{"recall_on_prompt": true}\n')
        prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": "echo ECHO mcp"}
        self._hook("user-prompt-submit", prompt, note="recall_on_prompt on")
        (self.store / "claude-code.json").unlink()
        end = {**base, "hook_event_name": "SessionEnd", "reason": "other"}
        self._hook("session-end", end, note="the whole transcript")
        resume = {**base, "hook_event_name": "SessionStart", "source": "resume"}
        self._hook("session-start", resume, note="the whole transcript")
        # The event from the payload alone; a payload naming no transcript; broken input.
        self._hook("", {**base, "hook_event_name": "Stop"}, note="no event argument")
        self.cli(
            ["--store", str(self.store), "hook"],
            stdin=json.dumps(base).encode(),
            stdin_note="no event anywhere",
        )
        no_path = {"session_id": sid, "hook_event_name": "PreCompact"}
        self._hook("pre-compact", no_path, note="no transcript_path")
        self.cli(
            ["--store", str(self.store), "hook", "stop"], stdin=b"{not json", stdin_note="not JSON"
        )
        missing = {**base, "transcript_path": str(projects / "missing.jsonl")}
        self._hook("pre-compact", missing, note="a transcript that does not exist")

    def codex_hooks(self) -> None:
        """The recorded Codex payloads in order, the rollout cut before its compaction until
        PreCompact."""
        folder = self.home / ".codex/sessions/2026/11/26"
        folder.mkdir(parents=True)
        path = folder / "rollout-2026-11-26T12-41-30-01a217e0-136e-7893-bf7e-58b4451a75fe.jsonl"
        lines = (RECORDED / "codex_rollout_autocompact.jsonl").read_bytes().splitlines(True)
        cut = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line)
        _write_lines(path, lines[:cut])
        for i, (argv, payload) in enumerate(_recorded_hooks("codex_hooks_autocompact.jsonl"), 1):
            if argv == "PostCompact":
                _write_lines(path, lines)
            payload["transcript_path"] = str(path)
            self._hook(argv, payload, agent="codex", note=f"codex_hooks_autocompact.jsonl line {i}")
        prompt = {**payload, "hook_event_name": "UserPromptSubmit", "prompt": "and now?"}
        self._hook("UserPromptSubmit", prompt, agent="codex", note="after the compaction")
        self._hook("stop", {"session_id": "x"}, agent="codex", note="no transcript_path")

    def gemini_hooks(self) -> None:
        """The recorded Gemini CLI payloads in order, the session file cut before its second
        compression until the second PreCompress."""
        folder = self.home / ".gemini/tmp/proj/chats"
        folder.mkdir(parents=True)
        (folder.parent / ".project_root").write_text("/home/dev/proj")
        path = folder / "session-2026-11-26T12-43-fb5b2188.jsonl"
        lines = (RECORDED / "gemini_transcript_resume_compress.jsonl").read_bytes().splitlines(True)
        resets = [i for i, line in enumerate(lines) if line.startswith(b'{"$set":{"sessionId"')]
        _write_lines(path, lines[: resets[-1]])
        compress = 0
        for i, (argv, payload) in enumerate(_recorded_hooks("gemini_hooks_compress.jsonl"), 1):
            payload["transcript_path"] = str(path)
            self._hook(argv, payload, agent="gemini", note=f"gemini_hooks_compress.jsonl line {i}")
            compress += argv == "PreCompress"
            if compress == 2:
                _write_lines(path, lines)
        prompt = {**payload, "hook_event_name": "BeforeAgent", "prompt": "and now?"}
        self._hook("BeforeAgent", prompt, agent="gemini", note="after the compression")
        self._hook("BeforeAgent", prompt, agent="gemini", note="the restore given already")
        self._hook("BeforeAgent", {"prompt": "x"}, agent="gemini", note="no transcript_path")

    def opencode_hooks(self) -> None:
        """What the plugin runs at session events, for each session of the database."""
        db = self.home / ".local/share/opencode/opencode.db"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            ids = [row[0] for row in conn.execute("SELECT id FROM session ORDER BY id")]
        for sid in ids:
            for event in ("session.idle", "session.compacted"):
                self.with_store("hook", event, "--agent", "opencode", "--session", sid)
        self.cli(
            [
                "hook",
                "session-event",
                "--agent",
                "opencode",
                "--session",
                ids[0],
                "--store",
                str(self.store),
            ]
        )
        self.with_store("hook", "session.idle", "--agent", "opencode", "--session", "ses_missing")
        self.with_store("hook", "session.idle", "--agent", "opencode")

    # --- reading the store ----------------------------------------------------------------------

    def queries(self) -> None:
        found = self.with_store("sessions", "--json", "--agents")
        self.with_store("sessions")
        self.with_store("sessions", "--json")
        self.with_store("sessions", "--agents")
        for agent in ("claude-code", "codex", "gemini", "opencode"):
            self.with_store("sessions", "--agent", agent)
        self.with_store("sessions", "--project", "/home/dev/proj")
        self.with_store("threads")
        self.with_store("threads", "--json")
        self.with_store("stats")
        for query in ("echo", "compaction summary", "ECHO mcp server", "session"):
            self.with_store("search", query, "--k", "5")
        self.with_store("search", "echo", "--k", "5", "--json")
        self.with_store("search", "echo", "--k", "5", "--agent", "codex")
        self.with_store("search", "hi-from-bash", "--k", "3", "--agent", "opencode", "--json")
        threads = _thread_per_agent(found.stdout)
        for agent, thread in threads.items():
            if thread is None:
                self.section(f"log/compile {agent}", [f"no {agent} session archived"])
                continue
            self.with_store("log", thread)
            self.with_store("compile", thread, "--format", "text")
        first = next((t for t in threads.values() if t is not None), None)
        if first is not None:
            self.with_store("log", first, "--json", "--to-seq", "3")
            self.with_store("compile", first, "--format", "json", "--dry-run")
            self.with_store("search", "echo", "--k", "5", "--thread", first)
        self.with_store("verify")
        self.with_store("stats", "--json")

    # --- install --------------------------------------------------------------------------------

    def installs(self) -> None:
        """Each agent: --dry-run, install, install again (unchanged), uninstall; the files the
        fake home and project hold after each, hashed. Then the MCP snippets of each client."""
        project = self.work / "proj"
        (self.home / ".claude").mkdir(exist_ok=True)
        (self.home / ".claude/settings.json").write_text(_USER_SETTINGS)
        (self.home / ".codex/config.toml").write_text('model = "o3"\n')
        self.config_files("files before the installs")
        for agent in ("claude-code", "codex", "gemini", "opencode"):
            self.with_store("install", agent, "--dry-run")
            self.with_store("install", agent)
            self.config_files(f"files after install {agent}")
            self.with_store("install", agent)
            self.with_store("uninstall", agent, "--dry-run")
            self.with_store("uninstall", agent)
            self.config_files(f"files after uninstall {agent}")
        self.cli(["install", "claude-code", "--no-mcp"])  # the default store: not named
        self.config_files("files after install claude-code --no-mcp (default store)")
        self.cli(["uninstall", "claude-code", "--no-mcp"])
        self.with_store("install", "claude-code", "--scope", "project", "--project", str(project))
        self.with_store("install", "gemini", "--scope", "project", "--project", str(project))
        self.config_files("files after project installs")
        self.with_store("uninstall", "claude-code", "--scope", "project", "--project", str(project))
        self.with_store("uninstall", "gemini", "--scope", "project", "--project", str(project))
        self.config_files("files after project uninstalls")
        for client in ("claude-code", "codex", "gemini", "cursor", "opencode"):
            self.with_store("install", "mcp", "--client", client, "--print")
        self.with_store("install", "mcp", "--client", "cursor")
        self.config_files("files after install mcp --client cursor")
        self.with_store("uninstall", "mcp", "--client", "cursor")
        self.with_store("install", "mcp")
        self.with_store("install", "codex", "--client", "codex")

    def config_files(self, title: str) -> None:
        """Every file of the fake home and of the project folder but the agents' sessions and
        data: path, size, sha256 of the bytes, and the text."""
        skip = (".claude/projects", ".codex/sessions", ".gemini/tmp", ".local/share")
        body: list[str] = []
        for root in (self.home, self.work / "proj"):
            for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
                rel = path.relative_to(root).as_posix()
                if root == self.home and rel.startswith(skip):
                    continue
                data = path.read_bytes()
                shown = self.normalise(str(path))
                body.append(
                    f"{shown}  {len(data)} bytes  sha256 {hashlib.sha256(data).hexdigest()}"
                )
                body.extend(
                    "    " + line
                    for line in self.normalise(
                        data.decode("utf-8", "backslashreplace")
                    ).splitlines()
                )
        self.section(title, body or ["(none)"])

    # --- the rest -------------------------------------------------------------------------------

    def errors(self) -> None:
        self.with_store(
            "ingest", "--agent", "nope", str(RECORDED / "claude_transcript_basic.jsonl")
        )
        self.with_store("ingest", str(self.work / "missing.jsonl"))
        self.with_store("ingest", "--agent", "codex", str(self.work / "missing"))
        self.with_store("ingest", "--agent", "gemini", str(self.work / "missing"))
        self.with_store("ingest", "--agent", "opencode", str(self.work / "missing.db"))
        self.with_store("ingest", str(RECORDED / "opencode_export.json"))  # not a transcript
        self.with_store("ingest", "--session", "x", str(RECORDED / "claude_transcript_basic.jsonl"))
        self.with_store("sessions", "--agent", "nope")
        self.with_store("log", "no-such-thread")
        self.with_store("compile", "no-such-thread", "--format", "text")
        self.with_store("install", "nope")
        self.with_store("no-such-command")
        self.cli(["--store", str(self.work / "no-store"), "sessions"])
        self.cli(["--store", str(self.work / "no-store"), "verify"])

    def demo(self) -> None:
        self.cli(["demo", "--temp-store"], extra=DEMO)

    def store_digest(self) -> None:
        """Every log of the store (``threads/*.jsonl``, and ``tombstones.jsonl`` if any), sorted
        by path: frames, frame types, sha256 of the bytes. A ``ts_ms`` stamped by the clock during
        this run (not one taken from a transcript) is replaced by <now>, and so is the digest of
        that frame and of every frame after it in its log (the chain covers the time). Then the
        artifacts (their names are the hashes of their bytes) and the number of other files in
        each folder (caches, cursors)."""
        body: list[str] = []
        everything = hashlib.sha256()
        now_ms = time.time_ns() // 1_000_000
        logs = sorted(self.store.glob("threads/*.jsonl")) + sorted(self.store.glob("*.jsonl"))
        for path in logs:
            rel = path.relative_to(self.store).as_posix()
            lines, stamped = self._normalised_log(path.read_bytes(), now_ms)
            data = b"".join(lines)
            everything.update(rel.encode() + b"\0" + data)
            types = Counter(_frame_type(line) for line in lines)
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(types.items()))
            digest = hashlib.sha256(data).hexdigest()
            body.append(f"{rel}  {len(lines)} frames ({stamped} clock-stamped)  sha256 {digest}")
            body.append(f"    {kinds}")
        body.append(f"all logs: sha256 {everything.hexdigest()}")
        others: Counter[str] = Counter()
        for path in sorted(p for p in self.store.rglob("*") if p.is_file() and p not in logs):
            where = path.relative_to(self.store)
            if where.parts[0] == "artifacts":
                body.append(f"artifact {where.name}")
            else:
                others[f"{where.parent.as_posix()}/*{path.suffix}"] += 1
        body.extend(f"{n:5d} {pattern}" for pattern, n in sorted(others.items()))
        for name in ("store.json", "errors.log"):  # the errors the hooks logged, their times
            if (self.store / name).is_file():
                body.append(f"{name}:")
                text = self.normalise((self.store / name).read_text("utf-8", "backslashreplace"))
                body.extend(f"    {line}" for line in text.splitlines())
        self.section("store logs", body)

    def _normalised_log(self, raw: bytes, now_ms: int) -> tuple[list[bytes], int]:
        stamped = 0
        chained = False
        out: list[bytes] = []
        for line in raw.splitlines(True):
            match = _TS_MS.search(line)
            if match is not None and self.started_ms <= int(match.group(1)) <= now_ms:
                line = _TS_MS.sub(b'"ts_ms":"<now>"', line, count=1)
                stamped += 1
                chained = True
            if chained:
                line = _DIGEST.sub(b'"digest":"<chained>"', line)
            out.append(line)
        return out, stamped


_USER_SETTINGS: Final = """{
  "model": "opus",
  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}
}
"""
"""A user's own Claude Code settings, which install keeps and uninstall gives back."""

_TS_MS: Final = re.compile(rb'"ts_ms":(\d{13})')
_DIGEST: Final = re.compile(rb'"digest":"[0-9a-f]{64}"')


def _frame_type(line: bytes) -> str:
    match = re.match(rb'\{"type":"([\w.-]+)"', line)
    return match.group(1).decode() if match else "?"


def _camel(slug: str) -> str:
    return "".join(part.capitalize() for part in slug.split("-"))


def _write_lines(path: Path, lines: Sequence[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def _recorded_hooks(name: str) -> list[tuple[str, dict[str, Any]]]:
    """The (argv, stdin payload) of each line of a recorded hooks file."""
    found: list[tuple[str, dict[str, Any]]] = []
    for line in (RECORDED / name).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            found.append((str(record["argv"]), dict(record["stdin"])))
    return found


def _thread_per_agent(sessions_json: str) -> dict[str, str | None]:
    """The thread of each agent whose ``log`` and ``compile`` the snapshot shows: the one of
    the recorded session (a tool call and a compaction), else the agent's first."""
    wanted = {
        "claude-code": "5b53a36a",
        "codex": "01a217e0",
        "gemini": "fb5b2188",
        "opencode": "ses_de81bee2",
    }
    rows: list[dict[str, Any]] = []
    for line in sessions_json.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    chosen: dict[str, str | None] = {}
    for agent, mark in wanted.items():
        ids = sorted(str(r["thread_id"]) for r in rows if r.get("agent") == agent)
        chosen[agent] = next((t for t in ids if mark in t), ids[0] if ids else None)
    return chosen


def _snapshot(args: argparse.Namespace) -> int:
    tree = Path(args.tree).resolve()
    if not (tree / "continuity" / "__init__.py").is_file():
        raise SystemExit(f"{tree} is not the root of a checkout (no continuity/__init__.py)")
    db = Path(args.opencode_db) if args.opencode_db else tree / OPENCODE_DB
    began = time.monotonic()
    snap = Snapshot(tree, Path(args.workdir).resolve(), db.resolve())
    snap.run()
    Path(args.out).write_text("\n".join(snap.lines) + "\n", encoding="utf-8")
    took = time.monotonic() - began
    print(f"{args.out}: {snap.steps} sections in {took:.1f} s", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.behaviour", description=__doc__.split("\n")[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="Run every scenario on a tree; write the snapshot.")
    snap.add_argument("--tree", required=True, help="The root of a checkout to import from.")
    snap.add_argument("--out", required=True, help="The snapshot file to write.")
    snap.add_argument(
        "--workdir",
        default=str(DEFAULT_WORKDIR),
        help="Wiped, then used (fixed: paths are compared).",
    )
    snap.add_argument(
        "--opencode-db", help=f"The opencode database to read (default: <tree>/{OPENCODE_DB})."
    )
    args = parser.parse_args(argv)
    return _snapshot(args)  # the only command


if __name__ == "__main__":
    sys.exit(main())
