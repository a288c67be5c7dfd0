"""Small threads keep no per-thread caches (ADR 0031): every reader answers from the log, with
the same bundles and hits as the indexed path; a thread that grows past the threshold gets its
caches on the next read that wants them; ``rebuild-index`` drops the caches of small threads;
the caches of a large thread are still rebuilt when deleted or damaged.

The rest of the suite runs with the threshold at 0 (every thread keeps caches: see conftest);
here it is set per test, in this process and for the CLI's child processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity import frames as fr
from continuity.caches import thread_index
from continuity.caches.thread_index import ThreadIndex, keeps_none, rebuild_all
from continuity.context.compiler import compile_context
from continuity.context.sources import IndexedSource, LiveSource, open_source
from continuity.maintenance.verify import verify_store
from continuity.retrieval.search import search, search_prefix
from continuity.store.jsonl import Store
from continuity.testing import FixedClock
from tests.support.compile import THREAD, Script, limits_strategy, scripts, text

SMALL = 4096
"""The threshold in these tests: a few messages cross it."""


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", SMALL)
    monkeypatch.setenv("CONTINUITY_SMALL_LOG_BYTES", str(SMALL))
    yield SMALL


def _thread_files(store: Store, tid: str) -> list[str]:
    assert store.cache_dir is not None
    found = []
    for sub in ("threads", "search"):
        folder = store.cache_dir / sub / tid
        if folder.exists():
            found += [f"{sub}/{p.name}" for p in folder.iterdir()]
    return sorted(found)


def _fill(store: Store, tid: str, n: int, size: int = 60) -> None:
    store.thread(tid).append(
        [
            text("user" if i % 2 else "assistant", f"turn {i} parser " + "w" * size, f"{tid}-{i}")
            for i in range(n)
        ]
    )


def _cli(store: Store, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(store.root), *args],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _size(store: Store, tid: str) -> int:
    return (store.root / "threads" / f"{tid}.jsonl").stat().st_size


@pytest.mark.slow
def test_no_cache_files_for_a_small_thread(tmp_store: Store, small_threshold: int) -> None:
    _fill(tmp_store, "s", 5)
    assert _size(tmp_store, "s") < small_threshold
    thread = tmp_store.thread("s")
    assert keeps_none(thread) and not ThreadIndex.available(thread)
    assert isinstance(open_source(thread), LiveSource)
    compile_context(thread)
    compile_context(thread, recall="parser")
    assert search(tmp_store, "parser", thread="s")
    assert search(tmp_store, "parser")
    assert search_prefix(thread, "parser", max_seq=3, k=3)
    rebuild_all(tmp_store)
    assert _thread_files(tmp_store, "s") == []
    for args in (
        ("log", "s"),
        ("stats",),
        ("threads",),
        ("search", "--thread", "s", "parser"),
        ("search", "parser"),
        ("compile", "s"),
        ("rebuild-index",),
        ("verify",),
    ):
        _cli(tmp_store, *args)
    assert _thread_files(tmp_store, "s") == []
    assert not verify_store(tmp_store).problems


def test_caches_appear_when_the_thread_grows(tmp_store: Store, small_threshold: int) -> None:
    _fill(tmp_store, "g", 5)
    thread = tmp_store.thread("g")
    small = compile_context(thread, log=False)
    assert _thread_files(tmp_store, "g") == []
    _fill(tmp_store, "g", 60)
    assert _size(tmp_store, "g") >= small_threshold
    assert not keeps_none(thread)
    grown = compile_context(thread, log=False)
    assert isinstance(open_source(thread), IndexedSource)
    assert "threads/manifest.v1.json" in _thread_files(tmp_store, "g")
    assert (
        grown.bundle_bytes() == compile_context(thread, log=False, use_caches=False).bundle_bytes()
    )
    assert grown.bundle_bytes() != small.bundle_bytes()
    search(tmp_store, "parser", thread="g")
    assert "search/manifest.json" in _thread_files(tmp_store, "g")


@pytest.mark.slow
def test_rebuild_index_drops_the_caches_of_small_threads(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_store, "s", 5)
    _fill(tmp_store, "b", 80)
    thread = tmp_store.thread("s")
    compile_context(thread)  # threshold 0: caches for both, as an older version made them
    search(tmp_store, "parser", thread="s")
    compile_context(tmp_store.thread("b"))
    assert _thread_files(tmp_store, "s")
    monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", SMALL)
    monkeypatch.setenv("CONTINUITY_SMALL_LOG_BYTES", str(SMALL))
    # caches that exist are kept in use (they know how far the log went) until rebuild-index
    assert not keeps_none(thread) and isinstance(open_source(thread), IndexedSource)
    _cli(tmp_store, "rebuild-index")
    assert _thread_files(tmp_store, "s") == []
    assert "threads/manifest.v1.json" in _thread_files(tmp_store, "b")
    assert isinstance(open_source(thread), LiveSource)
    assert not verify_store(tmp_store).problems


def test_deleted_or_damaged_caches_of_a_large_thread_are_rebuilt(
    tmp_store: Store, small_threshold: int
) -> None:
    _fill(tmp_store, "b", 80)
    thread = tmp_store.thread("b")
    want = compile_context(thread, log=False, use_caches=False).bundle_bytes()
    assert compile_context(thread, log=False).bundle_bytes() == want
    assert tmp_store.cache_dir is not None
    folder = tmp_store.cache_dir / "threads" / "b"
    shutil.rmtree(folder)
    assert compile_context(thread, log=False).bundle_bytes() == want
    assert (folder / "manifest.v1.json").exists()
    offsets = folder / "offsets.v1.u64"
    offsets.write_bytes(b"\xff" * offsets.stat().st_size)
    assert compile_context(thread, log=False).bundle_bytes() == want
    assert not ThreadIndex(thread).problems()
    hits = search(tmp_store, "parser", thread="b", k=5)
    seg = tmp_store.cache_dir / "search" / "b" / "docs.bin"
    seg.write_bytes(b"\x00" * seg.stat().st_size)
    assert search(tmp_store, "parser", thread="b", k=5) == hits


def _answers(store: Store, anchor: int | None, limits: fr.Limits) -> tuple[object, ...]:
    thread = store.thread(THREAD)
    head = thread.head()
    top = -1 if head is None else head.seq
    try:
        bundle: object = compile_context(
            thread, anchor=anchor, limits=limits, log=False, recall="out1 m2 summary"
        ).bundle_bytes()
    except Exception as exc:  # the same error either way
        bundle = type(exc).__name__
    return (
        bundle,
        search(store, "m1 out2 cmd summary", thread=THREAD, k=7),
        search_prefix(thread, "x y m3", max_seq=max(0, top // 2), k=4),
    )


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scripts(max_steps=25), limits_strategy(), st.data())
def test_small_and_indexed_paths_agree(
    monkeypatch: pytest.MonkeyPatch, script: Script, limits: fr.Limits, data: st.DataObject
) -> None:
    """Random threads around the threshold: read with no caches (small), through the caches,
    and after growing past the threshold, the answers are the same."""
    cut = data.draw(st.integers(1, len(script.frames)), label="frames at first")
    anchor = data.draw(st.none() | st.integers(0, cut), label="anchor")
    with tempfile.TemporaryDirectory() as tmp:
        small = Store(Path(tmp) / "small", create=True, durable=False, clock=FixedClock())
        indexed = Store(Path(tmp) / "indexed", create=True, durable=False, clock=FixedClock())
        early = Script(script.frames[:cut], script.summaries, script.missing)
        for store in (small, indexed):
            early.replay(store)
        size = _size(small, THREAD)
        # just above the log (it keeps none) or at it (it keeps them), in the two stores
        monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", size + 1)
        assert keeps_none(small.thread(THREAD))
        first = _answers(small, anchor, limits)
        assert _thread_files(small, THREAD) == []
        monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", size)
        assert not keeps_none(indexed.thread(THREAD))
        assert _answers(indexed, anchor, limits) == first
        assert "threads/manifest.v1.json" in _thread_files(indexed, THREAD)
        # the rest of the script: the small thread grows past the threshold (or not)
        rest = Script(script.frames[cut:])
        for store in (small, indexed):
            if rest.frames:
                rest.replay(store)
        grown = data.draw(st.booleans(), label="past the threshold")
        monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", size + 1 if grown else 1 << 40)
        later = _answers(small, anchor, limits)
        assert _answers(indexed, anchor, limits) == later
        try:
            reference: object = compile_context(
                small,
                THREAD,
                anchor=anchor,
                limits=limits,
                log=False,
                use_caches=False,
                recall="out1 m2 summary",
            ).bundle_bytes()
        except Exception as exc:
            reference = type(exc).__name__
        assert later[0] == reference
