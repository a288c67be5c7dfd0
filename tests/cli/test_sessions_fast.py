"""``continuity sessions`` and ``stats`` before typer (``continuity.cli.fast_list``, the sessions
file of ``continuity.caches.session_file``): the same bytes as the typer command for every
filter, on stores with secrets in titles, odd characters, sub-agents, other writers' threads,
deleted and tiered threads; never an answer once a log, the catalog or the redaction config
changed since the file was written (another process's append or deletion included), until the
typer command has caught up; and a file that ``rebuild-index`` (or deleting it) writes again
byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.table import AGENTS
from continuity.caches.listing import CONTEXT_FILE, PARTS, SESSIONS_FILE, escape, unescape
from continuity.cli.app import app
from continuity.cli.fast_list import fast_sessions, fast_stats, parse_command
from continuity.store.jsonl import Store

SECRET = "ghp_1234567890abcdefghijABCDEFGHIJ123456"

COMMANDS = [
    ["sessions"],
    ["sessions", "--json"],
    ["sessions", "--agents"],
    ["sessions", "--agents", "--json"],
    ["sessions", "--agent", "claude-code"],
    ["sessions", "--agent=Codex", "--agents"],
    ["sessions", "--agent", "gemini", "--json"],
    ["sessions", "--project", "/p/cc-s0"],
    ["sessions", "--project=/p/tab\there", "--agents"],
    ["sessions", "--project", "/nowhere"],
    ["sessions", "--agent", "opencode", "--project", "/nowhere", "--json"],
    ["sessions", "--context"],
    ["sessions", "--context", "--json"],
    ["sessions", "--context", "--agents"],
    ["sessions", "--agent", "codex", "--context", "--json", "--agents"],
    ["stats"],
    ["stats", "--json"],
]


@pytest.fixture(autouse=True)
def _settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log counts as settled however recently it changed (the racy-time rule would
    otherwise keep the listing file unwritten for two seconds after the test's own writes)."""
    monkeypatch.setattr("continuity.store.jsonl._RACY_NS", -(10**15))


def _session(
    store: Store,
    tid: str,
    source: str,
    *,
    t: int,
    parent: str | None = None,
    title: str | None = None,
    project: str | None = None,
) -> None:
    meta = {"source": source, "project": project or f"/p/{tid}", "git_branch": "main"}
    store.clock = lambda: t
    store.thread(tid).append(
        [
            fr.ThreadCreated(
                title=f"about {tid}" if title is None else title,
                parent_thread_id=parent,
                meta=meta,
            ),
            fr.message("user", f"question of {tid}", message_id=f"{tid}-u"),
            fr.message("assistant", "answer", message_id=f"{tid}-a"),
        ]
    )


def _sized(store: Store, tid: str, meta: dict[str, str]) -> None:
    """An answer of ``tid`` that reports its context (``meta``)."""
    answer = fr.message("assistant", "sized", message_id=f"{tid}-{len(meta)}-{meta}")
    store.thread(tid).append(msgspec.structs.replace(answer, meta=meta))


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = 1_700_000_000_000
    for i, agent in enumerate(AGENTS):
        tid = f"{agent.thread_prefix}s{i}"
        _session(store, tid, agent.source, t=t + i * 1000)
        _session(store, f"{tid}.agent-x", agent.source, parent=tid, t=t + i * 1000 + 1)
    cc = AGENTS[0]
    _session(store, "cc-secret", cc.source, t=t + 50, title=f"deploy with {SECRET} now")
    _session(store, "cc-odd", cc.source, t=t + 60, title="tab\there\nnew\\line “quoted” é")
    _session(store, "cc-tab", cc.source, t=t + 70, project="/p/tab\there", title="  ")
    _session(store, "cc-none", cc.source, t=t + 80, title="")
    store.clock = lambda: t + 90
    for tid, meta in (
        ("cc-s0", {"context_tokens": "54321", "model": "claude-sonnet-4"}),
        (f"{AGENTS[1].thread_prefix}s1", {"context_tokens": "1000", "context_window": "4000"}),
        ("cc-s0.agent-x", {"context_tokens": "7", "model": "gpt-4o"}),
    ):
        _sized(store, tid, meta)
    _session(store, "s1", AGENTS[1].source, t=t + 7)  # its source, not its id: no session
    _session(store, "runtime", "my-runtime", t=t - 5)
    store.clock = lambda: t
    store.thread("plain").append(fr.message("user", "no source", message_id="p1"))
    return store


