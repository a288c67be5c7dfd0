"""The store-wide search index (ADR 0029): the same hits as ranking every thread's own index,
byte-identical rebuilds, caught up after appends it never heard of, and a cache: deleted, torn,
damaged or left half-written by a killed writer, it is rebuilt, never believed."""

from __future__ import annotations

import importlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity import frames as fr
from continuity.maintenance.verify import verify_store
from continuity.retrieval import segments, store_index as ss
from continuity.retrieval.ranking import query_terms
from continuity.retrieval.search import _per_thread, search
from continuity.retrieval.segments import Segment, build_segment
from continuity.store.jsonl import Store
from continuity.testing import FixedClock

WORDS = ["deploy", "cache", "error", "retry", "cursor", "alembic", "watermark", "src/app.py"]
PROJECTS = ["/p/one", "/p/two"]


def _reference(store: Store, query: str, k: int, project: str | None = None) -> list[object]:
    """Today's path: every chosen thread's own index ranked together, with snippets."""
    return list(_per_thread(store, query_terms(query), k, None, project, [], None)[:k])


def _fill(store: Store, rng: random.Random, threads: int, messages: int) -> None:
    for n in range(threads):
        tid = f"t{rng.randrange(10**6):06d}-{n}"
        project = rng.choice([*PROJECTS, None])
        frames: list[fr.Frame] = []
        if project is not None or rng.random() < 0.5:
            frames.append(fr.ThreadCreated(meta={"project": project} if project else {}))
        for i in range(rng.randint(0, messages)):
            words = rng.choices(WORDS, k=rng.randint(1, 6))
            frames.append(fr.message(("user", "assistant")[i % 2], " ".join(words)))
        if frames:
            store.thread(tid).append(frames)


def _files(store: Store) -> dict[str, bytes]:
    folder = store.cache_dir / ss.FOLDER
    return {  # the stat file records the logs' inodes and times (ADR 0061): not the index
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.name not in (".lock", ss.STAT_FILE)
    }


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10**6),
    threads=st.integers(1, 12),
    messages=st.integers(0, 60),
    query=st.lists(st.sampled_from([*WORDS, "nothing"]), min_size=1, max_size=4),
    k=st.sampled_from([1, 3, 10, 50]),
    more=st.integers(0, 3),
)
def test_the_same_hits_as_every_threads_own_index(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    threads: int,
    messages: int,
    query: list[str],
    k: int,
    more: int,
) -> None:
    store = Store(tmp_path_factory.mktemp("wide"), create=True, durable=False, clock=FixedClock())
    rng = random.Random(seed)
    _fill(store, rng, threads, messages)
    q = " ".join(query)
    for round_ in range(more + 1):
        for project in (None, *PROJECTS, "/p/none"):
            assert search(store, q, k=k, project=project) == _reference(store, q, k, project)
        if round_ < more:  # appends and new threads: the index catches up
            _fill(store, rng, 2, messages)
            tid = rng.choice(store.threads())
            store.thread(tid).append(fr.message("user", " ".join(rng.choices(WORDS, k=3))))
    if store.threads():
        before = _files(store)
        ss.rebuild_store_search(store)
        rebuilt = _files(store)
        ss.rebuild_store_search(store)
        assert _files(store) == rebuilt  # a rebuild is a function of the logs
        assert search(store, q, k=k) == _reference(store, q, k)
        assert before.keys() >= {"manifest.json"}
        assert verify_store(store).ok


def _big(tmp_path: Path, threads: int = 40, messages: int = 30) -> Store:
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    _fill(store, random.Random(3), threads, messages)
    return store


QUERIES = ("alembic watermark", "deploy", "src/app.py retry", "cursor error cache")


