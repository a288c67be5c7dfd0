"""The restore after Claude's compaction names what other agents' sessions of the same project
did in the stretch the compaction dropped: a short line each (agent, thread, time span, title or
first prompt, counts), never their content, never the session itself or its subagents, at most
three, within the restore's budget, and never a secret of their titles."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from continuity.agents.base.restore import RESTORE_MAX_CHARS
from continuity.agents.claude_code.hooks import run_hook
from continuity.store.jsonl import Store
from tests.agents.claude_code.test_hooks import CWD, Transcript, context_of, work
from tests.redaction.test_redaction import GITHUB_PAT
from tests.support.archive import agent_session

HEADING = "## Also on this project in the same hours (other agents' sessions)\n"
STEP = 100  # ms between an injected session's frames: a whole session in a second


def ms(hour: int, minute: int, second: float = 0) -> int:
    return int(datetime(2026, 1, 5, hour, minute, tzinfo=UTC).timestamp() * 1000 + second * 1000)


def restored(tmp_path: Path, store: Store, t: Transcript) -> str:
    """Claude compacts the session ``t`` and the hooks give back the restore."""
    run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto"))
    t.compaction("Summary.")
    t.flush()
    out = run_hook(store, "session-start", t.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert len(text) <= RESTORE_MAX_CHARS
    return text


def section(text: str) -> list[str]:
    assert HEADING in text, text[:2000]
    return text.split(HEADING, 1)[1].split("\n\n", 1)[0].splitlines()


def test_the_restore_names_other_agents_sessions_of_the_stretch(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    store = Store(tmp_path / "store", create=True, durable=False)
    work(t, ["/work/demo/app.py", "/work/demo/lib.py"], ["pytest -q"])  # 09:00:01 on
    t.flush()
    run_hook(store, "user-prompt-submit", t.payload("UserPromptSubmit"))  # the session archived

    def near(source: str, sid: str, start: int, **more: object) -> str:
        return agent_session(store, source, sid, project=CWD, start_ms=start, step_ms=STEP, **more)  # type: ignore[arg-type]

    codex = near(
        "codex",
        "c-near",
        ms(9, 0, 2.5),
        title="fix flaky test",
        prompts=("fix it", "and the other"),
        tool_calls=3,
    )
    near("codex", "x", ms(9, 0, 3), parent=codex)  # its sub-agent: no line of its own
    # named by its first prompt when it has no title
    gemini = near("gemini-cli", "g-near", ms(9, 0, 2), prompts=("tidy the README",))
    # not in the stretch: later, or before the session began; another project; Claude Code
    near("codex", "c-later", ms(10, 0))
    near("opencode", "o-before", ms(8, 0))
    agent_session(store, "opencode", "o-elsewhere", project="/elsewhere", start_ms=ms(9, 0, 2))
    near("claude-code", "other-claude", ms(9, 0, 2))
    text = restored(tmp_path, store, t)
    lines = section(text)
    assert lines == [
        # the most recently active first; counts are of the stretch: 2 prompts, 6 calls and
        # their 6 results, 2 answers; 1 prompt, 1 call, its result, 1 answer
        f"- Codex session {codex} 2026-01-05 09:00–09:00 UTC “fix flaky test” "
        "(16 messages, 6 tool calls)",
        f"- Gemini CLI session {gemini} 2026-01-05 09:00–09:00 UTC “tidy the README” "
        "(4 messages, 1 tool call)",
    ]
    assert "pytest" not in "\n".join(lines)  # what they ran is theirs to read, not named here
    # after the extract of the session itself, which keeps its budget
    assert "app.py" in text and text.index(HEADING) < text.index("## Files changed")


def test_at_most_three_sessions_and_no_secret_of_their_titles(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    store = Store(tmp_path / "store", create=True, durable=False)
    work(t, ["/work/demo/app.py"], ["pytest -q"])
    t.flush()
    run_hook(store, "user-prompt-submit", t.payload("UserPromptSubmit"))
    ids = [
        agent_session(
            store,
            source,
            f"s{n}",
            project=CWD,
            start_ms=ms(9, 0, 2 + n / 10),
            title=f"deploy with token {GITHUB_PAT} now" if n == 3 else f"task {n}",
            step_ms=STEP // 10,
        )
        for n, source in enumerate(["codex", "gemini-cli", "opencode", "codex"])
    ]
    text = restored(tmp_path, store, t)
    lines = section(text)
    assert len(lines) == 3
    assert [line.split(" session ")[1].split()[0] for line in lines] == ids[:0:-1]
    assert GITHUB_PAT not in text and GITHUB_PAT[4:20] not in text
    assert "deploy with token" in lines[0] and "now" in lines[0]


def test_a_session_with_no_other_agent_has_no_such_section(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    store = Store(tmp_path / "store", create=True, durable=False)
    work(t, ["/work/demo/app.py"], ["pytest -q"])
    t.flush()
    assert "Also on this project" not in restored(tmp_path, store, t)


def test_any_agents_own_compaction_bounds_the_restore(tmp_path: Path) -> None:
    """A Codex session compacted by Codex is compacted (its restore gives back the stretch
    before), and the Claude Code session beside it is the other agent named."""
    from continuity.agents.base.restore import compacted, restore_context

    store = Store(tmp_path / "store", create=True, durable=False)
    codex = agent_session(
        store, "codex", "c1", project=CWD, start_ms=ms(9, 0), title="codex work", compaction=True
    )
    claude = agent_session(store, "claude-code", "k1", project=CWD, start_ms=ms(9, 1))
    agent_session(store, "codex", "c2", project=CWD, start_ms=ms(9, 2))  # the same agent
    assert compacted(store.thread(codex))
    text = restore_context(store.thread(codex), log=False)
    assert section(text) == [
        f"- Claude Code session {claude} 2026-01-05 09:01–09:05 UTC “fix the flaky test” "
        "(4 messages, 1 tool call)"
    ]
    assert "fix the flaky test" in text.split(HEADING)[1]
    assert not compacted(store.thread(claude))
