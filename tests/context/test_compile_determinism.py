"""The same log prefix and the same limits give a byte-identical bundle and the same id: in
another process, without caches, after a rebuild, on the scan path, on the memory backend, and
whatever is appended after the anchor. Plus the golden bundle that pins the format."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.caches.thread_index import rebuild_all
from continuity.context.bundle import MessageItem, ToolStubBlock, decode_bundle
from continuity.context.compaction import create_checkpoint
from continuity.context.compiler import (
    COMPILER_ID,
    STRATEGY_HIERARCHICAL,
    CompileResult,
    compile_context,
)
from continuity.errors import ContextTooSmall
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import (
    THREAD,
    Script,
    call,
    limits_strategy,
    result,
    scripts,
    text,
)

GOLDEN = Path(__file__).parents[1] / "data" / "golden_bundle_v1_compile4.json"
GOLDEN_COMPILE3 = Path(__file__).parents[1] / "data" / "golden_bundle_v1_compile3.json"
GOLDEN_COMPILE2 = Path(__file__).parents[1] / "data" / "golden_bundle_v1_compile2.json"
"""What ``continuity.compile/2`` wrote for the same thread, before ADR 0018."""
GOLDEN_COMPILE1 = Path(__file__).parents[1] / "data" / "golden_bundle_v1.json"
"""What ``continuity.compile/1`` wrote for the same thread, before ADR 0017."""
LIMITS = fr.Limits(recent_messages=12, budget_tokens=6000, keep_tool_outputs=1)
BIG_OUTPUT = "\n".join(f"{i:4d}  def rule_{i}(tokens):  # " + "r" * 40 for i in range(1, 150))


def build_fixed_thread(store: BaseStore) -> int:
    """A small coding session with fixed ids: tool pairs, an error, a large output kept in an
    artifact, an observation, and two cumulative summaries. Returns the head seq."""
    big = store.artifacts.put(BIG_OUTPUT.encode())
    t = store.thread(THREAD)
    t.append(
        [
            fr.ThreadCreated(thread_id=THREAD, title="golden"),
            text("user", "The parser test fails on empty input. Fix it.", "u1"),
            text("assistant", "Let me run the tests first.", "a1"),
            call("a2", "tu1", "Bash", command="pytest -q tests/test_parser.py"),
            result(
                "r1", "tu1", "F.\nFAILED test_parser.py::test_empty - IndexError", is_error=True
            ),
        ]
    )
    create_checkpoint(store, THREAD, 4, text="The user asked to fix the empty-input parser test.")
    t.append(
        [
            call("a3", "tu2", "Read", file_path="src/parser.py"),
            result("r2", "tu2", BIG_OUTPUT[:60], artifact_id=big, size=len(BIG_OUTPUT.encode())),
            text("assistant", "parse() indexes tokens[0] without a check. I'll guard it.", "a4"),
            call("a5", "tu3", "Edit", file_path="src/parser.py", old="tokens[0]", new="first"),
            result("r3", "tu3", "The file src/parser.py has been updated."),
        ]
    )
    create_checkpoint(store, THREAD, 8, text="Found parse() indexing an empty list.")
    t.append(
        [
            fr.ObservationRecorded(tool_use_id="tu3", text="Edit guarded tokens[0] in parser.py"),
            call("a6", "tu4", "Read", file_path="src/lexer.py"),
            result("r4", "tu4", BIG_OUTPUT[:70], artifact_id=big, size=len(BIG_OUTPUT.encode())),
            call("a7", "tu5", "Bash", command="pytest -q"),
            result("r5", "tu5", "..\n2 passed in 0.03s"),
            text("assistant", "Both tests pass now.", "a8"),
            text("user", "Thanks. Add a test for whitespace-only input too.", "u2"),
        ]
    )
    head = t.head()
    assert head is not None
    return head.seq


@pytest.fixture
def fixed(tmp_store: Store) -> tuple[Store, int, CompileResult]:
    head = build_fixed_thread(tmp_store)
    return tmp_store, head, compile_context(tmp_store, THREAD, limits=LIMITS, log=False)


def _same(a: CompileResult, b: CompileResult) -> None:
    assert a.bundle_bytes() == b.bundle_bytes()
    assert a.bundle_id == b.bundle_id


def test_the_fixed_thread_exercises_what_the_golden_file_pins(
    fixed: tuple[Store, int, CompileResult],
) -> None:
    _, head, ref = fixed
    b = ref.bundle
    assert b.anchor_seq == head and b.anchor_message_id == "u2"
    assert b.strategy == STRATEGY_HIERARCHICAL
    assert [s.to_seq for s in b.summaries] == [4, 8]
    results = {
        blk.tool_use_id: blk
        for m in b.messages
        for blk in m.content
        if isinstance(blk, fr.ToolResultBlock | ToolStubBlock)
    }
    assert set(results) == {"tu3", "tu4", "tu5"}
    assert isinstance(results["tu5"], fr.ToolResultBlock)
    observed = results["tu3"]
    assert isinstance(observed, ToolStubBlock)
    assert observed.observation == "Edit guarded tokens[0] in parser.py"
    stub = results["tu4"]
    assert isinstance(stub, ToolStubBlock) and stub.artifact_id is not None
    assert stub.tool_name == "Read" and stub.size == len(BIG_OUTPUT.encode())
    assert ref.bundle.limits == LIMITS


def test_the_golden_bundle(fixed: tuple[Store, int, CompileResult]) -> None:
    _, _, ref = fixed
    data = ref.bundle_bytes()
    if not GOLDEN.exists():
        GOLDEN.write_bytes(data)
        pytest.skip(f"wrote {GOLDEN.name}: review and commit it")
    golden = GOLDEN.read_bytes()
    assert data == golden, (
        f"The compiled bundle no longer matches tests/data/{GOLDEN.name} byte for byte. "
        "A bundle's bytes are its id and are replayed from the log, so this is a change of the "
        "context_bundle.v1 format (or of what the compiler selects). Do not just regenerate the "
        "file: give the format a new version (context_bundle.v2 / a new compiler id), update "
        "contracts/ and record the change, then add a golden file for the new version."
    )
    assert decode_bundle(golden) == ref.bundle


def test_later_compilers_select_what_compile_1_did_when_nothing_they_changed_applies(
    fixed: tuple[Store, int, CompileResult],
) -> None:
    # Each compiler id marks what changed (ADR 0017: elision, unreadable summaries; ADR 0018:
    # the turn in flight always in the window, min_recent, retractions; compile/4: a
    # provider's own compaction). On a thread where none of that applies, the bundle is
    # compile/1's, compile/2's and compile/3's but for its id.
    _, _, ref = fixed
    assert ref.bundle.notes == []
    for golden, version in (
        (GOLDEN_COMPILE1, b"1"),
        (GOLDEN_COMPILE2, b"2"),
        (GOLDEN_COMPILE3, b"3"),
    ):
        old = golden.read_bytes()
        tag = b"continuity.compile/" + version
        assert b'"compiler_id":"' + tag + b'"' in old
        assert decode_bundle(old).compiler_id == tag.decode()  # old bundles still read
        assert ref.bundle_bytes() == old.replace(tag, COMPILER_ID.encode(), 1)


def test_same_bundle_without_caches_after_rebuild_and_on_the_scan_path(
    fixed: tuple[Store, int, CompileResult],
) -> None:
    store, _, ref = fixed
    _same(ref, compile_context(store, THREAD, limits=LIMITS, log=False))
    _same(ref, compile_context(store, THREAD, limits=LIMITS, log=False, use_caches=False))
    shutil.rmtree(store.cache_dir)
    _same(ref, compile_context(store, THREAD, limits=LIMITS, log=False))
    rebuild_all(store)
    _same(ref, compile_context(store, THREAD, limits=LIMITS, log=False))
    reopened = Store(store.root, durable=False)
    _same(ref, compile_context(reopened, THREAD, limits=LIMITS, log=False))


def test_same_bundle_on_the_memory_backend(
    fixed: tuple[Store, int, CompileResult], clock: FixedClock
) -> None:
    store, _, ref = fixed
    memory = MemoryStore(clock=clock)
    build_fixed_thread(memory)
    assert list(memory.thread(THREAD).read_lines()) == list(store.thread(THREAD).read_lines())
    _same(ref, compile_context(memory, THREAD, limits=LIMITS, log=False))


_COMPILE_IN_A_CHILD = textwrap.dedent(
    """
    import sys
    import msgspec
    from continuity import frames as fr
    from continuity.context.compiler import compile_context
    from continuity.store.jsonl import Store

    limits = msgspec.json.decode(sys.argv[2], type=fr.Limits)
    res = compile_context(Store(sys.argv[1]), "t", limits=limits, log=False)
    print(res.bundle_id)
    """
)


@pytest.mark.slow
def test_same_bundle_in_another_process(fixed: tuple[Store, int, CompileResult]) -> None:
    store, _, ref = fixed
    argv = [sys.executable, "-c", _COMPILE_IN_A_CHILD, str(store.root)]
    argv.append(msgspec.json.encode(LIMITS).decode())
    for delete_caches in (False, True):
        if delete_caches:
            shutil.rmtree(store.cache_dir)
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        assert out.stdout.strip() == ref.bundle_id, out.stderr
    assert store.artifacts.exists(ref.bundle_id) is False  # the child ran with log=False


def test_frames_after_the_anchor_change_nothing(fixed: tuple[Store, int, CompileResult]) -> None:
    store, anchor, ref = fixed
    at_anchor = compile_context(store, THREAD, anchor=anchor, limits=LIMITS, log=False)
    _same(ref, at_anchor)
    t = store.thread(THREAD)
    compile_context(store, THREAD, limits=LIMITS)  # a logged decision
    t.append(
        [
            call("a9", "tu6", "Write", file_path="tests/test_ws.py"),
            result("r6", "tu6", "created"),
            text("assistant", "Added the whitespace test.", "a10"),
            fr.ObservationRecorded(tool_use_id="tu4", text="lexer.py read, nothing relevant"),
            fr.ObservationRecorded(tool_use_id="tu5", text="pytest: 2 passed"),
            fr.JobSpawned(job_id="j1", kind="compaction"),
            fr.JobEnded(job_id="j1", status="succeeded"),
        ]
    )
    # Checkpoints covering seqs before the anchor, logged after it.
    create_checkpoint(store, THREAD, 16, text="a later summary through 16")
    create_checkpoint(store, THREAD, anchor, text="a later summary through the anchor")
    create_checkpoint(store, THREAD, 2, text="a later summary through 2")
    for use_caches in (True, False):
        again = compile_context(
            store, THREAD, anchor=anchor, limits=LIMITS, log=False, use_caches=use_caches
        )
        _same(ref, again)
    by_id = compile_context(store, THREAD, anchor="u2", limits=LIMITS, log=False)
    _same(ref, by_id)
    # …while the default anchor has moved on and sees them.
    latest = compile_context(store, THREAD, limits=LIMITS, log=False)
    assert latest.bundle.anchor_seq > anchor
    assert latest.bundle_id != ref.bundle_id


def test_compiling_twice_gives_the_same_bundle(fixed: tuple[Store, int, CompileResult]) -> None:
    store, _, ref = fixed
    first = compile_context(store, THREAD, limits=LIMITS)
    second = compile_context(store, THREAD, limits=LIMITS)
    third = compile_context(store, THREAD, limits=LIMITS, use_caches=False)
    _same(ref, first)
    _same(first, second)
    _same(first, third)
    # the repeats are on record as small frames naming the first decision (ADR 0020)
    assert first.decision.seq == second.decision.seq == third.decision.seq
    assert second.record_seq == first.decision.seq + 1
    assert third.record_seq == first.decision.seq + 2


# --- property: the indexed path equals the scan path and the memory backend -----------------


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(scripts(max_steps=25), limits_strategy(), st.data())
def test_indexed_scan_and_memory_agree(
    script: Script, limits: fr.Limits, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(script.frames)), label="frames before the compile")
    anchor = data.draw(st.none() | st.integers(0, cut), label="anchor")
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Store(Path(tmp) / "s", create=True, durable=False, clock=FixedClock())
        memory = MemoryStore(clock=FixedClock())
        early = Script(script.frames[:cut], script.summaries, script.missing)
        for store in (jsonl, memory):
            early.replay(store)
        paths = [
            lambda **kw: compile_context(jsonl, THREAD, limits=limits, log=False, **kw),
            lambda **kw: compile_context(
                jsonl, THREAD, limits=limits, log=False, use_caches=False, **kw
            ),
            lambda **kw: compile_context(memory, THREAD, limits=limits, log=False, **kw),
        ]
        first = [_outcome(p, anchor=anchor) for p in paths]
        assert len(set(first)) == 1, first
        if isinstance(first[0], tuple):
            return  # the limits are too small for this turn, the same on every path
        fixed_anchor = decode_bundle(first[0].split(b"\n")[0]).anchor_seq
        # The rest of the script lands after the anchor: nothing changes at that anchor.
        if cut < len(script.frames):
            for store in (jsonl, memory):
                store.thread(THREAD).append(script.frames[cut:])
        later = {_bundle(_outcome(p, anchor=fixed_anchor)) for p in paths}
        assert later == {_bundle(first[0])}
        # And at the latest anchor the backends still agree.
        latest = [_outcome(p) for p in paths]
        assert len(set(latest)) == 1, latest
        if isinstance(latest[0], tuple):
            return
        for msg in decode_bundle(latest[0].split(b"\n")[0]).messages:
            assert isinstance(msg, MessageItem)


def _bundle(outcome: bytes | tuple[str, int]) -> bytes | tuple[str, int]:
    return outcome.split(b"\n")[0] if isinstance(outcome, bytes) else outcome


def _outcome(compile_: Any, **kw: Any) -> bytes | tuple[str, int]:
    """A compile's bundle bytes and its decision, or the limit it found too small and what it
    needs."""
    try:
        res = compile_(**kw)
        return bytes(res.bundle_bytes()) + b"\n" + msgspec.json.encode(res.decision)
    except ContextTooSmall as exc:
        return (exc.limit, exc.needed)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(scripts(max_steps=15), st.data())
def test_anchor_by_message_id_agrees_across_paths(script: Script, data: st.DataObject) -> None:
    memory = MemoryStore(clock=FixedClock())
    script.replay(memory)
    ids = [f.message_id for f in script.frames if isinstance(f, fr.MessageAppended)]
    if not ids:
        return
    mid = data.draw(st.sampled_from(ids), label="message id")
    # A later message reusing the id (an importer's duplicate): both paths pick the latest.
    memory.thread(THREAD).append(text("user", "duplicate", mid))
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Store(Path(tmp) / "s", create=True, durable=False, clock=FixedClock())
        script.replay(jsonl)
        jsonl.thread(THREAD).append(text("user", "duplicate", mid))
        results = [
            compile_context(jsonl, THREAD, anchor=mid, log=False),
            compile_context(jsonl, THREAD, anchor=mid, log=False, use_caches=False),
            compile_context(memory, THREAD, anchor=mid, log=False),
        ]
    assert len({r.bundle_bytes() for r in results}) == 1
    assert results[0].bundle.anchor_message_id == mid
