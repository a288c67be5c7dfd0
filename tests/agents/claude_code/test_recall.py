"""Prompt recall in the ``user-prompt-submit`` hook (``recall_on_prompt``, off by default).

What it may inject: this session's messages from before its last compaction (Claude no longer
has them) and earlier sessions of the same project (cwd); never what is still in Claude's
context (after the last compaction, or a session never compacted), never another project, never
the session's own subagents. The output is one JSON object whose context stays within
``recall_max_chars``; a prompt with nothing searchable prints nothing.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.hooks import HookConfig, main, run_hook
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.table import CLAUDE_CODE
from continuity.context.compaction import create_checkpoint
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from tests.agents.claude_code.test_hooks import (
    SPOTTER,
    Transcript,
    compacted,
    configure,
    context_of,
    hook_modules,
    hook_process,
    work,
)
from tests.support.fixtures import shared_fixture

SPOTTER_CWD = "/home/USER/projects/spotter-worktrees/spotter-dov"
EARLIER = "22222222-3333-4444-8555-666666666666"
OTHER_PROJECT = "33333333-4444-4555-8666-777777777777"
HEADER = "continuity recalled from the archive (no longer in this context):"
_LINE = re.compile(r"^- \[(this session|session (\S+)), seq (\d+)(?: (user|assistant|system))?\] ")

Payload = Callable[..., dict[str, Any]]


def recalled_lines(context: str) -> list[tuple[str, int, str]]:
    """(thread, seq, line) of each hit the hook injected ("" thread: this session)."""
    lines = context.splitlines()
    assert lines[0] == HEADER
    out = []
    for line in lines[1:]:
        m = _LINE.match(line)
        assert m, line
        out.append((m.group(2) or "", int(m.group(3)), line))
    return out


@pytest.fixture
def spotter(tmp_path: Path) -> tuple[Store, Path, Payload]:
    """A store and the whole spotter session (one compaction) as Claude Code left it."""
    src = shared_fixture("claude-code", "spotter", f"{SPOTTER}.jsonl")
    project = tmp_path / "projects" / "-home-USER-projects-spotter-worktrees-spotter-dov"
    transcript = project / f"{SPOTTER}.jsonl"
    (project / SPOTTER / "subagents").mkdir(parents=True)
    transcript.write_bytes(src.read_bytes())
    for agent in sorted((src.with_suffix("") / "subagents").glob("agent-*.jsonl")):
        (project / SPOTTER / "subagents" / agent.name).write_bytes(agent.read_bytes())
    store = Store(tmp_path / "store", create=True, durable=False)

    def payload(prompt: str, event: str = "UserPromptSubmit", **extra: Any) -> dict[str, Any]:
        return {
            "session_id": SPOTTER,
            "transcript_path": str(transcript),
            "cwd": SPOTTER_CWD,
            "hook_event_name": event,
            "prompt": prompt,
            **extra,
        }

    return store, transcript, payload


def compaction_to_seq(store: Store) -> int:
    """The to_seq of Claude's own (only) compaction of the spotter session."""
    thread = store.thread(CLAUDE_CODE.thread_id(SPOTTER))
    cps = [
        c
        for c in thread.read(types=["compaction_checkpoint_created"])
        if isinstance(c, fr.CompactionCheckpointCreated) and c.cut_rule_id.startswith("claude")
    ]
    assert len(cps) == 1
    return cps[0].to_seq


def prompt_context(store: Store, payload: Payload, prompt: str) -> str:
    out = run_hook(store, "user-prompt-submit", payload(prompt))
    assert out.exit_code == 0
    return context_of(out.stdout, "UserPromptSubmit") if out.stdout else ""


