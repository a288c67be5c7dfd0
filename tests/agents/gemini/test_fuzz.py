"""Damaged Gemini CLI sessions (``.jsonl``) into ``continuity ingest --agent gemini`` (issue 40
item 3): every line the damage did not touch is archived (a notice over 64 KiB too), nothing
raises, nothing is lost without a word. The bounded form of ``tools/faults/ingest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ingest_fuzz import assert_nothing_good_lost
from tools.faults.ingest import MUTATIONS


@pytest.mark.parametrize("mutation", MUTATIONS["gemini"])
def test_damaged_sessions_lose_no_good_line(tmp_path: Path, mutation: str) -> None:
    assert_nothing_good_lost("gemini", mutation, tmp_path)
