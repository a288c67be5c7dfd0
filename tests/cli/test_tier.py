"""`continuity tier` (ADR 0057): what it moves, what it says, and how it refuses bad input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.store.jsonl import Store

DAY = 86_400_000


def _run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(root), *args])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store = Store(tmp_path / "s", create=True, durable=False)
    old = int(time.time() * 1000) - 90 * DAY
    for tid in ("a", "b"):
        store.thread(tid).append(  # an import keeps the source's times
            [fr.ThreadCreated(thread_id=tid, ts_ms=old)]
            + [
                fr.message("user", f"{tid} message {i} " + "words " * 200, ts_ms=old)
                for i in range(49)
            ]
        )
    store.thread("b").append(fr.message("user", "a new one"))
    return store.root


def test_tier_moves_old_frames_and_the_log_reads_the_same(root: Path) -> None:
    before = _run(root, "log", "b").output
    dry = _run(root, "tier", "--all", "--keep-frames", "0", "--min-size", "0", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would tier thread a: frames 0-49" in dry.output
    assert "would tier thread b: frames 0-49" in dry.output  # the new frame is not old
    assert "dry run: nothing was moved" in dry.output
    assert Store(root).thread("a").cold_end() == 0
    done = _run(root, "tier", "a", "b", "--keep-frames", "0", "--min-size", "0")
    assert done.exit_code == 0, done.output
    assert "tiered 2 threads" in done.output
    assert Store(root).thread("b").cold_end() > 0
    assert _run(root, "log", "b").output == before
    assert _run(root, "verify").exit_code == 0
    again = _run(root, "tier", "--all", "--keep-frames", "0", "--min-size", "0")
    assert again.exit_code == 0 and "nothing to tier" in again.output


def test_the_newest_frames_and_small_stretches_stay(root: Path) -> None:
    kept = _run(root, "tier", "--all")  # 2,000 newest frames stay: nothing is old enough
    assert kept.exit_code == 0 and "nothing to tier" in kept.output
    small = _run(root, "tier", "a", "--keep-frames", "0", "--min-size", "10MB")
    assert small.exit_code == 0 and "left thread a" in small.output
    assert Store(root).thread("a").cold_end() == 0


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        ((), 2, "name the threads to tier, or give --all"),
        (("a", "--all"), 2, "name the threads to tier, or give --all"),
        (("a", "--older-than", "soon"), 2, "bad duration"),
        (("a", "--min-size", "big"), 2, "bad size"),
        (("a", "--keep-frames", "-1"), 2, ""),
        (("nope",), 1, "nope"),
    ],
)
def test_bad_input_is_one_line_and_nothing_moves(
    root: Path, args: tuple[str, ...], code: int, says: str
) -> None:
    result = _run(root, "tier", *args)
    assert result.exit_code == code, result.output
    assert says in result.output
    assert Store(root).thread("a").cold_end() == 0