def earlier_sessions(tmp_path: Path) -> tuple[Transcript, Transcript]:
    """An earlier session of the spotter project, and one of another project, both mentioning
    the flamingo_sync setting (neither compacted)."""
    same = Transcript(tmp_path / "projects" / "p" / f"{EARLIER}.jsonl", EARLIER, SPOTTER_CWD)
    same.prompt("Where does the flamingo_sync setting live?")
    same.tool("Read", {"file_path": "config/flamingo_sync.exs"}, "config :spotter, sync: true")
    same.say("The flamingo_sync setting lives in config/flamingo_sync.exs.")
    same.flush()
    other = Transcript(tmp_path / "projects" / "q" / f"{OTHER_PROJECT}.jsonl", OTHER_PROJECT)
    other.prompt("Rename the flamingo_sync setting in the other project.")
    other.say("Renamed flamingo_sync to heron_sync.")
    other.flush()
    return same, other


# --- off by default --------------------------------------------------------------------------


def test_recall_is_off_by_default(spotter: tuple[Store, Path, Payload]) -> None:
    store, _, payload = spotter
    assert HookConfig().recall_on_prompt is False
    out = run_hook(store, "user-prompt-submit", payload("where is subagent_pattern defined?"))
    assert (out.exit_code, out.stdout, out.stderr) == (0, "", "")
    assert store.thread(CLAUDE_CODE.thread_id(SPOTTER)).exists()  # the hook still archived
    assert compaction_to_seq(store) > 0
    configure(store, recall_on_prompt=False)
    out = run_hook(store, "user-prompt-submit", payload("where is subagent_pattern defined?"))
    assert out.stdout == ""


# --- what it brings back ---------------------------------------------------------------------


@pytest.mark.slow
def test_recall_brings_back_what_the_compaction_dropped(
    spotter: tuple[Store, Path, Payload],
) -> None:
    store, _, payload = spotter
    configure(store, recall_on_prompt=True)
    context = prompt_context(store, payload, "where is subagent_pattern defined?")
    to_seq = compaction_to_seq(store)
    hits = recalled_lines(context)
    assert hits
    assert all(thread == "" and seq <= to_seq for thread, seq, _ in hits)
    assert any("subagent_pattern" in line for _, _, line in hits)


@pytest.mark.slow
def test_recall_never_returns_what_is_still_in_context(
    spotter: tuple[Store, Path, Payload],
) -> None:
    """The best matches of the whole session are after the compaction: Claude has them. The
    hook returns the matches before it, and only those."""
    store, _, payload = spotter
    configure(store, recall_on_prompt=True)
    prompt = "sidecar"
    context = prompt_context(store, payload, prompt)
    to_seq = compaction_to_seq(store)
    whole = search(store, prompt, thread=CLAUDE_CODE.thread_id(SPOTTER), k=5)
    assert whole and all(h.seq > to_seq for h in whole), "the premise: the best hits are recent"
    hits = recalled_lines(context)
    assert hits
    assert all(thread == "" and seq <= to_seq for thread, seq, _ in hits)


@pytest.mark.slow
def test_a_checkpoint_of_our_own_does_not_move_claudes_boundary(
    spotter: tuple[Store, Path, Payload],
) -> None:
    """A checkpoint made by ``continuity compact`` (not by Claude) does not take anything out of
    Claude's context: recall still stops at Claude's own compaction."""
    store, _, payload = spotter
    run_hook(store, "user-prompt-submit", payload(""))  # ingest
    to_seq = compaction_to_seq(store)
    tid = CLAUDE_CODE.thread_id(SPOTTER)
    head = store.thread(tid).head()
    assert head is not None
    create_checkpoint(store, tid, head.seq - 2, text="our own summary of almost everything")
    configure(store, recall_on_prompt=True)
    hits = recalled_lines(prompt_context(store, payload, "highlighter sidecar"))
    assert hits and all(thread == "" and seq <= to_seq for thread, seq, _ in hits)


