"""Building a model's vector cache (ADR 0033, issue 31): only what is new is embedded, worker
processes give the same bytes as one process, an interrupted or killed build keeps every thread
it finished and the next one goes on from there, a hook's budget embeds no more than it may and
never waits for a build, and two models never share a cache."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.maintenance.verify import verify_store
from continuity.retrieval.embed_workers import embedder_spec, make_embedder
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.vectors import FOLDER, build_vectors, nearest, vector_caches
from continuity.store.jsonl import Store
from tests.support.model import TOPICS, build_tiny_model
from tests.support.processes import sigint_as_a_terminal_sends_it
from tests.support.slow_embedder import SlowEmbedder, embedded

ROOT = Path(__file__).resolve().parents[2]


def filled(path: Path, threads: int = 12, messages: int = 5) -> Store:
    store = Store(path, create=True, durable=False)
    words = [w for topic in TOPICS.values() for w in topic]
    for t in range(threads):
        frames: list[fr.Frame] = [fr.ThreadCreated(meta={"project": f"/p/{t % 3}"})]
        for m in range(messages):
            w = words[(t * messages + m) % len(words)]
            frames.append(fr.message("user" if m % 2 else "assistant", f"the {w} of thread {t}"))
        store.thread(f"t{t:03d}").append(frames)
    return store


def cache_bytes(store: Store) -> dict[str, bytes]:
    assert store.cache_dir is not None
    root = store.cache_dir / FOLDER
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def manifest_threads(store: Store) -> int:
    assert store.cache_dir is not None
    found = list((store.cache_dir / FOLDER).glob("*/manifest.json"))
    return len(json.loads(found[0].read_bytes())["threads"]) if found else 0


@pytest.mark.slow
def test_a_grown_thread_embeds_its_new_documents_only(tmp_path: Path) -> None:
    store = filled(tmp_path / "s")
    log = str(tmp_path / "calls")
    built = build_vectors(store, SlowEmbedder(0, log=log))
    assert built is not None and built.embedded == built.documents == 12 * 5
    assert sum(embedded(log)) == 1 + 60  # the dimension probe, then every document
    os.unlink(log)
    again = build_vectors(store, SlowEmbedder(0, log=log))
    assert again is not None and again.embedded == 0 and embedded(log) == [1]  # the probe alone
    os.unlink(log)
    store.thread("t004").append([fr.message("user", "one more"), fr.message("assistant", "two")])
    grown = build_vectors(store, SlowEmbedder(0, log=log))
    assert grown is not None and grown.embedded == 2 and embedded(log) == [1, 2]
    before = cache_bytes(store)
    build_vectors(store, SlowEmbedder(0), rebuild=True)
    assert cache_bytes(store) == before  # appended records are a rebuild's bytes


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["slow", "static"])
def test_worker_processes_give_the_bytes_of_one_process(tmp_path: Path, kind: str) -> None:
    store = filled(tmp_path / "s", threads=20, messages=6)
    embedder = (
        SlowEmbedder(0.0005) if kind == "slow" else StaticEmbedder(build_tiny_model(tmp_path / "m"))
    )
    spec = embedder_spec(embedder)
    assert spec is not None and make_embedder(spec).id == embedder.id
    one = build_vectors(store, embedder, jobs=1)
    here = cache_bytes(store)
    two = build_vectors(store, embedder, jobs=2, rebuild=True)
    assert one is not None and two is not None and two.embedded == one.embedded == 120
    assert cache_bytes(store) == here


_BUILD = """
import sys
sys.path.insert(0, {root!r})
from continuity.retrieval import vectors
from continuity.store.jsonl import Store
from tests.support.slow_embedder import SlowEmbedder
vectors.COMMIT_SECONDS = 0.05
try:
    vectors.build_vectors(Store({store!r}), SlowEmbedder(0.02), jobs={jobs})
except vectors.EmbeddingInterrupted as exc:
    print(exc, file=sys.stderr)
    sys.exit(130)
