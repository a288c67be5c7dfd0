"""The Snowball English ("Porter2") stemmer, in pure Python: :func:`stem`.

What it is: a line-by-line translation of the Snowball program ``algorithms/english.sbl`` as
Snowball 3 has it (https://snowballstem.org/algorithms/english/stemmer.html): the exceptional
forms (``skies``, ``idly``, ``news``...), consonant ``y`` marked ``Y``, R1 and R2 with the
prefixes ``gener``, ``commun``, ``arsen``, ``past``, ``univers``, ``later``, ``emerg``,
``organ`` and ``inter``, the apostrophe suffixes, steps 1a to 5 with the short syllable and
short word rules, and Snowball 3's changes to the 2006 algorithm (``ogist``, ``past`` as a short
syllable, ``dying``/``vying`` and the ``inning``/``proceed`` family handled inside step 1b).

Why it exists: the search index stems every word it indexes and every word of a query, and the
stems are written into the index files, so the stemmer must be a pure, deterministic function
that gives the same stem on every machine and in every process; and the core library may
depend only on msgspec, blake3, zstandard, numpy and typer, so it cannot use PyStemmer (a C
extension). This module uses only the standard library. Changing any rule changes stems that
are already on disk: do it only together with a rebuild of every search index.

It is checked word for word against Snowball's own C implementation (PyStemmer's
``Stemmer.Stemmer('english').stemWord``, PyStemmer 3.1) by ``tests/retrieval/test_stem.py``: the
~12,000 distinct words of the ``../shared`` claude-code fixtures, a hand-written list that
reaches every rule, and Hypothesis' random words; and, once, by hand, every string of 1 to 5
letters a-z (12.4 million), every 6-letter string over ``aeiouylsntdgcbr'`` and every
7-letter string over ``aeiyglnst'``, with no difference.

Input: the tokenizer passes lowercase ASCII words (letters a-z and the apostrophe). Other text
gets Snowball's answer too, since its C code works on code points as this module does: a
letter outside a-z is a non-vowel like any consonant, an input ``Y`` is the marked consonant
``y``, and words of 2 code points or fewer come back unchanged.

Speed (CPython 3.11, a 2-core Intel Xeon, the fixtures' 12,349 distinct words): about
300,000 words/s uncached, 12 to 15 million words/s for words already cached; the fixtures'
1.1 million word tokens stem at 5 to 10 million/s from a cold cache, since a text repeats its
words. Results are cached in a dict that is emptied when it reaches 100,000 entries.
"""

from __future__ import annotations

import re

__all__ = ["stem"]

_VOWELS = "aeiouy"
# a short syllable's last letter: a non-vowel other than w, x and Y (the marked consonant y)
_NOT_LAST_OF_SHORT = "aeiouywxY"
_VALID_LI = "cdeghkmnrt"
_DOUBLES = frozenset(("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt"))

# gopast v  gopast non-v: the end of the first vowel-then-non-vowel at or after a position
_VOWEL_THEN_NON_VOWEL = re.compile("[aeiouy][^aeiouy]")
_VOWEL = re.compile("[aeiouy]")

# R1 starts after these prefixes when a word begins with one (none is a prefix of another)
_R1_PREFIXES = (
    "gener",
    "commun",
    "arsen",
    "past",
    "univers",
    "later",
    "emerg",
    "organ",
    "inter",
)

# whole words, stemmed before anything else (exception1)
_EXCEPTIONS = {
    "skis": "ski",
    "skies": "sky",
    "idly": "idl",
    "gently": "gentl",
    "ugly": "ugli",
    "early": "earli",
    "only": "onli",
    "singly": "singl",
    "sky": "sky",
    "news": "news",
    "howe": "howe",
    "atlas": "atlas",
    "cosmos": "cosmos",
    "bias": "bias",
    "andes": "andes",
}

# step 1b: what stays of ...eed(ly) and ...ing when it is the whole rest of the word
_EED_KEEP = frozenset(("proc", "exc", "succ"))
_ING_KEEP = frozenset(("inn", "out", "cann", "herr", "earr", "even"))

# steps 2 and 3: suffix -> replacement, for suffixes in R1; "" marks a conditional rule
_STEP2 = {
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "abli": "able",
    "entli": "ent",
    "izer": "ize",
    "ization": "ize",
    "ational": "ate",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "aliti": "al",
    "alli": "al",
    "fulness": "ful",
    "ousli": "ous",
    "ousness": "ous",
    "iveness": "ive",
    "iviti": "ive",
    "biliti": "ble",
    "bli": "ble",
    "ogist": "og",
    "ogi": "",  # -> og after l
    "fulli": "ful",
    "lessli": "less",
    "li": "",  # deleted after a valid li-ending
}
_STEP3 = {
    "tional": "tion",
    "ational": "ate",
    "alize": "al",
    "icate": "ic",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
    "ative": "",  # deleted in R2 only
}
# step 4: suffixes deleted in R2 ("ion" only after s or t)
_STEP4 = frozenset(
    (
        "al",
        "ance",
        "ence",
        "er",
        "ic",
        "able",
        "ible",
        "ant",
        "ement",
        "ment",
        "ent",
        "ism",
        "ate",
        "iti",
        "ous",
        "ive",
        "ize",
        "ion",
    )
)
# the lengths of each table's suffixes, longest first: Snowball's among takes the longest
_STEP2_LENGTHS = tuple(sorted({len(s) for s in _STEP2}, reverse=True))
_STEP3_LENGTHS = tuple(sorted({len(s) for s in _STEP3}, reverse=True))
_STEP4_LENGTHS = tuple(sorted({len(s) for s in _STEP4}, reverse=True))

_CACHE_LIMIT = 100_000
_cache: dict[str, str] = {}