@pytest.mark.slow
def test_subagents_of_this_session_are_never_recalled(
    spotter: tuple[Store, Path, Payload],
) -> None:
    """The compaction's own subagent transcript holds the conversation Claude still has."""
    store, _, payload = spotter
    run_hook(store, "pre-compact", payload("", "PreCompact", trigger="auto"))
    tid = CLAUDE_CODE.thread_id(SPOTTER)
    agents = [t for t in store.threads() if t.startswith(tid + ".")]
    assert agents
    configure(store, recall_on_prompt=True, restore_on_prompt=False)
    for prompt in ("TranscriptRenderer render_mode", "undefined module attribute max_result_lines"):
        assert search(store, prompt, project=SPOTTER_CWD, k=20)  # something matches somewhere
        context = prompt_context(store, payload, prompt)
        assert all(not thread.startswith(tid) for thread, _, _ in recalled_lines(context))


@pytest.mark.slow
def test_recall_brings_back_earlier_sessions_of_the_same_project_only(
    spotter: tuple[Store, Path, Payload], tmp_path: Path
) -> None:
    store, _, payload = spotter
    same, other = earlier_sessions(tmp_path)
    for t in (same, other):
        ingest_transcript(store, t.path, final=True)
    configure(store, recall_on_prompt=True)
    context = prompt_context(store, payload, "what was the flamingo_sync setting again?")
    hits = recalled_lines(context)
    threads = {thread for thread, _, _ in hits}
    assert same.thread_id in threads
    assert other.thread_id not in threads
    assert all("flamingo_sync" in line for thread, _, line in hits if thread == same.thread_id)
    # Both sources together: the detail before the compaction and the earlier session.
    both = recalled_lines(prompt_context(store, payload, "subagent_pattern flamingo_sync"))
    assert {"", same.thread_id} <= {thread for thread, _, _ in both}


@pytest.mark.slow
def test_an_earlier_session_is_not_crowded_out_by_this_one(
    spotter: tuple[Store, Path, Payload], tmp_path: Path
) -> None:
    """This session (and its subagents) match the prompt far better than the one long file an
    earlier session read: the earlier session's hit is still the one brought back from it."""
    store, _, payload = spotter
    run_hook(store, "pre-compact", payload("", "PreCompact", trigger="auto"))  # + subagents
    earlier = Transcript(tmp_path / "projects" / "p" / f"{EARLIER}.jsonl", EARLIER, SPOTTER_CWD)
    earlier.prompt("Show me the old renderer module.")
    rows = [f"  # row {i}: the renderer draws rows of words" for i in range(100)]
    rows.insert(20, "  @subagent_pattern ~r/agent-x/")
    earlier.tool("Read", {"file_path": "lib/spotter/services/old_renderer.ex"}, "\n".join(rows))
    earlier.say("That is the old renderer.")
    earlier.flush()
    ingest_transcript(store, earlier.path, final=True)
    prompt = "where is subagent_pattern defined?"
    ranked = search(store, prompt, project=SPOTTER_CWD, k=10)
    assert len(ranked) == 10 and all(h.thread_id != earlier.thread_id for h in ranked)
    configure(store, recall_on_prompt=True, restore_on_prompt=False, recall_max_chars=3_000)
    hits = recalled_lines(prompt_context(store, payload, prompt))
    assert [(t, s) for t, s, _ in hits if t] == [(earlier.thread_id, 3)]
    assert sum(1 for t, _, _ in hits if not t) == 3


def test_a_session_never_compacted_recalls_only_other_sessions(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True, durable=False)
    configure(store, recall_on_prompt=True)
    same, _ = earlier_sessions(tmp_path)
    ingest_transcript(store, same.path, final=True)
    current = Transcript(tmp_path / "projects" / "p" / "cur.jsonl", cwd=SPOTTER_CWD)
    work(current, ["lib/flamingo_sync.ex"], ["mix test test/flamingo_sync_test.exs"])
    current.flush()
    payload = current.payload("UserPromptSubmit", prompt="flamingo_sync tests")
    out = run_hook(store, "user-prompt-submit", payload)
    hits = recalled_lines(context_of(out.stdout, "UserPromptSubmit"))
    assert hits and {thread for thread, _, _ in hits} == {same.thread_id}
    # Without an earlier session there is nothing to say: the current one is all in context.
    alone = Store(tmp_path / "alone", create=True, durable=False)
    configure(alone, recall_on_prompt=True)
    assert run_hook(alone, "user-prompt-submit", payload).stdout == ""


