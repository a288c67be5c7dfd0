"""The benchmark tools still run (a bounded smoke run; the figures themselves are not tested)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> ModuleType:
    # ``tools`` is a folder of the checkout, not an installed package.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)


def _in_a_git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    probe = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_bench_versions_compares_two_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _in_a_git_checkout():
        pytest.skip("bench_versions extracts a git revision: this is not a git checkout")
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    bench = _tool("tools.bench.bench_versions")
    report = bench.run(baseline="HEAD", frames=2_000, transcript_mb=1, repeat=1)
    rows = {r.metric: r for r in report.rows}
    commands = ["continuity compile --dry-run @2k", "continuity search (command) @2k"]
    if bench.FIXTURES.is_dir():
        commands += [
            "hook user-prompt-submit, one new turn, 1 MB",
            "hook session-start (compact) after a compaction, 1 MB",
        ]
    for name in commands:
        before, after = rows[f"{name} (before)"], rows[f"{name} (after)"]
        assert before.median > 0 and after.median > 0
        assert after.baseline == "before" and after.ratio == pytest.approx(
            after.median / before.median
        )
    assert len(rows) == 1 + 2 * len(commands)
    assert not (tmp_path / "bench" / "work").exists() or not any(
        (tmp_path / "bench" / "work").iterdir()
    )
