"""Bulk work on every core (ADR 0030): ``verify`` and ``rebuild-index`` of a whole store in
worker processes give what one process gives — the same report, problems in the same order,
the same cache bytes — show progress on stderr only, and fail clearly when a worker dies."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.caches import catalog as catalog_module, thread_index
from continuity.caches.catalog import CATALOG_FILE, catalog_view
from continuity.caches.thread_index import ThreadIndex
from continuity.cli.store_commands import bulk_progress
from continuity.errors import ContinuityError
from continuity.maintenance import bulk as bulk_module, verify as verify_module
from continuity.maintenance.bulk import rebuild_store
from continuity.maintenance.verify import VerifyReport, verify_store
from continuity.retrieval import documents as documents_module, store_index as store_search_module
from continuity.retrieval.store_index import open_store_search
from continuity.store.jsonl import Store

CLI = [sys.executable, "-m", "continuity"]


@pytest.fixture(autouse=True)
def _small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split logs of a few KB into byte ranges and stores of a few KB into several tasks, so
    the tests' stores take the paths long logs and big stores take."""
    monkeypatch.setattr(verify_module, "_SPLIT", 4096)
    monkeypatch.setattr(verify_module, "_RANGE_MIN", 1024)
    monkeypatch.setattr(bulk_module, "_MIN_TASK_BYTES", 1024)


def _store(root: Path, threads: int = 6, frames: int = 60) -> Store:
    store = Store(root, create=True, durable=False)
    for n in range(threads):
        t = store.thread(f"t{n}")
        t.append(fr.ThreadCreated(title=f"thread {n}", meta={"project": f"p{n % 2}"}))
        for i in range(0, frames * (n + 1), 10):
            t.append(
                [
                    fr.message("user" if j % 2 else "assistant", f"turn {j} of {n}: " + "x" * 40)
                    for j in range(i, i + 10)
                ]
            )
    return store


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _write(path: Path, lines: list[bytes], tail: bytes = b"") -> None:
    path.write_bytes(b"\n".join(lines) + b"\n" + tail)


def _summary(report: VerifyReport) -> tuple[object, ...]:
    return (
        [str(p) for p in report.problems],
        [(p.thread_id, p.seq, p.offset) for p in report.problems],
        report.notes,
        report.threads,
        report.frames,
        report.artifacts,
        report.truncated,
    )


def _damage(store: Store, kind: str) -> None:
    path = store.root / "threads"
    if kind == "edited":
        lines = _lines(path / "t3.jsonl")
        lines[40] = lines[40].replace(b"turn", b"tern", 1)
        _write(path / "t3.jsonl", lines)
    elif kind == "deleted":
        lines = _lines(path / "t4.jsonl")
        del lines[100]
        _write(path / "t4.jsonl", lines)
    elif kind == "seq":
        lines = _lines(path / "t5.jsonl")
        lines[200] = lines[200].replace(b'"seq":200', b'"seq":999', 1)
        _write(path / "t5.jsonl", lines)
    elif kind == "garbage":
        lines = _lines(path / "t2.jsonl")
        lines[7] = b"not a frame"
        _write(path / "t2.jsonl", lines, tail=b'{"seq":')
    elif kind == "cache":
        index = ThreadIndex(store.thread("t5"))
        index.refresh()
        victim = index.dir / "messages.v1.bin"
        data = bytearray(victim.read_bytes())
        data[20] ^= 0xFF
        victim.write_bytes(bytes(data))
    elif kind == "catalog":
        catalog_view(store)
        file = store.root / "cache" / CATALOG_FILE
        file.write_bytes(file.read_bytes().replace(b'"messages":', b'"messages":1', 1))


