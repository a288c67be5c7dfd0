"""Segments merged on disk (ADR 0061): a streamed merge writes the bytes of the in-memory merge,
and of one segment built from all the documents, whatever its budget of postings at a time."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings, strategies as st

from continuity.retrieval import segments
from continuity.retrieval.documents import Doc
from continuity.retrieval.segments import Segment, build_segment, merge_segments, write_merged

WORDS = ["deploy", "cache", "error", "retry", "src/app.py", "é", "日本", "=migrations", "w"]


def _docs(rng: random.Random, n: int, vocab: int) -> list[Doc]:
    out = []
    for i in range(n):
        terms = {f"{rng.choice(WORDS)}{rng.randrange(vocab)}" for _ in range(rng.randint(0, 9))}
        tf = {t: rng.choice([1, 2, 3, 70_000]) for t in sorted(terms)}
        out.append(Doc(i, 1, 1, sum(tf.values()), tf))
    return out


def _segments(docs: list[Doc], sizes: list[int]) -> list[Segment]:
    parts, first = [], 0
    for size in sizes:
        parts.append(Segment(build_segment(docs[first : first + size]), first))
        first += size
    return parts


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=16),
    vocab=st.sampled_from([1, 5, 50, 500]),
    budget=st.sampled_from([1, 2, 7, 64, 10**9]),
)
def test_a_streamed_merge_is_the_in_memory_merge(
    tmp_path_factory: pytest.TempPathFactory, seed: int, sizes: list[int], vocab: int, budget: int
) -> None:
    docs = _docs(random.Random(seed), sum(sizes), vocab)
    folder = tmp_path_factory.mktemp("merge")
    path = folder / "seg-merged.bin"
    check = write_merged(path, _segments(docs, sizes), budget=budget)
    written = path.read_bytes()
    assert written == merge_segments(_segments(docs, sizes)) == build_segment(docs)
    assert check == zlib.crc32(written)
    assert [p.name for p in folder.iterdir()] == ["seg-merged.bin"]  # no spill left behind


def test_the_default_budget_holds_a_bounded_number_of_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge sorts at most its budget of postings at a time (a term with more is one step of
    its own), so what it holds does not grow with the segments merged."""
    docs = _docs(random.Random(5), 600, 300)
    parts = _segments(docs, [100] * 6)
    sorted_sizes: list[int] = []
    real = np.argsort

    def watching(a: npt.NDArray[np.uint64], kind: str | None = None) -> npt.NDArray[np.intp]:
        assert kind == "stable"
        out = real(a, kind="stable")
        sorted_sizes.append(len(out))
        return out

    monkeypatch.setattr(segments, "MERGE_POSTINGS", 50)
    monkeypatch.setattr(np, "argsort", watching)
    write_merged(tmp_path / "m.bin", parts)
    monkeypatch.undo()
    postings = sum(len(d.tf) for d in docs)
    assert postings > 20 * 50
    steps = sorted_sizes[len(parts) + 1 :]  # each segment's check, then the term checks once
    assert sum(steps) == postings
    most = max(sum(1 for d in docs if t in d.tf) for t in {t for d in docs for t in d.tf})
    assert max(steps) <= max(50, most)
    assert (tmp_path / "m.bin").read_bytes() == build_segment(docs)


def test_a_merge_that_dies_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _docs(random.Random(2), 200, 40)
    parts = _segments(docs, [50] * 4)
    calls = [0]
    real = np.concatenate

    def dying(*args: object, **kw: object) -> object:
        calls[0] += 1
        if calls[0] > 6:
            raise KeyboardInterrupt("killed mid-merge")
        return real(*args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(segments, "MERGE_POSTINGS", 10)
    monkeypatch.setattr(np, "concatenate", dying)
    with pytest.raises(KeyboardInterrupt):
        write_merged(tmp_path / "seg-x.bin", parts)
    assert list(tmp_path.iterdir()) == []
