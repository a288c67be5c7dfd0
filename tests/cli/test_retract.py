"""`continuity retract`: take messages back from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.context.retract import live_messages
from continuity.store.jsonl import Store


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store = Store(tmp_path / "s", create=True, durable=False)
    store.thread("t").append(
        [
            fr.message("user", "my password is hunter2, fix the login", message_id="u1"),
            fr.message("assistant", "Looking at the login.", message_id="a1"),
            fr.message("user", "also the logout", message_id="u2"),
        ]
    )
    return tmp_path / "s"


def _run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(root), *args])


def test_retract_by_id_seq_and_last(root: Path) -> None:
    res = _run(root, "retract", "t", "--message-id", "u1", "--reason", "pasted a secret")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == "4"
    again = _run(root, "retract", "t", "--seq", "1")
    assert again.exit_code == 0 and "retracted already" in again.stdout
    last = _run(root, "retract", "t", "--last")
    assert last.exit_code == 0 and last.stdout.strip() == "5  retracted seq 3 (user)"
    thread = Store(root).thread("t")
    assert [m.message_id for m in live_messages(thread)] == ["a1"]
    log = _run(root, "log", "t").stdout
    assert "[retracted] user: my password" in log and "retracted seq 1: pasted a secret" in log
    compiled = json.loads(_run(root, "compile", "t", "--dry-run").stdout)
    assert [m["message_id"] for m in compiled["items"]] == ["a1"]


def test_retract_refuses_bad_input(root: Path) -> None:
    before = (root / "threads" / "t.jsonl").read_bytes()
    nothing = _run(root, "retract", "t")
    assert nothing.exit_code == 2 and "--seq N, --message-id ID or --last" in nothing.stderr
    both = _run(root, "retract", "t", "--last", "--seq", "1")
    assert both.exit_code == 2
    missing = _run(root, "retract", "t", "--message-id", "nope")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == (
        "error: retract: no live message with id 'nope' in 't' (nothing was written)"
    )
    not_a_message = _run(root, "retract", "t", "--seq", "9")
    assert not_a_message.exit_code == 1 and "seq 9 is not a message" in not_a_message.stderr
    unknown = _run(root, "retract", "zz", "--seq", "1")
    assert unknown.exit_code == 1 and "no thread 'zz'" in unknown.stderr
    assert (root / "threads" / "t.jsonl").read_bytes() == before
