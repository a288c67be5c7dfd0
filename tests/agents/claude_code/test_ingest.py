"""Incremental, idempotent ingest of Claude Code transcripts, against the real fixtures.

The central property is the replay test: a transcript fed the way Claude Code writes it — the
file growing turn by turn, sometimes cut in the middle of a line, ingested after every step
(``final=False``) and once at the end (``final=True``) — leaves exactly the log a one-shot
ingest of the whole file leaves. Expected counts are computed here from the raw JSON with the
standard library, independently of the reader.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from continuity import frames as fr
from continuity.agents.claude_code.ingest import (
    ingest_transcript,
)
from continuity.agents.table import CLAUDE_CODE
from continuity.context.bundle import SummaryItem
from continuity.context.compiler import compile_context
from continuity.store.jsonl import Store
from continuity.summary import decode_summary
from continuity.testing import FixedClock
from tests.support.fixtures import SHARED_FIXTURES, shared_fixture
from tests.support.narrow import narrow

CC = "claude-code"
SPOTTER_A = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
SPOTTER_B = "spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
VIEWER = "claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
LARGE = [SPOTTER_A, SPOTTER_B, VIEWER]
THRESHOLD = 16 * 1024  # ingest.ARTIFACT_THRESHOLD, restated: the test pins the behaviour
PREVIEW = 2000


def fixture(rel: str) -> Path:
    return shared_fixture(CC, *rel.split("/"))


def all_fixtures() -> list[str]:
    root = SHARED_FIXTURES / CC
    if not root.is_dir():
        return ["<absent>"]
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.jsonl"))


def new_store(path: Path) -> Store:
    return Store(path, create=True, durable=False, clock=FixedClock())


def lines_of(path: Path) -> list[bytes]:
    """Complete lines with their newlines."""
    return path.read_bytes().splitlines(keepends=True)


def objs_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(path)]


def frames(store: Store, thread_id: str) -> list[fr.Frame]:
    return list(store.thread(thread_id).read())


def messages(store: Store, thread_id: str) -> list[fr.MessageAppended]:
    return [f for f in frames(store, thread_id) if isinstance(f, fr.MessageAppended)]


def copy_fixture(rel: str, folder: Path) -> Path:
    """The fixture copied under ``folder`` keeping its last folder names (they name threads)."""
    src = fixture(rel)
    dst = folder.joinpath(*rel.split("/"))
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def log_bytes(store: Store) -> dict[str, bytes]:
    return {t: store.thread(t).path.read_bytes() for t in store.threads()}


def is_prompt(o: dict[str, Any]) -> bool:
    """A user line that is not a tool result (and not Claude's compaction summary)."""
    if o.get("type") != "user" or o.get("isCompactSummary"):
        return False
    content = o["message"]["content"]
    return not (
        isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


# --- the normalized projection two logs are compared by ----------------------------------


def projection(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every thread's frames with everything that must be equal between two ingests of the same
    transcript, however it was fed. Left out, and why:

    * ``more``: it marks every frame of an append batch but its last, and batches follow the
      reads (a piece of the file per ingest), not the content;
    * ``digest``: it chains the bodies, so it follows ``more`` (and ``ts_ms`` below);
    * ``ts_ms`` of ``thread_created``: the first message's time, or the store's clock when the
      first batch had no timed message (a different process, a different moment).

    Everything else is compared: seqs (so order, no gaps, no duplicates), message ids, roles,
    content, token estimates, source keys, meta (including ``cc_keys``), message and checkpoint
    times (they come from the transcript), checkpoints whole, thread_created's title, parent and
    meta (project, branch, version, session, transcript path).
    """
    out: dict[str, list[tuple[Any, ...]]] = {}
    for tid in store.threads():
        rows: list[tuple[Any, ...]] = []
        for f in frames(store, tid):
            ts_ms = 0 if isinstance(f, fr.ThreadCreated) else f.ts_ms
            body = fr.encode_body(msgspec.structs.replace(f, digest="", more=False, ts_ms=ts_ms))
            rows.append((type(f).__name__, f.seq, body))
        out[tid] = rows
    return out


def assert_same_logs(got: Store, want: Store) -> None:
    g, w = projection(got), projection(want)
    assert sorted(g) == sorted(w)
    for tid in w:
        if g[tid] != w[tid]:
            diff = next(i for i, (a, b) in enumerate(zip(g[tid], w[tid], strict=False)) if a != b)
            raise AssertionError(
                f"{tid}: {len(g[tid])} frames vs {len(w[tid])}; first difference at {diff}:\n"
                f"  got  {g[tid][diff]!r:.600}\n  want {w[tid][diff]!r:.600}"
            )
    for tid in w:  # and no message twice
        ids = [m.message_id for m in messages(got, tid)]
        assert len(ids) == len(set(ids)), tid


def one_shot(path: Path, store_path: Path) -> Store:
    store = new_store(store_path)
    ingest_transcript(store, path, final=True)
    return store


# --- every fixture ------------------------------------------------------------------------


@pytest.mark.parametrize("rel", all_fixtures())
def test_every_fixture_ingests(rel: str, tmp_path: Path) -> None:
    path = copy_fixture(rel, tmp_path / "projects")
    store = new_store(tmp_path / "store")
    report = ingest_transcript(store, path, final=True)
    objs = []
    for line in lines_of(path):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if isinstance(o, dict):
            objs.append(o)
    conversation = [o for o in objs if o.get("type") in ("user", "assistant")]
    has_content = [
        o
        for o in conversation
        if isinstance(o.get("message"), dict) and o["message"].get("content")
    ]
    held = sum(len(messages(store, t)) for t in store.threads())
    assert held == report.messages
    if not has_content:
        assert report.threads == [] and store.threads() == []
        return
    assert held >= 1 and report.threads
    for tid in report.threads:
        first = frames(store, tid)[0]
        assert isinstance(first, fr.ThreadCreated) and first.meta["source"] == "claude-code"
    again = ingest_transcript(store, path, final=True)
    assert again.messages == 0 and again.checkpoints == 0


# --- expected counts on the two large real sessions -----------------------------------------


def raw_counts(path: Path) -> dict[str, int]:
    prompts = tool_uses = tool_results = compactions = 0
    assistant_ids: set[str] = set()
    for o in objs_of(path):
        if o.get("isSidechain"):
            continue
        if o["type"] == "system" and o.get("subtype") == "compact_boundary":
            compactions += 1
        if o["type"] == "user":
            content = o["message"]["content"]
            if is_prompt(o):
                prompts += 1
            elif isinstance(content, list):
                tool_results += sum(b.get("type") == "tool_result" for b in content)
        if o["type"] == "assistant":
            assistant_ids.add(o["message"]["id"])
            tool_uses += sum(b.get("type") == "tool_use" for b in o["message"]["content"])
    return {
        "prompts": prompts,
        "assistant": len(assistant_ids),
        "tool_uses": tool_uses,
        "tool_results": tool_results,
        "compactions": compactions,
    }


def log_counts(store: Store, thread_id: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for f in frames(store, thread_id):
        if isinstance(f, fr.CompactionCheckpointCreated):
            counts["compactions"] += 1
        if not isinstance(f, fr.MessageAppended):
            continue
        results = sum(isinstance(b, fr.ToolResultBlock) for b in f.content)
        if f.role == "user":
            counts["tool_results"] += results
            counts["prompts"] += results == 0
        else:
            counts["assistant"] += 1
            counts["tool_uses"] += sum(isinstance(b, fr.ToolUseBlock) for b in f.content)
    return dict(counts)


@pytest.mark.parametrize("rel", [SPOTTER_A, SPOTTER_B])
def test_large_sessions_hold_the_expected_counts(rel: str, tmp_path: Path) -> None:
    path = fixture(rel)
    want = raw_counts(path)
    assert want["compactions"] == 1 and want["prompts"] >= 3 and want["tool_uses"] > 100
    store = new_store(tmp_path / "store")
    report = ingest_transcript(store, path, final=True)
    tid = CLAUDE_CODE.thread_id(path.stem)
    assert report.threads == [tid]
    assert log_counts(store, tid) == want
    # one message per API response: its id is the response's, every response is there once
    ids = [m.message_id for m in messages(store, tid) if m.role == "assistant"]
    raw_ids = {o["message"]["id"] for o in objs_of(path) if o["type"] == "assistant"}
    assert sorted(ids) == sorted(raw_ids)
    # every tool call is answered after it, in the log's order
    seen: set[str] = set()
    for m in messages(store, tid):
        for b in m.content:
            if isinstance(b, fr.ToolUseBlock):
                seen.add(b.id)
            elif isinstance(b, fr.ToolResultBlock):
                assert b.tool_use_id in seen
    created = frames(store, tid)[0]
    first = next(o for o in objs_of(path) if o.get("cwd"))
    assert isinstance(created, fr.ThreadCreated)
    assert created.meta["project"] == first["cwd"]
    assert created.meta["git_branch"] == first["gitBranch"]
    assert created.meta["session_id"] == path.stem and created.parent_thread_id is None


# --- subagents and sidechains ---------------------------------------------------------------


@pytest.mark.parametrize("rel", [SPOTTER_A, SPOTTER_B])
def test_nested_subagent_files_are_threads_under_their_session(rel: str, tmp_path: Path) -> None:
    session = fixture(rel)
    agents = sorted(session.with_suffix("").joinpath("subagents").glob("agent-*.jsonl"))
    assert agents
    store = new_store(tmp_path / "store")
    ingest_transcript(store, session, final=True)
    main = CLAUDE_CODE.thread_id(session.stem)
    for agent_file in agents:
        report = ingest_transcript(store, agent_file, final=True)
        agent = agent_file.stem[len("agent-") :]
        tid = CLAUDE_CODE.subagent_thread_id(session.stem, agent)
        assert report.threads == [tid]
        created = frames(store, tid)[0]
        assert isinstance(created, fr.ThreadCreated)
        assert created.parent_thread_id == main
        assert created.meta["session_id"] == session.stem
        objs = objs_of(agent_file)
        uuids = {o["uuid"] for o in objs if o["type"] in ("user", "assistant")}
        keys = {m.source.key for m in messages(store, tid) if m.source}
        assert keys <= uuids and len(messages(store, tid)) == report.messages > 0
    main_keys = {m.source.key for m in messages(store, main) if m.source}
    for agent_file in agents:  # nothing of a subagent leaked into the session's thread
        assert not main_keys & {o.get("uuid") for o in objs_of(agent_file)}


def test_nested_subagent_with_meta_json(tmp_path: Path) -> None:
    folder = fixture("agent-sessions/subagent")
    session = folder / "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"
    (agent_file,) = sorted(folder.rglob("agent-*.jsonl"))
    assert agent_file.with_suffix(".meta.json").is_file()
    store = new_store(tmp_path / "store")
    ingest_transcript(store, session, final=True)
    report = ingest_transcript(store, agent_file, final=True)
    tid = CLAUDE_CODE.subagent_thread_id(session.stem, "a0ad4f44468bdf20d")
    assert report.threads == [tid] and report.messages == 3
    created = frames(store, tid)[0]
    assert isinstance(created, fr.ThreadCreated)
    assert created.parent_thread_id == CLAUDE_CODE.thread_id(session.stem)


def test_flat_subagent_files_are_one_thread_each_under_their_session(tmp_path: Path) -> None:
    folder = fixture("claude-history/-Users-user-project")
    agents = sorted(folder.glob("agent-*.jsonl"))
    assert len(agents) > 10
    store = new_store(tmp_path / "store")
    for agent_file in agents:
        objs = objs_of(agent_file)
        session = next(o["sessionId"] for o in objs if o.get("sessionId"))
        report = ingest_transcript(store, agent_file, final=True)
        tid = CLAUDE_CODE.subagent_thread_id(session, agent_file.stem[len("agent-") :])
        assert report.threads == [tid], agent_file.name  # one thread, even if lines disagree
        created = frames(store, tid)[0]
        assert isinstance(created, fr.ThreadCreated)
        assert created.parent_thread_id == CLAUDE_CODE.thread_id(session)
        assert created.meta["session_id"] == session
        responses = {o["message"]["id"] for o in objs if o["type"] == "assistant"}
        assert len(messages(store, tid)) == sum(o["type"] == "user" for o in objs) + len(responses)


def test_flat_subagent_thread_survives_a_lost_cursor(tmp_path: Path) -> None:
    src = fixture("claude-history/-Users-user-project/agent-a434715.jsonl")
    lines = lines_of(src)
    path = tmp_path / "p" / src.name
    path.parent.mkdir()
    path.write_bytes(b"".join(lines[:2]))
    store = new_store(tmp_path / "store")
    first = ingest_transcript(store, path, final=True)
    path.write_bytes(b"".join(lines))
    second = ingest_transcript(store, path, final=True)  # the session is known from the cursor
    shutil.rmtree(store.cache_dir)
    third = ingest_transcript(store, path, final=True)
    assert first.threads == second.threads
    assert third.messages == 0 and store.threads() == first.threads


def test_in_file_sidechains_go_to_their_own_thread(tmp_path: Path) -> None:
    path = fixture(VIEWER)
    objs = objs_of(path)
    store = new_store(tmp_path / "store")
    report = ingest_transcript(store, path, final=True)
    main = CLAUDE_CODE.thread_id(path.stem)
    side = CLAUDE_CODE.subagent_thread_id(path.stem, "sidechain")
    assert sorted(report.threads) == sorted([main, side])
    created = frames(store, side)[0]
    assert isinstance(created, fr.ThreadCreated) and created.parent_thread_id == main
    for tid, flag in ((main, False), (side, True)):
        lines = [
            o
            for o in objs
            if o["type"] in ("user", "assistant") and bool(o.get("isSidechain")) == flag
        ]
        want = len({o["message"]["id"] for o in lines if o["type"] == "assistant"})
        want += sum(1 for o in lines if o["type"] == "user" and o["message"]["content"])
        assert len(messages(store, tid)) == want
        uuids = {o["uuid"] for o in lines}
        assert {m.source.key for m in messages(store, tid) if m.source} <= uuids


# --- Claude's own compaction ----------------------------------------------------------------


@pytest.mark.parametrize("rel", [SPOTTER_A, SPOTTER_B])
def test_compaction_becomes_a_claude_checkpoint_that_compile_selects(
    rel: str, tmp_path: Path
) -> None:
    path = fixture(rel)
    objs = objs_of(path)
    at = next(i for i, o in enumerate(objs) if o.get("subtype") == "compact_boundary")
    summary_obj = next(o for o in objs if o.get("isCompactSummary"))
    before = [o for o in objs[:at] if o["type"] in ("user", "assistant")][-1]
    last_id = before["message"]["id"] if before["type"] == "assistant" else before["uuid"]
    content = summary_obj["message"]["content"]
    claude_text = content if isinstance(content, str) else "\n".join(b["text"] for b in content)

    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    tid = CLAUDE_CODE.thread_id(path.stem)
    log = frames(store, tid)
    (cp,) = [f for f in log if isinstance(f, fr.CompactionCheckpointCreated)]
    assert cp.summary_kind == "cumulative_v1" and cp.produced_by == "claude-code"
    assert cp.from_seq == 0
    assert cp.checkpoint_id == f"cc-{summary_obj['uuid']}"
    assert cp.cut_rule_id == "claude_code_compact/auto"
    target = log[cp.to_seq]
    assert isinstance(target, fr.MessageAppended) and target.message_id == last_id
    assert all(not isinstance(f, fr.MessageAppended) for f in log[cp.to_seq + 1 : cp.seq])
    doc = decode_summary(store.artifacts.get(cp.summary_artifact_id))
    assert doc.text == claude_text and doc.to_seq == cp.to_seq and doc.produced_by == "claude-code"
    assert doc.thread_id == tid
    # messages after the compaction are still archived after the checkpoint
    assert any(isinstance(f, fr.MessageAppended) for f in log[cp.seq + 1 :])

    result = compile_context(store, tid)
    assert result.decision.checkpoint is not None
    assert result.decision.checkpoint.checkpoint_id == cp.checkpoint_id
    assert narrow(SummaryItem, result.bundle.items[0]).text == claude_text
    assert result.decision.window_from_seq is not None
    # after the checkpoint, or (a turn in flight when Claude compacted) the latest user turn
    # and the exchange that the summary covers, kept raw (ADR 0018)
    window = result.bundle.messages
    after = [m for m in window if m.seq > cp.to_seq]
    assert after, "the messages after the compaction are in the window"
    kept = [m for m in window if m.seq <= cp.to_seq]
    assert len(kept) <= 2 and all(m.seq < after[0].seq for m in kept)


# --- idempotency ----------------------------------------------------------------------------


def test_reingest_adds_nothing(tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_A, tmp_path / "p")
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    before = log_bytes(store)
    for final in (False, True):
        report = ingest_transcript(store, path, final=final)
        assert report.messages == 0 and report.checkpoints == 0 and report.bytes_read == 0
        assert report.restarted is None
    assert log_bytes(store) == before


@pytest.mark.parametrize("final", [True, False])
def test_lost_cursor_adds_nothing(final: bool, tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_B, tmp_path / "p")
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    before = log_bytes(store)
    shutil.rmtree(store.cache_dir)
    report = ingest_transcript(store, path, final=final)
    assert report.restarted == "no cursor"
    assert report.messages == 0 and report.checkpoints == 0 and report.duplicates > 100
    assert log_bytes(store) == before


def _new_turn(session: str, cwd: str, tag: str) -> list[bytes]:
    """A prompt and a two-line reply Claude Code could append, with fresh uuids."""
    base = {"sessionId": session, "cwd": cwd, "isSidechain": False, "version": "2.1.39"}
    prompt = {
        **base,
        "type": "user",
        "uuid": f"{tag}-u",
        "timestamp": "2026-02-11T10:00:00.000Z",
        "message": {"role": "user", "content": f"please also do {tag}"},
    }
    parts = [
        {
            **base,
            "type": "assistant",
            "uuid": f"{tag}-a{i}",
            "timestamp": f"2026-02-11T10:00:0{i + 1}.000Z",
            "requestId": f"req_{tag}",
            "message": {
                "id": f"msg_{tag}",
                "role": "assistant",
                "model": "claude-opus-4-6",
                "content": [block],
            },
        }
        for i, block in enumerate(
            [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": f"did {tag}"}]
        )
    ]
    return [(json.dumps(o) + "\n").encode() for o in (prompt, *parts)]


def test_shrunk_file_is_detected_and_only_new_lines_added(tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_A, tmp_path / "p")
    lines = lines_of(path)
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    tid = CLAUDE_CODE.thread_id(path.stem)
    before = messages(store, tid)
    extra = _new_turn(path.stem, "/somewhere", "shrunk")
    path.write_bytes(b"".join(lines[: len(lines) // 3] + extra))
    report = ingest_transcript(store, path, final=True)
    assert report.restarted is not None and "shrank" in report.restarted
    after = messages(store, tid)
    assert after[: len(before)] == before
    assert [m.message_id for m in after[len(before) :]] == ["shrunk-u", "msg_shrunk"]
    assert after[-1].content == [fr.ThinkingBlock(text="hm"), fr.TextBlock(text="did shrunk")]


def test_replaced_file_is_detected_and_only_new_lines_added(tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_B, tmp_path / "p")
    lines = lines_of(path)
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    tid = CLAUDE_CODE.thread_id(path.stem)
    before = messages(store, tid)
    # same size or more, different head: the first line is rewritten, one turn is appended
    head = json.loads(lines[0])
    head["replaced"] = True
    new_head = (json.dumps(head) + "\n").encode()
    assert new_head != lines[0]
    path.write_bytes(new_head + b"".join(lines[1:]) + b"".join(_new_turn(path.stem, "/x", "rep")))
    report = ingest_transcript(store, path, final=True)
    assert report.restarted == "file was replaced"
    after = messages(store, tid)
    assert after[: len(before)] == before
    assert [m.message_id for m in after[len(before) :]] == ["rep-u", "msg_rep"]
    assert report.duplicates > 100


def test_cut_in_the_middle_of_a_line_then_completed(tmp_path: Path) -> None:
    src = fixture("spotter/tool_heavy.jsonl")
    lines = lines_of(src)
    path = tmp_path / "p" / src.name
    path.parent.mkdir()
    store = new_store(tmp_path / "store")
    half = len(lines) // 2
    path.write_bytes(b"".join(lines[:half]) + lines[half][: len(lines[half]) // 2])
    report = ingest_transcript(store, path, final=True)
    assert report.bytes_read <= len(b"".join(lines[:half]))
    path.write_bytes(b"".join(lines))
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, one_shot(path, tmp_path / "ref"))


# --- the replay test ------------------------------------------------------------------------


def replay_steps(lines: list[bytes], rng: random.Random) -> list[int]:
    """Byte offsets the file grows to, the way hooks see it: up to each user line (a prompt or a
    tool result: UserPromptSubmit, PostToolUse), lagging a line or two behind at random, and
    every few steps cut in the middle of the next line (completed at the next step)."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    steps: list[int] = []
    for i, line in enumerate(lines):
        o = json.loads(line)
        if o.get("type") != "user" or (not is_prompt(o) and rng.random() < 0.5):
            continue
        j = max(0, i - rng.choice((0, 0, 1, 2)))
        offset = starts[j]
        if rng.random() < 0.3 and j < len(lines):
            offset += rng.randrange(1, len(lines[j]))  # half-written line
        if not steps or offset > steps[-1]:
            steps.append(offset)
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("rel", LARGE)
def test_replay_equals_one_shot(rel: str, tmp_path: Path) -> None:
    seed = sum(rel.encode())  # fixed per fixture, printed on failure
    print(f"replay seed {seed}")
    rng = random.Random(seed)
    path = copy_fixture(rel, tmp_path / "projects")
    data = path.read_bytes()
    lines = lines_of(path)
    want = one_shot(path, tmp_path / "one-shot")

    store = new_store(tmp_path / "replay")
    path.write_bytes(b"")
    written = 0
    steps = replay_steps(lines, rng)
    assert len(steps) > 20
    mid_line = 0
    starts = set()
    pos = 0
    for line in lines:
        starts.add(pos)
        pos += len(line)
    for offset in steps:
        with path.open("ab") as f:
            f.write(data[written:offset])
        written = offset
        mid_line += offset not in starts
        report = ingest_transcript(store, path, final=False)
        assert report.restarted is None or written == steps[0]
    assert mid_line > 3
    with path.open("ab") as f:
        f.write(data[written:])
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, want)
    main = CLAUDE_CODE.thread_id(path.stem)
    assert len(messages(store, main)) == len(messages(want, main))


@pytest.mark.slow
def test_replay_line_by_line_with_torn_lines(tmp_path: Path) -> None:
    # the finest feed: every line ingested on its own, each first written in two halves
    rel = "spotter/subagent.jsonl"
    path = copy_fixture(rel, tmp_path / "projects")
    data = path.read_bytes()
    want = one_shot(path, tmp_path / "one-shot")
    store = new_store(tmp_path / "replay")
    path.write_bytes(b"")
    for line in lines_of(fixture(rel)):
        with path.open("ab") as f:
            f.write(line[: len(line) // 2])
        ingest_transcript(store, path, final=False)
        with path.open("ab") as f:
            f.write(line[len(line) // 2 :])
        ingest_transcript(store, path, final=False)
    assert path.read_bytes() == data
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, want)


# --- parallel hook processes ----------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from continuity.store.jsonl import Store
    from continuity.agents.claude_code.ingest import ingest_transcript

    store_path, transcript, done = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    store = Store(store_path, durable=False)
    print("ready", flush=True)
    sys.stdin.readline()
    runs = 0
    while True:
        finished = done.exists()
        if transcript.exists():
            ingest_transcript(store, transcript, final=False)
            runs += 1
        if finished:
            break
    print(runs)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("rel", [SPOTTER_A, VIEWER])
def test_parallel_ingests_of_a_growing_transcript(rel: str, tmp_path: Path) -> None:
    path = copy_fixture(rel, tmp_path / "projects")
    data = path.read_bytes()
    want = one_shot(path, tmp_path / "one-shot")
    path.unlink()
    store = new_store(tmp_path / "parallel")
    done = tmp_path / "done"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(store.root), str(path), str(done)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    rng = random.Random(7)
    print("parallel seed 7")
    try:
        for p in procs:  # all started (imports done) before the file starts growing
            assert p.stdin is not None and p.stdout is not None
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        written = 0
        with path.open("ab") as f:
            while written < len(data):
                step = rng.randrange(1, 40_000)  # any byte: lines are cut anywhere
                f.write(data[written : written + step])
                f.flush()
                written += step
                time.sleep(rng.random() * 0.02)
        done.touch()
        runs = [int(p.communicate(timeout=60)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs)
    print(f"ingests per process: {runs}")
    assert sum(runs) > 8
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, want)


# --- large tool outputs ---------------------------------------------------------------------


def _tool_round(output: str, n: int) -> list[bytes]:
    base = {"sessionId": "s", "cwd": "/p", "isSidechain": False}
    use = {
        **base,
        "type": "assistant",
        "uuid": f"a{n}",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "id": f"msg_{n}",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}],
        },
    }
    result = {
        **base,
        "type": "user",
        "uuid": f"u{n}",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": output}],
        },
    }
    return [(json.dumps(o) + "\n").encode() for o in (use, result)]


def test_large_tool_output_goes_to_an_artifact_with_a_preview(tmp_path: Path) -> None:
    big = "".join(f"line {i}: é ünïcode ✓\n" for i in range(2000))
    assert len(big.encode()) > THRESHOLD
    small = "x" * THRESHOLD  # exactly the threshold stays in the frame
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_tool_round(big, 1) + _tool_round(small, 2)))
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    results = [
        b
        for m in messages(store, CLAUDE_CODE.thread_id("s"))
        for b in m.content
        if isinstance(b, fr.ToolResultBlock)
    ]
    stored, inline = results
    assert stored.artifact_id is not None and stored.content == ""
    assert stored.preview == big[:PREVIEW] and stored.size == len(big.encode())
    assert store.artifacts.get(stored.artifact_id).decode() == big
    assert inline.artifact_id is None and inline.content == small and inline.size == THRESHOLD


