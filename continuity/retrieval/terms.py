"""Terms: how text becomes the search index's terms (:func:`tokenize`).

Code-aware tokens: paths and identifiers are kept whole and split on ``/``, ``.``, ``_``,
``-`` and camelCase; a word character is a Unicode letter or digit; common English words are
left out; an ASCII word counts by its Snowball English stem (:mod:`.stem`) and, when that
differs, by its surface form too, marked with :data:`SURFACE` (ADR 0032). The same function
tokenizes documents (:mod:`.documents`) and queries (:func:`.ranking.query_terms`), so a
query's terms are spelled as the index spells them; :func:`token_spans` and :func:`words_of`
say where in a text each term comes from (snippets, highlights).

Changing a rule here changes terms already on disk: bump the index versions with it
(:data:`.index.VERSION`, :data:`.store_index.VERSION`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Final

from continuity.retrieval.stem import stem

__all__ = ["SURFACE", "term_counts", "token_spans", "tokenize", "words_of"]


# A word character is a Unicode letter or digit (``[^\W_]``): punctuation such as “ ” — … is
# a separator, and a non-ASCII letter stays inside its word. camelCase splits only at ASCII
# capitals, so "résumé" stays one part (not "r", "sum"), while "HTTPServerError" splits.
_CHUNK_RE: Final = re.compile(r"[^\W_]+(?:[._/\\:-]+[^\W_]+)*")
# The same chunks, found faster (ADR 0061, "Faster"): possessive quantifiers never give back
# (a word character is never a separator, so there is nothing to backtrack to), and an ASCII
# text takes the explicit ASCII class (for an ASCII character, Unicode ``[^\W_]`` is exactly
# ``[A-Za-z0-9]``). tests/retrieval/test_terms_fast.py checks them against _CHUNK_RE.
_FIND_CHUNKS: Final = re.compile(r"[^\W_]++(?:[._/\\:-]++[^\W_]++)*+").findall
_FIND_ASCII_CHUNKS: Final = re.compile(r"[A-Za-z0-9]++(?:[._/\\:-]++[A-Za-z0-9]++)*+").findall
_SPLIT_RE: Final = re.compile(r"[._/\\:-]+")
_CAMEL_RE: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W_A-Z0-9]+|[A-Z]+|[0-9]+")
_STOP: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "will",
        "with",
        "you",
        "your",
    ]
)
_MAX_TOKEN: Final = 64


_TOKEN_CACHE_MAX: Final = 100_000
_CACHED_CHUNK_MAX: Final = 128
_token_cache: dict[str, tuple[str, ...]] = {}
"""Chunk → its tokens: paths, identifiers and words repeat a lot, in generated and real text.
At most ``_TOKEN_CACHE_MAX`` chunks of at most ``_CACHED_CHUNK_MAX`` characters (cleared when
full): about 350 bytes a chunk on generated threads (14 characters on average), so some 35 MB
when full; chunks near the length limit and split into many parts cost a few times that."""


SURFACE: Final = "="
"""The mark of a word's surface form as a term (``=migrations``): no token holds ``=``."""


def _words(word: str) -> tuple[str, ...]:
    """The terms of one lowercase part: an ASCII word by its Snowball English stem, and, when
    the stem differs, its surface form marked with :data:`SURFACE` ("migrations" →
    ``migrat``, ``=migrations``); anything else (digits, other scripts, mixed) as it is.
    Ranking counts a surface form at a fraction of its stem's weight (ADR 0032): the stem
    finds every form of a word, the surface form lifts the exact one."""
    if word.isascii() and word.isalpha():
        root = stem(word)
        if root == word:
            return (word,)
        # A term is at most _MAX_TOKEN long: a word of that length keeps only its stem.
        return (root, SURFACE + word) if len(word) < _MAX_TOKEN else (root,)
    return (word,)


