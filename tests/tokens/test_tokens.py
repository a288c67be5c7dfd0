"""Deterministic token estimates (continuity.tokens)."""

from __future__ import annotations

import pytest

from continuity.tokens import HeuristicTokenizer, Tokenizer, estimate_text


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("x" * 400, 100),
        ("x" * 401, 101),
        ("日本語", 3),  # one token per non-ASCII character
        ("ab日本", 1 + 2),  # ASCII part rounded up, plus one per non-ASCII character
        ("abcde😀", 2 + 1),
        ("é" * 10, 10),
    ],
)
def test_estimate_text(text: str, tokens: int) -> None:
    assert estimate_text(text) == tokens


def test_estimate_is_monotonic_in_appended_text() -> None:
    text = ""
    last = 0
    for ch in "hello, wörld — 日本 " * 20:
        text += ch
        now = estimate_text(text)
        assert now >= last
        last = now


def test_non_ascii_text_is_never_cheaper_than_ascii_of_the_same_length() -> None:
    assert estimate_text("é" * 100) > estimate_text("e" * 100)


def test_heuristic_tokenizer_is_the_default_estimate() -> None:
    tokenizer: Tokenizer = HeuristicTokenizer()
    for text in ("", "hello world", "日本語のテキスト", "x" * 1001):
        assert tokenizer.count(text) == estimate_text(text)