@pytest.mark.slow
def test_damaged_torn_or_deleted_files_are_rebuilt_never_believed(tmp_path: Path) -> None:
    store = _big(tmp_path)
    truth = {q: _reference(store, q, 5) for q in QUERIES}
    assert {q: search(store, q, k=5) for q in QUERIES} == truth
    folder = store.cache_dir / ss.FOLDER
    for name in sorted(p.name for p in folder.iterdir() if p.name != ".lock"):
        good = (folder / name).read_bytes()
        rng = random.Random(name)
        # Flipped bytes where every byte counts for every answer (the document records: their
        # sums and order are checked; the manifest). A flipped posting of a document that would
        # have been a hit is the residual ADR 0014 names for every search index (only verify
        # sees it): segments and the tail are torn and emptied here instead.
        flips = name in ("docs.bin", "manifest.json") and good
        spots = sorted({rng.randrange(len(good)) for _ in range(25)}) if flips else []
        for damaged in (
            *(good[:at] + bytes([good[at] ^ 0x57]) + good[at + 1 :] for at in spots),
            good[: len(good) // 2],  # torn
            b"",
        ):
            (folder / name).write_bytes(damaged)
            for q in QUERIES:
                assert search(store, q, k=5) == truth[q], (name, q)
            (folder / name).write_bytes(good) if (folder / name).exists() else None
        (folder / name).unlink(missing_ok=True)
        for q in QUERIES:
            assert search(store, q, k=5) == truth[q], (name, q)
    import shutil

    shutil.rmtree(folder)
    assert {q: search(store, q, k=5) for q in QUERIES} == truth


@pytest.mark.slow
def test_a_damaged_length_elsewhere_never_shifts_the_scores(tmp_path: Path) -> None:
    import struct

    store = _big(tmp_path)
    truth = search(store, "alembic", k=5)
    path = store.cache_dir / ss.FOLDER / "docs.bin"
    good = path.read_bytes()
    for record in range(0, len(good) // 24, 37):
        damaged = bytearray(good)
        struct.pack_into("<I", damaged, record * 24 + 8, 999)
        path.write_bytes(bytes(damaged))
        assert search(store, "alembic", k=5) == truth, record
        path.write_bytes(good)


@pytest.mark.slow
def test_appends_by_a_process_that_never_updated_it_are_found(tmp_path: Path) -> None:
    store = _big(tmp_path)
    search(store, "deploy")
    tid = store.threads()[3]
    code = (
        "import sys; from continuity import frames as fr; from continuity.store.jsonl import Store;"
        "s = Store(sys.argv[1]); s.thread(sys.argv[2]).append(fr.message('user', 'zebra quokka'));"
        "s.thread('brand-new').append(fr.message('user', 'zebra narwhal'))"
    )
    subprocess.run([sys.executable, "-c", code, str(store.root), tid], check=True)
    hits = search(store, "zebra")
    assert sorted(h.thread_id for h in hits) == sorted([tid, "brand-new"])
    assert hits == _reference(store, "zebra", 10)
    assert verify_store(store).ok


@pytest.mark.slow
def test_a_sigkilled_updater_leaves_an_index_that_gives_right_answers(tmp_path: Path) -> None:
    store = _big(tmp_path, threads=10)
    search(store, "deploy")
    _fill(store, random.Random(9), 300, 40)  # a catch-up long enough to be killed in
    code = (
        "import sys; from continuity.store.jsonl import Store;"
        "from continuity.retrieval.store_index import open_store_search;"
        "open_store_search(Store(sys.argv[1]))"
    )
    for delay in (0.05, 0.2, 0.4):
        child = subprocess.Popen([sys.executable, "-c", code, str(store.root)])
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        for q in QUERIES:
            assert search(store, q, k=5) == _reference(store, q, 5), (delay, q)
        ss.drop_store_search(store) if delay < 0.4 else None
    assert verify_store(store).ok


@pytest.mark.slow
def test_a_build_in_many_small_runs_is_the_in_memory_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents streamed a few at a time and merged a few postings at a time (many runs and
    merge steps) make the bytes of a build that holds everything (ADR 0061), and each segment
    is the one built in memory from the documents it covers (in thread id order, each thread's
    in log order)."""
    monkeypatch.setattr(ss, "BLOCK", 8)
    monkeypatch.setattr(ss, "FANOUT", 4)
    monkeypatch.setattr(segments, "BLOCK", 8)
    monkeypatch.setattr(segments, "FANOUT", 4)
    monkeypatch.setattr(segments, "MAX_SEGMENT", 8 * 4**2)
    store = _big(tmp_path, threads=30, messages=40)
    builds = []
    for chunk, budget in ((10**6, 10**9), (1, 1), (3, 7), (50, 64)):
        monkeypatch.setattr(ss, "_CHUNK", chunk)
        monkeypatch.setattr(segments, "MERGE_POSTINGS", budget)
        ss.rebuild_store_search(store)
        builds.append(_files(store))
    assert all(b == builds[0] for b in builds[1:])
    docs = [
        d
        for tid in sorted(store.threads())
        if (part := ss.thread_documents(store.thread(tid))) is not None
        for d in part.docs
    ]
    m = ss._read_manifest(store.cache_dir / ss.FOLDER)
    assert m is not None and m.docs == len(docs) > 4 * 8 * 4**2
    assert sum(1 for s in m.segments if s.n_docs == 8 * 4**2) >= 4  # merged to the cap
    for ref in m.segments:
        covered = docs[ref.first_doc : ref.first_doc + ref.n_docs]
        assert builds[0][ref.name] == build_segment(covered)
    for q in QUERIES:
        assert search(store, q, k=10) == _reference(store, q, 10)


@pytest.mark.slow
def test_a_build_sigkilled_at_any_point_is_never_believed(tmp_path: Path) -> None:
    """A first build killed mid-way (one document and one posting at a time, so that it is
    killed while sealing, merging or writing its tail) leaves nothing a search trusts: the
    next search builds it and gives the answers of every thread's own index."""
    store = _big(tmp_path, threads=24, messages=600)  # past 4,096 documents: a merge
    code = (
        "import sys; from continuity.store.jsonl import Store;"
        "from continuity.retrieval import segments, store_index as ss;"
        "ss._CHUNK = 1; segments.MERGE_POSTINGS = 1;"
        "ss.open_store_search(Store(sys.argv[1]))"
    )
    folder = store.cache_dir / ss.FOLDER
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code, str(store.root)], check=True)
    whole = time.monotonic() - started  # how long a build takes here: kills spread over it
    built = _files(store)
    assert any(n.endswith("-4096.bin") for n in built)
    killed = 0
    for share in (0.3, 0.5, 0.7, 0.85, 0.95):
        ss.drop_store_search(store)
        child = subprocess.Popen([sys.executable, "-c", code, str(store.root)])
        time.sleep(whole * share)
        os.kill(child.pid, signal.SIGKILL)
        killed += child.wait() == -signal.SIGKILL
        for q in QUERIES:
            assert search(store, q, k=5) == _reference(store, q, 5), (share, q)
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
        assert verify_store(store).ok
        assert _files(store) == built
    assert killed  # at least one was killed mid-build (not after it finished)


