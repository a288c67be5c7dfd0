"""``continuity demo``: the scripted session through the real hooks, end to end."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.claude_code.transcript import read_records
from continuity.cli.app import app
from continuity.demo import print_report, run_demo
from continuity.maintenance.verify import verify_store
from continuity.store.jsonl import Store


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reaches the real default store or leaves a folder in the real temp dir."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def _frames(store: Store, thread_id: str) -> list[fr.Frame]:
    return list(store.thread(thread_id).read())


def test_demo_on_the_configured_store(tmp_path: Path, _isolated: Path) -> None:
    root = tmp_path / "store"
    result = CliRunner().invoke(app, ["--store", str(root), "demo", "--verbose"])
    assert result.exit_code == 0, result.stdout + result.stderr
    out = result.stdout
    assert "the context restored to Claude" in out
    assert "# Restored by continuity from the archive of this session" in out
    assert "context_selection_decided" in out
    assert str(root) in out

    store = Store(root)
    threads = [t for t in store.threads() if t.startswith("cc-demo-")]
    assert len(threads) == 1
    assert threads[0] in out
    report = verify_store(store)
    assert report.ok, report.problems
    frames = _frames(store, threads[0])
    checkpoints = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert [c.produced_by for c in checkpoints] == ["claude-code"]
    assert checkpoints[0].summary_kind == "cumulative_v1"
    decisions = [f for f in frames if isinstance(f, fr.ContextSelectionDecided)]
    assert len(decisions) == 1
    assert decisions[0].anchor_seq == checkpoints[0].to_seq
    assert list(_isolated.iterdir()) == []  # the transcript's temporary folder is gone


def test_temp_store_leaves_nothing_behind(_isolated: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--temp-store"])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "a temporary store, deleted at the end" in " ".join(result.stdout.split())
    assert list(_isolated.iterdir()) == []
    assert not (Path.home() / ".local" / "share" / "continuity").exists()


def test_keep_keeps_the_transcript_and_the_temp_store(_isolated: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--temp-store", "--keep"])
    assert result.exit_code == 0, result.stdout + result.stderr
    [work] = list(_isolated.iterdir())
    [transcript] = list(work.glob("projects/-home-demo-projects-invoice-service/demo-*.jsonl"))
    assert str(transcript) in result.stdout
    assert verify_store(Store(work / "store")).ok


def test_a_failure_is_one_line_and_exit_1(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    result = CliRunner().invoke(app, ["--store", str(not_a_folder), "demo"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: ")


def test_the_hooks_archive_what_a_one_shot_ingest_does(tmp_path: Path, tmp_store: Store) -> None:
    result = run_demo(tmp_store, tmp_path / "work")
    assert 0 < len(result.restored) <= 9_500
    assert 0 < len(result.guidance) <= 2_000
    assert "Prefetch customers in load_for_export" in result.guidance
    # what Claude's summary drops and the restore gives back
    assert "test_header_row" in result.restored
    assert "python -m pytest tests/test_export.py -q" in result.restored
    assert "invoices/repository.py" in result.restored
    a = result.archive
    assert a.prompts == 5
    assert a.tool_calls["Bash"] == 8 and a.tool_calls["Edit"] == 7
    assert a.tool_results == sum(a.tool_calls.values())
    assert any("large Bash output" in what for _, what, _ in a.artifacts)
    assert a.problems == []

    # the transcript is well formed, and the hooks lost nor duplicated anything
    read = read_records(result.transcript)
    assert "<not json>" not in read.skipped and "<not object>" not in read.skipped
    assert read.skipped["progress"] > 0
    fresh = Store(tmp_path / "fresh", create=True, durable=False)
    ingest_transcript(fresh, result.transcript, final=True)

    def messages(store: Store) -> list[tuple[str, str | None, list[fr.ContentBlock]]]:
        return [
            (f.role, f.source.key if f.source else None, f.content)
            for f in _frames(store, result.thread_id)
            if isinstance(f, fr.MessageAppended)
        ]

    assert messages(tmp_store) == messages(fresh)


@pytest.mark.parametrize("styled", [False, True])
def test_report_renders_plain_and_styled(tmp_path: Path, tmp_store: Store, styled: bool) -> None:
    result = run_demo(tmp_store, tmp_path / "work")
    out = io.StringIO()
    print_report(result, out, verbose=True, styled=styled)
    text = out.getvalue()
    assert result.thread_id in text
    assert "recent_messages_v1" in text or "summaries_recent_messages_v1" in text
    assert text.startswith("== ") is not styled
