"""A folder store's ``store.json``: a store opens only when its marker says a format and version
this code knows (``contracts/event_frames.md``, "The store's marker"). A newer version is
``SchemaTooNew``, anything else it does not understand ``UnknownStoreFormat``; either way the
store is not opened, so nothing is appended, and the CLI and a hook say why in one line."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity.errors import SchemaTooNew, StoreNotFound, UnknownStoreFormat
from continuity.store.jsonl import STORE_FORMAT, Store
from continuity.testing import msg

NEWER = b'{"format":"continuity-store","version":3}\n'
NOT_UNDERSTOOD = {
    "version-0": b'{"format":"continuity-store","version":0}\n',
    "negative": b'{"format":"continuity-store","version":-1}\n',
    "version-text": b'{"format":"continuity-store","version":"1"}\n',
    "version-true": b'{"format":"continuity-store","version":true}\n',
    "no-version": b'{"format":"continuity-store"}\n',
    "other-format": b'{"format":"something-else","version":1}\n',
    "no-format": b'{"version":1}\n',
    "array": b'[{"format":"continuity-store","version":1}]\n',
    "number": b"1\n",
    "garbage": b"garbage",
    "empty": b"",
    "not-utf8": b"\xff\xfe{}",
}


def a_store_with_marker(root: Path, marker: bytes) -> Path:
    """A store with one thread, whose ``store.json`` is then replaced by ``marker``."""
    Store(root, create=True, durable=False).thread("t").append(msg(1))
    (root / "store.json").write_bytes(marker)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "errors.log"
    }


def test_the_marker_this_code_writes_opens(tmp_path: Path) -> None:
    Store(tmp_path / "s", create=True, durable=False)
    assert json.loads((tmp_path / "s" / "store.json").read_bytes()) == STORE_FORMAT
    Store(tmp_path / "s")


def test_members_a_newer_version_may_add_are_ignored(tmp_path: Path) -> None:
    root = a_store_with_marker(
        tmp_path / "s", b'{"format":"continuity-store","version":1,"written_by":"0.9"}\n'
    )
    assert Store(root).thread("t").append(msg(2)) == range(2, 3)


@pytest.mark.parametrize("create", [False, True])
def test_a_newer_version_is_schema_too_new(tmp_path: Path, create: bool) -> None:
    root = a_store_with_marker(tmp_path / "s", NEWER)
    before = snapshot(root)
    with pytest.raises(SchemaTooNew) as caught:
        Store(root, create=create, durable=False)
    assert (caught.value.found, caught.value.needed, caught.value.known) == (3, 3, 2)
    message = str(caught.value)
    assert "\n" not in message
    assert str(root / "store.json") in message and "upgrade continuity" in message
    assert snapshot(root) == before


@pytest.mark.parametrize("create", [False, True])
@pytest.mark.parametrize("marker", NOT_UNDERSTOOD.values(), ids=NOT_UNDERSTOOD.keys())
def test_a_marker_it_does_not_understand_is_refused(
    tmp_path: Path, marker: bytes, create: bool
) -> None:
    root = a_store_with_marker(tmp_path / "s", marker)
    before = snapshot(root)
    with pytest.raises(UnknownStoreFormat) as caught:
        Store(root, create=create, durable=False)
    message = str(caught.value)
    assert "\n" not in message
    assert str(root / "store.json") in message
    assert '{"format": "continuity-store", "version": 1}' in message  # what it should say
    assert not isinstance(caught.value, StoreNotFound | SchemaTooNew)  # init would not fix it
    assert snapshot(root) == before


def test_the_cli_says_why_in_one_line_and_appends_nothing(tmp_path: Path) -> None:
    from continuity.cli.app import app

    for marker in (NEWER, b"garbage"):
        root = a_store_with_marker(tmp_path / f"s{len(marker)}", marker)
        before = snapshot(root)
        for args in (["append", "t"], ["init"], ["log", "t"]):
            result = CliRunner().invoke(
                app, ["--store", str(root), *args], input='{"role":"user","text":"hello"}\n'
            )
            assert result.exit_code == 1, (args, result.output)
            assert result.stdout == ""
            assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
            assert "store.json" in result.stderr
        assert snapshot(root) == before


@pytest.mark.parametrize("marker", [NEWER, b"garbage"], ids=["newer", "garbage"])
def test_a_hook_says_why_in_one_line_and_exits_0(
    tmp_path: Path,
    marker: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from continuity.agents.claude_code.hooks import main

    root = a_store_with_marker(tmp_path / "s", marker)
    before = snapshot(root)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(
        json.dumps(
            {
                "type": "user",
                "uuid": "u1",
                "sessionId": "s1",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hello"},
            }
        )
        + "\n"
    )
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    assert main(["stop"], store=root) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("continuity: ")
    assert "store.json" in captured.err
    assert snapshot(root) == before
    logged = (root / "errors.log").read_text().splitlines()
    assert len(logged) == 1 and "hook stop: " in logged[0] and "store.json" in logged[0]
