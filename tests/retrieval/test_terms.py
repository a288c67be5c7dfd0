"""The fast tokenizer (ADR 0061, "Faster") against the plain one it replaces: the same tokens
for every text, and :func:`term_counts` the same counts as counting each field's tokens
``weight`` times over (the index's bytes depend on both)."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given, settings, strategies as st

from continuity.retrieval import terms
from continuity.retrieval.terms import term_counts, tokenize

# The chunk pattern as it was before the fast path (what _CHUNK_RE still spells).
_PLAIN_CHUNK: re.Pattern[str] = re.compile(r"[^\W_]+(?:[._/\\:-]+[^\W_]+)*")


def _plain_tokenize(text: str) -> list[str]:
    """Tokens as the tokenizer made them before: no cache, the plain pattern."""
    return [t for chunk in _PLAIN_CHUNK.findall(text) for t in terms._chunk_tokens(chunk)]


def _plain_counts(fields: list[tuple[str, int]]) -> dict[str, int]:
    tokens: list[str] = []
    for text, weight in fields:
        tokens += _plain_tokenize(text) * weight
    return dict(Counter(tokens))


_SAMPLES = [
    "",
    "Fix db/migrations/0003_add_index.py then run `pytest -q tests/retrieval`",
    "HTTPServerError in getUserID at C:\\Users\\dev\\src\\main.rs:42:7",
    "__init__.py _private __dunder__ a_-b a._ ._a a.b. -x- ::: ...",
    "résumé naïve Straße ÉCOLE café-crème 東京都 の 検索 インデックス 한국어 русский текст",
    "emoji 🎉 mixed😀words and “quotes” — dashes… ½ ² ³ ٣٤ x²y",
    "x" * 200 + " " + "a/" * 100 + " " + "Word" * 20,
    "running runs ran runner connection connections connected the and of",
    "https://example.com/path/to/file.txt?q=1&r=2#frag user@host.org",
    "CamelCaseWord XMLHttpRequest iOS macOSVersion2 v1.2.3-rc.1 0x1F 3.14e-10",
]


def test_samples_tokenize_as_before() -> None:
    for text in _SAMPLES:
        assert tokenize(text) == _plain_tokenize(text), text
        terms._token_cache.clear()  # and again from an empty cache
        assert tokenize(text) == _plain_tokenize(text), text


def test_fast_patterns_find_the_same_chunks() -> None:
    for text in _SAMPLES:
        assert terms._FIND_CHUNKS(text) == _PLAIN_CHUNK.findall(text)
        if text.isascii():
            assert terms._FIND_ASCII_CHUNKS(text) == _PLAIN_CHUNK.findall(text)


_ALPHABET = st.sampled_from(
    [*"abcXYZ09 _-./\\:\t\n'\"éßÉ東京한ж😀—“½²٣", "the", "Running", "getHTTPResponse"]
)
_TEXTS = st.lists(_ALPHABET, max_size=40).map("".join) | st.text(max_size=60)


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_any_text_tokenizes_as_before(text: str) -> None:
    assert terms._FIND_CHUNKS(text) == _PLAIN_CHUNK.findall(text)
    if text.isascii():
        assert terms._FIND_ASCII_CHUNKS(text) == _PLAIN_CHUNK.findall(text)
    assert tokenize(text) == _plain_tokenize(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXTS, st.integers(min_value=1, max_value=4)), max_size=6))
def test_term_counts_are_the_weighted_counts(fields: list[tuple[str, int]]) -> None:
    assert term_counts(fields) == _plain_counts(fields)


def test_term_counts_of_repeated_weights() -> None:
    fields = [("the migrations ran", 2), ("Bash", 3), ("migrations again", 2), ("ran", 1)]
    assert term_counts(fields) == _plain_counts(fields)
    assert term_counts(fields)["migrat"] == 4
    assert term_counts([]) == {}
    assert term_counts([("the of", 2), ("word", 3)]) == {"word": 3}
