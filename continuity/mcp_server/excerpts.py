"""Pieces of long texts as the tools show them: redacted before they are cut, and cut between
tokens (ADR 0053).

A secret is recognised whole: a key's BEGIN line with its body, a provider's prefix with the
rest of its token. Cutting first can leave a piece no rule knows (a key body after a cut BEGIN
line, the tail of a token whose prefix fell before a snippet), so the text around a cut is
redacted first, as far as :data:`MARGIN` past the part shown, and the cut falls on whitespace
(a token is shown whole or not at all) unless a single run of characters fills the last quarter
of what is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["MARGIN", "cut_point", "head", "snippet", "trim_partial_tail"]

MARGIN: Final = 4096
"""Characters redacted beyond each side of the part shown: more than the longest secret the
rules recognise whole (a 4096-bit RSA key in PEM is about 3,300)."""

Clean = Callable[[str], str]


def cut_point(text: str, cap: int) -> int:
    """How many characters of ``text`` to show for at most ``cap``: up to the last whitespace
    in the last quarter of the ``cap`` characters (the token it would split goes), else ``cap``
    (one run of characters too long to be a word)."""
    if len(text) <= cap:
        return len(text)
    floor = cap - cap // 4
    for i in range(cap, floor, -1):  # text[i] is the first character not shown
        if text[i].isspace():
            return i
    return cap


def head(text: str, cap: int, clean: Clean) -> tuple[str, int]:
    """The start of ``text`` in at most ``cap`` characters, redacted before it is cut, and how
    many characters of ``text`` are not shown (0: all of it is)."""
    size = cap + MARGIN
    while True:
        region = clean(text[:size])
        whole = size >= len(text)
        if whole and len(region) <= cap:
            return region, 0
        # what is shown must end well before the region's end (a secret the redaction
        # shortened may have brought that end, and the token it cuts, close)
        if whole or len(region) >= cap + MARGIN // 2:
            n = cut_point(region, cap)
            shown = region[:n].rstrip()
            return shown, max(1, len(text) - len(shown))
        size *= 2


def trim_partial_tail(text: str) -> str:
    """``text`` (a preview cut where it was written) without its last, maybe partial, token."""
    n = cut_point(text + "\0", len(text))  # as if one character longer: the tail is cut
    return text[:n].rstrip() if n < len(text) else text


def _first_of(text: str, words: Sequence[str]) -> int:
    if not words:
        return -1
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    m = re.search(rf"(?<!\w)(?:{alternatives})", text, re.IGNORECASE)
    return -1 if m is None else m.start()


def snippet(text: str, words: Sequence[str], clean: Clean, width: int = 160) -> str:
    """About ``width`` characters of ``text`` around the first of ``words`` (the words a search
    hit matched), from the start when none is found; redacted before it is cut, its edges
    between tokens, marked ``…`` where the text goes on."""
    first = _first_of(text, words)
    if first < 0:
        shown, rest = head(text, width, clean)
        return shown + ("…" if rest else "")
    lo = max(0, first - MARGIN)
    hi = min(len(text), first + width + MARGIN)
    region = clean(text[lo:hi])
    at = _first_of(region, words)
    if at < 0:  # the word was inside a secret: the region from its start
        at = 0
    start = max(0, at - width // 3)
    if start > 0 and not region[start - 1].isspace():
        space = next((i for i in range(start, at) if region[i].isspace()), None)
        start = at if space is None else space + 1
    end = start + cut_point(region[start:], width)
    piece = region[start:end].strip()
    before = "…" if lo + start > 0 else ""
    after = "…" if end < len(region) or hi < len(text) else ""
    return before + piece + after
