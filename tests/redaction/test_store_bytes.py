"""No secret reaches the disk (issue 40): samples of the large corpus (tools/redaction_formats.py)
pushed through the Python API (a ``Store`` opened with a ``Redactor``: message text, a tool's
input and output, a large output kept as an artifact, a record, a thread's title) and through
the Claude Code, Codex and Gemini CLI ingests; then every byte of the store (not the agent's own
file beside it) is scanned, zstd
artifacts decompressed, for any 12 characters of any secret. A control run of each path without
a redactor finds every secret, so the scan can see what it looks for."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zstandard

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.codex.ingest import ingest_rollout
from continuity.agents.gemini.ingest import ingest_file
from continuity.context.records import record
from continuity.redaction import Redactor
from continuity.store.jsonl import Store
from tests.support.transcripts import Transcript
from tools.redaction_formats import Planted, planted

pytestmark = pytest.mark.slow

_LINE = "log line that pads the output past the artifact threshold\n"
_FILLER = _LINE * 300  # past the ingests' 16 KiB: the output is kept as a zstd artifact
_RECORD_FILLER = _LINE * 1200  # past a record frame's 64 KiB


def _output(i: int, text: str) -> str:
    """A tool's output: every fifth one large enough to be an artifact."""
    return _FILLER + text if i % 5 == 0 else text


def _samples() -> list[Planted]:
    """One sample per format and kind of context (a few hundred), each one the redactor finds
    whole in a text: what is checked here is that every path applies it, not the rules."""
    redactor = Redactor()
    seen: set[tuple[str, str]] = set()
    out: list[Planted] = []
    for p in planted():
        key = (p.format, p.context if p.kind == "key" else p.kind)
        if key in seen:
            continue
        text, _ = redactor.redact_text(p.text)
        if any(f in text for f in p.fragments):
            continue
        seen.add(key)
        out.append(p)
    return out


SAMPLES = _samples()


