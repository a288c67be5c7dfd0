"""The search index's speed-ups that must not change a byte: the token cache gives the tokens
of no cache, and a segment's vocabulary read in one go equals reading it term by term."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from continuity import search_index as si
from continuity.search_index import Doc, Segment, build_segment, tokenize

# --- tokens ---------------------------------------------------------------------------------


def _reference_tokenize(text: str) -> list[str]:
    """``tokenize`` as it was before the cache (version 2), verbatim."""
    out: list[str] = []
    for chunk in si._CHUNK_RE.findall(text):
        low = chunk.lower()
        parts = [p for piece in si._SPLIT_RE.split(chunk) for p in si._CAMEL_RE.findall(piece)]
        if len(parts) != 1 or parts[0].lower() != low:
            if 1 < len(low) <= si._MAX_TOKEN:
                out.append(low)
            out.extend(
                q for p in parts if (q := p.lower()) not in si._STOP and 1 < len(q) <= si._MAX_TOKEN
            )
        elif low not in si._STOP and 1 < len(low) <= si._MAX_TOKEN:
            out.append(low)
    return out


_words = st.text(
    alphabet=st.sampled_from("abcXYZ09_.-/:\\ éÅ“”\n"), min_size=0, max_size=12
) | st.sampled_from(["the", "HTTPServerError", "src/app/retry_backoff.py", "a", "x" * 70])
_texts = st.lists(_words, max_size=30).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_texts, min_size=1, max_size=5), cap=st.sampled_from([1, 2, 5, 100_000]))
def test_the_token_cache_gives_the_tokens_of_no_cache(texts: list[str], cap: int) -> None:
    """Cold, warm, and with a cache so small that it is cleared in the middle of a text."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(si, "_TOKEN_CACHE_MAX", cap)
        si._token_cache.clear()
        for text in texts + texts:
            assert tokenize(text) == _reference_tokenize(text)
            assert len(si._token_cache) <= cap
    si._token_cache.clear()


def test_the_token_cache_is_bounded_and_keeps_long_chunks_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(si, "_TOKEN_CACHE_MAX", 50)
    si._token_cache.clear()
    long_chunk = "a" * si._CACHED_CHUNK_MAX + "_tail"
    text = " ".join(f"word{i}" for i in range(500)) + " " + long_chunk
    assert tokenize(text) == _reference_tokenize(text)
    assert 0 < len(si._token_cache) <= 50
    assert long_chunk not in si._token_cache
    # what a caller does with the list never reaches the cache
    tokens = tokenize("retry_backoff")
    tokens.append("mutated")
    assert tokenize("retry_backoff") == ["retry_backoff", "retry", "backoff"]
    si._token_cache.clear()


# --- segments -------------------------------------------------------------------------------


def _doc(seq: int, *terms: str) -> Doc:
    tf = dict.fromkeys(sorted(terms), 1)
    return Doc(seq, si.KIND_MESSAGE, 1, len(tf), tf)


@pytest.mark.parametrize(
    "terms",
    [
        [],
        ["only"],
        ["ab", "café", "naïve", "zz", "日本語", "ß" * 30, "x1"],
        ["a\nb", "plain"],  # never a token, but a segment of it still reads right
    ],
)
def test_the_vocabulary_read_in_one_go_equals_term_by_term(terms: list[str]) -> None:
    seg = Segment(build_segment([_doc(0, *terms)] if terms else []), 0)
    assert seg.terms() == [seg.term(i) for i in range(seg.n_terms)] == sorted(terms)