def test_large_tool_outputs_of_a_real_session(tmp_path: Path) -> None:
    path = fixture(SPOTTER_A)
    want: dict[str, str] = {}
    for o in objs_of(path):
        content = o["message"]["content"] if o["type"] == "user" else None
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                c = b.get("content")
                text = c if isinstance(c, str) else "\n".join(x["text"] for x in c if "text" in x)
                if len(text.encode()) > THRESHOLD:
                    want[b["tool_use_id"]] = text
    assert len(want) >= 5
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    got = {
        b.tool_use_id: b
        for m in messages(store, CLAUDE_CODE.thread_id(path.stem))
        for b in m.content
        if isinstance(b, fr.ToolResultBlock) and b.artifact_id is not None
    }
    assert sorted(got) == sorted(want)
    for tool_use_id, text in want.items():
        b = got[tool_use_id]
        assert b.artifact_id is not None
        assert store.artifacts.get(b.artifact_id).decode() == text
        assert b.preview == text[:PREVIEW] and b.size == len(text.encode())


# --- work proportional to new bytes ---------------------------------------------------------


def test_appending_a_turn_reads_only_the_new_bytes(tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_B, tmp_path / "p")
    store = new_store(tmp_path / "store")
    ingest_transcript(store, path, final=True)
    size = path.stat().st_size
    turn = _new_turn(path.stem, "/p", "more")
    new_bytes = sum(len(line) for line in turn)
    with path.open("ab") as f:
        f.write(b"".join(turn))
    report = ingest_transcript(store, path, final=False)
    assert report.bytes_read < 2 * new_bytes < size / 100
    assert report.messages == 1 and report.held_back  # the reply may still grow
    again = ingest_transcript(store, path, final=True)
    assert again.bytes_read < 2 * new_bytes
    assert again.messages == 1
    tid = CLAUDE_CODE.thread_id(path.stem)
    assert [m.message_id for m in messages(store, tid)[-2:]] == ["more-u", "msg_more"]


