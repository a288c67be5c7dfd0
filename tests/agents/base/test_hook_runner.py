"""The guarded hook runner (``continuity.agents.base.hook``): a hook that failed before its event
was known logs ``hook (no event)``, never ``hook None``."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from continuity.agents.claude_code.hooks import main


@pytest.mark.parametrize("stdin", [b"[]", b"not json", b'{"transcript_path": "/tmp/x.jsonl"}'])
def test_a_failure_before_the_event_is_known_is_logged_as_no_event(
    tmp_path: Path,
    stdin: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "store"
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    assert main([], store=store) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("continuity: ")
    (logged,) = (store / "errors.log").read_text().splitlines()
    assert " hook (no event): " in logged and "None" not in logged