@pytest.mark.slow
@pytest.mark.parametrize(
    "kinds", [(), ("edited",), ("deleted", "seq"), ("garbage", "cache", "catalog")]
)
def test_parallel_verify_reports_what_one_process_does(
    tmp_path: Path, kinds: tuple[str, ...]
) -> None:
    store = _store(tmp_path / "s")
    for t in ("t0", "t5"):
        ThreadIndex(store.thread(t)).refresh()
    for kind in kinds:
        _damage(store, kind)
    reference = verify_store(store, jobs=1)
    assert reference.ok == (not kinds)
    for jobs in (2, 3):
        assert _summary(verify_store(store, jobs=jobs)) == _summary(reference)
    for limit in (1, 2, 4):
        one = verify_store(store, jobs=1, limit=limit)
        assert _summary(verify_store(store, jobs=2, limit=limit)) == _summary(one)
    chosen = [store.thread("t5"), store.thread("t1")]
    assert _summary(verify_store(store, chosen, jobs=2)) == _summary(
        verify_store(store, chosen, jobs=1)
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.slow
@pytest.mark.parametrize("small", [0, 4096])
@pytest.mark.parametrize("chosen", [None, ("t1", "u3", "t3")])
def test_parallel_rebuild_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: int, chosen: tuple[str, ...] | None
) -> None:
    """Every cache file, the catalog and the store-wide search index included, is the same
    bytes whatever the number of workers; with ``small`` the short threads keep no caches
    (ADR 0031), so their catalog rows and search documents are read from their logs."""
    monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", small)
    monkeypatch.setenv("CONTINUITY_SMALL_LOG_BYTES", str(small))
    source = _store(tmp_path / "s", threads=5, frames=400)
    for n in range(6):  # short threads, a few hundred bytes each
        t = source.thread(f"u{n}")
        t.append(fr.ThreadCreated(title=f"short {n}", meta={"project": "p1"}))
        t.append([fr.message("user", f"short turn {j} of u{n}") for j in range(n + 1)])
    for tid in source.threads():
        if not thread_index.log_is_small(source.thread(tid)):
            ThreadIndex(source.thread(tid)).refresh()
    catalog_view(source)
    open_store_search(source)
    trees = {}
    for jobs in (1, 2, 3):
        root = tmp_path / f"copy{jobs}"
        shutil.copytree(source.root, root)
        store = Store(root)
        done = rebuild_store(store, chosen, jobs=jobs)
        assert sorted(done.threads) == sorted(chosen or store.threads())
        trees[jobs] = _tree(root / "cache")
        assert verify_store(store, jobs=1).ok
    assert trees[1] == trees[2] == trees[3]
    assert CATALOG_FILE in trees[1]
    assert "search-store/manifest.json" in trees[1]
    assert any(name.startswith("search-store/seg-") for name in trees[1])
    assert any(name.startswith("threads/t") for name in trees[1])
    assert any(name.startswith("threads/u") for name in trees[1]) == (small == 0)