# --- synthetic transcripts for what the fixtures do not pin -----------------------------------


def _line(kind: str, uuid: str, second: int, **fields: Any) -> bytes:
    obj = {
        "type": kind,
        "uuid": uuid,
        "sessionId": "syn",
        "timestamp": f"2026-03-01T10:00:{second:02d}.000Z",
        "isSidechain": False,
        **fields,
    }
    return (json.dumps(obj) + "\n").encode()


def _prompt(uuid: str, second: int, text: str, **fields: Any) -> bytes:
    return _line("user", uuid, second, message={"role": "user", "content": text}, **fields)


def _reply(uuid: str, second: int, mid: str, block: dict[str, Any], **fields: Any) -> bytes:
    message = {"id": mid, "role": "assistant", "model": "m", "content": [block]}
    return _line("assistant", uuid, second, message=message, **fields)


def _feed(path: Path, store: Store, pieces: list[bytes]) -> None:
    """Write ``pieces`` one after another, ingesting (not final) after each, then a final one."""
    path.write_bytes(b"")
    for piece in pieces:
        with path.open("ab") as f:
            f.write(piece)
        ingest_transcript(store, path, final=False)
    ingest_transcript(store, path, final=True)


def test_thread_meta_and_title_do_not_depend_on_how_the_file_is_fed(tmp_path: Path) -> None:
    side = {"isSidechain": True, "cwd": "/c", "gitBranch": "side", "version": "1.0.3"}
    early = [
        (
            json.dumps({"type": "summary", "summary": "First title", "leafUuid": "x"}) + "\n"
        ).encode(),
        _prompt("u1", 1, "start", cwd="/a", gitBranch="main", version="1.0.1"),
        _reply("a1", 2, "m1", {"type": "text", "text": "ok"}, cwd="/a"),
    ]
    late = [
        (json.dumps({"type": "summary", "summary": "Late title", "leafUuid": "y"}) + "\n").encode(),
        _prompt("u2", 3, "go on", cwd="/b", gitBranch="feature", version="1.0.2"),
        _prompt("s1", 4, "sidechain task", **side),
        _reply("s2", 5, "m2", {"type": "text", "text": "side done"}, **side),
        _reply("a2", 6, "m3", {"type": "text", "text": "done"}, cwd="/b"),
    ]
    path = tmp_path / "p" / "syn.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(early + late))
    want = one_shot(path, tmp_path / "one-shot")
    for pieces in ([b"".join(early), b"".join(late)], [early[0], b"".join(early[1:] + late)]):
        store = new_store(tmp_path / f"fed-{len(pieces[0])}")
        _feed(path, store, pieces)
        assert_same_logs(store, want)
    main, sidechain = (
        CLAUDE_CODE.thread_id("syn"),
        CLAUDE_CODE.subagent_thread_id("syn", "sidechain"),
    )
    created = frames(want, main)[0]
    assert isinstance(created, fr.ThreadCreated)
    assert created.title == "First title"  # the late one came after the thread began
    assert created.meta["project"] == "/a" and created.meta["git_branch"] == "main"
    created = frames(want, sidechain)[0]
    assert isinstance(created, fr.ThreadCreated)
    assert (created.meta["project"], created.meta["git_branch"]) == ("/c", "side")
    assert created.meta["claude_code_version"] == "1.0.3" and created.parent_thread_id == main