def _bytes_of(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Every file under ``root``, zstd frames decompressed (an artifact, a compressed segment)."""
    dctx = zstandard.ZstdDecompressor()
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if data[:4] == b"\x28\xb5\x2f\xfd":
            data = dctx.stream_reader(data).read()
        yield path, data


def _found(root: Path, samples: list[Planted]) -> list[str]:
    """The samples any fragment of which is somewhere in the store (raw or JSON-escaped)."""
    blobs = [data for _, data in _bytes_of(root)]
    hit: list[str] = []
    for s in samples:
        for fragment in s.fragments:
            needles = {fragment.encode(), json.dumps(fragment)[1:-1].encode()}
            if any(n in blob for blob in blobs for n in needles):
                hit.append(f"{s.format} [{s.kind}] ({s.context})")
                break
    return hit


def _api(root: Path, samples: list[Planted], redactor: Redactor | None) -> None:
    store = Store(root / "store", create=True, durable=False, redactor=redactor)
    for i in range(0, len(samples), 20):
        chunk = samples[i : i + 20]
        thread = store.thread(f"api-{i}")
        # a title is a sample's first line or two (never a key's body cut from its BEGIN and END)
        title = next((s.text[:200] for s in chunk if s.kind != "key"), "a title")
        frames: list[fr.Frame] = [fr.ThreadCreated(title=title)]
        for j, s in enumerate(chunk):
            use = f"t{i}-{j}"
            frames += [
                fr.message("user", s.text),
                fr.message(
                    "assistant",
                    content=[
                        fr.TextBlock(text="running it"),
                        fr.ToolUseBlock(id=use, name="Bash", input={"command": s.text}),
                    ],
                ),
                fr.message(
                    "user",
                    content=[fr.ToolResultBlock(tool_use_id=use, content=_output(j, s.text))],
                ),
            ]
        thread.append(frames)
        record(thread, "test.notes", {"all": [s.text for s in chunk]})
        record(thread, "test.large", {"pad": _RECORD_FILLER, "all": [s.text for s in chunk]})


def _claude_code(root: Path, samples: list[Planted], redactor: Redactor | None) -> None:
    store = Store(root / "store", create=True, durable=False)
    transcript = Transcript(root / "session.jsonl", "5e3c1d2a-0000-4000-8000-00000000c1a0", "/w")
    for i, s in enumerate(samples):
        transcript.prompt(s.text)
        transcript.tool("Bash", {"command": s.text}, _output(i, s.text))
        transcript.say(s.text)
    transcript.flush()
    ingest_transcript(store, transcript.path, final=True, redactor=redactor)


def _codex(root: Path, samples: list[Planted], redactor: Redactor | None) -> None:
    store = Store(root / "store", create=True, durable=False)
    sid = "01a217e0-136e-7893-bf7e-58b4451a7500"
    lines: list[dict[str, object]] = [
        {
            "timestamp": "2026-11-26T12:41:30.887Z",
            "type": "session_meta",
            "payload": {
                "id": sid,
                "session_id": sid,
                "timestamp": "2026-11-26T12:41:30.746Z",
                "cwd": "/w",
                "originator": "codex_cli_rs",
                "cli_version": "0.169.0",
            },
        }
    ]
    for i, s in enumerate(samples):
        stamp = f"2026-11-26T12:{42 + i // 60:02d}:{i % 60:02d}.000Z"
        items: list[dict[str, object]] = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": s.text}],
            },
            {
                "type": "function_call",
                "name": "exec_command",
                "call_id": f"call_{i}",
                "arguments": json.dumps({"cmd": s.text}),
            },
            {"type": "function_call_output", "call_id": f"call_{i}", "output": _output(i, s.text)},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": s.text}],
            },
        ]
        lines += [{"timestamp": stamp, "type": "response_item", "payload": p} for p in items]
    path = root / "rollout-2026-11-26T12-41-30-01a217e0-136e-7893-bf7e-58b4451a7500.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingest_rollout(store, path, final=True, redactor=redactor)


def _gemini(root: Path, samples: list[Planted], redactor: Redactor | None) -> None:
    store = Store(root / "store", create=True, durable=False)
    lines: list[dict[str, object]] = [
        {
            "sessionId": "2c5fb175-e316-4b2a-98e2-6835ae661500",
            "projectHash": "ab" * 32,
            "startTime": "2026-11-26T12:42:14.050Z",
            "lastUpdated": "2026-11-26T12:42:14.050Z",
            "kind": "main",
        }
    ]
    for i, s in enumerate(samples):
        stamp = f"2026-11-26T13:{i // 60:02d}:{i % 60:02d}.000Z"
        call = f"run_shell_command_{i}"
        lines.append(
            {"id": f"u{i}", "timestamp": stamp, "type": "user", "content": [{"text": s.text}]}
        )
        lines.append(
            {
                "id": f"g{i}",
                "timestamp": stamp,
                "type": "gemini",
                "content": s.text,
                "thoughts": [],
                "model": "gemini-2.5-pro",
                "toolCalls": [
                    {
                        "id": call,
                        "name": "run_shell_command",
                        "args": {"command": s.text},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": call,
                                    "name": "run_shell_command",
                                    "response": {"output": _output(i, s.text)},
                                }
                            }
                        ],
                        "status": "success",
                        "timestamp": stamp,
                    }
                ],
            }
        )
    path = root / "session-2026-11-26T12-42-2c5fb175.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingest_file(store, path, final=True, redactor=redactor)


PATHS: dict[str, Callable[[Path, list[Planted], Redactor | None], None]] = {
    "python-api": _api,
    "claude-code": _claude_code,
    "codex": _codex,
    "gemini": _gemini,
}


def test_the_samples_cover_every_kind_and_hundreds_of_formats() -> None:
    assert {s.kind for s in SAMPLES} == {"token", "keyed", "password", "key"}
    assert len({s.format for s in SAMPLES}) >= 300


@pytest.mark.parametrize("path", list(PATHS))
def test_no_fragment_of_a_secret_is_in_any_byte_of_the_store(tmp_path: Path, path: str) -> None:
    write = PATHS[path]
    write(tmp_path / "control", SAMPLES, None)
    control = _found(tmp_path / "control" / "store", SAMPLES)
    # without a redactor the scan finds every secret: it sees what it looks for
    missing = [f"{s.format} [{s.kind}] ({s.context})" for s in SAMPLES]
    assert sorted(set(missing) - set(control)) == []
    assert len(control) == len(SAMPLES)
    write(tmp_path / "redacted", SAMPLES, Redactor())
    assert _found(tmp_path / "redacted" / "store", SAMPLES) == []
