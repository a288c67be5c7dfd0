"""What `continuity ingest --agent codex` does with a damaged rollout (issue 40 item 3): a line
nested 100,000 deep costs that line, said in one line with exit 1; a ``.jsonl.zst`` cut short
keeps what decompresses before the cut and says it was cut; a file that is not zstd is named."""

from __future__ import annotations

import random
from pathlib import Path

import zstandard
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.store.jsonl import Store
from tools.faults.ingest import SESSION_ID, make_session


def _ingest(store: Path, path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["--store", str(store), "ingest", "--agent", "codex", str(path)]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def _texts(store: Path) -> list[str]:
    thread = Store(store).thread(f"codex-{SESSION_ID}")
    frames = [f for f in thread.read() if isinstance(f, fr.MessageAppended)]
    return [b.text for f in frames for b in f.content if isinstance(b, fr.TextBlock)]


def test_a_deeply_nested_line_costs_that_line_only(tmp_path: Path) -> None:
    session = make_session("codex", 10, random.Random(1))
    deep = b'{"type":"response_item","payload":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    lines = [*session.lines[:3], deep, *session.lines[3:]]
    path = tmp_path / session.name
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = _ingest(tmp_path / "store", path)
    assert code == 1
    assert out.startswith("1 rollout: 10 new messages")
    assert err.splitlines() == [
        f"error: not archived (1 line): {path} line 4 (nested deeper than 256 levels)"
    ]
    assert len(_texts(tmp_path / "store")) == 10


def test_a_cut_compressed_rollout_keeps_what_comes_before_the_cut(tmp_path: Path) -> None:
    session = make_session("codex", 400, random.Random(2))
    plain = b"\n".join(session.lines) + b"\n"
    obj = zstandard.ZstdCompressor().compressobj()
    packed = bytearray()
    for i in range(0, len(plain), 8192):  # as a writer flushing as it goes
        packed += obj.compress(plain[i : i + 8192])
        packed += obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    packed += obj.flush()
    path = tmp_path / (session.name + ".zst")
    cut = len(packed) * 2 // 3
    path.write_bytes(bytes(packed[:cut]))
    code, out, err = _ingest(tmp_path / "store", path)
    kept = len(_texts(tmp_path / "store"))
    assert 100 < kept < 400
    assert code == 1
    assert out.startswith(f"1 rollout: {kept} new messages")
    (line,) = err.splitlines()
    assert line.startswith(f"error: not archived (1 cut file): {path} (cut short: it ends ")
    assert f"at byte {cut};" in line
    # said again, and nothing appended twice, on the next run
    code, out, err = _ingest(tmp_path / "store", path)
    assert (code, out.split(":")[1].strip().split(",")[0]) == (1, "0 new messages")
    assert len(_texts(tmp_path / "store")) == kept


def test_a_file_that_is_not_zstd_is_named(tmp_path: Path) -> None:
    path = tmp_path / f"rollout-2026-03-01T10-00-00-{SESSION_ID}.jsonl.zst"
    path.write_bytes(b'{"not": "compressed"}\n')
    code, _, err = _ingest(tmp_path / "store", path)
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(f"error: not archived (1 file): {path} (not a zstandard file")
