"""`continuity delete` and `continuity prune` (ADR 0040), and what `verify` says after them:
a deletion is not a loss, a log that comes back is a problem, derived data without a log is
orphaned (a log file removed by hand, a hand-written SQL delete on PostgreSQL)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.maintenance.verify import verify_store
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from tests.support.pg import PgStores

DAY = 86_400_000


def _run(root: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, ["--store", str(root), *args], input=stdin)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store = Store(tmp_path / "s", create=True, durable=False)
    now = int(time.time() * 1000)
    old, recent = now - 200 * DAY, now - 2 * DAY
    secret = store.artifacts.put(b"old tool output")
    store.thread("old").append(
        [
            fr.ThreadCreated(thread_id="old", ts_ms=old, meta={"project": "/p/a"}),
            fr.message("user", "the zebra password is hunter2", ts_ms=old),
            fr.RecordAppended(kind="x.out", artifact_id=secret, size=1, ts_ms=old),
        ]
    )
    store.thread("older").append(
        [
            fr.ThreadCreated(thread_id="older", ts_ms=old - DAY, meta={"project": "/p/b"}),
            fr.message("user", "an older thread", ts_ms=old - DAY),
        ]
    )
    store.thread("new").append(
        [
            fr.ThreadCreated(thread_id="new", ts_ms=recent, meta={"project": "/p/a"}),
            fr.message("user", "a recent zebra", ts_ms=recent),
        ]
    )
    assert {h.thread_id for h in search(store, "zebra")} == {"old", "new"}  # indexed
    return tmp_path / "s"


@pytest.mark.slow
def test_delete_dry_run_then_delete(root: Path) -> None:
    before = (root / "threads" / "old.jsonl").read_bytes()
    dry = _run(root, "delete", "old", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "would delete thread old: 3 frames" in dry.stdout
    assert "1 artifact" in dry.stdout and "nothing was removed" in dry.stdout
    assert (root / "threads" / "old.jsonl").read_bytes() == before
    asked = _run(root, "delete", "old", stdin="n\n")
    assert asked.exit_code == 1 and "nothing was deleted" in asked.stderr
    done = _run(root, "delete", "old", "--yes")
    assert done.exit_code == 0, done.stderr
    assert (
        done.stdout.startswith("deleted thread old: 3 frames")
        and "1 artifact removed" in done.stdout
    )
    assert not (root / "threads" / "old.jsonl").exists()
    assert not (root / "cache" / "threads" / "old").exists()
    assert list((root / "artifacts").rglob("*.zst")) == []
    store = Store(root)
    assert [h.thread_id for h in search(store, "zebra")] == ["new"]  # its words are gone
    assert _run(root, "search", "hunter2").stdout == "no hits for 'hunter2'\n"
    verify = _run(root, "verify")
    assert verify.exit_code == 0, verify.stdout
    assert "note: 1 deleted thread (tombstones; not problems)" in verify.stdout
    again = _run(root, "delete", "old", "--yes")
    assert again.exit_code == 0 and "finished deleting thread old" in again.stdout


def test_delete_refuses_bad_input(root: Path) -> None:
    missing = _run(root, "delete", "nope", "--yes")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: no thread 'nope' in this store")
    bad = _run(root, "delete", "../x", "--yes")
    assert bad.exit_code == 1 and "invalid thread id" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_prune_dry_run_and_yes(root: Path) -> None:
    dry = _run(root, "prune", "--older-than", "90d", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "would delete thread older" in dry.stdout and "would delete thread old:" in dry.stdout
    assert "would delete 2 threads" in dry.stdout and "new" not in dry.stdout
    refused = _run(root, "prune", "--older-than", "90d")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert Store(root).threads() == ["new", "old", "older"]
    only_a = _run(root, "prune", "--older-than", "12w", "--project", "/p/a", "--yes")
    assert only_a.exit_code == 0, only_a.stderr
    assert Store(root).threads() == ["new", "older"]
    rest = _run(root, "prune", "--older-than", "6m", "--yes")
    assert rest.exit_code == 0 and "deleted thread older" in rest.stdout
    reasons = [t.reason for t in Store(root).tombstones()]
    assert reasons == ["prune --older-than 12w", "prune --older-than 6m"]
    none = _run(root, "prune", "--older-than", "1y", "--yes")
    assert none.exit_code == 0 and "no thread was last active" in none.stdout


@pytest.mark.parametrize("duration", ["90", "d", "-3d", "9x", "1.5d", ""])
def test_prune_refuses_a_bad_duration(root: Path, duration: str) -> None:
    res = _run(root, "prune", "--older-than", duration, "--dry-run")
    assert res.exit_code == 2
    assert res.stderr.strip().startswith("error: bad duration")


def test_prune_refuses_an_unknown_agent(root: Path) -> None:
    res = _run(root, "prune", "--older-than", "1d", "--agent", "nobody", "--dry-run")
    assert res.exit_code == 1 and "unknown agent 'nobody'" in res.stderr


def test_verify_flags_derived_data_of_a_log_removed_by_hand(root: Path) -> None:
    _run(root, "threads")  # the catalog holds a row of every thread
    (root / "threads" / "old.jsonl").unlink()
    res = _run(root, "verify")
    assert res.exit_code == 1
    assert "problem: cache of thread old: derived data of thread old, which has no log" in (
        res.stdout
    )
    assert "problem: catalog row of thread old" in res.stdout
    # Once deleted properly, nothing is left over and the loss is a deletion.
    done = _run(root, "delete", "old", "--yes")
    assert done.exit_code == 1  # no log and no tombstone: there is nothing to delete
    assert "no thread 'old'" in done.stderr


def test_verify_says_a_deleted_log_came_back(root: Path, tmp_path: Path) -> None:
    saved = (root / "threads" / "old.jsonl").read_bytes()
    assert _run(root, "delete", "old", "--yes").exit_code == 0
    (root / "threads" / "old.jsonl").write_bytes(saved)  # a restore from an old backup
    res = _run(root, "verify")
    assert res.exit_code == 1
    assert "problem: thread old: deleted at" in res.stdout and "its log is there" in res.stdout
    assert _run(root, "delete", "old", "--yes").exit_code == 0
    assert _run(root, "verify").exit_code == 0


@pytest.mark.postgres
def test_verify_flags_search_rows_a_hand_written_sql_delete_left(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path / "s")
    store.thread("gone").append(fr.message("user", "the zebra password is hunter2"))
    store.thread("kept").append(fr.message("user", "a zebra too"))
    assert {h.thread_id for h in search(store, "zebra")} == {"gone", "kept"}
    s = store.schema
    ((key,),) = pg_stores.sql(f"SELECT thread_key FROM {s}.threads WHERE thread_id = 'gone'")
    # The case: the log's rows deleted by hand, the search and derived rows left.
    pg_stores.sql(f"DELETE FROM {s}.frames WHERE thread_key = {key}")
    pg_stores.sql(f"DELETE FROM {s}.threads WHERE thread_key = {key}")
    report = verify_store(store)
    found = [str(p) for p in report.problems]
    assert any("table search_postings: " in p and f"thread key {key}" in p for p in found), found
    assert any("table messages: 1 rows" in p for p in found), found
    # A proper delete leaves nothing of the kind.
    store.delete_thread("kept")
    left = pg_stores.sql(
        f"SELECT count(*) FROM {s}.search_postings p WHERE NOT EXISTS "
        f"(SELECT 1 FROM {s}.threads t WHERE t.thread_key = p.thread_key) AND p.thread_key <> {key}"
    )
    assert left == [(0,)]
    assert not any("kept" in p for p in (str(q) for q in verify_store(store).problems))


def test_vectors_go_with_the_thread_and_orphans_are_named(root: Path) -> None:
    from continuity.retrieval.embedders import HashedEmbedder
    from continuity.retrieval.vectors import semantic_search

    store = Store(root)
    embedder = HashedEmbedder()
    assert {t for t, _s, _c in semantic_search(store, "zebra", embedder)} == {"old", "new"}
    folder = root / "cache" / "vectors" / "hashed-256"
    assert (folder / "old.vec").exists() and b'"old"' in (folder / "manifest.json").read_bytes()
    assert _run(root, "delete", "old", "--yes").exit_code == 0
    assert not (folder / "old.vec").exists()
    assert b'"old"' not in (folder / "manifest.json").read_bytes()
    assert b'"new"' in (folder / "manifest.json").read_bytes()
    assert {t for t, _s, _c in semantic_search(store, "zebra", embedder)} == {"new"}
    (root / "threads" / "new.jsonl").unlink()  # by hand: its vectors are orphaned
    res = _run(root, "verify")
    assert res.exit_code == 1
    assert "problem: vectors of thread new (hashed-256): derived data of thread new" in res.stdout
