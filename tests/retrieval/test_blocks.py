"""The search index and the new content shapes (continuity.retrieval.index): a tool result
given as parts and a provider block's text are part of their message's document, so search and
recall find them; a record and a retraction are not documents; the documents of the shapes that
existed before are unchanged (no index version bump), and a catch-up over the new shapes equals
a rebuild byte for byte."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.context.records import record
from continuity.context.retract import retract
from continuity.redaction import Redactor
from continuity.retrieval import documents, index as si
from continuity.retrieval.documents import doc_of, frame_text
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.search import search, search_prefix
from continuity.retrieval.terms import tokenize
from continuity.store.jsonl import Store
from tests.redaction.test_redaction import GITHUB_PAT
from tests.retrieval.test_index import _files, small  # noqa: F401 (a fixture)


def _parts(*texts: str, tool_use_id: str = "toolu_1") -> fr.ToolResultBlock:
    return fr.ToolResultBlock(
        tool_use_id=tool_use_id,
        parts=[
            *(fr.TextBlock(text=t) for t in texts),
            fr.ImageBlock(media_type="image/png", url="https://example.com/chart.png"),
        ],
    )


def _provider(text: str) -> fr.ProviderBlock:
    return fr.ProviderBlock(
        provider="anthropic",
        kind="web_search_tool_result",
        data={
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://example.com", "title": text}],
        },
        text=text,
    )


def _seqs(store: Store, query: str) -> list[int]:
    return sorted(h.seq for h in search(store, query, k=50))


def test_search_finds_a_tool_results_parts_and_a_provider_blocks_text(tmp_store: Store) -> None:
    thread = tmp_store.thread("t")
    thread.append(
        [
            fr.message("user", "How humid is it where the lemurs live?"),
            fr.message("user", content=[_parts("zanzibar humidity 81%", "dew point 24")]),
            fr.message("assistant", content=[_provider("Quokka habitats on Rottnest Island")]),
        ]
    )
    record(thread, "myruntime.state", {"note": "wombat burrow depth"}, key="wombat")
    retract(thread, seqs=[1], reason="numbat mistaken for a lemur")

    assert _seqs(tmp_store, "zanzibar") == [2]
    assert _seqs(tmp_store, "dew point") == [2]
    assert _seqs(tmp_store, "quokka rottnest") == [3]
    (hit,) = search(tmp_store, "zanzibar")
    assert "zanzibar" in hit.snippet and hit.role == "user"
    # a record and a retraction are not conversation: no hit, whatever they hold
    assert search(tmp_store, "wombat burrow") == []
    assert search(tmp_store, "numbat mistaken") == []
    # the retracted message is still found, shown as retracted
    (lemurs,) = search(tmp_store, "lemurs")
    assert lemurs.seq == 1 and lemurs.retracted
    # the scan path (no caches) agrees with the index
    for query in ("zanzibar", "quokka", "wombat", "numbat"):
        by_index = search_prefix(tmp_store, "t", query, max_seq=10**9, k=10)
        assert by_index == search_prefix(
            tmp_store, "t", query, max_seq=10**9, k=10, use_caches=False
        )


def test_recall_text_holds_the_parts_and_the_provider_text(tmp_store: Store) -> None:
    frame = fr.message("user", content=[_parts("first part", "second part"), _provider("told")])
    assert frame_text(frame, tmp_store) == "first part second part told"


def test_a_redacting_store_indexes_no_secret(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, redactor=Redactor())
    store.thread("t").append(
        fr.message("user", content=[_parts(f"zanzibar token {GITHUB_PAT}"), _provider(GITHUB_PAT)])
    )
    assert _seqs(store, "zanzibar") == [1]
    assert search(store, GITHUB_PAT) == []
    assert search(store, GITHUB_PAT.split("_")[1]) == []


def test_parts_index_as_the_same_text_given_whole_would() -> None:
    text = "FAILED tests/test_cache.py::test_evict - AssertionError\n2 failed"
    whole = fr.ToolResultBlock(tool_use_id="t", content=text)
    as_parts = fr.ToolResultBlock(
        tool_use_id="t",
        parts=[fr.TextBlock(text=line) for line in text.split("\n")],
    )
    one, two = (fr.message("user", content=[b]) for b in (whole, as_parts))
    assert doc_of(one) == doc_of(two) is not None


def test_records_retractions_and_other_frames_are_not_documents() -> None:
    for frame in (
        fr.RecordAppended(kind="x.state", data={"text": "words words"}),
        fr.RecordAppended(kind="x.state", artifact_id="a" * 64, size=3),
        fr.MessagesRetracted(spans=[fr.SeqSpan(from_seq=1, to_seq=1)], reason="words"),
        fr.JobSpawned(job_id="j", kind="compaction", params={"text": "words"}),
    ):
        assert doc_of(frame) is None


def test_an_image_only_result_and_an_empty_provider_block_make_no_document() -> None:
    frame = fr.message(
        "user",
        content=[
            fr.ToolResultBlock(tool_use_id="t", parts=[fr.ImageBlock(media_type="image/png")]),
            fr.ProviderBlock(provider="openai.responses", kind="reasoning", data={"summary": []}),
        ],
    )
    assert doc_of(frame) is None


def test_a_field_of_parts_is_cut_like_any_other() -> None:
    long = " ".join(f"w{i}" for i in range(3000))  # far more than 4,000 characters
    frame = fr.message("user", content=[_parts(long)])
    doc = doc_of(frame)
    assert doc is not None
    assert doc.tf == dict(sorted(Counter(tokenize(long[: documents._MAX_FIELD_CHARS])).items()))


# --- the documents of the shapes that existed before are unchanged --------------------------


def _fields_before(frame: fr.Frame, summary: str | None) -> Iterator[tuple[str, int]]:
    """``_fields`` as it was before parts and provider blocks, verbatim."""
    if isinstance(frame, fr.MessageAppended):
        for b in frame.content:
            if isinstance(b, fr.TextBlock):
                yield b.text, 2
            elif isinstance(b, fr.ThinkingBlock):
                yield b.text, 1
            elif isinstance(b, fr.ToolUseBlock):
                yield b.name, 3
                for key, value in b.input.items():
                    if isinstance(value, str):
                        weight = (
                            4
                            if key in documents._PATH_KEYS or key in documents._COMMAND_KEYS
                            else 2
                        )
                        yield value, weight
            elif isinstance(b, fr.ToolResultBlock):
                yield (b.content if b.artifact_id is None else b.preview), 1
    elif isinstance(frame, fr.ObservationRecorded):
        yield frame.text, 2
    elif summary is not None:
        yield summary, 1


def _old_shapes(rng: random.Random, n: int) -> Iterator[fr.Frame]:
    words = ["retry", "backoff", "src/cache.py", "deploy", "timeout", "HTTPServerError", "é"]
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        kind = rng.randrange(6)
        if kind == 0:
            yield fr.message("user", text)
        elif kind == 1:
            yield fr.message(
                "assistant",
                content=[
                    fr.ThinkingBlock(text=text, signature="s"),
                    fr.ToolUseBlock(id=f"t{i}", name="Bash", input={"command": text, "n": 3}),
                ],
            )
        elif kind == 2:
            yield fr.message(
                "user", content=[fr.ToolResultBlock(tool_use_id=f"t{i}", content=text)]
            )
        elif kind == 3:
            yield fr.message(
                "user",
                content=[
                    fr.ToolResultBlock(
                        tool_use_id=f"t{i}", artifact_id="a" * 64, preview=text, size=99
                    )
                ],
            )
        elif kind == 4:
            yield fr.ObservationRecorded(tool_use_id=f"t{i}", text=text)
        else:
            yield fr.JobSpawned(job_id=f"j{i}", kind="compaction")


def test_the_documents_of_the_older_shapes_are_unchanged() -> None:
    rng = random.Random(7)
    for frame in _old_shapes(rng, 400):
        tokens: list[str] = []
        for text, weight in _fields_before(frame, None):
            tokens += tokenize(text[: documents._MAX_FIELD_CHARS]) * weight
        doc = doc_of(frame)
        if not tokens:
            assert doc is None
            continue
        assert doc is not None and doc.tf == dict(sorted(Counter(tokens).items()))
        assert documents.text_of(frame, None) == " ".join(
            " ".join(t.split()) for t, _ in _fields_before(frame, None)
        )


# --- catch-up over the new shapes equals a rebuild ------------------------------------------


def _new_shapes(rng: random.Random, n: int, first_seq: int) -> Iterator[fr.Frame]:
    words = ["zanzibar", "quokka", "retry", "src/app/main.py", "timeout", "wombat"]
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        kind = rng.randrange(5)
        if kind == 0:
            yield fr.message("user", content=[_parts(text, text[::-1], tool_use_id=f"t{i}")])
        elif kind == 1:
            yield fr.message("assistant", content=[fr.TextBlock(text="found"), _provider(text)])
        elif kind == 2:
            yield fr.RecordAppended(kind="x.state", key=str(i), data={"text": text})
        elif kind == 3 and first_seq + i > 1:
            seq = rng.randrange(1, first_seq + i)
            yield fr.MessagesRetracted(spans=[fr.SeqSpan(from_seq=seq, to_seq=seq)], reason=text)
        else:
            yield fr.message("user", text)


@pytest.mark.slow
@pytest.mark.usefixtures("small")
def test_a_catch_up_over_the_new_shapes_equals_a_rebuild(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    thread = tmp_store.thread("t")
    index = ThreadSearchIndex(tmp_store.thread("t"))
    total = 0
    while total < 200:
        n = rng.choice([1, 3, 7, 20])
        thread.append(list(_new_shapes(rng, n, total + 1)))
        total += n
        monkeypatch.setattr(si, "_CHUNK", rng.choice([1, 5, 1000]))
        index.refresh()
    caught_up = _files(index)
    assert index.problems() == []
    hits = [search(tmp_store, q, k=30) for q in ("zanzibar", "quokka", "wombat")]
    assert all(hits)
    for chunk in (1, 63, 10_000):
        monkeypatch.setattr(si, "_CHUNK", chunk)
        index.rebuild()
        assert _files(index) == caught_up  # byte for byte
    assert [search(tmp_store, q, k=30) for q in ("zanzibar", "quokka", "wombat")] == hits
    records = [f for f in thread.read() if isinstance(f, fr.RecordAppended)]
    assert records  # they hold the words too, and are never hit
    hit_seqs = {h.seq for found in hits for h in found}
    assert not hit_seqs & {f.seq for f in records}
