"""The benchmark tools still run (a bounded smoke run; the figures themselves are not tested)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
            "hook post-tool-use, one new tool call, 1 MB",
            "hook stop, nothing new, 1 MB",
            "hook session-end, one new turn, 1 MB",
        ]
    for name in commands:
        for what in (name, f"{name}, CPU"):  # the wall time, and the process's CPU time
            before, after = rows[f"{what} (before)"], rows[f"{what} (after)"]
            assert before.median > 0 and after.median > 0
            assert after.baseline == "before" and after.ratio == pytest.approx(
                after.median / before.median
            )
    assert len(rows) == 1 + 4 * len(commands)
    assert not (tmp_path / "bench" / "work").exists() or not any(
        (tmp_path / "bench" / "work").iterdir()
    )


@pytest.mark.slow
def test_bench_agent_loop_runs_and_reports_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    bench = _tool("tools.bench.bench_agent_loop")
    report = bench.run(turns=8, window=3, compact_every=4, big_share=0.5, big_kb=8)
    rows = {r.metric: r for r in report.rows}
    for loop in ("jsonl, log on", "jsonl, log off", "memory"):
        first, last = rows[f"turn, first 3 [{loop}]"], rows[f"turn, last 3 [{loop}]"]
        assert first.n == last.n == 3 and first.median > 0 and last.p90 is not None
        assert last.ratio == pytest.approx(rows[f"  last 3 / first 3 [{loop}]"].median)
        for part in ("append", "compile (recall)", "compile", "render"):
            assert rows[f"  {part}, last 3 [{loop}]"].median > 0
        assert rows[f"run_compaction every 4 turns [{loop}]"].n == 2
    assert rows["turn, first 3 [jsonl, log on]"].target == 6.0
    assert rows["turn, first 3 [memory]"].target == 2.0
    on, off = (
        rows["store total after the run [log on]"],
        rows["store total after the run [log off]"],
    )
    assert on.median > off.median > 0 and on.ratio == pytest.approx(on.median / off.median)
    notes = {n.split(":")[0]: n for n in report.notes}
    assert " 0 context_selection_decided" in notes["jsonl, log off"]
    assert " 0 context_selection_decided" not in notes["jsonl, log on"]
    assert not any((tmp_path / "bench" / "work").iterdir())  # the scratch stores are gone


@pytest.mark.slow
def test_gen_threads_writes_claude_code_threads_deterministically(tmp_path: Path) -> None:
    from continuity import frames as fr
    from continuity.store.jsonl import Store

    gen = _tool("tools.bench.gen_threads")
    logs = []
    for name in ("a", "b"):
        store = Store(tmp_path / name, create=True, durable=False, clock=lambda: 1)
        stats = gen.write_threads(store, 40, seed=3)
        assert stats.threads == len(store.threads()) == 40
        logs.append({p.name: p.read_bytes() for p in (tmp_path / name / "threads").iterdir()})
    assert logs[0] == logs[1]
    store = Store(tmp_path / "a")
    agents = [t for t in store.threads() if ".agent-" in t]
    assert agents and all(t.startswith("cc-") for t in store.threads())
    for tid in store.threads():
        first = next(iter(store.thread(tid).read(to_seq=0)))
        assert isinstance(first, fr.ThreadCreated) and first.meta["source"] == "claude-code"
        assert (first.parent_thread_id is not None) == (".agent-" in tid)
    assert 1_000 < stats.log_bytes / stats.threads < 20_000


def test_a_gen_threads_store_verifies(tmp_path: Path) -> None:
    """Every artifact a generated frame names is in the store (issue 42: the checkpoints named
    made-up summaries, 387 missing at 10,000 threads), and each summary is one compile reads."""
    from continuity import frames as fr
    from continuity.maintenance.verify import verify_store
    from continuity.store.jsonl import Store
    from continuity.summary import decode_summary

    gen = _tool("tools.bench.gen_threads")
    store = Store(tmp_path / "s", create=True, durable=False, clock=lambda: 1)
    gen.write_threads(store, 120, seed=5)
    checkpoints = [
        f
        for tid in store.threads()
        for f in store.thread(tid).read(types=["compaction_checkpoint_created"])
        if isinstance(f, fr.CompactionCheckpointCreated)
    ]
    assert checkpoints  # the seed gives some: the check below is not vacuous
    for cp in checkpoints:
        doc = decode_summary(store.artifacts.get(cp.summary_artifact_id))
        assert doc.to_seq == cp.to_seq and doc.text
    report = verify_store(store)
    assert report.ok, report.problems[:5]


@pytest.mark.slow
def test_bench_catalog_runs_and_reports_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUITY_BENCH_DIR", str(tmp_path / "bench"))
    bench = _tool("tools.bench.bench_catalog")
    report = bench.run(sizes=(30,), repeat=1, cold_repeat=1, baseline=None)
    metrics = [r.metric for r in report.rows]
    assert metrics[0] == "python -c pass"
    for cmd in ("threads", "sessions", "stats"):
        for phase in ("cold", "warm", "warm, 1 thread appended"):
            assert f"{cmd} @30, {phase} (after)" in metrics
    assert all(r.median > 0 for r in report.rows)
    assert not any((tmp_path / "bench" / "work").iterdir())


@pytest.mark.slow
def test_bench_search_fixtures_runs_and_reports_every_row() -> None:
    bench = _tool("tools.bench.bench_search_fixtures")
    if not bench.FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is absent: the benchmark searches the fixture sessions")
    report = bench.run(repeat=1, n_queries=2)
    rows = {r.metric: r for r in report.rows}
    fresh = rows["`continuity search` (fresh process)"]
    assert fresh.n == 2 and fresh.median > 0 and fresh.target == bench.TARGET_MS
    assert rows["search / import continuity"].ratio == pytest.approx(
        fresh.median / rows["baseline: python -c 'import continuity'"].median
    )
    assert rows["search() in-process (warm)"].n == 2


@pytest.mark.slow
def test_bench_search_warm_runs_and_reports_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from continuity.store.jsonl import Store

    gen = _tool("tools.bench.gen_threads")
    store = Store(tmp_path / "s", create=True, durable=False, clock=lambda: 1)
    gen.write_threads(store, 20, seed=2)
    before = sorted(p.name for p in (tmp_path / "s").rglob("*"))
    bench = _tool("tools.bench.bench_search_warm")
    bench.main(
        ["--store", str(tmp_path / "s"), "--repeat", "1", "--queries", "parser,zzz", "--json"]
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert set(rows) == {"floor", "search parser this", "search zzz this"}
    assert all(row["median_ms"] > 0 for row in rows.values())
    assert sorted(p.name for p in (tmp_path / "s").rglob("*")) == before  # searched a copy
