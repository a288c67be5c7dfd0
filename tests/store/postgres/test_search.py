"""Search on PostgreSQL through the server's own index (ADR 0026): the same hits as the JSONL
store for the same log (order, scores, snippets, filters, ``k``, recall's prefixes), caught up
lazily after appends by other processes, rebuilt after its tables are dropped, the same rows
after a rebuild, and a fresh process that searches a current index reads no frame."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.maintenance.migrate import migrate_store
from continuity.retrieval.index import rebuild_search
from continuity.retrieval.search import search, search_prefix
from continuity.retrieval.state import forget
from continuity.store.jsonl import Store
from continuity.testing import FixedClock
from tests.support.narrow import head_seq
from tests.support.pg import TEST_APP

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tools.gen_thread import write_thread  # noqa: E402

WORDS = [
    "deploy",
    "cache",
    "error",
    "timeout",
    "retry",
    "backoff",
    "cursor",
    "manifest",
    "segment",
    "alembic",
    "quarantine",
    "digest",
    "résumé",
    "naïve",
]
CODE = [
    "src/app/main.py",
    "HTTPServerError",
    "foo_bar.baz",
    "tests/test_cache.py::test_retry",
    "getUserById",
    "ECONNRESET",
    "pg_advisory_xact_lock",
]
QUERIES = [
    "error timeout",
    "src/app/main.py",
    "HTTPServerError retry",
    "alembic quarantine digest",
    "getUserById cache",
    "résumé",
    "deploy cache error timeout retry backoff cursor manifest",  # common terms
    "pytest failed ImportError traceback",  # the generated thread's words
    "zzzz-not-there",
]


def _text(rng: random.Random) -> str:
    n = rng.randint(1, 20)
    return " ".join(rng.choice(CODE) if rng.random() < 0.2 else rng.choice(WORDS) for _ in range(n))


def _frames(rng: random.Random, n: int) -> list[fr.Frame]:
    out: list[fr.Frame] = []
    for i in range(n):
        r = rng.random()
        if r < 0.1:
            out.append(fr.ObservationRecorded(tool_use_id=f"o{i}", text=_text(rng)))
        elif r < 0.2:
            tool = fr.ToolUseBlock(
                id=f"t{i}", name="Bash", input={"command": f"pytest {rng.choice(CODE)}"}
            )
            out.append(fr.MessageAppended(role="assistant", content=[tool]))
        else:
            out.append(fr.message("user" if i % 2 == 0 else "assistant", _text(rng)))
    return out


@pytest.fixture(scope="module")
def stores(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Any]]:
    """The same log in a JSONL store and a PostgreSQL one: a generated agent thread (tool calls,
    outputs, checkpoints with summaries), two random threads in two projects."""
    from tests.support.pg import PgStores

    root = tmp_path_factory.mktemp("pgsearch")
    js = Store(root / "jsonl", create=True, durable=False, clock=FixedClock())
    write_thread(js, "gen", 5_000, seed=3, checkpoint_every=200)
    rng = random.Random(11)
    for tid, project, n in (("a", "p1", 1_300), ("b", "p2", 300)):
        first: list[fr.Frame] = [fr.ThreadCreated(thread_id=tid, meta={"project": project})]
        js.thread(tid).append(first + _frames(rng, n))
    pg_stores = PgStores(pg_url)
    pg = pg_stores.open(root / "pg")
    migrate_store(js, pg)
    try:
        yield js, pg
    finally:
        pg_stores.close()


def _rows(pg: Any) -> dict[str, list[tuple[Any, ...]]]:
    s = pg.schema
    out = {}
    with pg._db.connection() as conn:
        for table, order in (
            ("search_threads", "thread_key"),
            ("search_docs", "thread_key, first_doc"),
            ("search_postings", "thread_key, first_doc, part"),
        ):
            rows = conn.execute(f"SELECT * FROM {s}.{table} ORDER BY {order}").fetchall()
            out[table] = [
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows
            ]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("k", [1, 5, 25])
def test_search_equals_jsonl(stores: tuple[Store, Any], query: str, k: int) -> None:
    js, pg = stores
    assert search(pg, query, k=k) == search(js, query, k=k)


@pytest.mark.parametrize("query", QUERIES[:6])
@pytest.mark.parametrize("scope", [{"thread": "a"}, {"thread": "gen"}, {"project": "p2"}])
def test_filters_equal_jsonl(stores: tuple[Store, Any], query: str, scope: Any) -> None:
    js, pg = stores
    assert search(pg, query, k=8, **scope) == search(js, query, k=8, **scope)


@pytest.mark.slow
@pytest.mark.parametrize("max_seq", [0, 150, 1_000, 2_345, 4_999])
def test_prefix_search_equals_jsonl(stores: tuple[Store, Any], max_seq: int) -> None:
    js, pg = stores
    for query in QUERIES[:8]:
        want = search_prefix(js, "gen", query, max_seq=max_seq, k=6, exclude_seqs=[3, 150])
        got = search_prefix(pg, "gen", query, max_seq=max_seq, k=6, exclude_seqs=[3, 150])
        assert got == want
        assert got == search_prefix(
            pg, "gen", query, max_seq=max_seq, k=6, exclude_seqs=[3, 150], use_caches=False
        )


@pytest.mark.parametrize("anchor", [1_200, 3_001, None])
def test_recall_in_compile_equals_jsonl(stores: tuple[Store, Any], anchor: int | None) -> None:
    js, pg = stores
    for recall in ("pytest failed ImportError traceback", True):
        a = compile_context(js, "gen", anchor=anchor, recall=recall, log=False)
        b = compile_context(pg, "gen", anchor=anchor, recall=recall, log=False)
        assert b.decision.recall_hits == a.decision.recall_hits
        assert [(r.seq, r.score, r.text) for r in b.bundle.recalled] == [
            (r.seq, r.score, r.text) for r in a.bundle.recalled
        ]


def _run(pg: Any, code: str) -> Any:
    """``code`` in a fresh process with ``pg`` opened as ``store``; what it prints, as JSON."""
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from continuity.store.postgres import PostgresStore\n"
        f"store = PostgresStore({pg.location!r}, schema={pg.schema!r}, durable=False)\n" + code
    )
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_process_reads_no_frame_of_a_current_index(stores: tuple[Store, Any]) -> None:
    js, pg = stores
    search(pg, "error", k=3)  # every thread indexed
    found = _run(
        pg,
        "from continuity.retrieval.search import search\n"
        "hits = search(store, 'error timeout', k=5)\n"
        "found = [[h.thread_id, h.seq, h.score] for h in hits]\n"
        "print(json.dumps([store.search_backend().frames_read, found]))\n",
    )
    assert found[0] == 0
    assert found[1] == [[h.thread_id, h.seq, h.score] for h in search(js, "error timeout", k=5)]


@pytest.mark.slow
def test_appends_by_other_processes_are_caught_up(
    stores: tuple[Store, Any], tmp_path: Path
) -> None:
    js, pg = stores
    rng = random.Random(5)
    tid = "grows"
    for round_ in range(4):
        head = js.thread(tid).head()
        js.thread(tid).append(_frames(rng, 90 + 170 * round_))
        new = head_seq(js.thread(tid)) - (head.seq if head is not None else -1)
        # another process copies the new frames to the server (an append there)
        _run(
            pg,
            "from continuity.maintenance.migrate import migrate_store\n"
            "from continuity.store.jsonl import Store\n"
            f"migrate_store(Store({str(js.root)!r}), store, threads=[{tid!r}])\n"
            "print(json.dumps(0))\n",
        )
        before = pg.search_backend().frames_read
        for query in QUERIES[:5]:
            assert search(pg, query, k=6) == search(js, query, k=6)
            assert search(pg, query, k=4, thread=tid) == search(js, query, k=4, thread=tid)
        # only the new frames were read to catch up
        assert pg.search_backend().frames_read - before == new


@pytest.mark.slow
def test_dropped_tables_are_rebuilt_lazily(stores: tuple[Store, Any], pg_url: str) -> None:
    js, pg = stores
    search(pg, "error", k=3)
    before = _rows(pg)
    import psycopg

    with psycopg.connect(pg_url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute(f"DROP TABLE {pg.schema}.search_postings")
    forget()
    for query in QUERIES[:4]:
        assert search(pg, query, k=7) == search(js, query, k=7)
    after = _rows(pg)
    assert after == before


@pytest.mark.slow
def test_incremental_catch_ups_leave_the_rows_a_rebuild_makes(stores: tuple[Store, Any]) -> None:
    """Batches of irregular sizes, searched after each (a catch-up each), crossing 256 and
    4,096 documents: the rows equal those of a rebuild, of one thread and of all."""
    js, pg = stores
    rng = random.Random(9)
    tid = "batches"
    n = 0
    while n < 4_500:
        size = rng.choice([1, 3, 40, 255, 256, 700, 1_500])
        frames = _frames(rng, size)
        js.thread(tid).append(frames)
        head = pg.thread(tid).head()
        start = 0 if head is None else head.seq + 1
        pg.thread(tid).append_sealed(
            [line for _seq, line in js.thread(tid).read_lines(from_seq=start)]
        )
        n += size
        got = search(pg, "error", k=3, thread=tid)
        assert got == search(js, "error", k=3, thread=tid)
    caught_up = _rows(pg)
    assert rebuild_search(pg, [pg.thread(tid)]) == 1
    assert _rows(pg) == caught_up
    indexed = len(caught_up["search_threads"])
    assert rebuild_search(pg) == indexed
    assert _rows(pg) == caught_up
    forget()
    for query in QUERIES:
        assert search(pg, query, k=9) == search(js, query, k=9)


def test_a_first_build_reads_the_checkpoint_summaries_together(
    pg_stores: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint's document holds its summary's text: the first build reads the summaries of
    a batch of threads in one query (a query each before, ADR 0063), and finds their words."""
    from continuity.context.compaction import create_checkpoint

    asked: list[int] = []
    for n in (2, 24):
        pg = pg_stores.open(tmp_path / str(n), pooled=False)
        for i in range(n):
            t = pg.thread(f"t{i}")
            t.append([fr.message("user", f"question {i}"), fr.message("assistant", "answer")])
            create_checkpoint(t, head_seq(t), text=f"summary{i} mentions quokka")
        # the catch-up holds the store's one connection: any other read opens its own
        opened: list[int] = []
        connect = pg._db.connect
        monkeypatch.setattr(pg._db, "connect", lambda c=connect, o=opened: o.append(1) or c())
        assert search(pg, "nothingmatchesthis") == []  # builds the index
        asked.append(len(opened))
        hits = search(pg, "quokka", k=50)
        assert sorted(h.thread_id for h in hits) == sorted(f"t{i}" for i in range(n))
    assert asked[0] == asked[1], asked  # not one more for each checkpoint


def test_threads_written_together_leave_the_rows_of_each_written_alone(
    pg_stores: Any, tmp_path: Path
) -> None:
    """A first build lays out the runs of a batch of threads in one pass (one term numbering,
    one sort, ADR 0063): each thread's rows equal those it gets indexed alone (runs of 256
    and a tail, postings rows cut at the size limit, each thread's own scope terms)."""
    pg = pg_stores.open(tmp_path / "together", pooled=False)
    rng = random.Random(5)
    sizes = (1, 40, 300, 700, 2, 520)
    for i, n in enumerate(sizes):
        first: list[fr.Frame] = [fr.ThreadCreated(thread_id=f"w{i}", meta={"project": f"p{i % 2}"})]
        pg.thread(f"w{i}").append(first + _frames(rng, n))
    assert search(pg, "nothingmatchesthis") == []  # one catch-up: every thread in one batch
    together = _rows(pg)
    assert any(r[2] > 0 for r in together["search_postings"])  # some rows were cut
    for i in range(len(sizes)):
        assert rebuild_search(pg, [pg.thread(f"w{i}")]) == 1
    assert _rows(pg) == together