@pytest.mark.slow
@pytest.mark.parametrize("survivors", range(4))  # a seal, a merge, the tail, the manifest
def test_a_writer_that_dies_between_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, survivors: int
) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    store.thread("a").append([fr.message("user", f"w{i} common") for i in range(16 * 256 - 6)])
    search(store, "common")
    store.thread("b").append([fr.message("user", f"w{i} common") for i in range(20)])
    real, real_merge = ss._write, segments.write_merged
    done = [0]

    def dying(path: Path, data: bytes) -> None:
        if done[0] >= survivors:
            raise KeyboardInterrupt(path.name)
        done[0] += 1
        real(path, data)

    def dying_merge(path: Path, segments: list[Segment]) -> int:
        if done[0] >= survivors:
            raise KeyboardInterrupt(path.name)
        done[0] += 1
        return real_merge(path, segments)

    monkeypatch.setattr(ss, "_write", dying)
    monkeypatch.setattr(ss, "write_merged", dying_merge)  # a merge streams to its file
    with pytest.raises(KeyboardInterrupt):
        search(store, "common")
    monkeypatch.undo()
    for q in ("w5", "w4089 common", "w19"):
        assert search(store, q, k=5) == _reference(store, q, 5)
    assert verify_store(store).ok


def test_verify_names_a_damaged_index(tmp_path: Path) -> None:
    store = _big(tmp_path)
    search(store, "deploy")
    assert verify_store(store).ok
    path = store.cache_dir / ss.FOLDER / "docs.bin"
    data = bytearray(path.read_bytes())
    data[24 * 5] ^= 0x01  # a seq
    path.write_bytes(bytes(data))
    problems = verify_store(store).problems
    assert [p.where for p in problems] == ["store-wide search index"]
    assert "docs.bin does not match its checksum" in problems[0].message


@pytest.mark.slow
def test_a_log_cut_or_replaced_rebuilds_it(tmp_path: Path) -> None:
    store = _big(tmp_path)
    search(store, "deploy")
    # A thread the first search read nothing of (its hits' threads have frame caches, which
    # rightly refuse a log that lost frames): only the store-wide index knew it.
    tid = next(t for t in store.threads() if not (store.cache_dir / "threads" / t).exists())
    (store.root / "threads" / f"{tid}.jsonl").unlink()
    store.thread(tid).append(fr.message("user", "okapi"))
    assert [h.thread_id for h in search(store, "okapi")] == [tid]
    assert search(store, "deploy") == _reference(store, "deploy", 10)
    (store.root / "threads" / f"{tid}.jsonl").unlink()
    assert search(store, "okapi") == []


