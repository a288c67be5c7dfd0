"""Damaged opencode databases into ``continuity ingest --agent opencode`` (issue 40 item 3): a
changed leaf page of the session, message or part table, a zeroed one, a file cut at a page,
bad UTF-8, deep nesting, wrong types and a 1 MiB part in a row's data. Every message none of
whose rows is on a changed page is archived, nothing raises, nothing is lost without a word.
The bounded form of ``tools/faults/ingest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ingest_fuzz import assert_nothing_good_lost
from tools.faults.ingest import MUTATIONS


@pytest.mark.parametrize("mutation", MUTATIONS["opencode-db"])
def test_damaged_databases_lose_no_good_session(tmp_path: Path, mutation: str) -> None:
    assert_nothing_good_lost("opencode-db", mutation, tmp_path, trials=2)