def test_response_interleaved_with_its_tool_results_is_one_message(tmp_path: Path) -> None:
    def use(n: int) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}}

    def result(uuid: str, second: int, n: int) -> bytes:
        content = [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"out {n}"}]
        return _line("user", uuid, second, message={"role": "user", "content": content})

    lines = [
        _prompt("u1", 1, "read two files"),
        _reply("a1", 2, "m1", {"type": "text", "text": "reading"}),
        _reply("a2", 3, "m1", use(1)),
        result("r1", 4, 1),
        _reply("a3", 5, "m1", use(2)),
        result("r2", 6, 2),
        _reply("a4", 7, "m2", {"type": "text", "text": "both read"}),
    ]
    path = tmp_path / "syn.jsonl"
    path.write_bytes(b"".join(lines))
    want = one_shot(path, tmp_path / "one-shot")
    got = messages(want, CLAUDE_CODE.thread_id("syn"))
    assert [m.message_id for m in got] == ["u1", "m1", "r1", "r2", "m2"]
    assert got[1].content == [
        fr.TextBlock(text="reading"),
        fr.ToolUseBlock(id="t1", name="Read", input={"n": 1}),
        fr.ToolUseBlock(id="t2", name="Read", input={"n": 2}),
    ]
    assert got[1].meta["cc_keys"] == "a2,a3,a:m1"  # every line's uuid, for idempotency
    # fed line by line: the response stays held back while only its results follow it
    store = new_store(tmp_path / "fed")
    path.write_bytes(b"")
    held = []
    for line in lines:
        with path.open("ab") as f:
            f.write(line)
        report = ingest_transcript(store, path, final=False)
        held.append(report.held_back)
    assert held == [False, True, True, True, True, True, True]
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, want)