@pytest.mark.slow
def test_rebuild_index_is_byte_identical_and_thread_filter_unchanged(tmp_path: Path) -> None:
    store = _big(tmp_path)
    search(store, "deploy")
    first = _files(store)
    cli = [sys.executable, "-m", "continuity", "--store", str(store.root)]
    subprocess.run([*cli, "rebuild-index"], check=True, capture_output=True)
    assert _files(store) == first
    tid = store.threads()[5]
    assert search(store, "deploy", thread=tid) == list(
        _per_thread(store, query_terms("deploy"), 10, tid, None, [], None)
    )


@pytest.mark.slow
def test_the_benchmark_runs_and_reports_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    root = str(Path(__file__).resolve().parents[2])  # ``tools`` is a folder of the checkout
    if root not in sys.path:
        sys.path.insert(0, root)
    bench_store_search = importlib.import_module("tools.bench.bench_store_search")
    report = bench_store_search.run(sizes=(30,), repeat=1, cold_repeat=1, baseline=None)
    metrics = [r.metric for r in report.rows]
    assert metrics[0] == "python -c pass"
    for phase in ("cold", "warm, store-wide", "warm, --project", "warm, --thread"):
        assert f"search @30, {phase} (after)" in metrics
    assert "search @30, warm, 1 thread appended (after)" in metrics
    assert all(r.median > 0 for r in report.rows)


@pytest.mark.slow
def test_the_build_benchmark_runs_and_reports_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    root = str(Path(__file__).resolve().parents[2])  # ``tools`` is a folder of the checkout
    if root not in sys.path:
        sys.path.insert(0, root)
    bench = importlib.import_module("tools.bench.bench_index_build")
    report = bench.run(sizes=(300,), repeat=2, baseline=None)
    rows = {r.metric: r for r in report.rows}
    for phase in ("first search", "warm search"):
        assert rows[f"{phase} @300 CPU (after)"].median > 0
        assert rows[f"{phase} @300 peak RSS (after)"].n == 2
    assert rows["index bytes @300: one digest across trees and runs"].median == 1.0


@pytest.mark.parametrize("step", [1, 2, 5, 64, 1 << 18])
def test_the_documents_check_sees_the_same_damage_in_any_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    """A view checks ``docs.bin`` a step of records at a time (ADR 0061: its memory does not
    grow with the documents): seqs out of order within a step or across two, counts, length
    sums and watermarks are caught whatever the step."""
    store = _big(tmp_path, threads=6, messages=30)
    search(store, "deploy")
    _fill(store, random.Random(4), 3, 30)  # a catch-up: threads' documents interleave
    for tid in store.threads()[:3]:
        store.thread(tid).append(fr.message("user", "deploy again"))
    search(store, "deploy")
    folder = store.cache_dir / ss.FOLDER
    m = ss._read_manifest(folder)
    assert m is not None
    docs = np.frombuffer((folder / "docs.bin").read_bytes(), ss.STORE_DOC, m.docs).copy()
    thread_of = docs["thread"]
    assert len(set(thread_of[: m.docs // 2].tolist())) < len(m.threads)  # interleaved later
    monkeypatch.setattr(ss, "_CHECK_STEP", step)

    def check(seqs: object, lengths: object, threads: object) -> str:
        try:
            ss._check_docs(m, seqs, lengths, threads)  # type: ignore[arg-type]
        except ValueError as exc:
            return str(exc)
        return ""

    assert check(docs["seq"], docs["len"], thread_of) == ""
    rows = np.flatnonzero(thread_of == thread_of[-1])  # the last thread's documents
    for i, j in ((rows[0], rows[1]), (rows[-2], rows[-1]), (rows[0], rows[-1])):
        seqs = docs["seq"].copy()
        seqs[j] = seqs[i]  # a later document with an earlier one's seq
        assert check(seqs, docs["len"], thread_of) == "docs.bin holds a thread's seqs out of order"
    seqs = docs["seq"].copy()
    seqs[rows[-1]] += 10**6
    assert "past its thread's watermark" in check(seqs, docs["len"], thread_of)
    lengths = docs["len"].copy()
    lengths[rows[0]] += 1
    assert "manifest counts" in check(docs["seq"], lengths, thread_of)
    moved = thread_of.copy()
    moved[rows[0]] = (moved[rows[0]] + 1) % len(m.threads)
    assert "manifest counts" in check(docs["seq"], docs["len"], moved)