"""


def start_build(tmp_path: Path, store: Store, jobs: int) -> subprocess.Popen[bytes]:
    script = tmp_path / "build.py"
    script.write_text(_BUILD.format(root=str(ROOT), store=str(store.root), jobs=jobs))
    return subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )


def wait_for_threads(store: Store, proc: subprocess.Popen[bytes], at_least: int) -> None:
    deadline = time.monotonic() + 60
    while manifest_threads(store) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.slow
def test_a_killed_build_keeps_what_it_committed_and_the_next_goes_on(tmp_path: Path) -> None:
    store = filled(tmp_path / "s", threads=40, messages=5)
    proc = start_build(tmp_path, store, jobs=1)
    wait_for_threads(store, proc, 5)
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate()
    kept = manifest_threads(store)
    assert 5 <= kept < 40
    log = str(tmp_path / "calls")
    resumed = build_vectors(store, SlowEmbedder(0, log=log))
    assert resumed is not None and resumed.threads == 40
    assert resumed.embedded == 200 - 5 * kept  # what was committed is not embedded again
    after = cache_bytes(store)
    build_vectors(store, SlowEmbedder(0), rebuild=True)
    assert cache_bytes(store) == after  # and the result is a clean build's


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_keeps_every_finished_thread_and_says_so(tmp_path: Path, jobs: int) -> None:
    store = filled(tmp_path / "s", threads=40, messages=5)
    proc = start_build(tmp_path, store, jobs=jobs)
    wait_for_threads(store, proc, 3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    message = err.decode()
    assert "Traceback" not in message  # no worker's either
    assert message.startswith("interrupted: the vectors of ") and "run the same command" in message
    kept = manifest_threads(store)
    assert f"the vectors of {kept:,} thread(s) are kept" in message
    resumed = build_vectors(store, SlowEmbedder(0.02))
    assert resumed is not None and resumed.embedded == 200 - 5 * kept


@pytest.mark.slow
def test_a_hook_budget_embeds_no_more_and_never_waits_for_a_build(tmp_path: Path) -> None:
    store = filled(tmp_path / "s")
    log = str(tmp_path / "calls")
    slow = SlowEmbedder(0, log=log)
    assert nearest(store, "the storage", slow, None, None, 5, budget=0) == []
    assert embedded(log) == [1, 1]  # the query and the probe: no document
    build_vectors(store, slow)
    store.thread("t001").append(fr.message("user", "the storage grew"))
    os.unlink(log)
    cached = nearest(store, "the storage grew", slow, None, None, 50, budget=0)
    assert cached and all(t != "t001" or s != 6 for t, s, *_ in cached)
    assert embedded(log) == [1]  # the query (an embedder's dimension is probed once)
    os.unlink(log)
    caught_up = nearest(store, "the storage grew", slow, None, None, 50, budget=5)
    assert ("t001", 6) in [(t, s) for t, s, *_ in caught_up]
    assert embedded(log) == [1, 1]  # the query, the new document within the budget
    store.thread("t002").append(fr.message("user", "the storage grew again"))
    assert store.cache_dir is not None
    (folder,) = (store.cache_dir / FOLDER).iterdir()
    fd = os.open(folder / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a build holds the cache
        busy = nearest(store, "the storage grew", slow, None, None, 50, budget=5)
    finally:
        os.close(fd)
    assert ("t001", 6) in [(t, s) for t, s, *_ in busy]  # what is there, read as it is
    assert ("t002", 6) not in [(t, s) for t, s, *_ in busy]


@pytest.mark.slow
def test_two_models_never_share_a_cache(tmp_path: Path) -> None:
    store = filled(tmp_path / "s")
    a = StaticEmbedder(build_tiny_model(tmp_path / "a"))
    b = StaticEmbedder(build_tiny_model(tmp_path / "b", scale=2.0))
    assert a.id != b.id
    build_vectors(store, a)
    build_vectors(store, b)
    caches = {v.model: v for v in vector_caches(store)}
    assert set(caches) == {a.id, b.id}
    assert all(v.current == 12 and not v.misplaced for v in caches.values())
    assert caches[a.id].folder != caches[b.id].folder
    # b's manifest copied over a's: never read as a's (embedded again), and verify says so
    folder_a, folder_b = Path(caches[a.id].folder), Path(caches[b.id].folder)
    stray = folder_a.with_name("stray")
    shutil.copytree(folder_b, stray)
    shutil.copy(folder_b / "manifest.json", folder_a / "manifest.json")
    again = build_vectors(store, a)
    assert again is not None and again.embedded == 60
    report = verify_store(store)
    assert any("stray" in p.where and "another" in p.message for p in report.problems), report
    assert {v.model for v in vector_caches(store) if not v.misplaced} == {a.id, b.id}