def _typer(store: Store, command: list[str], *, from_file: bool = False) -> str:
    """The typer command's output; made the full way (every title redacted, every line
    rendered), not from the sessions file it may take once the catalog caught up, unless
    ``from_file``."""
    with pytest.MonkeyPatch.context() as patch:
        if not from_file:
            patch.setattr("continuity.cli.fast_list.sessions_from_file", lambda *a, **k: None)
        result = CliRunner().invoke(app, ["--store", str(store.root), *command])
    assert result.exit_code == 0, result.output
    return result.stdout


def _fast(store: Store, command: list[str], capsys: pytest.CaptureFixture[str]) -> str | None:
    capsys.readouterr()
    run = fast_stats if command[0] == "stats" else fast_sessions
    code = run(["--store", str(store.root), *command])
    out = capsys.readouterr().out
    if code is None:
        assert out == ""
        return None
    assert code == 0
    return out


def _same_everywhere(store: Store, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Each command's output, the fast path's equal to the typer command's (after a full
    listing that writes the caches, which ``stats`` counts)."""
    _typer(store, ["stats"])
    shown = {}
    for command in COMMANDS:
        expected = _typer(store, command)
        assert _fast(store, command, capsys) == expected, command
        shown[" ".join(command)] = expected
    return shown


def test_every_filter_prints_the_typer_commands_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    assert _fast(store, ["sessions"], capsys) is None  # never listed: no file yet
    shown = _same_everywhere(store, capsys)
    assert SECRET not in "".join(shown.values())
    assert "[REDACTED:github-token]" in shown["sessions"]
    assert "[REDACTED:github-token]" in shown["sessions --json"]
    assert SECRET in (store.root / "cache" / "catalog.v1.json").read_text()  # as stored
    assert SECRET not in (store.root / "cache" / SESSIONS_FILE).read_text()
    assert "codex" in shown["sessions --agent=Codex --agents"]
    assert "cc-tab" in shown["sessions --project=/p/tab\there --agents"]
    assert shown["sessions --project /nowhere"] == "no sessions of /nowhere archived yet\n"
    assert shown["sessions --agent opencode --project /nowhere --json"] == ""
    assert "sessions     " in shown["stats"]


def test_a_change_from_another_process_is_never_served_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    before = _same_everywhere(store, capsys)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = (
        "import sys\n"
        "from continuity import frames as fr\n"
        "from continuity.store.jsonl import Store\n"
        "s = Store(sys.argv[1], durable=False)\n"
        "s.thread('cc-s0').append(fr.message('user', 'more', message_id='more'))\n"
    )
    subprocess.run([sys.executable, "-c", script, str(store.root)], env=env, check=True)
    for command in COMMANDS:
        assert _fast(store, command, capsys) is None, command
    appended = _same_everywhere(store, capsys)
    assert appended["sessions"] != before["sessions"]  # cc-s0 has 3 messages now

    script = "import os, sys\nos.remove(sys.argv[1])\n"
    log = store.root / "threads" / "cc-secret.jsonl"
    subprocess.run([sys.executable, "-c", script, str(log)], env=env, check=True)
    assert _fast(store, ["sessions"], capsys) is None
    assert _fast(store, ["stats"], capsys) is None
    deleted = _same_everywhere(store, capsys)
    assert "cc-secret" not in deleted["sessions"]

    store.delete_thread("cc-odd")
    assert _fast(store, ["sessions", "--json"], capsys) is None
    assert "cc-odd" not in _same_everywhere(store, capsys)["sessions --json"]

    _session(store, "cc-new", AGENTS[0].source, t=1_800_000_000_000)
    assert _fast(store, ["sessions", "--agents"], capsys) is None
    assert "cc-new" in _same_everywhere(store, capsys)["sessions"]


def test_a_tiered_thread_lists_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    thread = store.thread("cc-s0")
    for i in range(200):
        thread.append(fr.message("user", f"line {i} " * 20, message_id=f"m{i}"))
    before = _same_everywhere(store, capsys)
    log = thread.open_log()
    assert log is not None
    with log:
        upto = log.line_end(log.end // 2)
    thread.move_to_cold(upto)
    for command in COMMANDS:
        assert _fast(store, command, capsys) in (None, before[" ".join(command)])
    after = _same_everywhere(store, capsys)
    assert after["sessions"] == before["sessions"]


def test_a_redaction_config_is_part_of_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _same_everywhere(store, capsys)
    config = store.root / "redaction.json"
    config.write_text('{"rules": [{"id": "about", "pattern": "about [a-z]+"}]}')
    assert _fast(store, ["sessions"], capsys) is None  # the titles would be redacted otherwise
    shown = _same_everywhere(store, capsys)
    assert "[REDACTED:about]" in shown["sessions"]
    config.write_text('{"enabled": false}')
    assert _fast(store, ["sessions", "--json"], capsys) is None
    assert SECRET in _same_everywhere(store, capsys)["sessions --json"]
    config.write_text("{not json")  # sessions fails on it: never a stale answer meanwhile
    assert _fast(store, ["sessions"], capsys) is None
    result = CliRunner().invoke(app, ["--store", str(store.root), "sessions"])
    assert result.exit_code != 0
    assert _fast(store, ["sessions"], capsys) is None


def test_the_context_file_follows_the_settings_and_the_sessions_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    shown = _same_everywhere(store, capsys)
    assert "context 54,321/200,000 (27%)" in shown["sessions --context"]
    assert "context 1,000/4,000 (25%)" in shown["sessions --context"]
    assert '"context_tokens":54321,"context_window":200000}' in shown["sessions --context --json"]
    assert "context 7/128,000 (0%)" in shown["sessions --context --agents"]  # a sub-agent's
    (store.root / "rolling.json").write_text('{"windows": {"claude-": 100000}}')
    assert _fast(store, ["sessions", "--context"], capsys) is None
    assert "context 54,321/100,000 (54%)" in _same_everywhere(store, capsys)["sessions --context"]
    monkeypatch.setenv("CONTINUITY_CONTEXT_WINDOW", "1000000")
    assert _fast(store, ["sessions", "--context", "--json"], capsys) is None
    assert "context 54,321/1,000,000 (5%)" in _same_everywhere(store, capsys)["sessions --context"]
    monkeypatch.delenv("CONTINUITY_CONTEXT_WINDOW")
    _same_everywhere(store, capsys)
    _sized(store, "cc-s0", {"context_tokens": "99999"})
    assert _fast(store, ["sessions", "--context"], capsys) is None
    assert "context 99,999/200,000 (50%)" in _same_everywhere(store, capsys)["sessions --context"]
    context = store.root / "cache" / CONTEXT_FILE
    made = context.read_bytes()
    context.unlink()
    _typer(store, ["sessions", "--context"])
    assert context.read_bytes() == made  # the unchanged sessions' usage was carried over


def test_the_file_is_rebuilt_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _same_everywhere(store, capsys)
    side = store.root / "cache" / SESSIONS_FILE
    grown = side.read_bytes()
    side.unlink()
    _typer(store, ["threads"])
    assert not side.exists()  # `threads` leaves it: a pass over every session
    _typer(store, ["stats"])
    assert side.read_bytes() == grown  # entries taken from the old file are the ones made anew

    store.thread("cc-s0").append(fr.message("user", "later", message_id="later"))
    _typer(store, ["sessions"])
    caught_up = side.read_bytes()  # the unchanged rows' entries taken from the file before
    side.unlink()
    _typer(store, ["sessions"])
    assert side.read_bytes() == caught_up
    result = CliRunner().invoke(app, ["--store", str(store.root), "rebuild-index"])
    assert result.exit_code == 0, result.output
    _typer(store, ["sessions"])
    assert side.read_bytes() == caught_up


def test_a_damaged_file_is_not_served_and_the_next_full_listing_mends_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    shown = _same_everywhere(store, capsys)
    side = store.root / "cache" / SESSIONS_FILE
    data = side.read_bytes()
    head = data.split(b"\n", 1)[0]
    sizes = [int(item.split(b":")[0]) for item in head.split(b" ")[4:]]
    readers = {  # a command that reads each part (the last, the checks, only the writer reads)
        "stats": "stats",
        "text": "sessions",
        "lines": "sessions --json",
        "agents": "sessions --agent claude-code",
        "agents_json": "sessions --agent claude-code --json",
        "keys": "sessions --agents",
        "table": "sessions --agents",
        "json": "sessions --agents --json",
        "checks": None,
    }
    assert list(readers) == list(PARTS) and len(sizes) == len(PARTS)
    offset = len(head) + 1
    for (part, reader), size in zip(readers.items(), sizes, strict=True):
        at = offset + size // 2
        side.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
        offset += size
        if reader is not None:
            assert _fast(store, reader.split(), capsys) is None, part
        for command in COMMANDS:
            assert _fast(store, command, capsys) in (None, shown[" ".join(command)]), command
        _typer(store, ["sessions"])
        assert side.read_bytes() == data, part


def test_the_typer_command_answers_from_the_file_it_brought_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from continuity.cli import fast_list

    store = _store(tmp_path)
    shown = _same_everywhere(store, capsys)
    answered: list[int | None] = []
    real = fast_list.sessions_from_file

    def counted(*args: object, **kwargs: object) -> int | None:
        answered.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return answered[-1]

    monkeypatch.setattr(fast_list, "sessions_from_file", counted)
    for command in (["sessions"], ["sessions", "--agent", "codex", "--json"]):
        _sized(store, "cc-s0", {"context_tokens": str(len(answered))})  # the catalog is behind
        answer = _typer(store, command, from_file=True)
        full = _typer(store, command)
        assert answer == full
    assert answered == [0, 0]
    assert shown["sessions"] != full


def test_an_escape_sequence_in_a_title_leaves_sessions_to_the_typer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _session(store, "cc-esc", AGENTS[0].source, t=1_700_000_000_900, title="red \x1b[31m!")
    _typer(store, ["sessions"])
    assert _fast(store, ["sessions"], capsys) is None  # click strips it from a pipe
    assert _fast(store, ["stats"], capsys) is None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sessions"], {}),
        (["--store", "/s", "sessions", "--json"], {"--store": "/s", "--json": True}),
        (["sessions", "--agent", "codex", "--agent=gemini"], {"--agent": "gemini"}),
        (["sessions", "--project", "--json"], {"--project": "--json"}),
        (["sessions", "--store=/t", "--agents"], {"--store": "/t", "--agents": True}),
        (["--json", "sessions"], None),
        (["sessions", "--context"], None),
        (["sessions", "--help"], None),
        (["sessions", "--agent"], None),
        (["sessions", "x"], None),
        (["--schema", "x", "sessions"], None),
        (["threads"], None),
    ],
)
def test_only_the_known_options_are_taken(
    argv: list[str], expected: dict[str, str | bool] | None
) -> None:
    assert (
        parse_command(argv, "sessions", ("--agents", "--json"), ("--agent", "--project"))
        == expected
    )


def test_an_agent_only_the_registry_knows_is_left_to_the_typer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _same_everywhere(store, capsys)
    assert _fast(store, ["sessions", "--agent", "no-such-agent"], capsys) is None


@pytest.mark.parametrize("text", ["", "plain", "a\tb", "a\nb", "back\\slash\\t", "\\\\n\t\n"])
def test_fields_escape_and_come_back(text: str) -> None:
    field = escape(text)
    assert "\t" not in field and "\n" not in field
    assert unescape(field) == text
