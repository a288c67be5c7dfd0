"""The pure-Python Snowball English stemmer (:mod:`continuity.retrieval.stem`) against Snowball's C.

PyStemmer (``import Stemmer``, the dev extra) wraps Snowball's own C code; every comparison
test skips, saying why, when it is not installed. The vocabulary is every word of the
``../shared/fixtures/claude-code`` transcripts, ``/usr/share/dict/words`` when the machine has
it, a hand-written list that reaches every rule of the algorithm, and Hypothesis' random words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from continuity.retrieval import stem as stem_module
from continuity.retrieval.stem import stem

CLAUDE_CODE_FIXTURES = Path(__file__).parents[3] / "shared" / "fixtures" / "claude-code"
DICT_WORDS = Path("/usr/share/dict/words")
_WORD = re.compile(r"[a-z']+")

# every rule branch of https://snowballstem.org/algorithms/english/stemmer.html (Snowball 3)
HAND_WRITTEN = """
skis skies sky dying lying tying vying ying eying idly gently ugly early only singly news howe
atlas cosmos bias andes atlases biases inning innings outing outings canning cannings herring
herrings earring earrings evening evenings proceed exceed succeed proceeded exceeding succeeds
proceedings reproceed agreed agreedly feed feeds bleed
generate generates generously general generic communication community communism arsenal
arsenic past paste pasted pasting pastes universe universal university lateral later emerge
emergency organ organic organize organization inter intern internal international interval
interfere internment
bed beds bled sing string thing things hoping hopping hoped hopped fizzed filed filing
luxuriated luxuriating disabled sized sizing hugged abbing eggs odded adding added
aed eing aaing fizzing failing filling falling tanned conned
caresses ponies ties cries tied cried gas gaps kiwis bus buses press dress us is ss
cry by say sayyes yyy yay yes youth boy boys toy enjoy enjoyed enjoying play played
players daisy dy ay ye
relational conditional rational valenci hesitanci digitizer digitization conformabli
radicalli differentli vileli analogousli operator feudalism sensitiviti sensibiliti
hopefulness callousness decisiveness formaliti vietnamization predication operation
lovelessli hopefulli fully mostli biologi geologist analogist ecologist onli apologi
triplicate formative formalize electriciti electrical hopeful goodness
revival allowance inference airliner gyroscopic adjustable defensible irritant replacement
adjustment dependent adoption communism activate angulariti homologous effective bowdlerize
adoption erosion decision fusion union
rate cease controll roll dialled probate hopeful
dog's dogs' dogs's 'tis ''s it's 's' o'clock rock'n'roll don't isn't ''' 'a' a'b
generously generosity communicative skiing skied skis sky's
"""


def _fixture_words() -> set[str]:
    words: set[str] = set()
    for path in sorted(CLAUDE_CODE_FIXTURES.rglob("*")):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace").lower()
            words.update(_WORD.findall(text))
    return words


@cache
def _reference() -> Any:
    """PyStemmer's English stemmer (Snowball's C code), or a skip saying why there is none."""
    try:
        import Stemmer  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        pytest.skip(
            "PyStemmer (import Stemmer, the dev extra) is not installed: nothing to compare"
        )
    return Stemmer.Stemmer("english")


def _mismatches(words: Iterable[str]) -> list[tuple[str, str, str]]:
    reference = _reference()
    out = []
    for word in words:
        expected = reference.stemWord(word)
        if stem(word) != expected:
            out.append((word, stem(word), expected))
    return out


def test_hand_written_words_match_snowball() -> None:
    words = HAND_WRITTEN.split()
    assert _mismatches(words) == []


@pytest.mark.slow
def test_fixture_vocabulary_matches_snowball() -> None:
    if not CLAUDE_CODE_FIXTURES.is_dir():
        pytest.skip(f"../shared/fixtures is absent: {CLAUDE_CODE_FIXTURES} not found")
    words = _fixture_words()
    assert len(words) > 1000
    assert _mismatches(sorted(words)) == []


def test_system_dictionary_matches_snowball() -> None:
    if not DICT_WORDS.is_file():
        pytest.skip(f"{DICT_WORDS} is absent")
    text = DICT_WORDS.read_text(encoding="utf-8", errors="replace").lower()
    words = set(_WORD.findall(text))
    assert _mismatches(sorted(words)) == []


def test_known_stems() -> None:
    """A few stems written out, so the module is tested without PyStemmer too."""
    expected = {
        "caresses": "caress",
        "ponies": "poni",
        "ties": "tie",
        "running": "run",
        "hoping": "hope",
        "generously": "generous",
        "communication": "communic",
        "international": "internat",
        "pasted": "paste",
        "dying": "die",
        "innings": "inning",
        "proceedings": "proceed",
        "skies": "sky",
        "biologist": "biolog",
        "dogs'": "dog",
        "yyy": "yyy",
        "sayyes": "sayy",
        "by": "by",
        "a": "a",
        "": "",
    }
    assert {word: stem(word) for word in expected} == expected


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz'", max_size=16))
def test_random_words_match_snowball(word: str) -> None:
    assert stem(word) == _reference().stemWord(word)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="aeiouylsntdgbe'", max_size=14))
def test_random_rule_dense_words_match_snowball(word: str) -> None:
    """A small alphabet full of vowels, y and suffix letters reaches the rules far more often."""
    assert stem(word) == _reference().stemWord(word)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="aeioulnstwxyYéßø'’", max_size=12))
def test_non_ascii_and_capital_y_match_snowball(word: str) -> None:
    """Outside a-z, Snowball's C works on code points; so does the module (see its docstring)."""
    assert stem(word) == _reference().stemWord(word)


@pytest.mark.slow
def test_deterministic_and_idempotent_where_snowball_is() -> None:
    reference = _reference()
    words = HAND_WRITTEN.split()
    if CLAUDE_CODE_FIXTURES.is_dir():
        words += sorted(_fixture_words())
    first = [stem(word) for word in words]
    stem_module._cache.clear()
    assert [stem_module._stem(word) for word in words] == first
    assert [stem(word) for word in words] == first
    # Porter2 is not idempotent ("generalization" -> "general" -> "general", but
    # "agreed" -> "agre" -> "agr"): assert it only where Snowball's C is
    for once in first:
        twice = reference.stemWord(once)
        assert stem(once) == twice
        if twice == once:
            assert stem(once) == once


@pytest.mark.slow
def test_cache_is_bounded() -> None:
    limit = stem_module._CACHE_LIMIT
    for i in range(limit + 10):
        stem(f"word{i}s")
    assert len(stem_module._cache) <= limit
    assert stem("words") == "word"
