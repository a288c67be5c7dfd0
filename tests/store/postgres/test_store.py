"""The PostgreSQL backend passes the contract suites unchanged (``StoreContract``,
``ContextContract``, ``ArtifactStoreContract``) on a real server (``tests/support/pg.py``),
and stores the JSONL backend's lines byte for byte."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from continuity.store.artifacts import ArtifactStore
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.testing import (
    ArtifactStoreContract,
    ContextContract,
    FixedClock,
    StoreContract,
    drive_reference_batches,
    msg,
    stored_lines,
    verify_chain,
)
from tests.support.narrow import head_seq
from tests.support.pg import PgStores


class _OnPostgres:
    """Stores for the suites: one schema per folder the suite names, closed after the test."""

    _stores: PgStores

    @pytest.fixture(autouse=True)
    def _on_server(self, pg_stores: PgStores) -> None:
        self._stores = pg_stores

    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        store: BaseStore = self._stores.open(path, clock=clock)
        return store


class TestPostgresStore(_OnPostgres, StoreContract):
    pass


class TestPostgresStoreContext(_OnPostgres, ContextContract):
    pass


class TestPostgresArtifactStore(ArtifactStoreContract):
    _stores: PgStores

    @pytest.fixture(autouse=True)
    def _on_server(self, pg_stores: PgStores) -> None:
        self._stores = pg_stores

    def make(self, tmp_path: Path) -> ArtifactStore:
        artifacts: ArtifactStore = self._stores.open(tmp_path).artifacts
        return artifacts


def _batches(store: BaseStore) -> None:
    drive_reference_batches(store)
    t = store.thread("c")
    t.append([msg(i) for i in range(1, 300)])
    t.append(msg("last", text="x" * 100_000))


def test_lines_are_the_jsonl_stores_byte_for_byte(pg_stores: PgStores, tmp_path: Path) -> None:
    jsonl = Store(tmp_path / "jsonl", create=True, durable=False, clock=FixedClock())
    pg = pg_stores.open(tmp_path / "pg", clock=FixedClock())
    for store in (jsonl, pg):
        _batches(store)
    assert pg.threads() == jsonl.threads() == ["a", "b", "c"]
    for tid in pg.threads():
        lines = stored_lines(jsonl.thread(tid))
        assert stored_lines(pg.thread(tid)) == lines
        verify_chain(lines)
        on_disk = jsonl.thread(tid).path.read_bytes()
        assert b"".join(line + b"\n" for line in stored_lines(pg.thread(tid))) == on_disk
        assert list(pg.thread(tid).read_lines_backwards()) == list(
            jsonl.thread(tid).read_lines_backwards()
        )
        assert pg.thread(tid).head() == jsonl.thread(tid).head()


def test_sealed_lines_are_stored_as_they_are(pg_stores: PgStores, tmp_path: Path) -> None:
    """``append_sealed`` (what ``migrate`` uses) keeps another store's bytes, checked against
    the chain; bad lines leave nothing, not even a new thread's row."""
    from continuity.errors import BadFrame

    jsonl = Store(tmp_path / "jsonl", create=True, durable=False, clock=FixedClock())
    _batches(jsonl)
    pg = pg_stores.open(tmp_path / "pg")
    lines = stored_lines(jsonl.thread("c"))
    copy = pg.thread("c")
    with pytest.raises(BadFrame):
        copy.append_sealed(lines[1:3])  # does not start at seq 0
    with pytest.raises(BadFrame, match="inside a batch"):
        copy.append_sealed(lines[:2])  # seq 1 opens a batch of 299 frames
    assert not copy.exists() and pg.threads() == []
    assert copy.append_sealed(lines[:300]) == range(0, 300)  # the first batch
    assert copy.append_sealed(lines[300:]) == range(300, len(lines))
    assert stored_lines(copy) == lines and copy.head() == jsonl.thread("c").head()
    with pytest.raises(BadFrame, match="thread_created"):
        pg.thread("d").append_sealed(lines[:300])  # thread c's frames do not start thread d
    assert copy.append(msg("after")) == range(len(lines), len(lines) + 1)


def test_migrate_there_and_back_keeps_every_byte(pg_stores: PgStores, tmp_path: Path) -> None:
    from continuity.maintenance.migrate import migrate_store

    jsonl = Store(tmp_path / "jsonl", create=True, durable=False, clock=FixedClock())
    _batches(jsonl)
    jsonl.artifacts.put(b"an artifact " * 100)
    pg = pg_stores.open(tmp_path / "pg")
    back = Store(tmp_path / "back", create=True, durable=False)
    migrate_store(jsonl, pg)
    migrate_store(jsonl, pg)  # again: nothing more to copy
    migrate_store(pg, back)
    for store in (pg, back):
        assert store.threads() == jsonl.threads()
        for tid in jsonl.threads():
            assert stored_lines(store.thread(tid)) == stored_lines(jsonl.thread(tid))
        assert list(store.artifacts.ids()) == list(jsonl.artifacts.ids())


def test_reads_in_chunks_agree_with_the_reference(pg_stores: PgStores, tmp_path: Path) -> None:
    """Ranges that start, end and cross the read chunks' edges give exactly the frames asked."""
    pg = pg_stores.open(tmp_path, clock=FixedClock())
    t = pg.thread("t")
    for start in range(1, 5001, 500):
        t.append([msg(i) for i in range(start, start + 500)])
    lines = stored_lines(t)
    assert len(lines) == 5001
    verify_chain(lines)
    for lo, hi in ((0, 127), (127, 128), (1, 5000), (128, 4000), (4999, 6000), (2000, None)):
        got = list(t.read_lines(from_seq=lo, to_seq=hi))
        end = 5000 if hi is None else min(hi, 5000)
        assert got == [(s, lines[s]) for s in range(lo, end + 1)], (lo, hi)
    backwards = list(t.read_lines_backwards())
    assert backwards == [(s, lines[s]) for s in range(5000, -1, -1)]


def test_verify_reads_a_postgres_store(pg_stores: PgStores, tmp_path: Path) -> None:
    from continuity.context.compaction import create_checkpoint
    from continuity.maintenance.verify import verify_store

    pg = pg_stores.open(tmp_path, clock=FixedClock())
    _batches(pg)
    t = pg.thread("c")
    create_checkpoint(t, head_seq(t), text="a summary")
    report = verify_store(pg)
    # The reference batches name an artifact they never store: the one problem, as on JSONL.
    assert [(p.where, p.message) for p in report.problems] == [
        (f"artifact {'cd' * 32}", "missing (referenced by thread a seq 4)")
    ]
    frames = sum(len(stored_lines(pg.thread(tid))) for tid in pg.threads())
    assert (report.threads, report.frames, report.artifacts) == (3, frames, 2)


def test_is_postgres_url() -> None:
    from continuity.store.postgres import is_postgres_url

    for yes in ("postgresql://u@h/db", "postgres://h/db", "POSTGRESQL://h", "postgresql://"):
        assert is_postgres_url(yes), yes
    for no in ("", "/var/store", "postgresql:/x", "mysql://h/db", "./postgres://x", None):
        assert not is_postgres_url(no), no  # type: ignore[arg-type]


def test_naming_the_backend_does_not_import_psycopg() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from continuity.store.postgres import is_postgres_url; "
        "print(is_postgres_url('postgresql://x'), "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, text=True)
    assert out.stdout.strip() == "True []"