def test_a_final_ingest_in_the_middle_of_a_response_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    # pre-compact and session-end ingest everything, even a response still being written;
    # its later lines then become a continuation message under a derived id
    path = tmp_path / "syn.jsonl"
    path.write_bytes(_prompt("u1", 1, "hi") + _reply("a1", 2, "m1", {"type": "text", "text": "x"}))
    store = new_store(tmp_path / "store")
    assert ingest_transcript(store, path, final=True).messages == 2
    with path.open("ab") as f:
        f.write(_reply("a2b3c4d5-rest", 3, "m1", {"type": "text", "text": "y"}))
    assert ingest_transcript(store, path, final=True).messages == 1
    got = messages(store, CLAUDE_CODE.thread_id("syn"))
    assert [m.message_id for m in got] == ["u1", "m1", "m1#a2b3c4d5"]
    assert [m.content for m in got[1:]] == [[fr.TextBlock(text="x")], [fr.TextBlock(text="y")]]
    shutil.rmtree(store.cache_dir)
    assert ingest_transcript(store, path, final=True).messages == 0


def test_boundary_then_summary_in_a_later_read(tmp_path: Path) -> None:
    path = copy_fixture(SPOTTER_A, tmp_path / "p")
    data = path.read_bytes()
    want = one_shot(path, tmp_path / "one-shot")
    lines = lines_of(path)
    at = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line)
    cut = sum(len(line) for line in lines[: at + 1])
    store = new_store(tmp_path / "fed")
    path.write_bytes(data[:cut])  # the boundary is written, Claude's summary not yet
    report = ingest_transcript(store, path, final=False)
    assert report.held_back and report.checkpoints == 0
    path.write_bytes(data)
    assert ingest_transcript(store, path, final=False).checkpoints == 1
    ingest_transcript(store, path, final=True)
    assert_same_logs(store, want)
    (cp,) = [
        f
        for f in frames(store, CLAUDE_CODE.thread_id(path.stem))
        if isinstance(f, fr.CompactionCheckpointCreated)
    ]
    assert cp.cut_rule_id == "claude_code_compact/auto"  # the boundary's trigger was kept