@pytest.mark.slow
def test_parallel_rebuild_reads_the_store_wide_parts_in_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calling process only merges: no thread's catalog row or search documents are read
    in it while the logs stay as the workers read them."""
    store = _store(tmp_path / "s", threads=6, frames=60)
    catalog_view(store)
    open_store_search(store)
    parent = os.getpid()
    real_row, real_docs = catalog_module.read_row, documents_module.doc_of_line

    def row_in_worker(*args: object, **kwargs: object) -> object:
        assert os.getpid() != parent, "a catalog row was read in the calling process"
        return real_row(*args, **kwargs)  # type: ignore[arg-type]

    def docs_in_worker(*args: object, **kwargs: object) -> object:
        assert os.getpid() != parent, "search documents were read in the calling process"
        return real_docs(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module, "read_row", row_in_worker)
    monkeypatch.setattr(store_search_module, "doc_of_line", docs_in_worker)
    rebuild_store(store, jobs=2)
    monkeypatch.setattr(catalog_module, "read_row", real_row)
    monkeypatch.setattr(store_search_module, "doc_of_line", real_docs)
    assert verify_store(store, jobs=1).ok


@pytest.mark.slow
@pytest.mark.parametrize(("part_max", "batch_bytes"), [(3000, 10**9), (10**9, 1)])
def test_parts_past_their_bounds_are_streamed_by_the_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part_max: int, batch_bytes: int
) -> None:
    """A thread whose log is past ``PART_MAX_BYTES``, and the threads of a batch past its
    budget of documents, are not read whole by the workers: the rebuild streams them itself,
    to the same bytes (ADR 0061)."""
    store = _store(tmp_path / "s", threads=6, frames=60)
    open_store_search(store)
    rebuild_store(store, jobs=1)
    reference = _tree(store.root / "cache")
    parent, in_parent = os.getpid(), [0]
    real = documents_module.doc_of_line

    def counting(*args: object, **kwargs: object) -> object:
        in_parent[0] += os.getpid() == parent
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_search_module, "PART_MAX_BYTES", part_max)
    monkeypatch.setattr(bulk_module, "_DOCUMENTS_BYTES", batch_bytes)
    monkeypatch.setattr(store_search_module, "doc_of_line", counting)
    rebuild_store(store, jobs=2)
    assert in_parent[0] > 0  # some threads were streamed here
    assert _tree(store.root / "cache") == reference
    assert not [p for p in (store.root / "cache" / "search-store").iterdir() if "tmp" in p.name]


def test_parts_read_before_an_append_are_not_taken(tmp_path: Path) -> None:
    """A row or documents read by a worker before its log grew (or was cut and written again)
    are read again by the merge: the result is what a rebuild of the logs as they are gives."""
    store = _store(tmp_path / "s", threads=4, frames=30)
    open_store_search(store)
    rows = {tid: catalog_module.fresh_row(store.thread(tid)) for tid in store.threads()}
    parts = {tid: store_search_module.thread_documents(store.thread(tid)) for tid in rows}
    store.thread("t1").append(fr.message("user", "one more turn after the workers read it"))
    store.thread("t9").append(fr.ThreadCreated(title="new"))
    cache = store.root / "cache"
    catalog_module.rebuild_catalog(store, None, {t: r for t, r in rows.items() if r})
    store_search_module.rebuild_store_search(store, parts={t: d for t, d in parts.items() if d})
    merged = _tree(cache)
    catalog_module.rebuild_catalog(store)
    store_search_module.rebuild_store_search(store)
    assert _tree(cache) == merged
    manifest = store_search_module._read_manifest(cache / "search-store")
    assert manifest is not None
    ends = {e.thread_id: e.log_end for e in manifest.threads}
    assert ends["t1"] == store.thread("t1").log_bytes() and "t9" in ends
    listed = {r.thread_id: r for r in catalog_view(store).rows}
    assert listed["t1"].log_bytes == ends["t1"] and "t9" in listed


def _run(store: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "--store", str(store), *args], capture_output=True, check=False)


@pytest.mark.slow
def test_cli_output_is_the_same_and_progress_stays_off_stdout(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", threads=4, frames=30)
    _damage(store, "edited")
    one, two = _run(store.root, "verify", "--jobs", "1"), _run(store.root, "verify", "-j", "2")
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    assert b"problem: thread t3" in one.stdout
    assert two.stderr == b""  # a quick run shows no progress
    done = _run(store.root, "rebuild-index", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"rebuilt the caches of 4 threads")
    assert _run(store.root, "verify", "--jobs", "0").returncode == 2  # a usage error


def test_progress_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    report = bulk_progress("verify", tty=True)
    for done in range(0, 201, 50):
        report(done, 200, done * 10)
    out, err = capsys.readouterr()
    assert out == ""
    assert "verify: 200/200 threads, 2,000 frames" in err


_PARENT = os.getpid()


def _die(*_args: object, **_kwargs: object) -> None:
    """Kill the worker that runs it (never the test process)."""
    if os.getpid() != _PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("the work ran in the test process, not in a worker")


def test_a_killed_verify_worker_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path / "s", threads=3, frames=60)
    monkeypatch.setattr(verify_module, "_check_range", _die)
    with pytest.raises(ContinuityError, match="worker process died"):
        verify_store(store, jobs=2)


def test_a_killed_rebuild_worker_is_a_clear_error_and_leaves_sound_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path / "s", threads=4, frames=400)
    for tid in store.threads():
        ThreadIndex(store.thread(tid)).refresh()
    real = ThreadIndex.rebuild

    def rebuild_or_die(self: ThreadIndex, *args: object, **kwargs: object) -> object:
        if self.thread.id == "t2":
            _die()
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ThreadIndex, "rebuild", rebuild_or_die)
    with pytest.raises(ContinuityError, match="rebuild-index: a worker process died"):
        rebuild_store(store, jobs=2)
    monkeypatch.setattr(ThreadIndex, "rebuild", real)
    assert verify_store(store, jobs=1).ok  # old files or new ones, never half of one