# --- the output ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("limit", [300, 500, 1_500])
def test_the_output_is_one_json_object_within_the_limit(
    spotter: tuple[Store, Path, Payload], tmp_path: Path, limit: int
) -> None:
    store, _, payload = spotter
    same, _ = earlier_sessions(tmp_path)
    ingest_transcript(store, same.path, final=True)
    configure(store, recall_on_prompt=True, recall_max_chars=limit)
    for prompt in (
        "subagent_pattern flamingo_sync transcript renderer tests",
        "highlighter sidecar render_mode",
    ):
        out = run_hook(store, "user-prompt-submit", payload(prompt))
        assert out.exit_code == 0 and out.stderr == ""
        context = context_of(out.stdout, "UserPromptSubmit")
        assert len(context) <= limit
        assert len(out.stdout) <= limit + 300  # the JSON envelope and escapes: a small header
        hits = recalled_lines(context)
        assert hits
        if limit >= 1_500:
            assert len(hits) >= 3


@pytest.mark.slow
def test_a_limit_too_small_for_one_hit_prints_nothing(
    spotter: tuple[Store, Path, Payload],
) -> None:
    """A hit is shown whole or not at all: below the length of one line nothing is injected."""
    store, _, payload = spotter
    configure(store, recall_on_prompt=True, recall_max_chars=len(HEADER) + 20)
    out = run_hook(store, "user-prompt-submit", payload("where is subagent_pattern defined?"))
    assert (out.exit_code, out.stdout) == (0, "")


@pytest.mark.slow
def test_a_hook_process_prints_one_json_line(
    spotter: tuple[Store, Path, Payload], tmp_path: Path
) -> None:
    store, _, payload = spotter
    configure(store, recall_on_prompt=True, recall_max_chars=800)
    stdin = json.dumps(payload("where is subagent_pattern defined?")).encode()
    proc = hook_process(store.root, ["user-prompt-submit"], stdin)
    assert (proc.returncode, proc.stderr) == (0, b"")
    out = proc.stdout.decode()
    assert out.endswith("\n") and out.count("\n") == 1
    context = context_of(out, "UserPromptSubmit")
    assert len(context) <= 800 and recalled_lines(context)


@pytest.mark.parametrize("prompt", ["?!", "...", "the of a", "  ", "", None, 42])
def test_a_prompt_with_nothing_to_search_prints_nothing(
    spotter: tuple[Store, Path, Payload], prompt: object
) -> None:
    store, _, payload = spotter
    configure(store, recall_on_prompt=True)
    out = run_hook(store, "user-prompt-submit", payload(prompt))
    assert (out.exit_code, out.stdout, out.stderr) == (0, "", "")
    assert store.thread(CLAUDE_CODE.thread_id(SPOTTER)).exists()


def test_a_prompt_matching_nothing_prints_nothing(spotter: tuple[Store, Path, Payload]) -> None:
    store, _, payload = spotter
    configure(store, recall_on_prompt=True)
    out = run_hook(store, "user-prompt-submit", payload("xylophone quaternion zeppelin"))
    assert (out.exit_code, out.stdout) == (0, "")