def test_long_session_and_agent_names_still_make_valid_thread_ids(tmp_path: Path) -> None:
    from continuity.store.base import validate_thread_id

    long = "x" * 300
    assert validate_thread_id(
        CLAUDE_CODE.subagent_thread_id(long, long)
    ) == CLAUDE_CODE.subagent_thread_id(long, long)
    assert validate_thread_id(CLAUDE_CODE.thread_id(long)) == CLAUDE_CODE.thread_id(long)


def test_a_symlink_to_a_transcript_shares_its_cursor(tmp_path: Path) -> None:
    from continuity.agents.claude_code.ingest import ingest_transcript
    from continuity.store.jsonl import Store

    store = Store(tmp_path / "s", create=True, durable=False)
    real = tmp_path / "sess.jsonl"
    real.write_text(
        '{"type":"user","uuid":"u1","sessionId":"sess","timestamp":"2026-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"hello"}}\n'
    )
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    first = ingest_transcript(store, real, final=True)
    again = ingest_transcript(store, link, final=True)
    assert first.messages == 1
    assert again.messages == 0 and again.bytes_read == 0  # same cursor: nothing re-read


def test_an_unfinished_last_line_is_scanned_once(tmp_path: Path) -> None:
    """The cursor remembers how far the file holds no newline, so a hook that finds the same
    unfinished line is not made to read it again; once the line ends, it is archived."""
    from continuity.agents.claude_code.ingest import _cursor_path, _load_cursor

    store = Store(tmp_path / "store", create=True)
    path = tmp_path / "syn.jsonl"
    done = _prompt("u1", 1, "first question")
    big = _prompt("u2", 2, "x" * (3 << 20))
    path.write_bytes(done + big[:-100])  # the second line is still being written
    ingest_transcript(store, path)
    cursor = _load_cursor(_cursor_path(store, path))
    assert cursor is not None and (cursor.offset, cursor.scanned) == (
        len(done),
        len(done) + len(big) - 100,
    )
    report = ingest_transcript(store, path)
    assert report.bytes_read == 0 and report.messages == 0
    with open(path, "ab") as f:
        f.write(big[-100:])
    report = ingest_transcript(store, path)
    assert report.messages == 1
    cursor = _load_cursor(_cursor_path(store, path))
    assert cursor is not None and (cursor.offset, cursor.scanned) == (len(done) + len(big),) * 2


