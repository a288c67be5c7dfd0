"""Deterministic token estimates.

The estimate only has to be stable (same text, same number, in every process and version) and
roughly right for budgeting; an exact tokenizer can be plugged in through :class:`Tokenizer`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["HeuristicTokenizer", "Tokenizer", "estimate_text"]


class Tokenizer(Protocol):
    """Anything that can count the tokens of a text. Must be deterministic."""

    def count(self, text: str) -> int: ...


def estimate_text(text: str) -> int:
    """About one token per four characters of ASCII, one per character beyond it.

    Code and prose in English average three to four characters a token with BPE tokenizers;
    non-ASCII text (CJK, emoji) is closer to one token a character, so it is counted that way to
    keep budgets on the safe side.
    """
    if not text:
        return 0
    n = len(text)
    if text.isascii():
        return (n + 3) // 4
    non_ascii = n - len(text.encode("ascii", "ignore"))  # in C, not a Python loop
    return (n - non_ascii + 3) // 4 + non_ascii


class HeuristicTokenizer:
    """The default :class:`Tokenizer`: :func:`estimate_text`."""

    def count(self, text: str) -> int:
        return estimate_text(text)