@pytest.mark.slow
def test_restore_and_recall_share_one_json_object(
    spotter: tuple[Store, Path, Payload],
) -> None:
    """The first prompt after a compaction that SessionStart did not restore gets both."""
    store, transcript, payload = spotter
    data = transcript.read_bytes()
    lines = data.splitlines(keepends=True)
    boundary = next(
        i
        for i, raw in enumerate(lines)
        if json.loads(raw).get("subtype") == "compact_boundary"
        and json.loads(raw).get("type") == "system"
    )
    transcript.write_bytes(b"".join(lines[:boundary]))
    run_hook(store, "pre-compact", payload("", "PreCompact", trigger="auto"))
    transcript.write_bytes(data)
    configure(store, recall_on_prompt=True, recall_max_chars=600)
    out = run_hook(store, "user-prompt-submit", payload("where is subagent_pattern defined?"))
    context = context_of(out.stdout, "UserPromptSubmit")
    assert context.startswith("# Restored by continuity")
    _, _, recalled = context.partition("\n\n" + HEADER)
    assert recalled, "the recall part follows the restored context"
    assert len(HEADER + recalled) <= 600
    assert recalled_lines(HEADER + recalled)
    again = run_hook(store, "user-prompt-submit", payload("where is subagent_pattern defined?"))
    assert context_of(again.stdout, "UserPromptSubmit").startswith(HEADER)  # restored once


def test_a_failing_recall_does_not_swallow_a_pending_restore(
    tmp_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook exits 0 on an error and prints nothing; the restore it could not deliver is
    still pending, and the next prompt gets it."""
    transcript = Transcript(tmp_path / "projects" / "-work-demo" / "session.jsonl")
    compacted(tmp_store, transcript)
    configure(tmp_store, recall_on_prompt=True)
    import continuity.retrieval.search

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(continuity.retrieval.search, "search_prefix", disk_full)
        stdin = json.dumps(transcript.payload("UserPromptSubmit", prompt="app.py tests"))
        patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        assert main(["user-prompt-submit"], store=tmp_store.root) == 0
    assert "No space left on device" in (tmp_store.root / "errors.log").read_text()
    out = run_hook(
        tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit", prompt="?!")
    )
    context = context_of(out.stdout, "UserPromptSubmit")
    assert context.startswith("# Restored by continuity") and "/work/demo/app.py" in context
    again = run_hook(
        tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit", prompt="?!")
    )
    assert again.stdout == ""


def test_recall_off_keeps_the_hook_path_light(tmp_path: Path) -> None:
    """With a prompt and recall off, the hook imports neither numpy nor the search modules."""
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    work(t, ["/work/demo/app.py"], ["pytest -q"])
    t.flush()
    modules = hook_modules(
        tmp_path, t.payload("UserPromptSubmit", prompt="where is app.py tested?")
    )
    assert "continuity.agents.claude_code.ingest" in modules
    assert "numpy" not in modules
    searching = {
        "continuity.retrieval.search",
        "continuity.retrieval.index",
        "continuity.retrieval.ranking",
    }
    assert not searching & modules


def test_restore_is_bounded_by_claude_compactions_not_by_our_own_checkpoints(
    tmp_path: Path,
) -> None:
    from continuity.agents.base.restore import restore_context
    from continuity.agents.claude_code.ingest import ingest_transcript
    from continuity.context.compaction import create_checkpoint
    from continuity.store.jsonl import Store

    store = Store(tmp_path / "s", create=True, durable=False)
    lines = [
        f'{{"type":"user","uuid":"u{i}","sessionId":"sess","timestamp":"2026-01-01T00:00:{i:02d}Z",'
        f'"message":{{"role":"user","content":"run `make deploy-{i}` please"}}}}'
        for i in range(1, 21)
    ]
    transcript = tmp_path / "sess.jsonl"
    transcript.write_text("\n".join(lines) + "\n")
    ingest_transcript(store, transcript, final=True)
    # Claude compacted after the third prompt (seq 3); later we checkpointed at the end ourselves
    create_checkpoint(store, "cc-sess", 3, text="claude", cut_rule_id="claude_code_compact/auto")
    create_checkpoint(store, "cc-sess", 20, text="ours")
    text = restore_context(store.thread("cc-sess"), log=False)
    # what Claude lost is what came before its own compaction, whatever we did afterwards
    assert "make deploy-1" in text and "make deploy-3" in text
    assert "make deploy-20" not in text  # after Claude's compaction: still in its context