# --- a compaction whose summary has no earlier message in its thread ----------------------------


def _boundary(uuid: str, second: int, **fields: Any) -> bytes:
    meta = {"trigger": "auto", "preTokens": 150000}
    return _line("system", uuid, second, subtype="compact_boundary", compactMetadata=meta, **fields)


def _summary(uuid: str, second: int, text: str, **fields: Any) -> bytes:
    return _prompt(uuid, second, text, isCompactSummary=True, **fields)


def _claude_checkpoints(store: Store, tid: str) -> list[fr.CompactionCheckpointCreated]:
    return [f for f in frames(store, tid) if isinstance(f, fr.CompactionCheckpointCreated)]


def test_a_resumed_session_starting_with_the_summary_still_gets_a_checkpoint(
    tmp_path: Path,
) -> None:
    lines = [
        _boundary("b1", 1),
        _summary("s1", 2, "This session is being continued from a previous conversation. Done: X."),
        _prompt("u1", 3, "go on"),
        _reply("a1", 4, "m1", {"type": "text", "text": "going on"}),
    ]
    path = tmp_path / "syn.jsonl"
    path.write_bytes(b"".join(lines))
    want = one_shot(path, tmp_path / "one-shot")
    tid = CLAUDE_CODE.thread_id("syn")
    (cp,) = _claude_checkpoints(want, tid)
    # nothing of this thread is covered: the checkpoint ends at the frame before it
    assert (cp.seq, cp.from_seq, cp.to_seq) == (1, 0, 0)
    assert cp.cut_rule_id == "claude_code_compact/auto" and cp.checkpoint_id == "cc-s1"
    doc = decode_summary(want.artifacts.get(cp.summary_artifact_id))
    assert doc.text.endswith("Done: X.") and doc.to_seq == 0
    assert [m.message_id for m in messages(want, tid)] == ["u1", "m1"]
    result = compile_context(want, tid, log=False)
    assert result.decision.checkpoint is not None
    assert result.decision.checkpoint.checkpoint_id == "cc-s1"
    assert [m.message_id for m in result.bundle.messages] == ["u1", "m1"]
    # fed line by line (the boundary held back until its summary comes) it is the same log
    store = new_store(tmp_path / "fed")
    _feed(path, store, lines)
    assert_same_logs(store, want)
    # a second such compaction ends after the first checkpoint; re-reading adds nothing
    with path.open("ab") as f:
        f.write(_boundary("b2", 5) + _summary("s2", 6, "Continued again."))
    ingest_transcript(want, path, final=True)
    first, second = _claude_checkpoints(want, tid)
    assert second.to_seq == second.seq - 1 and second.to_seq > first.to_seq
    shutil.rmtree(want.cache_dir)
    assert ingest_transcript(want, path, final=True).checkpoints == 0