def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    """The tokens of one chunk (a word, path or identifier): whole, then its parts, each word
    by its stem and surface form. A chunk of several parts keeps its whole form as it is (an
    exact path or identifier is its own term)."""
    low = chunk.lower()
    parts = [p for piece in _SPLIT_RE.split(chunk) for p in _CAMEL_RE.findall(piece)]
    if len(parts) != 1 or parts[0].lower() != low:
        out = [low] if 1 < len(low) <= _MAX_TOKEN else []
        for p in parts:
            q = p.lower()
            if q not in _STOP and 1 < len(q) <= _MAX_TOKEN:
                out.extend(_words(q))
        return tuple(out)
    if low not in _STOP and 1 < len(low) <= _MAX_TOKEN:
        return _words(low)
    return ()


def _chunk_terms(text: str) -> list[tuple[str, ...]]:
    """The tokens of each chunk of ``text``, in order (from the cache, filled as needed)."""
    chunks = _FIND_ASCII_CHUNKS(text) if text.isascii() else _FIND_CHUNKS(text)
    cache = _token_cache
    try:
        return list(map(cache.__getitem__, chunks))  # most chunks repeat: all cached
    except KeyError:
        pass
    found = []
    for chunk in chunks:
        tokens = cache.get(chunk)
        if tokens is None:
            tokens = _chunk_tokens(chunk)
            if len(chunk) <= _CACHED_CHUNK_MAX:
                if len(cache) >= _TOKEN_CACHE_MAX:
                    cache.clear()
                cache[chunk] = tokens
        found.append(tokens)
    return found


def tokenize(text: str) -> list[str]:
    """Lowercase tokens of ``text``: each path or identifier whole and split into its parts."""
    return list(chain.from_iterable(_chunk_terms(text)))


def term_counts(fields: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Each term of the ``(text, weight)`` fields with the sum of the weights of its
    occurrences (a term twice in a field of weight 2 counts 4), in no particular order: what
    counting :func:`tokenize` of each text ``weight`` times over gives, without making the
    copies (a document's term frequencies, :func:`.documents.doc_of`)."""
    by_weight: dict[int, list[tuple[str, ...]]] = {}
    for text, weight in fields:
        found = _chunk_terms(text)
        same = by_weight.get(weight)
        if same is None:
            by_weight[weight] = found
        else:
            same += found
    counts: dict[str, int] = {}
    for weight, found in by_weight.items():
        more = Counter(chain.from_iterable(found))
        if not counts:
            counts = more if weight == 1 else {term: n * weight for term, n in more.items()}
            continue
        get = counts.get
        for term, n in more.items():
            counts[term] = get(term, 0) + n * weight
    return counts


def as_written(terms: Iterable[str]) -> frozenset[str]:
    """The query ``terms`` a document holds only if it has a word the way the query wrote it:
    each surface form (``=migrations``), and each other term but the stem of one
    (``migrat`` stands for other words too: only ``=migrations`` says the word is there)."""
    terms = list(terms)
    stems = {_words(t[len(SURFACE) :])[0] for t in terms if t.startswith(SURFACE)}
    return frozenset(t for t in terms if t not in stems)


def words_of(chunk: str, terms: Iterable[str]) -> list[str]:
    """For each of ``terms`` (tokens of ``chunk``), the text it stands for, lowercased: the
    chunk's part whose stem it is ("migrat" in "db/migrations" → "migrations"), else itself."""
    parts = [p.lower() for piece in _SPLIT_RE.split(chunk) for p in _CAMEL_RE.findall(piece)]
    out = []
    for t in terms:
        out.append(next((p for p in parts if p != t and _words(p)[0] == t), t))
    return out


def token_spans(text: str) -> Iterator[tuple[int, int, tuple[str, ...]]]:
    """(start, end, tokens) of each chunk of ``text`` that has tokens, in order: where in the
    text each term :func:`tokenize` gives comes from (a stem is not a substring of its word)."""
    for m in _CHUNK_RE.finditer(text):
        chunk = m.group()
        tokens = _token_cache.get(chunk)
        if tokens is None:
            tokens = _chunk_tokens(chunk)
        if tokens:
            yield m.start(), m.end(), tokens