def _longest_suffix(
    w: str, lengths: tuple[int, ...], table: dict[str, str]
) -> tuple[str, str, int] | None:
    """(suffix, replacement, where it starts) of the longest suffix of ``w`` in ``table``
    (``lengths``: the table's suffix lengths, longest first), or None: Snowball's ``among``."""
    n = len(w)
    for length in lengths:
        if length <= n:
            replacement = table.get(w[-length:])
            if replacement is not None:
                return w[-length:], replacement, n - length
    return None


def stem(word: str) -> str:
    """The Snowball English stem of ``word`` (a lowercase word), exactly as Snowball's C code.

    Words of 2 letters or fewer come back unchanged. Results are cached.
    """
    result = _cache.get(word)
    if result is None:
        result = _stem(word)
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[word] = result
    return result


def _short_syllable(w: str, end: int) -> bool:
    """Whether ``w[:end]`` ends with a short syllable (Snowball's ``shortv``)."""
    if end >= 3:
        if (
            w[end - 1] not in _NOT_LAST_OF_SHORT
            and w[end - 2] in _VOWELS
            and w[end - 3] not in _VOWELS
        ):
            return True
    elif end == 2 and w[1] not in _VOWELS and w[0] in _VOWELS:
        return True
    return w.endswith("past", 0, end)


def _stem(word: str) -> str:
    exception = _EXCEPTIONS.get(word)
    if exception is not None:
        return exception
    if len(word) < 3:
        return word

    # prelude: drop one leading apostrophe, mark consonant y as Y
    if word[0] == "'":
        word = word[1:]
    y_found = False
    if "y" in word:
        chars = list(word)
        if chars[0] == "y":
            chars[0] = "Y"
            y_found = True
        for i in range(1, len(chars)):
            if chars[i] == "y" and chars[i - 1] in _VOWELS:
                chars[i] = "Y"
                y_found = True
        word = "".join(chars)

    # R1 and R2, as positions from the start (every later change is at the end)
    n = len(word)
    p1 = p2 = n
    start = -1
    for prefix in _R1_PREFIXES:
        if word.startswith(prefix):
            start = len(prefix)
            break
    else:
        match = _VOWEL_THEN_NON_VOWEL.search(word)
        if match is not None:
            start = match.end()
    if start >= 0:
        p1 = start
        match = _VOWEL_THEN_NON_VOWEL.search(word, start)
        if match is not None:
            p2 = match.end()

    w = word

    # step 1a: apostrophe suffixes, then plurals
    if w.endswith("'"):
        w = w[:-3] if w.endswith("'s'") else w[:-1]
    elif w.endswith("'s"):
        w = w[:-2]
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = w[:-2] if len(w) > 4 else w[:-1]
        elif w.endswith(("us", "ss")):
            pass
        elif len(w) >= 3 and _VOWEL.search(w, 0, len(w) - 2) is not None:
            w = w[:-1]
    elif w.endswith("ied"):
        w = w[:-2] if len(w) > 4 else w[:-1]

    # step 1b
    cut = 0
    if w.endswith("eed"):
        if w[:-3] not in _EED_KEEP and len(w) - 3 >= p1:
            w = w[:-1]
    elif w.endswith("eedly"):
        if w[:-5] not in _EED_KEEP and len(w) - 5 >= p1:
            w = w[:-3]
    elif w.endswith("ing"):
        if w.endswith("ying") and len(w) == 5 and w[0] not in _VOWELS:
            w = w[0] + "ie"
        elif w[:-3] not in _ING_KEEP:
            cut = 3
    elif w.endswith("ed"):
        cut = 2
    elif w.endswith("ingly"):
        cut = 5
    elif w.endswith("edly"):
        cut = 4
    if cut and _VOWEL.search(w, 0, len(w) - cut) is not None:
        w = w[:-cut]
        end = w[-2:]
        if end in ("at", "bl", "iz"):
            w += "e"
        elif end in _DOUBLES:
            if not (len(w) == 3 and w[0] in "aeo"):
                w = w[:-1]
        elif len(w) == p1 and _short_syllable(w, len(w)):
            w += "e"

    # step 1c: y after a non-vowel that is not the first letter
    n = len(w)
    if n >= 3 and w[-1] in "yY" and w[-2] not in _VOWELS:
        w = w[:-1] + "i"

    # step 2
    found = _longest_suffix(w, _STEP2_LENGTHS, _STEP2)
    if found is not None and found[2] >= p1:
        suffix, replacement, at = found
        if replacement:
            w = w[:at] + replacement
        elif suffix == "li":
            if at >= 1 and w[at - 1] in _VALID_LI:
                w = w[:at]
        elif at >= 1 and w[at - 1] == "l":  # ogi
            w = w[:at] + "og"

    # step 3
    found = _longest_suffix(w, _STEP3_LENGTHS, _STEP3)
    if found is not None and found[2] >= p1:
        suffix, replacement, at = found
        if replacement:
            w = w[:at] + replacement
        elif suffix != "ative" or at >= p2:
            w = w[:at]

    # step 4
    n = len(w)
    for length in _STEP4_LENGTHS:
        if length > n:
            continue
        suffix = w[-length:]
        if suffix not in _STEP4:
            continue
        at = n - length
        if at >= p2 and (suffix != "ion" or (at >= 1 and w[at - 1] in "st")):
            w = w[:at]
        break

    # step 5
    n = len(w)
    if n:
        last = w[-1]
        at = n - 1
        if last == "e":
            if at >= p2 or (at >= p1 and not _short_syllable(w, at)):
                w = w[:at]
        elif last == "l" and at >= p2 and at >= 1 and w[at - 1] == "l":
            w = w[:at]

    # postlude
    if y_found:
        w = w.replace("Y", "y")
    return w