def test_a_summary_after_only_sidechain_lines_still_gets_a_checkpoint(tmp_path: Path) -> None:
    side = {"isSidechain": True}
    lines = [
        _prompt("u1", 1, "side task", **side),
        _reply("a1", 2, "m1", {"type": "text", "text": "side done"}, **side),
        _boundary("b1", 3),
        _summary("s1", 4, "Summary of the side task."),
        _prompt("u2", 5, "next"),
    ]
    path = tmp_path / "syn.jsonl"
    path.write_bytes(b"".join(lines))
    store = one_shot(path, tmp_path / "store")
    (cp,) = _claude_checkpoints(store, CLAUDE_CODE.thread_id("syn"))
    assert (cp.seq, cp.to_seq) == (1, 0)
    assert _claude_checkpoints(store, CLAUDE_CODE.subagent_thread_id("syn", "sidechain")) == []


def test_the_small_fixture_cut_at_its_boundary_gets_a_checkpoint_in_either_chain(
    tmp_path: Path,
) -> None:
    # agent-sessions/small.jsonl: everything before its boundary is on a sidechain, and so is
    # its summary. Read from the boundary on (a resumed file), and with the summary moved to
    # the main chain (whose thread then has no message before it), it is still a checkpoint.
    objs = objs_of(fixture("agent-sessions/small.jsonl"))
    at = next(i for i, o in enumerate(objs) if o.get("subtype") == "compact_boundary")
    summary = next(o for o in objs if o.get("isCompactSummary"))
    for name, flag, tid in (
        ("side", True, CLAUDE_CODE.subagent_thread_id("small", "sidechain")),
        ("main", False, CLAUDE_CODE.thread_id("small")),
    ):
        path = tmp_path / name / "small.jsonl"
        path.parent.mkdir()
        rest = [dict(o, isSidechain=flag) if o is summary else o for o in objs[at:]]
        path.write_text("".join(json.dumps(o) + "\n" for o in rest))
        store = one_shot(path, tmp_path / f"store-{name}")
        (cp,) = _claude_checkpoints(store, tid)
        assert cp.checkpoint_id == f"cc-{summary['uuid']}" and cp.to_seq == cp.seq - 1
        assert not any(isinstance(f, fr.MessageAppended) for f in frames(store, tid)[: cp.seq])
