"""``tools.bench.bench_agent_overhead`` runs the real agent CLIs (installed from npm into the
test cache) with and without continuity: a bounded run reports every world's row."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.agents
def test_bench_agent_overhead_runs_the_real_cli_in_each_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    bench = importlib.import_module("tools.bench.bench_agent_overhead")
    exes, notes = bench.available(["claude-code"])
    if not exes:
        pytest.skip(f"no cached Claude Code CLI: {notes}")
    report = bench.run(rounds=1, names=("claude-code",), turns=1)
    rows = {r.metric: r for r in report.rows}
    for what in ("wall", "CPU"):
        base = rows[f"claude-code: session {what}, without"]
        assert base.median > 0 and base.n == 1
        for world in ("hooks", "hooks + MCP"):
            row = rows[f"claude-code: session {what}, {world}"]
            assert row.baseline == "without"
            assert row.ratio == pytest.approx(row.median / base.median)
    assert len(rows) == 6
