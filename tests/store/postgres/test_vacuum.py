"""What ``delete`` leaves in a PostgreSQL server's files, and ``delete --vacuum`` (issue 40 item
5): the deleted rows' bytes stay in the table and index files after the DELETE commits (and after
a checkpoint writes the pages out); ``--vacuum`` rewrites the store's tables so the text is gone
from every one of its relation files. Read from the real server's data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.paths import with_schema
from tests.support.pg import PgStores

SECRET = b"vacuum-marker-7f3a9c1e5b"


def _files_holding(stores: PgStores, schema: str, needle: bytes) -> list[str]:
    """The relation files (tables, indexes, TOAST and their indexes) of ``schema`` that hold
    ``needle``, after a checkpoint has written every page out."""
    stores.sql("CHECKPOINT")
    data = Path(stores.sql("SHOW data_directory")[0][0])
    rows = stores.sql(
        "WITH own AS (SELECT c.oid, c.reltoastrelid FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s) "
        "SELECT pg_relation_filepath(x.oid) FROM pg_class x WHERE x.oid IN (SELECT oid FROM own) "
        "OR x.oid IN (SELECT reltoastrelid FROM own) OR x.oid IN (SELECT indexrelid FROM "
        "pg_index WHERE indrelid IN (SELECT reltoastrelid FROM own))",
        [schema],
    )
    found = []
    for (rel,) in rows:
        if rel is None:
            continue
        base = data / rel
        for path in [base, *base.parent.glob(base.name + ".*")]:
            try:
                if needle in path.read_bytes():
                    found.append(path.name)
            except PermissionError:
                pytest.skip(f"the server's files cannot be read here ({path})")
            except FileNotFoundError:
                continue
    return found


def test_delete_leaves_the_text_in_the_servers_files_and_vacuum_removes_it(
    pg_stores: PgStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    store = pg_stores.open(tmp_path, durable=True)
    store.thread("secret").append(fr.message("user", f"the key is {SECRET.decode()}"))
    store.thread("kept").append(fr.message("user", "nothing to hide"))
    assert _files_holding(pg_stores, store.schema, SECRET)  # the frames table holds it
    url = with_schema(pg_stores.url, store.schema)

    done = CliRunner().invoke(app, ["--store", url, "delete", "secret", "--yes"])
    assert done.exit_code == 0, done.output
    assert _files_holding(pg_stores, store.schema, SECRET)  # deleted, yet on disk

    done = CliRunner().invoke(app, ["--store", url, "delete", "secret", "--vacuum"])
    assert done.exit_code == 0, done.output
    assert "rewrote" in done.output and "checkpoint" in done.output, done.output
    assert _files_holding(pg_stores, store.schema, SECRET) == []
    assert [seq for seq, _ in store.thread("kept").read_lines()] == [0, 1]
