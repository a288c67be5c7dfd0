"""Damaged Codex rollouts, ``.jsonl`` and ``.jsonl.zst``, into ``continuity ingest --agent
codex`` (issue 40 item 3): every line the damage did not touch is archived (in a ``.zst``, every
line before the first byte it no longer decompresses to), nothing raises, nothing is lost
without a word. The bounded form of ``tools/faults/ingest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ingest_fuzz import assert_nothing_good_lost
from tools.faults.ingest import MUTATIONS


@pytest.mark.parametrize("mutation", MUTATIONS["codex"])
def test_damaged_rollouts_lose_no_good_line(tmp_path: Path, mutation: str) -> None:
    assert_nothing_good_lost("codex", mutation, tmp_path)


@pytest.mark.parametrize("mutation", MUTATIONS["codex-zst"])
def test_damaged_compressed_rollouts_lose_no_good_line(tmp_path: Path, mutation: str) -> None:
    assert_nothing_good_lost("codex-zst", mutation, tmp_path)
