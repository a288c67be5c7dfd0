"""The contracts in ``contracts/`` agree with the code, and logs written by v1 keep reading.

``tests/data/golden_v1.jsonl`` was written once by the v1 code (run this file as a script to
recreate it in an empty checkout; it refuses to overwrite). It must never be regenerated to make a
test pass: a failure here means a change broke old logs, which the schema-evolution rules in
``contracts/event_frames.md`` forbid.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

from continuity import frames as fr
from continuity.caches.thread_index import CheckpointEntry, Manifest, Watermark
from continuity.context.bundle import (
    ContextBundle,
    MessageItem,
    SummaryItem,
    ToolStubBlock,
    bundle_bytes,
    bundle_id,
    decode_bundle,
)
from continuity.store.jsonl import Store
from continuity.summary import SummaryDoc, decode_summary, summary_bytes

ROOT = Path(__file__).resolve().parents[2]
FRAMES_DOC = ROOT / "contracts" / "event_frames.md"
GOLDEN_V1 = Path(__file__).resolve().parents[1] / "data" / "golden_v1.jsonl"
GOLDEN_V1_THREAD = "golden-v1"


def _load_gen_contracts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_contracts", ROOT / "tools/gen_contracts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


gen_contracts = _load_gen_contracts()


# --- generated contracts ----------------------------------------------------------------------


@pytest.mark.parametrize("contract", gen_contracts.CONTRACTS, ids=lambda c: c.path)
def test_committed_contract_matches_code(contract: Any) -> None:
    committed = ROOT / contract.path
    assert committed.is_file(), f"{contract.path} is missing: run `python tools/gen_contracts.py`"
    assert committed.read_bytes() == contract.render(), (
        f"{contract.path} differs from the schema generated from the code: if the change is "
        "intended (and follows contracts/event_frames.md), run `python tools/gen_contracts.py` "
        "and commit the result"
    )


def test_frame_schema_names_every_frame_type() -> None:
    schema = msgspec.json.decode((ROOT / "contracts/event_frames.schema.json").read_bytes())
    assert sorted(schema["discriminator"]["mapping"]) == sorted(fr.frame_types())


def test_check_mode_reports_a_stale_contract(tmp_path: Path) -> None:
    stale = gen_contracts.Contract("stale.json", lambda: b"{}\n")
    (tmp_path / "stale.json").write_bytes(b"{ }\n")
    assert gen_contracts.stale_contracts(tmp_path, [stale]) == ["stale.json"]
    gen_contracts.write_contracts(tmp_path, [stale])
    assert gen_contracts.stale_contracts(tmp_path, [stale]) == []


# --- the prose contract documents every tag and field -----------------------------------------


_BLOCK_CLASSES = (
    fr.TextBlock,
    fr.ThinkingBlock,
    fr.ToolUseBlock,
    fr.ToolResultBlock,
    fr.ImageBlock,
    fr.ProviderBlock,
)
_HEADING = re.compile(r"^(#+)\s+(.*)$", re.MULTILINE)


def _tag(cls: type[msgspec.Struct]) -> str:
    return str(cls.__struct_config__.tag)


def _frame_classes() -> dict[str, type[msgspec.Struct]]:
    found: dict[str, type[msgspec.Struct]] = {_tag(c): c for c in fr.FrameBase.__subclasses__()}
    assert sorted(found) == sorted(fr.frame_types()), "every FrameBase subclass is a frame type"
    return found


def _section(doc: str, tag: str) -> str:
    """The text under the heading that names ``tag`` in backticks, up to the next heading of the
    same or a higher level."""
    headings = list(_HEADING.finditer(doc))
    for i, h in enumerate(headings):
        if f"`{tag}`" in h.group(2):
            level = len(h.group(1))
            end = len(doc)
            for later in headings[i + 1 :]:
                if len(later.group(1)) <= level:
                    end = later.start()
                    break
            return doc[h.end() : end]
    raise AssertionError(f"no heading names `{tag}`")


def _in_heading_or_table(doc: str, tag: str) -> bool:
    """``tag`` (in backticks) is in a heading or is the first cell of a table row."""
    for line in doc.splitlines():
        if line.startswith("#") and f"`{tag}`" in line:
            return True
        if re.match(rf"\|\s*`{re.escape(tag)}`\s*\|", line.lstrip()):
            return True
    return False


def test_every_frame_type_is_documented() -> None:
    doc = FRAMES_DOC.read_text(encoding="utf-8")
    missing = [t for t in fr.frame_types() if not _in_heading_or_table(doc, t)]
    assert not missing, f"frame types missing from {FRAMES_DOC.name}: {missing}"


def test_every_content_block_type_is_documented() -> None:
    doc = FRAMES_DOC.read_text(encoding="utf-8")
    missing = [_tag(c) for c in _BLOCK_CLASSES if not _in_heading_or_table(doc, _tag(c))]
    assert not missing, f"content block types missing from {FRAMES_DOC.name}: {missing}"
    assert set(fr.Block.__subclasses__()) == set(_BLOCK_CLASSES), "update _BLOCK_CLASSES"


def test_every_field_is_documented_under_its_type() -> None:
    doc = FRAMES_DOC.read_text(encoding="utf-8")
    envelope = {f.name for f in msgspec.structs.fields(fr.FrameBase)}
    undocumented: list[str] = []
    for tag, cls in [*_frame_classes().items(), *((_tag(c), c) for c in _BLOCK_CLASSES)]:
        section = _section(doc, tag)
        for field in msgspec.structs.fields(cls):
            if field.name in envelope:
                continue
            if not re.search(rf"^\|\s*`{field.encode_name}`", section, re.MULTILINE):
                undocumented.append(f"{tag}.{field.encode_name}")
    for cls in (fr.FrameBase, fr.SourceRef, fr.CheckpointRef, fr.Limits, fr.SeqSpan, fr.ForkPoint):
        section = _section(doc, cls.__name__)
        for field in msgspec.structs.fields(cls):
            if not re.search(rf"^\|\s*`{field.encode_name}`", section, re.MULTILINE):
                undocumented.append(f"{cls.__name__}.{field.encode_name}")
    assert not undocumented, f"fields without a table row in {FRAMES_DOC.name}: {undocumented}"


def test_line_format_example_in_the_contract_verifies() -> None:
    doc = FRAMES_DOC.read_text(encoding="utf-8")
    found = re.search(r"```jsonl\n(.*?)```", doc, re.DOTALL)
    assert found, "the contract shows an example log in a ```jsonl block"
    prev = fr.GENESIS_DIGEST
    lines = found.group(1).encode().splitlines()
    for seq, line in enumerate(lines):
        sealed = fr.unseal(line)
        assert sealed is not None, f"example line {seq} is not sealed"
        assert fr.chain(prev, sealed[0]) == sealed[1], f"example line {seq} does not chain"
        assert fr.decode_frame(line).seq == seq
        prev = sealed[1]
    assert [fr.decode_frame(line).more for line in lines] == [True, True, False]


# --- the bundle, summary and cache contracts --------------------------------------------------

CONTRACTS_DIR = ROOT / "contracts"


@pytest.mark.parametrize(
    ("doc", "heading", "cls"),
    [
        ("context_bundle.md", "ContextBundle", ContextBundle),
        ("context_bundle.md", "summary_ref", SummaryItem),
        ("context_bundle.md", "message", MessageItem),
        ("context_bundle.md", "tool_stub", ToolStubBlock),
        ("summary.md", "SummaryDoc", SummaryDoc),
        ("caches.md", "checkpoints.v1.jsonl", CheckpointEntry),
        ("caches.md", "Manifest", Manifest),
        ("caches.md", "Watermark", Watermark),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_every_field_of_the_other_contracts_is_documented(
    doc: str, heading: str, cls: type[msgspec.Struct]
) -> None:
    section = _section((CONTRACTS_DIR / doc).read_text(encoding="utf-8"), heading)
    missing = [
        f.encode_name
        for f in msgspec.structs.fields(cls)
        if not re.search(rf"^\|\s*`{f.encode_name}`", section, re.MULTILINE)
    ]
    assert not missing, f"fields of {cls.__name__} without a table row in {doc}: {missing}"


def _json_examples(doc: str) -> list[bytes]:
    text = (CONTRACTS_DIR / doc).read_text(encoding="utf-8")
    return [m.encode() for m in re.findall(r"```json\n(\{.*?\})\n```", text, re.DOTALL)]


def test_the_bundle_example_is_canonical_and_has_the_stated_id() -> None:
    (example,) = _json_examples("context_bundle.md")
    bundle = decode_bundle(example)
    assert bundle_bytes(bundle) == example, "the example is not the canonical encoding"
    stated = re.search(
        r"Its id is `([0-9a-f]{64})`", (CONTRACTS_DIR / "context_bundle.md").read_text()
    )
    assert stated is not None
    assert bundle_id(bundle) == stated.group(1)
    assert bundle.tokens == sum(item.tokens for item in bundle.items)


def test_the_summary_example_is_canonical() -> None:
    (example,) = _json_examples("summary.md")
    assert summary_bytes(decode_summary(example)) == example


def test_the_checkpoint_index_example_is_canonical() -> None:
    line = _json_examples("caches.md")[0]
    assert msgspec.json.encode(msgspec.json.decode(line, type=CheckpointEntry)) == line


# --- old logs keep reading --------------------------------------------------------------------

_A1 = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
_A2 = "1f7d8e4c7a0b4b83f3b5b0c0a0e6f2b9c1d4e5f60718293a4b5c6d7e8f901234"
_A3 = "6f3c2a8e9d1b4c5a7e0f1d2c3b4a59687766554433221100ffeeddccbbaa9988"
_A4 = "0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e9f"
_A5 = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
_T0 = 1_732_240_000_000

# Every frame of v1 as it must decode from the golden log (``digest`` left out: the chain test
# checks it). Literal on purpose: nothing here is computed by today's code.
GOLDEN_V1_FRAMES: list[fr.Frame] = [
    fr.ThreadCreated(
        seq=0,
        ts_ms=_T0,
        thread_id=GOLDEN_V1_THREAD,
        title="Golden log v1 — «contract» test",
        parent_thread_id="parent-thread",
        meta={"project": "continuity"},
    ),
    fr.MessageAppended(
        seq=1,
        ts_ms=_T0 + 1000,
        more=True,
        message_id="msg-0001",
        role="system",
        content=[fr.TextBlock(text="You are a careful assistant.")],
        tokens=11,
    ),
    fr.MessageAppended(
        seq=2,
        ts_ms=_T0 - 5000,
        more=True,
        message_id="msg-0002",
        role="user",
        content=[
            fr.TextBlock(text='Read "notes.txt"\nand summarise — 日本語 ✓'),
            fr.ImageBlock(media_type="image/png", artifact_id=_A1, size=2048),
            fr.ImageBlock(media_type="image/jpeg"),
        ],
        tokens=3218,
        source=fr.SourceRef(system="claude_code", key="transcript.jsonl#L1"),
        meta={"cwd": "/tmp/project"},
    ),
    fr.MessageAppended(
        seq=3,
        ts_ms=_T0 + 1000,
        message_id="msg-0003",
        role="assistant",
        content=[
            fr.ThinkingBlock(text="The user wants a summary.", signature="sig-abc"),
            fr.ThinkingBlock(text="Read the file first."),
            fr.TextBlock(text="Reading it now."),
            fr.ToolUseBlock(
                id="toolu_01",
                name="Read",
                input={"path": "notes.txt", "limit": 100, "opts": [1, 2.5, True, None]},
            ),
            fr.ToolUseBlock(id="toolu_02", name="ListFiles"),
        ],
        tokens=40,
    ),
    fr.MessageAppended(
        seq=4,
        ts_ms=_T0 + 2000,
        message_id="msg-0004",
        role="user",
        content=[
            fr.ToolResultBlock(tool_use_id="toolu_01", content="line 1\nline 2", size=13),
            fr.ToolResultBlock(
                tool_use_id="toolu_02",
                artifact_id=_A2,
                preview="a.txt\nb.txt\n",
                size=123_456,
                is_error=True,
            ),
            fr.ToolResultBlock(tool_use_id="toolu_03"),
        ],
        tokens=11,
    ),
    fr.ObservationRecorded(
        seq=5,
        ts_ms=_T0 + 3000,
        tool_use_id="toolu_02",
        text="ListFiles returned 3 files (a.txt, b.txt, c.txt).",
        source_seq=4,
    ),
    fr.JobSpawned(
        seq=6,
        ts_ms=_T0 + 4000,
        more=True,
        job_id="job-1",
        kind="compaction",
        params={"cut_rule_id": "every_n_messages_v1", "n": 4},
    ),
    fr.CompactionCheckpointCreated(
        seq=7,
        ts_ms=_T0 + 4000,
        more=True,
        checkpoint_id="cp-1",
        cut_rule_id="every_n_messages_v1",
        summary_kind="cumulative_v1",
        summary_artifact_id=_A3,
        from_seq=0,
        to_seq=1,
        from_message_id="msg-0001",
        to_message_id="msg-0001",
    ),
    fr.JobEnded(
        seq=8,
        ts_ms=_T0 + 4000,
        job_id="job-1",
        status="succeeded",
        result={"checkpoint_id": "cp-1"},
    ),
    fr.CompactionCheckpointCreated(
        seq=9,
        ts_ms=_T0 + 5000,
        checkpoint_id="cp-2",
        cut_rule_id="every_n_messages_v1",
        summary_kind="cumulative_v1",
        summary_artifact_id=_A4,
        from_seq=2,
        to_seq=2,
        base_checkpoint_id="cp-1",
        produced_by="custom-summarizer",
    ),
    fr.JobSpawned(seq=10, ts_ms=_T0 + 6000, more=True, job_id="job-2", kind="compaction"),
    fr.JobEnded(
        seq=11, ts_ms=_T0 + 6000, job_id="job-2", status="failed", error="summarizer timed out"
    ),
    fr.JobSpawned(seq=12, ts_ms=_T0 + 7000, more=True, job_id="job-3", kind="reindex"),
    fr.JobEnded(seq=13, ts_ms=_T0 + 7000, job_id="job-3", status="cancelled"),
    fr.ContextSelectionDecided(
        seq=14,
        ts_ms=_T0 + 8000,
        compiler_id="continuity.compiler/v1",
        strategy="hierarchical_summaries_recent_messages_v1",
        anchor_seq=4,
        anchor_message_id="msg-0004",
        limits=fr.Limits(recent_messages=8, budget_tokens=4000, keep_tool_outputs=2),
        checkpoint=fr.CheckpointRef(
            checkpoint_id="cp-2",
            seq=9,
            to_seq=2,
            summary_kind="cumulative_v1",
            summary_artifact_id=_A4,
        ),
        checkpoints=[
            fr.CheckpointRef(
                checkpoint_id="cp-1",
                seq=7,
                to_seq=1,
                summary_kind="cumulative_v1",
                summary_artifact_id=_A3,
            ),
            fr.CheckpointRef(
                checkpoint_id="cp-2",
                seq=9,
                to_seq=2,
                summary_kind="cumulative_v1",
                summary_artifact_id=_A4,
            ),
        ],
        window_from_seq=3,
        window_to_seq=4,
        window_messages=2,
        reasons=["2 cumulative checkpoints eligible", "window: both messages after to_seq 2"],
        resets=["cache rebuilt"],
        bundle_artifact_id=_A5,
        tokens=321,
    ),
    fr.ContextSelectionDecided(
        seq=15,
        ts_ms=_T0 + 9000,
        compiler_id="continuity.compiler/v1",
        strategy="recent_messages_v1",
        anchor_seq=3,
        bundle_artifact_id=_A5,
    ),
    fr.MessageAppended(
        seq=16,
        ts_ms=_T0 + 10_000,
        message_id="msg-0005",
        role="assistant",
        content=[fr.TextBlock(text="Done.")],
        tokens=6,
    ),
]

# What v1 had; a later version may add tags and block types, but never drop one of these.
V1_FRAME_TYPES = frozenset(
    {
        "thread_created",
        "message_appended",
        "compaction_checkpoint_created",
        "context_selection_decided",
        "observation_recorded",
        "job_spawned",
        "job_ended",
    }
)
V1_BLOCK_TYPES = frozenset({"text", "thinking", "tool_use", "tool_result", "image"})


def _golden_lines() -> list[bytes]:
    data = GOLDEN_V1.read_bytes()
    assert data.endswith(b"\n"), "the golden log ends with a newline"
    return data[:-1].split(b"\n")


def _decoded() -> Iterator[tuple[bytes, fr.Frame]]:
    for line in _golden_lines():
        yield line, fr.decode_frame(line)


def test_golden_log_covers_every_v1_frame_and_block_type() -> None:
    frames = [f for _, f in _decoded()]
    tags = {_tag(type(f)) for f in frames}
    blocks = {_tag(type(b)) for f in frames if isinstance(f, fr.MessageAppended) for b in f.content}
    assert tags == V1_FRAME_TYPES
    assert blocks == V1_BLOCK_TYPES
    assert set(fr.frame_types()) >= V1_FRAME_TYPES, "a v1 frame type was removed"
    assert any(f.more for f in frames), "the golden log holds a multi-frame batch"


def test_golden_log_decodes_into_the_same_frames() -> None:
    decoded = [msgspec.structs.replace(f, digest="") for _, f in _decoded()]
    assert len(decoded) == len(GOLDEN_V1_FRAMES)
    for got, want in zip(decoded, GOLDEN_V1_FRAMES, strict=True):
        assert got == want, f"seq {want.seq} decodes differently"


def test_golden_log_chain_verifies_from_stored_bytes() -> None:
    prev = fr.GENESIS_DIGEST
    for seq, (line, frame) in enumerate(_decoded()):
        sealed = fr.unseal(line)
        assert sealed is not None, f"seq {seq}: no digest suffix"
        body, digest = sealed
        assert frame.seq == seq
        assert fr.chain(prev, body) == digest, f"seq {seq}: digest does not chain"
        assert frame.digest == digest.hex()
        prev = digest
    last = GOLDEN_V1_FRAMES[-1]
    assert not last.more, "the golden log ends on a committed batch"


def test_golden_log_chain_detects_a_changed_byte() -> None:
    lines = _golden_lines()
    lines[3] = lines[3].replace(b"Reading it now.", b"Reading it now!")
    prev = fr.GENESIS_DIGEST
    broken = []
    for seq, line in enumerate(lines):
        sealed = fr.unseal(line)
        assert sealed is not None
        if fr.chain(prev, sealed[0]) != sealed[1]:
            broken.append(seq)
        prev = sealed[1]
    assert broken == [3]


def test_resealing_decoded_frames_reproduces_the_golden_bytes() -> None:
    prev = fr.GENESIS_DIGEST
    out = bytearray()
    for _, frame in _decoded():
        body = fr.encode_body(msgspec.structs.replace(frame, digest=""))
        prev = fr.chain(prev, body)
        out += fr.seal(body, prev)
    assert bytes(out) == GOLDEN_V1.read_bytes()


def test_store_reads_the_golden_log(tmp_store: Store) -> None:
    store = tmp_store
    target = store.root / "threads" / f"{GOLDEN_V1_THREAD}.jsonl"
    target.write_bytes(GOLDEN_V1.read_bytes())
    thread = store.thread(GOLDEN_V1_THREAD)
    head = thread.head()
    assert head is not None and head.seq == len(GOLDEN_V1_FRAMES) - 1
    assert [msgspec.structs.replace(f, digest="") for f in thread.read()] == GOLDEN_V1_FRAMES


# --- writing the golden log (once) ------------------------------------------------------------


def _batches(frames: list[fr.Frame]) -> Iterator[list[fr.Frame]]:
    batch: list[fr.Frame] = []
    for f in frames:
        batch.append(f)
        if not f.more:
            yield batch
            batch = []
    assert not batch


def write_golden_v1(path: Path) -> None:
    """Append ``GOLDEN_V1_FRAMES`` batch by batch through the JSONL store and copy the log."""
    if path.exists():
        raise SystemExit(f"{path} exists; golden logs are written once and never regenerated")
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False, clock=lambda: -1)
        thread = store.thread(GOLDEN_V1_THREAD)
        for batch in _batches(GOLDEN_V1_FRAMES):
            # The store assigns seq and more; every golden frame carries its own ts_ms.
            thread.append([msgspec.structs.replace(f, seq=-1, more=False) for f in batch])
        data = thread.path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


if __name__ == "__main__":
    write_golden_v1(GOLDEN_V1)
    print(f"wrote {GOLDEN_V1}")
