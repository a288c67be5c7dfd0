"""Damaged Claude Code transcripts into ``continuity ingest`` (issue 40 item 3): every line the
damage did not touch is archived, nothing raises, nothing is lost without a word. The bounded
form of ``tools/faults/ingest.py`` (``python -m tools.faults.ingest`` runs it at full size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ingest_fuzz import assert_nothing_good_lost
from tools.faults.ingest import MUTATIONS


@pytest.mark.parametrize("mutation", MUTATIONS["claude-code"])
def test_damaged_transcripts_lose_no_good_line(tmp_path: Path, mutation: str) -> None:
    assert_nothing_good_lost("claude-code", mutation, tmp_path)
