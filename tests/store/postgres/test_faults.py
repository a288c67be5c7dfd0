"""The PostgreSQL backend when things go wrong: a connection lost mid-batch leaves no partial
batch, an edited row is a ``CorruptFrame``, a schema from newer code and an unreachable server
are typed errors with one-line messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.errors import (
    CorruptFrame,
    SchemaTooNew,
    StoreNotFound,
    StoreUnavailable,
)
from continuity.store.postgres.schema import SCHEMA_VERSION
from continuity.testing import msg, stored_lines, verify_chain
from tests.support.narrow import narrow
from tests.support.pg import PgStores, schema_for


def _wait_for(stores: PgStores, query: str, params: Any = None, timeout: float = 10.0) -> Any:
    """The first value ``query`` returns once it returns a row (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = stores.sql(query, params)
        if rows:
            return rows[0][0]
        time.sleep(0.005)
    raise AssertionError(f"nothing came of {query!r} in {timeout} s")


def _append_in_background(
    thread: Any, batch: Sequence[fr.Frame]
) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(thread.append(batch))
        except BaseException as exc:  # the test looks at what it was
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    return worker, outcome


def _assert_whole_batches(thread: Any, head_seq: int) -> None:
    lines = stored_lines(thread)
    assert len(lines) == head_seq + 1
    verify_chain(lines)
    head = thread.head()
    assert head is not None and head.seq == head_seq
    assert not narrow(fr.Envelope, fr.envelope(lines[-1])).more


@pytest.mark.parametrize("when", ["before the rows", "after the rows, before the commit"])
def test_a_connection_lost_mid_batch_leaves_no_partial_batch(
    pg_stores: PgStores, tmp_path: Path, when: str
) -> None:
    store = pg_stores.open(tmp_path)
    s = store.schema
    t = store.thread("t")
    t.append([msg(i) for i in range(1, 11)])
    big = [msg(i) for i in range(100, 3100)]
    app = f"continuity-test-{s}"
    holder = pg_stores.connect(application_name=app)
    with holder.transaction():
        if when == "before the rows":
            # The writer locks the head row, then waits for the frames table mid-batch.
            holder.execute(f"LOCK TABLE {s}.frames IN EXCLUSIVE MODE")
        else:
            # The writer copies all its rows, then waits to move the head.
            holder.execute(f"LOCK TABLE {s}.threads IN SHARE MODE")
        worker, outcome = _append_in_background(t, big)
        pid = _wait_for(
            pg_stores,
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND application_name <> %s AND datname = current_database()",
            [app],
        )
        if when != "before the rows":
            copied = pg_stores.sql(f"SELECT count(*) FROM {s}.frames")[0][0]
            assert copied == 11  # the batch's rows are not visible to anyone else
        assert pg_stores.sql("SELECT pg_terminate_backend(%s)", [pid]) == [(True,)]
        worker.join(10)
    holder.close()
    assert len(outcome) == 1 and isinstance(outcome[0], StoreUnavailable), outcome
    said = str(outcome[0])
    # (the server's words, or libpq's when the pipelined append was reading its answers)
    assert "\n" not in said
    assert "terminating connection" in said or "closed the connection unexpectedly" in said
    _assert_whole_batches(t, 10)
    assert pg_stores.sql(f"SELECT count(*) FROM {s}.frames")[0][0] == 11
    assert t.append(msg(11)) == range(11, 12)  # the next append works, on another connection
    _assert_whole_batches(t, 11)


def test_a_connection_lost_while_copying_leaves_no_partial_batch(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path)
    t = store.thread("t")
    t.append(msg(1))
    big = [msg(i, text="y" * 2000) for i in range(2, 20_002)]  # ~40 MB: long enough to catch
    worker, outcome = _append_in_background(t, big)
    pid = _wait_for(
        pg_stores,
        "SELECT pid FROM pg_stat_activity WHERE query LIKE 'COPY%%frames%%' AND state = 'active'",
    )
    pg_stores.sql("SELECT pg_terminate_backend(%s)", [pid])
    worker.join(30)
    assert len(outcome) == 1
    if not isinstance(outcome[0], StoreUnavailable):  # the batch won the race and committed
        assert outcome[0] == range(2, 20_002)
        pytest.skip("the batch committed before the backend was terminated")
    _assert_whole_batches(t, 1)
    assert t.append(msg(2)) == range(2, 3)


# -- edited rows --


@pytest.fixture
def edited(pg_stores: PgStores, tmp_path: Path) -> tuple[Any, PgStores]:
    store = pg_stores.open(tmp_path)
    t = store.thread("t")
    for start in range(1, 601, 100):
        t.append([msg(i) for i in range(start, start + 100)])
    return t, pg_stores


def _frames(t: Any) -> str:
    return f"{t.store.schema}.frames"


def test_an_edited_row_is_a_corrupt_frame(edited: tuple[Any, PgStores]) -> None:
    t, stores = edited
    stores.sql(
        f"UPDATE {_frames(t)} SET line = convert_to(replace(convert_from(line, 'UTF8'), "
        "'message 300', 'message 3oo'), 'UTF8') "
        "WHERE seq = 300"
    )
    reads: list[Callable[[], object]] = [
        lambda: list(t.read_lines()),
        lambda: list(t.read_lines(from_seq=300)),
        lambda: list(t.read_lines(from_seq=250, to_seq=310)),
        lambda: list(t.read_lines_backwards()),
        lambda: list(t.read()),
    ]
    for read in reads:
        with pytest.raises(CorruptFrame) as err:
            read()
        assert (err.value.thread_id, err.value.seq) == ("t", 300), err.value
        assert "does not chain" in err.value.reason
    # Reads that do not reach the edited frame are not refused.
    assert len(list(t.read_lines(to_seq=299))) == 300
    assert len(list(t.read_lines(from_seq=301))) == 300
    assert len(t.tail(5)) == 5


@pytest.mark.parametrize(
    ("edit", "seq", "reason"),
    [
        ("DELETE FROM {f} WHERE seq = 420", 420, "missing"),
        ("UPDATE {f} SET line = 'not a frame'::bytea WHERE seq = 420", 420, "not a sealed frame"),
        ("UPDATE {f} SET seq = seq + 1000 WHERE seq = 600", 600, "missing"),
    ],
)
def test_a_missing_or_unsealed_row_is_a_corrupt_frame(
    edited: tuple[Any, PgStores], edit: str, seq: int, reason: str
) -> None:
    t, stores = edited
    stores.sql(edit.format(f=_frames(t)))
    with pytest.raises(CorruptFrame, match=reason) as err:
        list(t.read_lines())
    assert err.value.seq == seq
    with pytest.raises(CorruptFrame, match=reason):
        list(t.read_lines_backwards())


def test_a_read_starting_after_an_edited_parent_is_refused(edited: tuple[Any, PgStores]) -> None:
    """A read from frame N checks it against N - 1's stored digest: a changed digest there
    is caught though N - 1 itself is not read."""
    t, stores = edited
    line = stores.sql(f"SELECT line FROM {_frames(t)} WHERE seq = 199")[0][0]
    digest = line[-66:-2]
    changed = line[:-66] + (b"0" if digest[:1] != b"0" else b"1") + line[-65:]
    stores.sql(f"UPDATE {_frames(t)} SET line = %s WHERE seq = 199", [changed])
    with pytest.raises(CorruptFrame) as err:
        list(t.read_lines(from_seq=200, to_seq=201))
    assert err.value.seq == 200


def test_a_head_row_behind_its_frames_refuses_appends(edited: tuple[Any, PgStores]) -> None:
    t, stores = edited
    s = t.store.schema
    stores.sql(f"UPDATE {s}.threads SET head_seq = head_seq - 1")
    with pytest.raises(CorruptFrame, match="head row is behind"):
        t.append(msg(9999))


# -- the schema --


def test_a_schema_from_newer_code_is_refused(pg_stores: PgStores, tmp_path: Path) -> None:
    store = pg_stores.open(tmp_path)
    s = store.schema
    store.close()
    pg_stores.sql(
        f"UPDATE {s}.meta SET value = '999' WHERE key IN ('schema_version', 'min_code_version')"
    )
    with pytest.raises(SchemaTooNew, match="upgrade continuity") as err:
        pg_stores.open(tmp_path, create=True)
    assert (err.value.found, err.value.needed, err.value.known) == (999, 999, SCHEMA_VERSION)
    assert "\n" not in str(err.value)


def test_a_newer_schema_that_keeps_older_code_working_is_used(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    """A step that only adds (a derived table) leaves ``min_code_version``: older code goes on."""
    store = pg_stores.open(tmp_path)
    store.thread("t").append(msg(1))
    s = store.schema
    store.close()
    newer = str(SCHEMA_VERSION + 1)
    pg_stores.sql(f"UPDATE {s}.meta SET value = '{newer}' WHERE key = 'schema_version'")
    again = pg_stores.open(tmp_path)
    assert [f.seq for f in again.thread("t").read()] == [0, 1]
    assert pg_stores.sql(f"SELECT value FROM {s}.meta WHERE key = 'schema_version'") == [(newer,)]


def test_no_store_without_create(pg_stores: PgStores, tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound, match="continuity init"):
        pg_stores.open(tmp_path, create=False)
    pg_stores.open(tmp_path, create=True).close()
    pg_stores.open(tmp_path, create=False)  # now there is one


def test_a_schema_of_another_program_is_not_filled(pg_stores: PgStores, tmp_path: Path) -> None:
    schema = schema_for(tmp_path)
    pg_stores.sql(f"CREATE SCHEMA {schema}; CREATE TABLE {schema}.threads (x int)")
    with pytest.raises(StoreNotFound, match="not a continuity store"):
        pg_stores.open(tmp_path, create=True)
    assert pg_stores.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", [schema]
    ) == [(1,)]


def test_a_bad_schema_name_is_refused(pg_stores: PgStores, tmp_path: Path) -> None:
    for bad in ("Upper", "a-b", "x; DROP TABLE y", "", "1abc", "a" * 64):
        with pytest.raises(ValueError, match="invalid schema name"):
            pg_stores.open(tmp_path, schema=bad)


# -- an unreachable server --


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://alice:s3cret-pw@127.0.0.1:1/app", "Connection refused"),
        ("postgresql://alice:s3cret-pw@/app?host=/nonexistent/socket", "No such file"),
    ],
)
def test_an_unreachable_server_is_one_line_without_the_password(url: str, says: str) -> None:
    from continuity.store.postgres import PostgresStore

    with pytest.raises(StoreUnavailable) as err:
        PostgresStore(url, connect_timeout=2)
    text = str(err.value)
    assert "\n" not in text and says in text, text
    assert "s3cret-pw" not in text and "alice@" in text and "/app" in text
    assert text.startswith("cannot connect to PostgreSQL at ")


def test_a_refused_login_is_one_line(pg_url: str) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from continuity.store.postgres import PostgresStore

    params = conninfo_to_dict(pg_url)
    params.update(user="nobody_here", password="hunter2-secret")
    with pytest.raises(StoreUnavailable) as err:
        PostgresStore(make_conninfo(**params))  # type: ignore[arg-type]
    text = str(err.value)
    assert "\n" not in text and "nobody_here" in text and "hunter2" not in text, text
    assert "FATAL" not in text


def test_a_closed_store_says_so(pg_stores: PgStores, tmp_path: Path) -> None:
    store = pg_stores.open(tmp_path)
    store.close()
    store.close()  # twice is harmless
    with pytest.raises(StoreUnavailable, match="closed"):
        store.threads()
