"""A hook whose transcript holds what it cannot read says so in one line (stderr and
``errors.log``) and still exits 0: a binary file is named as one, and the unreadable lines of a
text file are counted and placed. Each is said once: the cursor moves past what was read."""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path

import pytest

from continuity.agents.claude_code.hooks import main


def _prompt(n: int) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "sessionId": "s",
            "timestamp": "2026-01-05T09:00:00Z",
            "cwd": "/work",
            "message": {"role": "user", "content": f"prompt {n}"},
        }
    )


def _hook(
    store: Path,
    transcript: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    event: str = "stop",
) -> str:
    payload = {"session_id": "s", "transcript_path": str(transcript), "cwd": "/work"}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    capsys.readouterr()  # what the test printed before (its seed)
    assert main([event], store=store) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)


def _logged(store: Path) -> list[str]:
    log = store / "errors.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("newlines", [True, False], ids=["with-newlines", "one-line"])
def test_a_binary_transcript_is_named_as_one(
    tmp_path: Path,
    newlines: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    data = random.Random(seed).randbytes(20_000)
    data = data if newlines else data.replace(b"\n", b"\0")
    transcript = tmp_path / "s.jsonl"
    transcript.write_bytes(b"\0\xff" + data)
    store = tmp_path / "store"
    err = _hook(store, transcript, monkeypatch, capsys)
    assert err.count("\n") == 1 and err.startswith("continuity: "), err
    assert str(transcript) in err and "not a text file" in err
    assert len(_logged(store)) == 1 and "not a text file" in _logged(store)[0]
    assert _hook(store, transcript, monkeypatch, capsys, "user-prompt-submit") == ""


def test_unreadable_lines_of_a_transcript_are_counted_and_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("\n".join([_prompt(1), "garbage", _prompt(2), "[1]", ""]))
    store = tmp_path / "store"
    err = _hook(store, transcript, monkeypatch, capsys)
    assert err == (
        f"continuity: {transcript}: 2 unreadable lines skipped (not JSON objects): lines 2, 4\n"
    )
    assert _logged(store)[0].endswith(f"hook stop: {err.removeprefix('continuity: ').strip()}")
    with transcript.open("a") as f:
        f.write(_prompt(3) + "\n")
    assert _hook(store, transcript, monkeypatch, capsys) == ""  # said once


def test_a_clean_transcript_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(_prompt(1) + "\n")
    assert _hook(tmp_path / "store", transcript, monkeypatch, capsys) == ""
    transcript.write_text(_prompt(1) + "\n" + _prompt(2)[:40])  # a line still being written
    assert _hook(tmp_path / "store", transcript, monkeypatch, capsys) == ""
