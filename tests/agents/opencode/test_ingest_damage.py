"""A damaged opencode database (issue 40 item 3): bytes that are not UTF-8 in a row cost their
characters, not a traceback; a damaged page costs the rows on it — named, exit 1 — and every
other session is archived."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from continuity.cli.app import app
from tools.faults.ingest import make_db


def _ingest(store: Path, db: Path) -> tuple[int, str, str]:
    args = ["--store", str(store), "ingest", "--agent", "opencode", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def test_bytes_that_are_not_utf8_cost_their_characters(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    where = make_db(db, 3, 4, random.Random(1))
    data = db.read_bytes()
    marker = sorted(where)[5]
    at = data.index(marker.encode())
    db.write_bytes(data[:at] + b"\xff\xfe" + data[at + 2 :])  # in place: the page stays whole
    code, out, err = _ingest(tmp_path / "store", db)
    assert (code, err) == (0, "")
    assert "12 new messages" in out


def test_a_damaged_page_costs_only_the_rows_on_it(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    make_db(db, 20, 10, random.Random(2))
    con = sqlite3.connect(db)
    size = con.execute("PRAGMA page_size").fetchone()[0]
    pages = con.execute(
        "SELECT pageno FROM dbstat WHERE name = 'part' AND pagetype = 'leaf' ORDER BY pageno"
    ).fetchall()
    con.close()
    page = pages[len(pages) // 2][0]
    data = bytearray(db.read_bytes())
    data[(page - 1) * size : page * size] = bytes(size)
    db.write_bytes(bytes(data))
    code, out, err = _ingest(tmp_path / "store", db)
    assert code == 1
    assert out.startswith("ingested 20 opencode sessions into ")  # a thread each with a part
    archived = int(out.split(": ")[1].split(" new")[0])
    (line,) = err.splitlines()
    lost = int(line.split("(")[1].split(" record")[0])
    assert archived + lost == 200 and 0 < lost < 40
    assert "(its parts are on a damaged page)" in line
