"""Secret redaction: well-known secrets are replaced in frames before they are sealed.

A :class:`Redactor` is a store's ``redactor`` (``Store(path, redactor=Redactor())``): every frame
of every batch goes through it before it is numbered, checked and chained, so a secret never
reaches the log, and so never a summary, an index or a bundle either (they are all made from
the log). The Claude Code ingest applies one by default, to tool outputs before they become
artifacts too.

What is matched (:data:`BUILTIN_RULES`, in the order they are tried): private key blocks (PEM,
base64-encoded, PuTTY), the tokens of some eighty providers, each recognised by its documented
prefix and shape with or without a key name in front (Anthropic, OpenAI, Google, GitHub,
GitLab, Slack, Stripe, Hugging Face, npm, PyPI, SendGrid ``SG.``, Databricks ``dapi``, Mailgun
``key-``, DigitalOcean ``dop_v1_``, Shopify ``shpat_``, Square ``sq0csp-``, Vault ``hvs.``,
Terraform ``….atlasv1.…``, age ``AGE-SECRET-KEY-1``, Postman ``PMAK-`` and the others of
:data:`_PROVIDER_RULES`), AWS access key ids and secret keys, JWTs; secrets known by what is
around them (:data:`_CONTEXT_RULES`: a Twilio auth token after its account SID, a registry's
``"auth"``, a kubeconfig's ``client-key-data``, Azure account keys and SAS signatures,
``mysql -p…``, ``sshpass -p``, ``redis-cli -a``, ``docker login -p``, ``--password``/``--token``
flags, ``.netrc``, Discord and Teams webhooks, ``Authorization: token|Bot|SSWS …``); bearer and
basic credentials and API-key headers, passwords in URLs and ``curl -u``, and assignments whose
key names a secret (``API_KEY=…``, ``PGPASSWORD=…``, ``"password": "…"``; only the value goes).
A match is replaced by ``[REDACTED:<rule id>]``: the rest of the text, an assignment's key
included, stays as it was. Redacting again changes nothing.

Where: every text a model or a user reads (message text, thinking, tool inputs (every string
inside, recursively), tool results, their previews and their text parts, a thread's title,
observations, a job's params, result and error, a recall query, a retraction's reason); never
ids, digests, signatures or artifact ids. JSON that a provider or a runtime wrote is redacted
string by string, keys kept (:meth:`Redactor.redact_json`): a provider block's ``data`` (and its
``text``), the layout hints a converter keeps in a message's ``meta`` (``<provider>.layout``:
raw tool arguments, citations, parts kept whole), a record's ``data``. What a provider must get
back byte for byte is left alone there (:data:`OPAQUE_KEYS`, encrypted thinking, base64
payloads: see :func:`opaque`). A frame without secrets comes back as the same object, and the
common case is cheap: each rule's pattern starts with a literal the regex engine skips to, or
the rule has keywords a text must hold before it is searched (and a JSON value's strings are
gated all at once: :meth:`Redactor.redact_json`).

How many: a message or ``thread_created`` frame that lost secrets says how many in
``meta["redacted"]`` (``stats`` adds them up without scanning again). Frames without ``meta``
(records, retractions, …) are redacted all the same, but not counted. What repeats another
member of the same message is not counted twice: a provider block's ``text`` (made from its
``data``) counts only as far as it holds more secrets than the data, and the layout hints (raw
arguments of a call whose input is a block, a part kept whole beside the text that tells it, a
citation's quote) only as far as they hold more than the blocks.

Configuration (``<store>/redaction.json`` for the Claude Code adapter, :func:`load_redactor`
for anyone)::

    {"enabled": true,
     "disable": ["jwt"],
     "rules": [{"id": "acme-token", "pattern": "acme_[A-Za-z0-9]{32}", "keywords": ["acme_"]}]}

A rule's ``pattern`` is a Python regular expression; when it has a group named ``secret`` only
that group is replaced. Artifacts a caller stores itself are not frames: pass their bytes
through :meth:`Redactor.redact_bytes` first.
"""

from __future__ import annotations

import binascii
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.errors import BadFrame, InvalidSettings

__all__ = [
    "BUILTIN_RULES",
    "CONFIG_FILE",
    "MARKER_PREFIX",
    "META_KEY",
    "RedactionConfig",
    "RedactionRule",
    "Redactor",
    "RuleConfig",
    "load_redactor",
    "redaction_count",
]

MARKER_PREFIX: Final = "[REDACTED:"
META_KEY: Final = "redacted"
CONFIG_FILE: Final = "redaction.json"
_RULE_ID_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")


TOKEN_MIN_CHARS: Final = 16
"""The shortest token a ``token`` rule matches (an Alibaba key id: ``LTAI`` and 12 more)."""


def long_words(text: str) -> str:
    """The words of ``text`` (split at whitespace) of :data:`TOKEN_MIN_CHARS` characters or
    more, joined by spaces: where a token rule's keyword can be, when it matches."""
    return " ".join([w for w in text.split() if len(w) >= TOKEN_MIN_CHARS])


class RedactionRule:
    """One kind of secret.

    ``pattern`` is a regular expression; the secret is its group ``secret`` when it has one,
    else the whole match. ``keywords`` are literal strings one of which every match contains:
    a text holding none of them is not searched (a pattern that starts with a literal needs
    none: the regex engine skips to it). ``ignore_case`` matches regardless of case (keywords
    too). ``lowered`` says the pattern is written for lower-cased text: it is searched in
    ``text.lower()``, which is several times faster than ignoring case, and gives the same
    matches. ``boundary`` holds the characters that must not touch a match on either side (a
    key is a whole token), and ``accept``, when given, may turn a secret down (a placeholder).
    ``token`` says that where a match holds a keyword, the keyword is in a run of
    :data:`TOKEN_MIN_CHARS` or more characters without whitespace (a provider's token, or an
    account id glued to one), so its keywords are looked for in the text's long words alone
    (:func:`long_words`): most of a text is short words, and a hundred rules' keywords are
    looked for in what is left, not in all of it.
    """

    __slots__ = (
        "_compiled",
        "_folded",
        "_group",
        "accept",
        "boundary",
        "fold",
        "id",
        "keywords",
        "lowered",
        "pattern",
        "probes",
        "token",
    )

    def __init__(
        self,
        id: str,
        pattern: str,
        *,
        keywords: Iterable[str] = (),
        ignore_case: bool = False,
        lowered: bool = False,
        boundary: str = "",
        accept: Callable[[str], bool] | None = None,
        token: bool = False,
    ) -> None:
        if not (0 < len(id) <= 64 and id[0].isalnum() and set(id) <= _RULE_ID_CHARS):
            raise ValueError(
                f"redaction rule id {id!r}: use 1-64 lower-case letters, digits and . _ -"
            )
        self.id = id
        self.pattern = pattern
        self.lowered = lowered
        self.fold = ignore_case or lowered
        self.keywords = tuple(k.lower() if self.fold else k for k in keywords)
        self.boundary = frozenset(boundary)
        self.accept = accept
        self.token = token
        hay = 2 if token else 1 if self.fold else 0  # long words, lowered text, text
        self.probes = tuple((hay, k) for k in self.keywords)
        self._compiled: re.Pattern[str] | None = None
        self._folded: re.Pattern[str] | None = None
        self._group: int | str = 0

    @property
    def marker(self) -> str:
        return f"{MARKER_PREFIX}{self.id}]"

    def compile(self) -> re.Pattern[str]:
        """The compiled pattern, compiled on first use (a hook process pays only for the rules
        its texts call for). Raises :class:`re.error` for a bad pattern."""
        if self._compiled is None:
            flags = re.IGNORECASE if self.fold and not self.lowered else 0
            self._compiled = re.compile(self.pattern, flags)
            self._group = "secret" if "secret" in self._compiled.groupindex else 0
        return self._compiled

    def _target(self, text: str, lowered: str | None) -> tuple[re.Pattern[str], str]:
        """The regex and the string to search: ``lowered`` when the pattern is written for it
        and lowering kept every character in place (a few characters lower to two)."""
        regex = self.compile()
        if not self.lowered:
            return regex, text
        if lowered is not None and len(lowered) == len(text):
            return regex, lowered
        if self._folded is None:
            self._folded = re.compile(self.pattern, re.IGNORECASE)
        return self._folded, text

    def secret_span(self, text: str, m: re.Match[str]) -> tuple[int, int] | None:
        """Where the secret of match ``m`` is in ``text``, or None when it is not one."""
        start, end = m.span(self._group)
        if start >= end:  # the group did not take part
            return None
        if self.boundary:
            before, after = m.start() - 1, m.end()
            if (before >= 0 and text[before] in self.boundary) or (
                after < len(text) and text[after] in self.boundary
            ):
                return None
        if text.startswith(MARKER_PREFIX, start):
            return None
        if self.accept is not None and not self.accept(text[start:end]):
            return None
        return start, end

    def apply(self, text: str, lowered: str | None = None) -> tuple[str, int]:
        """``text`` with every secret replaced by the marker, and how many were."""
        regex, hay = self._target(text, lowered)
        marker = self.marker
        parts: list[str] = []
        pos = n = 0
        for m in regex.finditer(hay):
            if m.end() <= pos:  # inside the secret just replaced
                continue
            span = self.secret_span(text, m)
            if span is None or span[0] < pos:
                continue
            parts.append(text[pos : span[0]])
            parts.append(marker)
            pos = span[1]
            n += 1
        if not n:
            return text, 0
        parts.append(text[pos:])
        return "".join(parts), n

    def __repr__(self) -> str:
        return f"RedactionRule({self.id!r})"


class _Lazy:
    """A pattern compiled on first use: importing this module (every hook does) compiles
    none of the helpers' patterns, only what a text calls for."""

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def _get(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._pattern, self._flags)
        return self._compiled

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._get().search(text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._get().match(text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._get().fullmatch(text, pos, endpos)


# --- the assignment rule: a key that names a secret, and a value that looks like one --------

_SECRET_WORDS: Final = frozenset(
    [
        "secret",
        "secrets",
        "token",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "credential",
        "credentials",
        "apikey",
        "secretkey",
        "accesskey",
        "privatekey",
    ]
)
_KEY_QUALIFIERS: Final = frozenset(
    [
        "api",
        "access",
        "account",
        "admin",
        "app",
        "auth",
        "client",
        "encryption",
        "license",
        "master",
        "private",
        "secret",
        "service",
        "session",
        "signing",
        "webhook",
    ]
)
# Patterns are compiled on first use (through re's own cache), like the rules: a hook process
# whose texts never call for them does not pay for them.
_WORD_SPLIT: Final = r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])"
_ENV_NAME: Final = r"[A-Z][A-Z0-9_]*"
_DOTTED: Final = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
_IDENTIFIER: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_PLACEHOLDERS: Final = frozenset(
    [
        "changeme",
        "change_me",
        "password",
        "secret",
        "token",
        "none",
        "null",
        "undefined",
        "true",
        "false",
        "redacted",
        "example",
        "placeholder",
    ]
)
_MIN_VALUE_CHARS: Final = 8
_WORDS_JOINED: Final = (
    r"(?:[A-Z]+|[A-Za-z][a-z]*)(?:[-_]+(?:[A-Z]+|[A-Za-z][a-z]*))+"
    r"|(?:[A-Z][a-z]*){2,}|[a-z]+(?:[A-Z][a-z]+)+"
)
"""``proxy-handled``, ``refresh_token``, ``REDACTED_API_KEY``, ``InvalidAllowCredentials``:
words joined, no digit: a value a program names (a mode, a placeholder, a constant, a type),
not a key."""


_NOT_A_SECRET: Final = 0
_WEAK: Final = 1
_STRONG: Final = 2


def _key_strength(key: str) -> int:
    """How surely an assignment's key names a secret. Strong: its last word is one
    (``DB_PASSWORD``, ``authToken``, ``client-secret``, ``NGROK_AUTHTOKEN``), or it is
    ``<qualifier> key`` (``api_key``, ``secretKey``, ``SIGNING_KEY``), or a private key's id.
    Weak: any other environment name ending in ``_KEY`` or ``_PASS`` (``STRIPE_KEY``, but also
    ``SORT_KEY``), and the names whose last word may name a credential or something else
    (``..._PAT``, ``X-Acme-Auth``, ``sessionid``): their value must look random.
    ``max_tokens``, ``sort_key`` and ``password_file`` name no secret."""
    words = [w for w in re.split(_WORD_SPLIT, key.strip("\"'")) if w]
    if not words:
        return _NOT_A_SECRET
    low = [w.lower() for w in words]
    if low[-1] == "base" and len(low) > 1:  # SECRET_KEY_BASE
        low.pop()
    last = low[-1]
    if "public" in low or "publickey" in low:  # publicKeyToken, PUBLIC_KEY: not secrets
        return _NOT_A_SECRET
    if last in _SECRET_WORDS or last.endswith(_COMPOUND_ENDINGS):
        return _STRONG  # DB_PASSWORD, authToken; PGPASSWORD, NGROK_AUTHTOKEN as one word
    if len(low) > 1 and last in ("key", "pass"):
        if low[-2] in _KEY_QUALIFIERS:
            return _STRONG
        if re.fullmatch(_ENV_NAME, key):
            return _WEAK
    if low[-2:] == ["key", "id"] and "private" in low:  # a service account's private_key_id
        return _STRONG
    if last in _WEAK_WORDS:
        return _WEAK
    return _NOT_A_SECRET


_WEAK_WORDS: Final = frozenset(
    ["auth", "pat", "sessionid", "sid", "dsn", "signature", "cookie", "creds", "authkey"]
)
_COMPOUND_ENDINGS: Final = ("password", "passwd", "passphrase", "secret", "token", "apikey")


@functools.lru_cache(maxsize=1024)
def _may_name_secret(key: str) -> bool:
    """Whether ``key`` holds a word every key :func:`_key_strength` takes for a secret's name
    holds (the cheap test, cached: the keys of JSON repeat)."""
    low = key.lower()
    return any(word in low for word in _SECRET_KEY_WORDS)


_SECRET_KEY_WORDS: Final = (
    "key",
    "secret",
    "token",
    "pass",
    "pwd",
    "credential",
    "auth",
    "pat",
    "sid",
    "sessionid",
    "dsn",
    "signature",
    "cookie",
    "creds",
)


def _looks_random(value: str) -> bool:
    """What a key, unlike a setting or a variable, almost always is: it holds a digit, and it
    is no identifier (``created_at``, ``access_token_v2``) unless a long one without ``_``
    (``a1B2c3D4e5F6``) or one whose words are not words (``n7b5H8zP_MO6Rban7JL2``: see
    :func:`random_run`)."""
    if not any(c.isdigit() for c in value):
        return False
    if not re.fullmatch(_IDENTIFIER, value) or ("_" not in value and len(value) >= 12):
        return True
    return random_run(value)


_CHUNKS: Final = r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])"
_WORDLIKE: Final = r"[A-Za-z][a-z]*\d{0,3}|[A-Z]+\d{0,3}|\d+[a-z]{0,2}"
_RANDOM_MIN_CHARS: Final = 12
"""How many characters of a run must be in pieces that are not words for it to be random."""


def random_run(run: str) -> bool:
    """Whether ``run`` (a run of characters without whitespace) looks machine-made rather than
    written: cut at punctuation and at a lower-to-upper case change, its pieces are not words
    (``Parse``, ``utf8``, ``v2``, ``2026``) for 12 characters or more, it holds two digits and
    four letters, and it is not hex (a digest, a uuid, a commit: their own rules decide, by
    what is around them). A key's characters are drawn at random, so a digit lands between
    letters; a name's are words."""
    digits = letters = 0
    for c in run:
        if c.isdigit():
            digits += 1
        elif c.isalpha():
            letters += 1
    if digits < 2 or letters < 4:
        return False
    if re.fullmatch(r"[0-9a-f_.:-]+|[0-9A-F_.:-]+", run):
        return False
    odd = 0
    wordlike = re.compile(_WORDLIKE)
    for piece in re.split(_CHUNKS, run):
        if len(piece) > 3 and not wordlike.fullmatch(piece):
            odd += len(piece)
    if odd < _RANDOM_MIN_CHARS:
        return False
    segments = [g for g in re.split(r"[^A-Za-z0-9]+", run) if len(g) >= 8]
    return any(_machine_made(g) for g in segments)


def _plausible_value(value: str) -> bool:
    """Not a placeholder, a reference or a path: long enough, and not ``${VAR}``, ``<key>``,
    ``****``, ``os.environ``, ``~/.ssh/id_rsa``, ``proxy-handled``, ``REDACTED_API_KEY`` or a
    URL (its password has its own rule)."""
    if len(value) < _MIN_VALUE_CHARS or value.startswith(MARKER_PREFIX):
        return False
    if any(c.isspace() for c in value):  # a sentence ("must be 8 characters"), not a key
        return False
    if value[0] in "$%{<*[(" or value.startswith(("~/", "./", "../")) or "://" in value:
        return False
    low = value.lower()
    if low in _PLACEHOLDERS or low.startswith("your") or len(set(low)) == 1:
        return False
    if low.rstrip("0123456789") in _PLACEHOLDERS or "..." in value or "\u2026" in value:
        return False  # password1, an example cut short
    if re.fullmatch(_WORDS_JOINED, value):  # a setting's word or a constant's name
        return False
    return not _is_reference(value)


def _is_reference(value: str) -> bool:
    """``settings.GITHUB_TOKEN``, ``os.environ.key``: dotted names, where a dotted token is
    not one (``hvs.CAESIJ…``, ``<14>.atlasv1.<60>``: a part of 16 characters or more with a
    digit in it is key material, not a name)."""
    if not re.fullmatch(_DOTTED, value):
        return False
    parts = value.split(".")
    if len(parts[0]) >= 4 and parts[-1][:1].isupper() and not random_run(parts[-1]):
        return True  # module.TypeName2
    return not any(len(part) >= 16 and _has_digit(part) for part in parts)


_VALUE: Final = (
    r"""[ \t]*(?:"(?P<dq>(?:[^"\\\n]|\\.)*)"|'(?P<sq>[^'\n]*)'"""
    r"""|(?P<bare>[^\s"'`,;&|(){}\[\]<>]{1,1024}))"""
)
_MAX_BARE_VALUE: Final = 1024
"""An unquoted value stops here (a search that reads each value to its end would take time in
the square of a line made of ``key=key=key=…``)."""
_BARE_CHAR: Final = r"""[^\s"'`,;&|(){}\[\]<>]"""
_LINE_REST: Final = r"[ \t]*(?:#.*)?(?:\r?\n|$)"
_KEY_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_LINE_LEAD: Final = r"[ \t]*(?:-[ \t]+|export[ \t]+)?[\"']?"


_ASSIGNMENT_MARKER: Final = f"{MARKER_PREFIX}secret-assignment]"


class _AssignmentRule(RedactionRule):
    """``KEY=value``, ``key: value``, ``"key": "value"`` (``:=`` and ``=>`` too) where the key
    names a secret (:func:`_key_strength`); only the value is replaced.

    The value must look like one (:func:`_plausible_value`), and code must not look like it:
    a bare (unquoted) value counts after ``=`` when the key is an environment name or the value
    holds a digit and is no identifier, and after ``:`` only as a whole line's value (YAML) with
    the same test; a quoted value counts whatever the key's case.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(
            "secret-assignment",
            r"(?:key|secret|token|passw(?:or)?d|passphrase|pwd|pass|credentials?)(?:_base)?"
            r"""(?P<q>["']?)[ \t]*(?P<sep>:=|=>|=(?!=)|:(?![:/]))""",
            keywords=("key", "secret", "token", "pass", "pwd", "credential"),
            lowered=True,
        )

    def secret_span(self, text: str, m: re.Match[str]) -> tuple[int, int] | None:
        word_end = m.start("q")
        start = m.start()
        while start > 0 and text[start - 1] in _KEY_CHARS and word_end - start < 128:
            start -= 1
        quote = m.group("q")
        if quote and (start == 0 or text[start - 1] != quote):
            return None
        key = text[start:word_end]
        strength = _key_strength(key)
        if strength == _NOT_A_SECRET:
            return None
        v = re.compile(_VALUE).match(text, m.end())
        if v is None:
            return None
        sep = m.group("sep")
        bare = v.group("bare")
        if bare is None:
            group = "dq" if v.group("dq") is not None else "sq"
            value = v.group(group)
            if not _plausible_value(value) or (strength == _WEAK and not _looks_random(value)):
                return None
            return v.span(group)
        after = v.end()
        if after < len(text) and text[after] in "([":  # a call or a subscript: code
            return None
        if not _plausible_value(bare):
            return None
        env_name = strength == _STRONG and bool(re.fullmatch(_ENV_NAME, key))
        if len(bare) == _MAX_BARE_VALUE:  # a long value (a whole credentials file in base64)
            if not (env_name or _looks_random(bare)):
                return None
            after = _run_end(text, after)
        if sep == ":":
            line_start = text.rfind("\n", 0, start) + 1
            leading = re.compile(_LINE_LEAD).fullmatch(
                text, line_start, start - (1 if quote else 0)
            )
            if leading is None or not re.compile(_LINE_REST).match(text, after):
                return None
        if not (env_name or _looks_random(bare)):
            return None
        return v.start("bare"), after


_last_run: list[tuple[str, int, int]] = [("", 0, 0)]


def _run_end(text: str, at: int) -> int:
    """Where the run of value characters that goes on at ``at`` ends. The last answer is kept:
    in a line of ``token:a1token:a1…`` every match is in the same run, which is read once."""
    cached, start, end = _last_run[0]
    if cached is text and start <= at <= end:
        return end
    m = re.compile(f"{_BARE_CHAR}*").match(text, at)
    end = m.end() if m else at
    _last_run[0] = (text, at, end)
    return end


class _PgpassRule(RedactionRule):
    """A ``.pgpass`` line, found from its ``:port:`` (a literal the engine skips to): the
    line must start with a host name (or ``*``) just before it."""

    __slots__ = ()

    def secret_span(self, text: str, m: re.Match[str]) -> tuple[int, int] | None:
        line_start = max(text.rfind("\n", 0, m.start()), text.rfind("\r", 0, m.start())) + 1
        if not _PGPASS_HOST.fullmatch(text, line_start, m.start()):
            return None
        return super().secret_span(text, m)


_PGPASS_HOST: Final = _Lazy(r"[ \t]*(?:[A-Za-z0-9*][A-Za-z0-9.*_-]*|\[[0-9a-fA-F:]+\])")


class _HeaderRule(RedactionRule):
    """``X-Acme-Api-Key: <value>``: found from the name's last word; the whole name (a word
    with a dash in it) must start a line, or a curl ``-H '…'``."""

    __slots__ = ()

    def secret_span(self, text: str, m: re.Match[str]) -> tuple[int, int] | None:
        start = m.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "-"):
            start -= 1
        name = text[start : m.start()]
        if "-" not in name or not name[:1].isalpha() or m.start() - start > 64:
            return None
        lead = text[max(0, start - 24) : start].rstrip(" \t")
        if not (
            start == 0
            or not lead
            or lead.endswith(("\n", "\r", "\\n"))
            or _HEADER_FLAG.search(lead)
        ):
            return None
        return super().secret_span(text, m)


_HEADER_FLAG: Final = _Lazy(r"(?:-H|--header)[ \t=]*[\"']$", re.IGNORECASE)


class _XmlSecretRule(RedactionRule):
    """``<password>…</password>`` and ``<add key="ClearTextPassword" value="…" />``: an XML
    element or a key/value pair whose name names a secret (:func:`_key_strength`)."""

    __slots__ = ()

    def secret_span(self, text: str, m: re.Match[str]) -> tuple[int, int] | None:
        name, group = (m.group("tag"), "secret") if m.group("tag") else (m.group("key"), "v")
        if (
            group == "v"
            and m.start() > 0
            and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")
        ):
            return None  # monkey="…": not a key attribute
        strength = _key_strength(name)
        value = m.group(group)
        if strength == _NOT_A_SECRET or value.startswith(MARKER_PREFIX):
            return None
        if not _plausible_password(value) or (strength == _WEAK and not _looks_random(value)):
            return None
        return m.span(group)


_COOKIE_ATTRIBUTES: Final = frozenset(
    ["path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority"]
)
_SESSION_NAMES: Final = ("sess", "sid", "auth", "token", "remember", "jwt", "login", "secret")


class _CookieRule(RedactionRule):
    """The values of a ``Cookie:`` or ``Set-Cookie:`` header (or of ``curl -b``) that hold a
    session: a cookie whose name says so (``sessionid``, ``connect.sid``, ``PHPSESSID``,
    ``laravel_session``, ``remember_token``) or whose value is random; the attributes
    (``Path``, ``Expires``) and short values (``lang=en``) stay."""

    __slots__ = ()

    def apply(self, text: str, lowered: str | None = None) -> tuple[str, int]:
        regex, hay = self._target(text, lowered)
        marker = self.marker
        parts: list[str] = []
        pos = n = 0
        for m in regex.finditer(hay):
            start, end = m.span("secret")
            if start < pos:
                continue
            if hay[m.start()] == "-" and m.start() > 0 and not text[m.start() - 1].isspace():
                continue  # a flag starts a word
            for pair in re.finditer(r"([^=;,\s]+)=([^;\s]*)", text[start:end]):
                name, value = pair.group(1), pair.group(2)
                if name.lower() in _COOKIE_ATTRIBUTES or len(value) < 8:
                    continue
                if value.startswith(MARKER_PREFIX) or not _plausible_password(value):
                    continue
                low = name.lower()
                if not (any(w in low for w in _SESSION_NAMES) or _looks_random(value)):
                    continue
                at = start + pair.start(2)
                parts.append(text[pos:at])
                parts.append(marker)
                pos = at + len(value)
                n += 1
        if not n:
            return text, 0
        parts.append(text[pos:])
        return "".join(parts), n


_TOKEN_RUN: Final = r"(?<![A-Za-z0-9_.+/=~-])[A-Za-z0-9][A-Za-z0-9_.+/=~-]{19,}"
_PREFIX: Final = r"((?:[A-Za-z][A-Za-z0-9]{0,11}[_-]){1,3})"
_SECRET_PREFIX_WORDS: Final = frozenset(
    [
        "sk",
        "rk",
        "pk",
        "pat",
        "sat",
        "key",
        "keys",
        "tok",
        "tkn",
        "token",
        "secret",
        "sec",
        "esecret",
        "live",
        "test",
        "prod",
        "api",
        "apikey",
        "ak",
        "as",
        "auth",
        "oauth",
        "access",
        "refresh",
        "session",
        "sess",
        "priv",
        "private",
        "pw",
        "pass",
        "admin",
        "bot",
        "app",
        "svc",
        "service",
        "sbox",
    ]
)
_HASH_LEAD: Final = _Lazy(
    r"(?:(?:sha\d*|md5|blake2[bs]?\d*|h1|crc32c?|xxh\d*|etag|integrity|nonce|base64)[\"']?"
    r"[:=, -]*|\$(?:2[abxy]?|1|5|6|y|argon2\w*|scrypt|pbkdf2[\w-]*)\$[^\s$]*\$?"
    r"|(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com)[ \t]+)$",
    re.IGNORECASE,
)
_HASH_HEAD: Final = _Lazy(r"(?:sha\d+|md5|blake2[bs]?\d*)[-=]", re.IGNORECASE)
_BLOB_CHARS: Final = 256
_BASE64_LINE: Final = _Lazy(r"""[ \t"'b]*[A-Za-z0-9+/]{60,}={0,2}(?:\\n)?\\?["',]*[ \t]*""")
_BASE64_LAST: Final = _Lazy(r"""[ \t"'b]*[A-Za-z0-9+/]{16,}={0,2}(?:\\n)?\\?["',]*[ \t]*""")


_VOWELS: Final = frozenset("aeiouAEIOU")
_PIECES: Final = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+"
"""A run cut where its characters change class (``Public``, ``MLKEM``, ``1024``): random
characters make pieces of two characters on average, words of five."""
_COMMON_PAIRS: Final = frozenset(
    [
        "th",
        "he",
        "in",
        "er",
        "an",
        "re",
        "on",
        "at",
        "en",
        "nd",
        "ti",
        "es",
        "or",
        "te",
        "of",
        "ed",
        "is",
        "it",
        "al",
        "ar",
        "st",
        "to",
        "nt",
        "ng",
        "se",
        "ha",
        "as",
        "ou",
        "io",
        "le",
        "ve",
        "co",
        "me",
        "de",
        "hi",
        "ri",
        "ro",
        "ic",
        "ne",
        "ea",
        "ra",
        "ce",
        "li",
        "ch",
        "ll",
        "be",
        "ma",
        "si",
        "om",
        "ur",
        "ca",
        "el",
        "ta",
        "la",
        "ns",
        "ge",
        "ly",
        "ei",
        "ut",
        "il",
        "ss",
        "ff",
        "tt",
        "ee",
        "oo",
        "us",
        "ol",
        "ad",
        "ow",
    ]
)
"""The fifty-odd commonest letter pairs of English (and of the names code is written in): a
random run of letters holds about one in fourteen of them, words one in three."""


def _machine_made(segment: str) -> bool:
    """Whether an alphanumeric ``segment`` reads as drawn at random rather than as words run
    together (``arm64ssh2libxmljs``, ``i8i16i32i64isize``, a mangled C++ name): random
    characters change class (upper, lower, digit) at most steps and hold few vowels (a fifth
    of their letters); words change class seldom and are a third or more vowels."""
    letters = vowels = changes = 0
    last = ""
    for c in segment:
        kind = "d" if c.isdigit() else "u" if c.isupper() else "l"
        if kind != "d":
            letters += 1
            vowels += c in _VOWELS
        changes += kind != last
        last = kind
    if not letters:
        return False
    pairs = [segment[i : i + 2] for i in range(len(segment) - 1)]
    pairs = [p for p in pairs if p.isalpha() and p.islower()]  # as written: words are lower
    if len(pairs) >= 6 and sum(p in _COMMON_PAIRS for p in pairs) >= 0.25 * len(pairs):
        return False  # English letter pairs: words run together
    trigrams = [segment[i : i + 3] for i in range(len(segment) - 2)]
    if len(set(trigrams)) < 0.8 * len(trigrams):  # a pattern repeated (eHh4eHh4…)
        return False
    if len(segment) / len(re.findall(_PIECES, segment)) >= 3.3:
        return False  # MLKEM1024PublicKey, crc32ttf2woff2bufferutil: pieces as long as words
    vowel_share = vowels / letters
    change_rate = (changes - 1) / max(len(segment) - 1, 1)
    if vowel_share >= 0.4 or change_rate < 0.2:
        return False
    return not (vowel_share >= 0.3 and change_rate < 0.35)


def _plain_json(run: str) -> bool:
    """Whether ``run`` is base64 of a JSON object — or of a msgpack map or array (a LangGraph
    checkpoint value as its saver keeps it, whose strings its serializer redacted already) —
    none of whose strings looks random (a cursor, a state: data that names things; a Grafana
    key's ``{"k":"<random>"…}`` is not)."""
    try:
        raw = binascii.a2b_base64(run.translate(_FROM_URLSAFE) + "=" * (-len(run) % 4))
    except (binascii.Error, ValueError):
        return False
    try:
        value: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        value = _msgpack_container(raw)
    if not isinstance(value, dict | list) or not value:
        return False
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, bytes) and len(item) > 2:
            inner = _msgpack_container(item)
            if inner is None:
                return False  # opaque bytes inside: not data that names things
            stack.append(inner)
        elif isinstance(item, str) and random_run(item):
            return False
    return True


def _msgpack_container(raw: bytes) -> Any:
    """``raw`` as one whole msgpack map or array (its extension types' bytes kept as bytes),
    else None."""
    if not raw or not (0x80 <= raw[0] <= 0x9F or raw[0] in (0xDC, 0xDD, 0xDE, 0xDF)):
        return None
    import msgspec

    try:
        return msgspec.msgpack.decode(raw, ext_hook=lambda _code, data: bytes(data))
    except (msgspec.DecodeError, ValueError, TypeError, UnicodeDecodeError):
        return None


_FROM_URLSAFE: Final = str.maketrans("-_", "+/")
_MSGPACK_CONTAINER_B64: Final = frozenset("ghijklmn3")
"""The first base64 character of a msgpack map or array (fixmap/fixarray 0x80-0x9f: g-n;
array/map 16/32 0xdc-0xdf: 3)."""


def _random_hex(value: str) -> bool:
    """Hex drawn at random: digits and letters both (a tenth of each at least), many of the
    sixteen characters (not ``aaaa…`` or ``1bbbb…``)."""
    digits = sum(c.isdigit() for c in value)
    return 0.1 * len(value) <= digits <= 0.9 * len(value) and len(set(value.lower())) >= 10


_LONG_WORD: Final = _Lazy(r"[A-Za-z0-9_.+/=~-]{20}")


def _spans(regex: re.Pattern[str]) -> Callable[[str], Iterable[tuple[int, int]]]:
    return lambda text: (m.span() for m in regex.finditer(text))


_TWO_DIGITS: Final = _Lazy(r"\d[^\d]*\d")
_DATA_CHARS: Final = 512
"""A run this long is data (an encrypted payload, a blob), not a token, unless a name says
otherwise (the assignment rule takes it then) or a rule knows its shape (a JWT, a 1Password
service account token)."""


class _RandomTokenRule(RedactionRule):
    """A token no rule knows, found by its look alone: a run of 20 or more token characters
    whose pieces are not words (:func:`random_run`), bare, in prose, in a header or under a
    neutral key. An id (``msg_01…``, ``toolu_01…``, ``call_…``, a uuid, a commit, a digest)
    is not one: a run of 32 characters or more counts on its own, a shorter one only after a
    prefix that names a secret (``sk_``, ``live_``, ``pat_``), an all-capital one of 20 like
    an access key id; hex counts only after such a prefix; what a hash name or ``base64,``
    leads, a base64 blob of more than 256 characters and a line of a base64 block (a
    certificate's body) are data."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("random-token", _TOKEN_RUN)

    def apply(
        self,
        text: str,
        lowered: str | None = None,
        runs: Callable[[str], Iterable[tuple[int, int]]] | None = None,
    ) -> tuple[str, int]:
        """``runs``, when given, finds the pattern's matches (spans) another way (RE2: the
        maximal runs of 20 or more token characters that start with a letter or a digit, which
        are what the pattern matches)."""
        if len(text) < 20:
            return text, 0
        if runs is None:
            if _LONG_WORD.search(text) is None:
                return text, 0
            runs = _spans(self.compile())
        marker = self.marker
        parts: list[str] = []
        pos = n = 0
        for m_start, m_end in runs(text):
            if _TWO_DIGITS.search(text, m_start, m_end) is None:
                continue
            for start, end in self._secrets(text, m_start, m_end):
                if start < pos:
                    continue
                parts.append(text[pos:start])
                parts.append(marker)
                pos = end
                n += 1
        if not n:
            return text, 0
        parts.append(text[pos:])
        return "".join(parts), n

    def _secrets(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        while end > start and text[end - 1] in ".-_~":
            end -= 1
        if _HASH_LEAD.search(text, max(0, start - 24), start) or _HASH_HEAD.match(text, start):
            return []
        found: list[tuple[int, int]] = []
        while True:  # NAME=value=…: each part alone
            at = text.find("=", start, end)
            while at >= 0 and at + 1 < end and text[at + 1] == "=":
                at += 1
            if at < 0 or at + 1 >= end:
                return found + self._secrets_of(text, start, end)
            if "/" not in text[start:at]:
                found += self._secrets_of(text, start, text.find("=", start, end))
            start = at + 1

    def _secrets_of(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        ext = re.search(r"\.[a-z][a-z0-9]{0,4}$", text[start:end])
        if ext:  # a file's name: its stem
            end = start + ext.start()
        run = text[start:end]
        if len(run) < 20 or len(run) >= _DATA_CHARS or not any(c.isdigit() for c in run):
            return []
        if "/" in run and "+" not in run and not run.endswith("="):  # a path: its pieces
            out: list[tuple[int, int]] = []
            at = start
            for piece in run.split("/"):
                if len(piece) >= 20 and self._is_secret(text, at, at + len(piece)):
                    out.append((at, at + len(piece)))
                at += len(piece) + 1
            return out
        return [(start, end)] if self._is_secret(text, start, end) else []

    def _is_secret(self, text: str, start: int, end: int) -> bool:
        run = text[start:end]
        if _HASH_LEAD.search(text, max(0, start - 16), start):
            return False
        if run[:2] in ("0x", "0X") and _hexish(run[2:]):  # a number
            return False
        prefix = re.match(_PREFIX, run)
        body = run[prefix.end() :] if prefix else run
        named = prefix is not None and any(
            w.lower() in _SECRET_PREFIX_WORDS for w in re.split(r"[_-]", prefix.group(1)) if w
        )
        if re.fullmatch(r"[A-Za-z]{1,4}(?:[0-9a-f]{32,}|[0-9A-F]{32,})", run):
            return False  # an id: a type's letters and hex (a Twilio account SID)
        if _hexish(body.replace("_", "")) or _hexish(body[1:]):  # a digest, an anchor's id
            return named and len(body) >= 32 and _random_hex(body)
        if len(body) < 32 and not named and not re.fullmatch(r"[A-Z0-9]{20,31}", run):
            return False
        if not random_run(run):
            return False
        if (run.startswith("eyJ") or run[:1] in _MSGPACK_CONTAINER_B64) and _plain_json(run):
            return False
        segments = [g for g in re.split(r"[^A-Za-z0-9]+", body) if len(g) >= 12 and not _hexish(g)]
        if sum(len(g) for g in segments if _machine_made(g)) < min(16, len(body)):
            return False
        if re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", run):  # base64 alone: a blob or a block
            if len(run) > _BLOB_CHARS:
                return False
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line_end = len(text) if line_end < 0 else line_end
            if _BASE64_LAST.fullmatch(text, line_start, line_end):
                before = max(0, text.rfind("\n", 0, line_start - 1) + 1)
                prev, nxt = text[before : max(line_start - 1, 0)], text[line_end + 1 :]
                if (
                    _BASE64_LINE.fullmatch(prev)
                    or _BASE64_LINE.match(nxt)
                    or "-----BEGIN" in prev
                    or nxt.lstrip().startswith("-----END")
                ):
                    return False  # a line of a block of base64: a certificate's body
        return True


_KEY_TAIL: Final = _Lazy(r"[A-Za-z0-9+/=]{16,}(?:\\r)?(?:\\n)?\r?$")


class _KeyTailRule(RedactionRule):
    """The body of a private key whose BEGIN line was cut off: the lines of key material
    (base64 or hex, line breaks real or escaped) just above its END line."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(
            "private-key",
            r"-{4,5} ?END(?:[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?| OpenVPN Static key V\d) ?-{4,5}",
            keywords=("PRIVATE KEY", "Static key"),
        )

    def apply(self, text: str, lowered: str | None = None) -> tuple[str, int]:
        marker = self.marker
        parts: list[str] = []
        pos = n = 0
        line = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+: [^\r\n\\]*)[ \t]*")
        for m in self.compile().finditer(text):
            first = m.start()
            cursor = m.start()
            while True:  # walk back over the lines of key material
                if text.endswith("\n", 0, cursor):
                    brk = 2 if text.endswith("\r\n", 0, cursor) else 1
                elif text.endswith("\\n", 0, cursor):
                    brk = 4 if text.endswith("\\r\\n", 0, cursor) else 2
                else:
                    break
                stop = cursor - brk
                begin = max(text.rfind("\n", 0, stop), text.rfind("\\n", 0, stop) + 1) + 1
                if begin <= pos or not line.fullmatch(text, begin, stop):
                    break
                first = cursor = begin
            if first == m.start() or first < pos:
                continue
            # the line the cut went through: its tail of key material goes too ("...F71TH…")
            tail = _KEY_TAIL.search(text, max(pos, first - 4096), max(first - 1, pos))
            if tail is not None and tail.end() >= first - 3:
                first = tail.start()
            parts.append(text[pos:first])
            parts.append(marker)
            pos = m.end()
            n += 1
        if not n:
            return text, 0
        parts.append(text[pos:])
        return "".join(parts), n


# --- the built-in rules ----------------------------------------------------------------------

# Characters that may not touch a token on either side. The patterns start with a literal where
# they can (the regex engine then skips from one occurrence of it to the next), and most have a
# keyword a text must hold before they are searched (and compiled): that is what makes a text
# without secrets cheap. The edges are checked on the few matches instead of by a lookbehind,
# which would make the engine try every position.
_TOKEN: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_WORD: Final = _TOKEN[:-1]
_ALNUM: Final = _TOKEN[:-2]


def _has_digit(secret: str) -> bool:
    return any(c.isdigit() for c in secret)


def _plausible_password(value: str) -> bool:
    """Not a reference (``$PASS``, ``${PASS}``, ``%s``, ``<password>``) or a mask (``****``)."""
    return value[0] not in "$%{<*" and len(set(value)) > 1


def _plausible_flag_value(value: str) -> bool:
    """A password or token given on a command line: not a reference or a mask, and with a
    digit in it (``--password prompt`` and ``--token-file`` are not secrets)."""
    return _plausible_password(value) and _has_digit(value) and "://" not in value


def _url_password(value: str) -> bool:
    """A URL's password: plausible, not a port followed by a path (``host:8080/a@b``), not
    the placeholder of an example (``user:pass@``, ``:TOKEN@``, ``[password]``, a short
    word, ``a%20secret``)."""
    if not _plausible_password(value) or value.split("/", 1)[0].isdigit():
        return False
    if value[0] in "[(]" or value[-1] == "]" or "%20" in value or re.match(r"\d+[,/]", value):
        return False
    return not (value.isalpha() and len(value) < 12)


def _hexish(value: str) -> bool:
    return re.fullmatch(r"[0-9a-f]+|[0-9A-F]+", value.replace("-", "")) is not None


def _url_token(value: str) -> bool:
    """A URL's user that is a token (``https://<token>@host``): random, or 32 hex and more."""
    return random_run(value) or (len(value) >= 32 and _hexish(value))


def _plausible_cli_password(value: str) -> bool:
    """A password a tool's flag takes: not a reference, a mask, the next flag or a prompt."""
    return _plausible_password(value) and value[0] not in "-/" and value.lower() != "prompt"


def _query_secret(value: str) -> bool:
    """A query parameter's value that is a key: random, or 32 hex and more."""
    bare = value.rstrip("=").replace("%3D", "").replace("%3d", "")
    return random_run(bare) or (len(bare) >= 32 and _hexish(bare))


_WORDY: Final = _Lazy(r"[A-Za-z]+[0-9]{0,4}(?:[._/-][A-Za-z]+[0-9]{0,4})*")


def _header_value(value: str) -> bool:
    """A header's value that is a credential: random, or 20 hex and more (the name says what
    it is); not a scheme word (``Bearer``), a number or a date."""
    value = value.rstrip(":")
    if len(value) >= 12 and _looks_random(value) and not _WORDY.fullmatch(value):
        return True
    return random_run(value) or (len(value) >= 20 and _hexish(value))


def _user_and_password(value: str) -> bool:
    """Base64 of ``user:password`` (a registry's ``auth``), not of anything else."""
    try:
        decoded = binascii.a2b_base64(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return False
    user, sep, password = decoded.partition(b":")
    return bool(sep and user and password) and all(32 <= b < 127 for b in decoded)


def _token(id: str, pattern: str, *keywords: str, boundary: str = _TOKEN) -> RedactionRule:
    """A provider's token: a documented prefix and shape, a whole token (no token character
    touches it), searched only in a text that holds one of ``keywords``."""
    return RedactionRule(id, pattern, keywords=keywords, boundary=boundary, token=True)


_B64: Final = "[A-Za-z0-9+/]"
_HEX: Final = "[a-f0-9]"
_URLSAFE: Final = "[A-Za-z0-9_-]"
_UUID: Final = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

_PROVIDER_RULES: Final[tuple[RedactionRule, ...]] = (
    # AI providers
    _token("groq-api-key", r"gsk_[A-Za-z0-9]{48,56}", "gsk_"),
    _token("xai-api-key", r"xai-[A-Za-z0-9]{70,90}", "xai-"),
    _token("perplexity-api-key", r"pplx-[A-Za-z0-9]{40,56}", "pplx-"),
    _token("replicate-token", r"r8_[A-Za-z0-9]{37}", "r8_"),
    _token("openrouter-api-key", rf"sk-or-v1-{_HEX}{{64}}", "sk-or-"),
    _token("langfuse-secret-key", rf"sk-lf-{_UUID}", "sk-lf-"),
    _token("langsmith-api-key", rf"lsv2_(?:pt|sk)_{_HEX}{{32}}_{_HEX}{{10}}", "lsv2_"),
    _token("cerebras-api-key", r"csk-[a-z0-9]{40,56}", "csk-"),
    _token("pinecone-api-key", r"pcsk_[A-Za-z0-9]{4,8}_[A-Za-z0-9]{50,80}", "pcsk_"),
    _token("aws-bedrock-api-key", rf"ABSK{_B64}{{60,}}={{0,2}}", "ABSK"),
    # clouds and hosting
    _token("digitalocean-token", rf"do[opr]_v1_{_HEX}{{64}}", "_v1_"),
    _token("alibaba-access-key-id", r"LTAI[A-Za-z0-9]{12,20}", "LTAI", boundary=_ALNUM),
    _token("azure-ad-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", "Q~"),
    _token("google-oauth-client-secret", rf"GOCSPX-{_URLSAFE}{{28}}", "GOCSPX-"),
    _token("google-oauth-token", rf"ya29\.{_URLSAFE}{{30,}}", "ya29."),
    _token("cloudflare-origin-ca-key", rf"v1\.0-{_HEX}{{24}}-{_HEX}{{146}}", "v1.0-"),
    _token("heroku-api-key", rf"HRKU-(?:AA)?{_URLSAFE}{{58,}}", "HRKU-"),
    _token(
        "fly-token",
        rf"fm[12][ar]?_{_B64}{{80,}}={{0,3}}|fo1_{_URLSAFE}{{43}}",
        "fm1",
        "fm2",
        "fo1_",
    ),
    _token("render-api-key", r"rnd_[A-Za-z0-9]{32}", "rnd_"),
    _token(
        "supabase-token", rf"sbp_{_HEX}{{40}}|sb_secret_{_URLSAFE}{{31,}}", "sbp_", "sb_secret_"
    ),
    _token("planetscale-token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}", "pscale_"),
    _token("databricks-token", rf"dapi{_HEX}{{32}}(?:-\d)?", "dapi"),
    _token("terraform-cloud-token", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}", "atlasv1"),
    _token("vault-token", rf"hv[sbr]\.{_URLSAFE}{{24,}}", "hvs.", "hvb.", "hvr."),
    _token("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}", "dp."),
    _token("pulumi-token", rf"pul-{_HEX}{{40}}", "pul-"),
    _token("scalingo-token", rf"tk-us-{_URLSAFE}{{48}}", "tk-us-"),
    _token("tailscale-key", r"tskey-[a-z]+-[A-Za-z0-9]{8,}-[A-Za-z0-9]{20,}", "tskey-"),
    _token("infracost-api-key", r"ico-[A-Za-z0-9]{32}", "ico-"),
    # developer tools, registries, CI
    _token("docker-hub-token", rf"dckr_(?:pat|oat)_{_URLSAFE}{{27,}}", "dckr_"),
    _token("jfrog-token", r"AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56}", "AKCp", "cmVmdGtu"),
    _token("rubygems-token", rf"rubygems_{_HEX}{{48}}", "rubygems_"),
    _token("clojars-token", r"CLOJARS_[a-z0-9]{60}", "CLOJARS_"),
    _token("nuget-api-key", r"oy2[a-z0-9]{43}", "oy2"),
    _token("atlassian-api-token", r"AT(?:AT|CT)T3[A-Za-z0-9_=-]{100,}", "TT3"),
    _token("buildkite-token", rf"bkua_{_HEX}{{40}}", "bkua_"),
    _token("circleci-token", rf"CCIP(?:AT|RJ)_[A-Za-z0-9]{{20,}}_{_HEX}{{40}}", "CCIP"),
    _token("sonarqube-token", rf"sq[pua]_{_HEX}{{40}}", "sqp_", "squ_", "sqa_"),
    _token("sourcegraph-token", rf"sgp_(?:{_HEX}{{16}}_)?{_HEX}{{40}}", "sgp_"),
    _token("linear-api-key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}", "lin_"),
    _token("figma-token", rf"figd_{_URLSAFE}{{40}}", "figd_"),
    _token("postman-api-key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}", "PMAK-"),
    _token("readme-api-key", r"rdme_[a-z0-9]{70}", "rdme_"),
    _token("sentry-token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", "sntry"),
    _token("frameio-token", rf"fio-u-{_URLSAFE}{{64}}", "fio-u-"),
    _token("typeform-token", r"tfp_[A-Za-z0-9_.=-]{59}", "tfp_"),
    _token("prefect-api-key", r"pnu_[A-Za-z0-9]{36}", "pnu_"),
    _token("octopus-api-key", r"API-[A-Z0-9]{26}", "API-"),
    _token("harness-token", rf"pat\.{_URLSAFE}{{22}}\.{_HEX}{{24}}\.[A-Za-z0-9]{{20}}", "pat."),
    _token("airtable-token", rf"pat[A-Za-z0-9]{{14}}\.{_HEX}{{64}}", "pat"),
    _token(
        "age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "AGE-SECRET"
    ),
    _token("1password-token", rf"ops_eyJ{_B64}{{250,}}={{0,3}}", "ops_eyJ"),
    _token("notion-token", r"ntn_\d{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}", "ntn_", "secret_"),
    # messaging, mail, commerce, payments, analytics
    _token("sendgrid-api-key", rf"SG\.{_URLSAFE}{{22}}\.{_URLSAFE}{{43}}", "SG."),
    _token("mailgun-api-key", rf"(?:pub)?key-{_HEX}{{32}}", "key-"),
    _token("mailchimp-api-key", rf"{_HEX}{{32}}-us\d{{1,2}}", "-us"),
    _token("brevo-api-key", rf"x(?:keysib|smtpsib)-{_HEX}{{64}}-[A-Za-z0-9]{{16}}", "sib-"),
    _token("twilio-api-key", r"SK[0-9a-fA-F]{32}", "SK"),
    _token("telegram-bot-token", rf"\d{{8,10}}:AA{_URLSAFE}{{33}}", ":AA"),
    _token("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "shp"),
    _token(
        "square-token", rf"sq0(?:csp|atp)-{_URLSAFE}{{22,60}}|EAAA{_URLSAFE}{{60}}", "sq0", "EAAA"
    ),
    _token("facebook-access-token", r"EAA[A-Za-z0-9]{90,}", "EAA"),
    _token("flutterwave-key", r"FLWSECK(?:_TEST)?-?[a-hA-H0-9]{12,32}(?:-X)?", "FLWSECK"),
    _token("duffel-token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}", "duffel_"),
    _token("shippo-token", rf"shippo_(?:live|test)_{_HEX}{{40}}", "shippo_"),
    _token("easypost-token", r"EZ[AT]K[A-Za-z0-9]{54}", "EZAK", "EZTK"),
    _token("salesforce-token", r"00D[A-Za-z0-9]{12,15}![A-Za-z0-9._]{80,}", "00D"),
    _token("new-relic-key", r"NR(?:AK|JS|II|AA|RA)-[A-Za-z0-9]{19,32}", "NR"),
    _token("dynatrace-token", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", "dt0c01."),
    _token(
        "grafana-token",
        rf"glc_{_B64}{{32,400}}={{0,2}}|glsa_[A-Za-z0-9]{{32}}_{_HEX}{{8}}",
        "glc_",
        "glsa_",
    ),
    _token("dropbox-token", rf"sl\.(?:[A-Za-z]\.)?{_URLSAFE}{{130,}}", "sl."),
    _token("mapbox-secret-token", rf"sk\.eyJ{_URLSAFE}{{50,4096}}\.{_URLSAFE}{{20,}}", "sk.eyJ"),
    _token("yandex-api-key", rf"AQVN{_URLSAFE}{{35,38}}", "AQVN"),
    _token("firebase-server-key", rf"AAAA{_URLSAFE}{{7}}:APA91b{_URLSAFE}{{100,}}", ":APA91b"),
    _token(
        "uuid-token",  # LaunchDarkly sdk-/api-/mob-<uuid>, HubSpot pat-na1-<uuid>
        rf"(?:sdk|api|mob|pat-(?:na|eu|ap)\d)-{_UUID}",
        "sdk-",
        "api-",
        "mob-",
        "pat-",
    ),
    _token("twitter-bearer-token", r"A{21}[A-Za-z0-9]{10,80}%3D[A-Za-z0-9]{30,}", "A" * 20),
    _token(
        "encoded-private-key",  # base64 of "-----BEGIN … PRIVATE KEY" (kubeconfig, a Secret)
        rf"LS0tLS1CRUdJTi{_B64}{{0,32}}?(?:UFJJVkFURSBLRV|QUklWQVRFIEtFW|SSVZBVEUgS0VZ){_B64}*={{0,2}}",
        "LS0tLS1CRUdJTi",
        boundary="",
    ),
)
"""Tokens a provider gives a shape of its own: a documented prefix (``SG.``, ``dop_v1_``,
``shpat_``, ``PMAK-``, ``AGE-SECRET-KEY-1``), a length and an alphabet."""

_CONTEXT_RULES: Final[tuple[RedactionRule, ...]] = (
    RedactionRule(
        "twilio-auth-token",  # Client('AC…', '<auth token>'); an API key's secret after SK…
        r"""(?:AC|SK)[0-9a-fA-F]{32}["']?[ \t]*,[ \t]*["']?"""
        r"(?P<secret>[A-Za-z0-9]{32})(?![A-Za-z0-9])",
        keywords=("AC", "SK"),
        token=True,  # its keyword starts a run of 34 or more characters
    ),
    RedactionRule(
        "registry-auth",  # ~/.docker/config.json "auth": "<base64 user:password>"; .npmrc _auth=
        r"""(?:"auth"[ \t]*:[ \t]*"|_auth[ \t]*=[ \t]*["']?)(?P<secret>[A-Za-z0-9+/]{8,}={0,2})""",
        keywords=('"auth"', "_auth"),
        accept=_user_and_password,
    ),
    RedactionRule(
        "kubeconfig-client-key",  # client-key-data: <base64 of a private key>
        r"""client-key-data["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9+/]{16,}={0,2})""",
        keywords=("client-key-data",),
    ),
    RedactionRule(
        "azure-storage-key",  # connection strings: AccountKey=…; SharedAccessKey=…; a SAS sig=
        r"(?:AccountKey=|SharedAccessKey=|[?&]sig=)(?P<secret>[A-Za-z0-9+/%]{40,}(?:==|%3D%3D|=|%3D)?)",
        keywords=("AccountKey=", "SharedAccessKey=", "sig="),
        token=True,  # its keyword starts a run of 34 or more characters
    ),
    RedactionRule(
        "cli-password",  # mysql -p<password>, sshpass -p, redis-cli -a, docker login -p
        r"(?:(?:mysql|mysqldump|mysqladmin|mariadb)[ \t][^\n|;&]{0,1024}?[ \t](?:-p|--password=)"
        r"|sshpass[ \t](?:[^\n|;&]{0,1024}?[ \t])?-p[ \t]*"
        r"|redis-cli[ \t](?:[^\n|;&]{0,1024}?[ \t])?-a[ \t]+"
        r"|(?:docker|podman|buildah|helm[ \t]+registry)[ \t]+login[ \t][^\n|;&]{0,1024}?[ \t]"
        r"(?:-p[ \t]+|--password[ \t=]))"
        r"""["']?(?P<secret>[^\s"']+)""",
        keywords=("mysql", "mariadb", "sshpass", "redis-cli", "login"),
        accept=_plausible_password,
    ),
    RedactionRule(
        "cli-secret-flag",  # --password hunter2, --token=…, -storepass …, -passin pass:…
        r"--?(?:[a-z][a-z0-9-]{0,30}?)?(?:pass(?:in|out|word|wd|phrase)?|token"
        r"|api-?key|secret|secret-key|storepass|keypass)(?:=|[ \t]+)[\"']?"
        r"""(?:pass:)?(?P<secret>[^\s"']{6,})""",
        keywords=("pass", "-token", "-api", "secret"),
        lowered=True,
        boundary=_TOKEN,  # a flag starts a word
        accept=_plausible_flag_value,
    ),
    RedactionRule(
        "cli-tool-password",  # the tools whose password flag names no password
        r"(?:\bldap[a-z]*[ \t][^\n|;&]{0,512}?[ \t]-w[ \t]*"
        r"|\b(?:sqlcmd|bcp|osql|isql)[ \t][^\n|;&]{0,512}?[ \t]-P[ \t]*"
        r"|\bmongo(?:sh|dump|restore|export|import)?[ \t][^\n|;&]{0,512}?[ \t]-p[ \t]+"
        r"|\b(?:un)?zip[ \t](?:[^\n|;&]{0,512}?[ \t])?-P[ \t]+"
        r"|\b7z[ar]?[ \t][^\n|;&]{0,512}?[ \t]-p"
        r"|\bopenssl[ \t][^\n|;&]{0,512}?[ \t]-k[ \t]+"
        r"|\b(?:xfreerdp|wlfreerdp|sdl-freerdp)[ \t][^\n|;&]{0,512}?[ \t]/p:"
        r"|\brdesktop[ \t][^\n|;&]{0,512}?[ \t]-p[ \t]*"
        r"|\bnet[ \t]+use[ \t]+(?:[a-z]:[ \t]+)?\\\\\S+[ \t]+"
        r"|\baws[ \t]+configure[ \t]+set[ \t]+(?:aws_secret_access_key|aws_session_token)"
        r"[ \t]+"
        r"|\b(?:smbclient|rpcclient|smbmap|smbget|smbcacls|net)[ \t][^\n|;&]{0,512}?"
        r"(?-i:-U|--user=)[ \t]*[\"']?[^\s%\"']+%)"
        r"""[\"']?(?P<secret>[^\s"']{4,})""",
        keywords=(
            "ldap",
            "sqlcmd",
            "bcp",
            "osql",
            "isql",
            "mongo",
            "zip",
            "7z",
            "openssl",
            "freerdp",
            "rdesktop",
            "net use",
            "aws configure",
            "smb",
            "rpcclient",
            "net ",
        ),
        ignore_case=True,
        accept=_plausible_cli_password,
    ),
    RedactionRule(
        "netrc-password",  # machine host login user password secret (one line or several)
        r"machine[ \t]+\S+\s+login[ \t]+\S+\s+password[ \t]+(?P<secret>\S+)",
        keywords=("machine",),
        accept=_plausible_password,
    ),
    _PgpassRule(
        "pgpass-password",  # ~/.pgpass: hostname:port:database:username:password
        r":(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:(?P<secret>(?:[^\s:\\]|\\.){4,})[ \t]*(?=[\r\n]|\Z)",
        keywords=(":",),
        accept=_plausible_password,
    ),
    _XmlSecretRule(
        "xml-secret",  # <password>…</password> (Maven), <add key="ClearTextPassword" value="…"/>
        r"<(?P<tag>[A-Za-z_][\w.:-]{0,64})>(?P<secret>[^<>\s]{4,})</(?P=tag)>"
        r"|key[ \t]*=[ \t]*\"(?P<key>[^\"]{1,64})\"[ \t]+value[ \t]*=[ \t]*\"(?P<v>[^\"]+)\"",
        keywords=("</", "value=", "value ="),
    ),
    RedactionRule(
        "bundler-credentials",  # BUNDLE_GEMS__CONTRIBSYS__COM=user:password
        r"""BUNDLE_[A-Z0-9_]*__[A-Z0-9]+[ \t]*[=:][ \t]*["']?(?P<secret>[^\s"':]+:[^\s"']+)""",
        keywords=("BUNDLE_",),
    ),
    _CookieRule(
        "cookie-value",  # Cookie: / Set-Cookie: headers, curl -b: a session's value
        r"(?:cookie[ \t]*:|-b[ \t]+[\"']?|--cookie[ \t]+[\"']?)(?P<secret>[^\r\n\"']*)",
        keywords=("cookie", "-b"),
        lowered=True,
    ),
    RedactionRule(
        "query-secret",  # ?code=<function key>, &api_key=, &access_token=, &client_secret=
        r"[?&](?P<name>code|key|api_?key|apikey|token|access_token|auth|auth_token|secret"
        r"|client_secret|password|pwd|session|sessionid|sid|signature|x-amz-signature"
        r"|x-goog-signature)=(?P<secret>[A-Za-z0-9_.~%+/=-]{16,})",
        keywords=("?", "&"),  # the pattern starts at one of them: the engine skips to it
        lowered=True,
        accept=_query_secret,
    ),
    RedactionRule(
        "putty-private-key",  # the private lines of a .ppk file
        r"Private-Lines: \d+(?P<secret>(?:\r?\n[A-Za-z0-9+/=]{4,}(?![^\r\n]))+)",
        keywords=("Private-Lines:",),
    ),
    RedactionRule(
        "webhook-url",  # Discord and Microsoft Teams webhooks: the path is the credential
        r"(?:discord(?:app)?\.com/api/webhooks/\d+/|\.webhook\.office\.com/webhookb2/)"
        r"""(?P<secret>[^\s"'<>)]{30,})""",
        keywords=("/api/webhooks/", "webhookb2/"),
    ),
    RedactionRule(
        "zapier-webhook",  # the path after catch/ is the credential
        r"hooks\.zapier\.com/hooks/catch/(?P<secret>\d+/[A-Za-z0-9]+)",
        keywords=("hooks.zapier.com",),
    ),
    RedactionRule(
        "authorization-token",  # Authorization: token …, Bot …, SSWS …, sso-key …
        r"""authorization["']?[ \t]*[:=][ \t]*["']?(?:token|bot|ssws|sso-key|apikey|api-key|key)"""
        r"[ \t]+(?P<secret>[a-z0-9._~+/:=-]{16,})",
        keywords=("authorization",),
        lowered=True,
        accept=_has_digit,
    ),
    _HeaderRule(
        "secret-header",  # X-Acme-Api-Key: …, X-Acme-Auth: …, DD-API-KEY: … (a line, or -H '…')
        r"(?:key|token|secret|auth|password|passwd|signature|session|credentials?|sid|pat)"
        r"[ \t]*:[ \t]*(?P<secret>[a-z0-9._~+/=%$!|:-]{8,})",
        keywords=(
            "key",
            "token",
            "secret",
            "auth",
            "pass",
            "signature",
            "session",
            "credential",
            "sid",
            "pat",
        ),
        lowered=True,
        accept=_header_value,
    ),
)
"""Secrets known by what is around them: a command's flag, a config file's key, a header."""


BUILTIN_RULES: Final[tuple[RedactionRule, ...]] = (
    RedactionRule(
        "private-key",
        # The whole block; or, cut short (no END), the lines of key material after BEGIN.
        # PEM, PGP, SSH.com (---- BEGIN SSH2 … ----) and OpenVPN static keys.
        r"-{4,5} ?BEGIN(?:[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?| OpenVPN Static key V\d) ?-{4,5}"
        r"(?:[\s\S]{0,16384}?-{4,5} ?END(?:[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?"
        r"| OpenVPN Static key V\d) ?-{4,5}"
        r"|(?:(?:\r?\n|(?:\\r)?\\n)+[ \t]*"
        r"(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+: [^\r\n\\]*))*)",
        keywords=("PRIVATE KEY", "Static key"),
    ),
    _KeyTailRule(),
    RedactionRule(
        "minisign-secret-key",  # base64 of "Ed" "Sc"|"\0\0" "B2": an encrypted or bare secret key
        r"RW(?:RTY0Iy|QAAEIy)[A-Za-z0-9+/]{100,}={0,2}",
        keywords=("RWRTY0Iy", "RWQAAEIy"),
        boundary=_TOKEN,
        token=True,
    ),
    RedactionRule(
        "anthropic-api-key",  # sk-ant-api03-…, sk-ant-admin01-…, sk-ant-oat01-… (OAuth)
        r"sk-ant-(?:[a-z]{2,10}\d{2}-)?[A-Za-z0-9_-]{32,}",
        keywords=("sk-ant-",),
        boundary=_TOKEN,
        token=True,
    ),
    RedactionRule(
        "openai-api-key",  # sk-proj-…, sk-svcacct-…, sk-admin-…, legacy sk-<48>, T3BlbkFJ inside
        r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
        r"|[A-Za-z0-9_-]{0,80}T3BlbkFJ[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{32,})",
        keywords=("sk-",),
        boundary=_TOKEN,
        token=True,
    ),
    RedactionRule(
        "aws-access-key-id",  # long-term (AKIA), temporary (ASIA) and other key ids
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        boundary=_ALNUM,
    ),
    RedactionRule(
        "aws-secret-access-key",  # the 40 characters after a secret key's name; session tokens
        r"(?:secret_?access_?key|aws_?secret_?key|session_?token)"
        r"""["']?[ \t]*[:=][ \t]*["']?(?P<secret>[a-z0-9/+=]{40,})(?![a-z0-9/+=])""",
        keywords=("access", "aws_secret", "awssecret", "token"),
        lowered=True,
        accept=_has_digit,  # not a type's name
    ),
    RedactionRule(
        "github-token",  # classic (ghp_ gho_ ghu_ ghs_ ghr_) and fine-grained (github_pat_)
        r"gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
        keywords=("gh", "github_pat_"),
        boundary=_WORD,
        token=True,
    ),
    RedactionRule(
        "gitlab-token",  # personal (glpat-), deploy, runner, trigger, CI job, feed, … tokens
        r"gl(?:pat|dt|rt|ptt|cbt|ft|soat|oas|imt|agent|ffct)-[A-Za-z0-9_-]{20,}"
        r"(?:\.[A-Za-z0-9]{9})?",
        boundary=_TOKEN,
    ),
    RedactionRule(
        "slack-token",  # bot, user, workspace, legacy, configuration and app-level tokens
        r"xox[abeoprs]-(?:\d-)?\d{6,14}-[A-Za-z0-9-]{8,}"
        r"|xoxe(?:\.xox[bp])?-\d-[A-Za-z0-9]{100,}"
        r"|xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]{20,}",
        keywords=("xox", "xapp-"),
        boundary=_TOKEN,
        token=True,
    ),
    RedactionRule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/_-]{20,})",
        keywords=("hooks.slack.com",),
    ),
    RedactionRule(
        "stripe-key",  # secret and restricted keys, live and test; webhook signing secrets
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,247}|whsec_[A-Za-z0-9+/=]{24,}",
        keywords=("k_live_", "k_test_", "whsec_"),
        boundary=_WORD,
        token=True,
    ),
    RedactionRule(
        "google-api-key", r"AIza[A-Za-z0-9_-]{35}", keywords=("AIza",), boundary=_TOKEN, token=True
    ),
    RedactionRule(
        "huggingface-token",  # user (hf_) and organisation (api_org_) tokens
        r"hf_[A-Za-z0-9]{34,40}|api_org_[A-Za-z0-9]{34}",
        keywords=("hf_", "api_org_"),
        boundary=_WORD,
        token=True,
    ),
    RedactionRule(
        "npm-token", r"npm_[A-Za-z0-9]{36}", keywords=("npm_",), boundary=_WORD, token=True
    ),
    RedactionRule(
        "pypi-token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        keywords=("pypi-AgEIcHlwaS5vcmc",),
        boundary=_TOKEN,
        token=True,
    ),
    *_PROVIDER_RULES,
    RedactionRule(
        "jwt",  # header.payload.signature, both JSON objects base64url-encoded ("eyJ" is `{"`)
        r"eyJ[A-Za-z0-9_-]{8,1024}\.eyJ[A-Za-z0-9_-]{8,16384}\.[A-Za-z0-9_-]{8,}",
        keywords=("eyJ",),
        boundary=_TOKEN,
        token=True,
    ),
    RedactionRule(
        "bearer-token",  # Authorization: Bearer <token> (a token holds a digit; a word does not)
        r"bearer[ \t]+(?P<secret>[a-z0-9._~+/:$%!|-]{16,}=*)(?![a-z0-9._~+/=:$%!|-])",
        keywords=("bearer",),
        lowered=True,
        boundary=_WORD,
        accept=_has_digit,
    ),
    RedactionRule(
        "basic-auth",
        r"""authorization["']?[ \t]*[:=][ \t]*["']?basic[ \t]+(?P<secret>[a-z0-9+/]{8,}={0,2})""",
        keywords=("basic",),
        lowered=True,
    ),
    RedactionRule(
        "api-key-header",
        r"(?:api-key|x-auth-token|x-auth-key|private-token|access-token|api-token"
        r"|vault-token|server-token|figma-token|application-key|subscription-key"
        r"""|functions-key|honeycomb-team|apikey)["']?[ \t]*:[ \t]*"""
        r"""["']?(?P<secret>[a-z0-9._~+/=-]{16,})""",
        keywords=("-key", "-token", "apikey", "-team"),
        lowered=True,
        accept=_has_digit,
    ),
    RedactionRule(
        "url-password",  # scheme://user:password@host (a password may hold '/', a port not)
        r"""://[^\s/:@"'<>]{0,256}:(?P<secret>[^\s@"'<>]{1,256})@""",
        keywords=("://",),
        accept=_url_password,
    ),
    RedactionRule(
        "url-user-token",  # https://<token>@host: a token as the user, no password
        r"""://(?P<secret>[A-Za-z0-9_.~%-]{16,256})@""",
        keywords=("://",),
        accept=_url_token,
    ),
    RedactionRule(
        "curl-user",  # curl -u user:password
        r"""curl[ \t](?:[^\n|;&]{0,1024}?[ \t])?(?:-u|--user)[ =]?["']?[^\s:"']+:"""
        r"""(?P<secret>[^\s"']+)""",
        keywords=("curl",),
        accept=_plausible_password,
    ),
    *_CONTEXT_RULES,
    _AssignmentRule(),
    _RandomTokenRule(),
)
"""Every built-in rule, in the order they are tried (the most specific first, so a key with a
known shape is named by its provider's rule rather than by the assignment it sits in)."""


# --- JSON a provider or a runtime wrote -------------------------------------------------------

OPAQUE_KEYS: Final = frozenset({"signature", "encrypted_content", "encrypted_index"})
"""Members whose value is a cryptographic payload that a provider checks or decrypts when it is
sent back, so it must come back byte for byte, and that no one reads: Anthropic's thinking
``signature``, OpenAI's reasoning (and compaction) ``encrypted_content``, the
``encrypted_content`` of Anthropic web search results and the ``encrypted_index`` of their
citations. Redaction leaves them alone wherever they are (:func:`opaque`): a secret-shaped run
inside one is chance, and replacing it would make the provider refuse the whole request."""
_ENCRYPTED_DATA_TYPES: Final = frozenset({"redacted_thinking"})
"""Objects whose ``data`` is encrypted (Anthropic's redacted thinking, as it is written when it
is kept whole rather than as a :class:`~continuity.frames.ThinkingBlock`)."""
LAYOUT_SUFFIX: Final = ".layout"
"""The ``meta`` keys of a message that hold a converter's layout hints (``anthropic.layout``,
``openai.chat.layout``, ``openai.responses.layout``): JSON of the members no block holds. Their
strings are redacted like a provider block's data. ``openai.role`` (a role name) is not."""
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_BINARY_MIN_CHARS: Final = 1024
_SCALARS: Final = (int, float, bool, type(None))
_LEAVES: Final = (*_SCALARS, bytes, bytearray)
_NO_PARENT: Final[dict[Any, Any]] = {}


def opaque(key: object, value: str, parent: dict[Any, Any]) -> bool:
    """Whether the string ``value`` of member ``key`` of ``parent`` is left as it is: a
    cryptographic payload (:data:`OPAQUE_KEYS`, the ``data`` of redacted thinking), or bytes
    rather than text: a base64 data URL (``data:image/png;base64,…``, OpenAI's ``file_data``,
    screenshots) or 1,024 or more characters of nothing but standard base64 (Anthropic's base64
    sources, audio, generated images). A secret the rules find is shorter than that, or is set
    apart from its neighbours by characters base64 has not (a space, a line break, ``-``, ``_``,
    ``:``, ``=`` inside): in such a run, a secret-shaped stretch is chance, not a secret."""
    if key in OPAQUE_KEYS:
        return True
    kind = parent.get("type")
    if key == "data" and isinstance(kind, str) and kind in _ENCRYPTED_DATA_TYPES:
        return True
    if value.startswith("data:"):
        head, sep, body = value.partition(",")
        return bool(sep) and head.endswith(";base64") and _BASE64.fullmatch(body) is not None
    return len(value) >= _BINARY_MIN_CHARS and _BASE64.fullmatch(value) is not None


_KEEP: Final = -1
_FIELD: Final = -2
_EDGE_SENSITIVE: Final = re.compile(r"[$^]|\\[AZbB]|\(\?[<=!]")
"""What can make a pattern match differently in a string than in the same string between two
newlines (anchors, word edges, lookarounds): a rule without keywords whose pattern has none of
them is gated by one search of all the strings joined."""


def _plan(value: Any, secret_key: Callable[[str, str], bool], strings: list[str]) -> list[int]:
    """What becomes of each string of ``value``, in the order :func:`_rebuild` meets them: kept
    (:func:`opaque`), replaced whole (under a key that names a secret), or searched (its index
    in ``strings``, where it is appended)."""
    planner = _Planner(secret_key, strings)
    planner.walk(value)
    return planner.plan


class _Planner:
    """The walk of :func:`_plan`. The hot path of a record without secrets: the checks before
    :func:`opaque` are the cheap ones it can only be true after."""

    __slots__ = ("plan", "secret_key", "strings")

    def __init__(self, secret_key: Callable[[str, str], bool], strings: list[str]) -> None:
        self.plan: list[int] = []
        self.secret_key = secret_key
        self.strings = strings

    def walk(self, v: Any) -> None:
        if isinstance(v, dict):
            self.members(v)
        elif isinstance(v, list | tuple):
            self.items(v)
        elif isinstance(v, str):
            self.string(v)
        elif not isinstance(v, _LEAVES):
            self.walk(_builtins(v))

    def members(self, v: dict[Any, Any]) -> None:
        mark = self.plan.append
        strings = self.strings
        for k, item in v.items():
            if isinstance(item, str):
                if k in OPAQUE_KEYS:
                    mark(_KEEP)
                elif isinstance(k, str) and self.secret_key(k, item):
                    mark(_FIELD)  # a secret's name first: base64 of a whole credentials file
                elif (
                    k == "data" or len(item) >= _BINARY_MIN_CHARS or item.startswith("data:")
                ) and opaque(k, item, v):
                    mark(_KEEP)
                else:
                    mark(len(strings))
                    strings.append(item)
            elif not isinstance(item, _SCALARS):
                self.walk(item)

    def items(self, v: list[Any] | tuple[Any, ...]) -> None:
        for item in v:
            if isinstance(item, str):
                self.string(item)
            elif not isinstance(item, _SCALARS):
                self.walk(item)

    def string(self, v: str) -> None:
        """A string that is not a member's value (a list's item, the value itself)."""
        if opaque(None, v, _NO_PARENT):
            self.plan.append(_KEEP)
        else:
            self.plan.append(len(self.strings))
            self.strings.append(v)


def _builtins(value: Any) -> Any:
    """A value msgspec would encode (a Struct, a dataclass, …) as the JSON it encodes to."""
    try:
        return msgspec.to_builtins(value, str_keys=True)
    except (TypeError, msgspec.EncodeError):
        return None  # the store refuses it, naming the frame


def _rebuild(value: Any, plan: list[int], found: list[tuple[str, int]]) -> Any:
    """``value`` with the strings :func:`_plan` met replaced as ``found`` says (the objects that
    hold none of them are the same objects)."""
    return _Rebuilder(plan, found).walk(value)


class _Rebuilder:
    """The walk of :func:`_rebuild`: the same walk as :class:`_Planner`'s, a container copied
    only when something in it changes."""

    __slots__ = ("found", "step")

    def __init__(self, plan: list[int], found: list[tuple[str, int]]) -> None:
        self.step = iter(plan)
        self.found = found

    def string(self, v: str) -> str:
        i = next(self.step)
        if i == _FIELD:
            return _ASSIGNMENT_MARKER
        return v if i == _KEEP or not self.found[i][1] else self.found[i][0]

    def walk(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, dict):
            return self.members(v)
        if isinstance(v, list | tuple):
            return self.items(v)
        if isinstance(v, _LEAVES):
            return v
        plain = _builtins(v)
        changed = self.walk(plain)
        return v if changed is plain else changed

    def members(self, v: dict[Any, Any]) -> dict[Any, Any]:
        out: dict[Any, Any] | None = None
        for k, item in v.items():
            if isinstance(item, _SCALARS):
                continue
            changed = self.string(item) if isinstance(item, str) else self.walk(item)
            if changed is not item:
                if out is None:
                    out = dict(v)
                out[k] = changed
        return v if out is None else out

    def items(self, v: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        items: list[Any] | None = None
        for i, item in enumerate(v):
            if isinstance(item, _SCALARS):
                continue
            changed = self.walk(item)
            if changed is not item:
                if items is None:
                    items = list(v)
                items[i] = changed
        return v if items is None else items


# --- the keywords of every rule, looked for at once -------------------------------------------

_RE2_AFTER_CHARS: Final = 128 * 1024
"""RE2 (``google-re2``, the ``re2`` extra) is loaded once a process has redacted this many
characters: its import (some 6 ms) has paid for itself by then, the keywords being looked for
at about 10 ns a character instead of 70 (ADR 0049). A hook that redacts a few messages never
loads it."""
_redacted_chars: list[int] = [0]
_RUN_HEADS: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_re2_engine: list[Any] = []  # [the extension module] once loaded, [None] when not installed


def _load_re2() -> Any:
    if not _re2_engine:
        import importlib

        try:  # the extension module itself: its Set and Latin-1 options (ADR 0049)
            engine = importlib.import_module("re2._re2")
        except ImportError:
            engine = None
        _re2_engine.append(engine)
    return _re2_engine[0]


def _gates() -> tuple[str, ...]:
    """The gates this interpreter has: ``scan`` always, ``re2`` when ``google-re2`` is
    installed."""
    return ("scan", "re2") if _load_re2() is not None else ("scan",)


@functools.lru_cache(maxsize=16)
def _keyword_sets_of(rules: tuple[RedactionRule, ...]) -> _KeywordSets:
    """The gate of a rule set, built once (some 2.5 ms) for every redactor of the same rules
    (an ingest makes one per run)."""
    return _KeywordSets(rules, _load_re2())


class _KeywordSets:
    """Which keywords of a rule set a text holds, found in one pass per haystack (the text, its
    lower-case form, its long words: :attr:`RedactionRule.probes`) by an RE2 ``Set`` of the
    keywords as literals, rather than one search per keyword. The text is given to RE2 as UTF-8
    (lone surrogates too) and matched as Latin-1 bytes: a keyword is in the text exactly when
    its UTF-8 bytes are in the text's, so the rules tried are those the scan tries."""

    __slots__ = ("_always", "_runs", "_sets", "_unanchored")

    def __init__(self, rules: Iterable[RedactionRule], engine: Any) -> None:
        keys: dict[int, list[str]] = {0: [], 1: [], 2: []}
        always: set[tuple[int, str]] = set()
        for rule in rules:
            for hay, keyword in rule.probes:
                if not keyword:
                    always.add((hay, keyword))  # "" is in every text
                elif keyword not in keys[hay]:
                    keys[hay].append(keyword)
        options = engine.RE2.Options()
        options.encoding = engine.RE2.Options.Encoding.LATIN1
        options.max_mem = 64 << 20
        self._sets: list[tuple[int, Any, list[tuple[int, str]]]] = []
        for hay, words in keys.items():
            if not words:
                continue
            kset = engine.Set(engine.RE2.Anchor.UNANCHORED, options)
            for keyword in words:
                literal = "".join(f"\\x{b:02x}" for b in keyword.encode("utf-8", "surrogatepass"))
                kset.Add(literal.encode("ascii"))
            if not kset.Compile():
                raise RuntimeError("RE2 could not compile the redaction keywords")
            self._sets.append((hay, kset, [(hay, k) for k in words]))
        self._always = frozenset(always)
        self._runs = engine.RE2(rb"[A-Za-z0-9_.+/=~-]{20,}", options)
        self._unanchored = engine.RE2.Anchor.UNANCHORED

    def runs(self, text: str) -> Iterator[tuple[int, int]]:
        """The spans of ``text`` that :data:`_TOKEN_RUN` matches, found by RE2 in its UTF-8
        bytes: the maximal runs of 20 or more token characters (all ASCII: a byte of a
        character beyond ASCII is never one) that start with a letter or a digit."""
        data = text.encode("utf-8", "surrogatepass")
        ascii_only = len(data) == len(text)
        size = len(data)
        at = byte_at = char_at = 0
        while True:
            start, end = self._runs.Match(self._unanchored, data, at, size)[0]
            if start < 0:
                return
            at = end
            if data[start] not in _RUN_HEADS:
                continue
            if ascii_only:
                yield start, end
                continue
            char_at += len(data[byte_at:start].decode("utf-8", "surrogatepass"))
            byte_at = start
            yield char_at, char_at + end - start

    def present(self, text: str, lowered: str) -> set[tuple[int, str]]:
        """The probes ``(haystack, keyword)`` found in ``text`` (``lowered`` is its
        ``lower()``)."""
        found = set(self._always)
        words: str | None = None
        for hay, kset, probes in self._sets:
            if hay == 2:
                words = long_words(text) if words is None else words
                subject = words
            else:
                subject = lowered if hay == 1 else text
            hits = kset.Match(subject.encode("utf-8", "surrogatepass"))
            if hits:
                found.update(probes[i] for i in hits)
        return found


# --- the redactor ----------------------------------------------------------------------------


class Redactor:
    """Replaces secrets in frames, block lists, texts and bytes; a store's ``redactor``.

    ``rules`` replaces the built-in rules (None: :data:`BUILTIN_RULES`); ``extra`` rules are
    tried after them, but before the generic assignment rule (so a secret of a shape they know
    is named by them); ``disable`` names rules to leave out (a name no rule has is an error).
    """

    def __init__(
        self,
        *,
        rules: Iterable[RedactionRule] | None = None,
        extra: Iterable[RedactionRule] = (),
        disable: Iterable[str] = (),
    ) -> None:
        base = list(BUILTIN_RULES if rules is None else rules)
        generic = [r for r in base if isinstance(r, _AssignmentRule | _RandomTokenRule)]
        chosen = [*(r for r in base if r not in generic), *extra, *generic]
        off = set(disable)
        unknown = off - {r.id for r in chosen}
        if unknown:
            raise ValueError(f"no redaction rule named {', '.join(sorted(unknown))}")
        self.rules: tuple[RedactionRule, ...] = tuple(r for r in chosen if r.id not in off)
        # A tool input's {"password": "..."} is the dict form of an assignment.
        self._fields = any(isinstance(r, _AssignmentRule) for r in self.rules)
        # The rules without keywords that one search of a JSON value's strings joined can rule
        # out (no anchor or lookaround: a match in one string is a match in the joined text).
        self._joinable = frozenset(
            r.id for r in self.rules if not r.keywords and not _EDGE_SENSITIVE.search(r.pattern)
        )
        # How a text's keywords are looked for: None picks (RE2 once it pays, when installed),
        # "scan" one by one, "re2" all at once (tools/redaction_same.py compares them).
        self._gate_kind: str | None = None
        self._sets: _KeywordSets | None = None

    @property
    def rule_ids(self) -> list[str]:
        return [r.id for r in self.rules]

    # -- texts ----------------------------------------------------------------------------------

    def redact_text(self, text: str) -> tuple[str, int]:
        """``text`` with every secret replaced, and how many were (``text`` itself when none)."""
        return self._redact(text, self.rules)

    def _redact(self, text: str, rules: Sequence[RedactionRule]) -> tuple[str, int]:
        if not text:
            return text, 0
        sets = self._keyword_sets(len(text))
        if sets is not None:
            return self._redact_set(text, rules, sets)
        return self._redact_scan(text, rules)

    def _keyword_sets(self, chars: int) -> _KeywordSets | None:
        """The RE2 gate, when it is in use (None: the keywords are looked for one by one)."""
        if self._sets is not None or self._gate_kind == "scan":
            return self._sets
        if self._gate_kind is None:
            _redacted_chars[0] += chars
            if _redacted_chars[0] < _RE2_AFTER_CHARS:
                return None
        if _load_re2() is None:
            if self._gate_kind == "re2":
                raise RuntimeError("the re2 gate needs google-re2 (pip install google-re2)")
            self._gate_kind = "scan"
            return None
        self._sets = _keyword_sets_of(self.rules)
        return self._sets

    def _redact_set(
        self, text: str, rules: Sequence[RedactionRule], sets: _KeywordSets
    ) -> tuple[str, int]:
        """:meth:`_redact_scan`'s result, the keywords found in one pass per haystack: only the
        rules whose keywords occur (and those without keywords) are tried."""
        lowered = text.lower()
        present = sets.present(text, lowered)
        total = 0
        for rule in rules:
            if rule.keywords and present.isdisjoint(rule.probes):
                continue
            if isinstance(rule, _RandomTokenRule):
                text, n = rule.apply(text, lowered, sets.runs)
            else:
                text, n = rule.apply(text, lowered)
            if n:  # a marker may hold a keyword: look again, in the text as it is now
                total += n
                lowered = text.lower()
                present = sets.present(text, lowered)
        return text, total

    def _redact_scan(self, text: str, rules: Sequence[RedactionRule]) -> tuple[str, int]:
        lowered: str | None = None
        words: str | None = None
        found: dict[tuple[int, str], bool] = {}  # a keyword shared by rules is looked for once
        total = 0
        for rule in rules:
            if rule.fold and lowered is None:
                lowered = text.lower()
            if rule.keywords:  # a text without any keyword is not searched (the hot path)
                if rule.token:  # its keyword can only be in a long word
                    if words is None:
                        words = long_words(text)
                    hay = words
                else:
                    hay = (lowered or text) if rule.fold else text
                for probe in rule.probes:
                    hit = found.get(probe)
                    if hit is None:
                        hit = found[probe] = probe[1] in hay
                    if hit:
                        break
                else:
                    continue
            text, n = rule.apply(text, lowered)
            if n:
                total += n
                lowered = words = None
                found.clear()
        return text, total

    def redact_bytes(self, data: bytes) -> tuple[bytes, int]:
        """UTF-8 ``data`` (an artifact's content) redacted; bytes that are not UTF-8 are kept
        as they are. Returns ``data`` itself when nothing was found."""
        text = data.decode("utf-8", "surrogateescape")
        redacted, n = self.redact_text(text)
        return (redacted.encode("utf-8", "surrogateescape"), n) if n else (data, 0)

    def redact_value(self, value: Any) -> tuple[Any, int]:
        """A JSON-like value (a tool's input, a job's params) with every string in it redacted,
        recursively; a string under a key that names a secret goes whole. The same object when
        nothing was found."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            total = 0
            for k, v in value.items():
                if isinstance(v, str) and isinstance(k, str) and self._secret_field(k, v):
                    new, n = _ASSIGNMENT_MARKER, 1
                else:
                    new, n = self.redact_value(v)
                if n:
                    if out is None:
                        out = dict(value)
                    out[k] = new
                    total += n
            return (value, 0) if out is None else (out, total)
        if isinstance(value, list):
            items: list[Any] | None = None
            total = 0
            for i, v in enumerate(value):
                new, n = self.redact_value(v)
                if n:
                    if items is None:
                        items = list(value)
                    items[i] = new
                    total += n
            return (value, 0) if items is None else (items, total)
        return value, 0

    def redact_json(self, value: Any) -> tuple[Any, int]:
        """A JSON value a provider or a runtime wrote (a provider block's ``data``, a layout
        hint, a record's ``data``) with every string in it redacted, recursively, keys kept, and
        a string under a key that names a secret replaced whole, as :meth:`redact_value` does;
        but the payloads a provider needs back byte for byte stay as they are (:func:`opaque`).
        The same object when nothing was found.

        The strings are gated all at once: only the rules whose keywords occur in them (or,
        for a rule without keywords, whose pattern matches them joined) search them one by one,
        so a value of many short strings without a secret costs about one search of its text.
        """
        if isinstance(value, _SCALARS):
            return value, 0
        strings: list[str] = []
        plan = _plan(value, self._secret_field, strings)
        fields = plan.count(_FIELD)
        rules = self._candidates(strings) if strings else ()
        if not rules and not fields:
            return value, 0
        found = [self._redact(t, rules) for t in strings]
        total = fields + sum(n for _, n in found)
        if not total:
            return value, 0
        return _rebuild(value, plan, found), total

    def _candidates(self, strings: list[str]) -> tuple[RedactionRule, ...]:
        """The rules that may find something in one of ``strings``: a rule with keywords when
        one of them is in some string; one without, when its pattern matches the strings
        joined (or may match one string and not the joined text)."""
        joined = "\n".join(strings)
        lowered: str | None = None
        words: str | None = None
        chosen: list[RedactionRule] = []
        for rule in self.rules:
            if rule.fold and lowered is None:
                lowered = joined.lower()
            if rule.keywords:
                if rule.token:
                    if words is None:
                        words = long_words(joined)
                    hay = words
                else:
                    hay = (lowered or joined) if rule.fold else joined
                if any(keyword in hay for keyword in rule.keywords):
                    chosen.append(rule)
            elif rule.id not in self._joinable:
                chosen.append(rule)
            else:
                regex, hay = rule._target(joined, lowered)
                if regex.search(hay) is not None:
                    chosen.append(rule)
        return tuple(chosen)

    def _secret_field(self, key: str, value: str) -> bool:
        if not (self._fields and _may_name_secret(key)):
            return False
        return (
            (strength := _key_strength(key)) != _NOT_A_SECRET
            and _plausible_value(value)
            and (strength == _STRONG or _looks_random(value))
        )

    # -- frames ---------------------------------------------------------------------------------

    def redact_blocks(self, blocks: Sequence[fr.ContentBlock]) -> tuple[list[fr.ContentBlock], int]:
        """Message content with every secret replaced, and how many were (the blocks are the
        same objects when none was found)."""
        out: list[fr.ContentBlock] | None = None
        total = 0
        replace = msgspec.structs.replace
        for i, b in enumerate(blocks):
            new: fr.ContentBlock = b
            if isinstance(b, fr.TextBlock | fr.ThinkingBlock):
                text, n = self.redact_text(b.text)
                if n:
                    new = replace(b, text=text)
            elif isinstance(b, fr.ToolUseBlock):
                value, n = self.redact_value(b.input)
                if n:
                    new = replace(b, input=value)
            elif isinstance(b, fr.ToolResultBlock):
                content, n = self.redact_text(b.content)
                preview, m = self.redact_text(b.preview)
                parts, k = self._redact_parts(b.parts) if b.parts else (b.parts, 0)
                if n or m or k:
                    new = replace(b, content=content, preview=preview, parts=parts)
                    if (n or k) and b.artifact_id is None and b.size == _utf8_len(b.text):
                        new = replace(new, size=_utf8_len(new.text))  # the size as stored
                n += m + k
            elif isinstance(b, fr.ProviderBlock):
                data, n = self.redact_json(b.data)
                text, m = self.redact_text(b.text)
                if n or m:
                    new = replace(b, data=data, text=text)
                n = max(n, m)  # the text is made from the data: a secret in both is one
            else:
                n = 0
            if n:
                if out is None:
                    out = list(blocks)
                out[i] = new
                total += n
        return (list(blocks) if out is None else out), total

    def _redact_parts(
        self, parts: list[fr.TextBlock | fr.ImageBlock]
    ) -> tuple[list[fr.TextBlock | fr.ImageBlock], int]:
        """A tool output's parts with their texts redacted (the same list when none changed)."""
        out: list[fr.TextBlock | fr.ImageBlock] | None = None
        total = 0
        for i, p in enumerate(parts):
            if isinstance(p, fr.TextBlock):
                text, n = self.redact_text(p.text)
                if n:
                    if out is None:
                        out = list(parts)
                    out[i] = msgspec.structs.replace(p, text=text)
                    total += n
        return (parts if out is None else out), total

    def redact_layouts(self, meta: dict[str, str]) -> tuple[dict[str, str], int]:
        """A message's ``meta`` with the strings of its layout hints (``<provider>.layout``)
        redacted as :meth:`redact_json` does; a hint that is not JSON (no renderer reads it) is
        redacted as text. The same dict when nothing was found."""
        out: dict[str, str] | None = None
        total = 0
        for key, raw in meta.items():
            if not (key.endswith(LAYOUT_SUFFIX) and isinstance(raw, str)):
                continue
            try:
                layout = json.loads(raw)
            except ValueError:
                new, n = self.redact_text(raw)
            else:
                value, n = self.redact_json(layout)
                new = json.dumps(value, ensure_ascii=False, separators=(",", ":")) if n else raw
            if n:
                if out is None:
                    out = dict(meta)
                out[key] = new
                total += n
        return (meta if out is None else out), total

    def __call__(self, frame: fr.Frame) -> fr.Frame:
        """``frame`` with every secret replaced and counted in ``meta["redacted"]``; the same
        object when it holds none."""
        replace = msgspec.structs.replace
        if isinstance(frame, fr.MessageAppended):
            content: list[Any] = frame.content
            given_as_dicts = not all(isinstance(b, fr.Block) for b in content)
            if given_as_dicts:
                try:
                    content = fr.content_blocks(content)
                except BadFrame:
                    return frame  # the store refuses it, naming the frame and the field
            blocks, n = self.redact_blocks(content)
            meta, m = self.redact_layouts(frame.meta) if frame.meta else (frame.meta, 0)
            if not (n or m):
                return frame
            counted = _counted(meta, max(n, m))  # a layout repeats members of the blocks
            if not n:
                return replace(frame, meta=counted)
            tokens = frame.tokens
            if given_as_dicts or tokens == fr.estimate_message_tokens(content):
                tokens = 0  # the store estimates the new content
            return replace(frame, content=blocks, tokens=tokens, meta=counted)
        if isinstance(frame, fr.ThreadCreated) and frame.title:
            title, n = self.redact_text(frame.title)
            return replace(frame, title=title, meta=_counted(frame.meta, n)) if n else frame
        if isinstance(frame, fr.ObservationRecorded):
            text, n = self.redact_text(frame.text)
            return replace(frame, text=text) if n else frame
        if isinstance(frame, fr.JobSpawned):
            params, n = self.redact_value(frame.params)
            return replace(frame, params=params) if n else frame
        if isinstance(frame, fr.JobEnded):
            result, n = self.redact_value(frame.result)
            error, m = self.redact_text(frame.error or "")
            if not (n or m):
                return frame
            return replace(frame, result=result, error=error if frame.error is not None else None)
        if isinstance(frame, fr.ContextSelectionDecided) and frame.recall_query:
            query, n = self.redact_text(frame.recall_query)
            return replace(frame, recall_query=query) if n else frame
        if isinstance(frame, fr.RecordAppended):
            data, n = self.redact_json(frame.data)
            return replace(frame, data=data) if n else frame
        if isinstance(frame, fr.MessagesRetracted) and frame.reason:
            reason, n = self.redact_text(frame.reason)
            return replace(frame, reason=reason) if n else frame
        return frame

    def __repr__(self) -> str:
        return f"Redactor(rules={self.rule_ids!r})"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _counted(meta: dict[str, str], n: int) -> dict[str, str]:
    return {**meta, META_KEY: str(redaction_count(meta) + n)}


def redaction_count(frame_or_meta: fr.Frame | dict[str, str]) -> int:
    """How many secrets were redacted from a frame (its ``meta["redacted"]``; 0 when none or
    when the frame has no ``meta``)."""
    meta = frame_or_meta if isinstance(frame_or_meta, dict) else getattr(frame_or_meta, "meta", {})
    raw = meta.get(META_KEY, "") if isinstance(meta, dict) else ""
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0


# --- configuration -----------------------------------------------------------------------------


class RuleConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A rule in a redaction config: ``pattern`` is a Python regular expression (its group
    ``secret``, if any, is what is replaced); ``keywords`` let a text without any of them skip
    it."""

    id: str
    pattern: str
    keywords: list[str] = []
    ignore_case: bool = False


class RedactionConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What ``<store>/redaction.json`` holds (every key optional)."""

    enabled: bool = True
    disable: list[str] = []
    rules: list[RuleConfig] = []

    def redactor(self) -> Redactor | None:
        """The redactor this config describes (None when ``enabled`` is false). Raises
        :class:`InvalidSettings` for a rule that is not valid."""
        if not self.enabled:
            return None
        extra: list[RedactionRule] = []
        for rc in self.rules:
            try:
                rule = RedactionRule(
                    rc.id, rc.pattern, keywords=rc.keywords, ignore_case=rc.ignore_case
                )
                rule.compile()
            except (ValueError, re.error) as exc:
                raise InvalidSettings(f"redaction rule {rc.id!r}: {exc}") from None
            extra.append(rule)
        try:
            return Redactor(extra=extra, disable=self.disable)
        except ValueError as exc:
            raise InvalidSettings(f"redaction config: {exc}") from None


def load_redactor(path: str | os.PathLike[str]) -> Redactor | None:
    """The redactor a config file describes: the built-in rules when the file does not exist,
    None when it says ``"enabled": false``. Raises :class:`InvalidSettings` naming the file when
    it is not a valid config (fail closed: a config that cannot be read must not let the
    secrets it names through)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return Redactor()
    try:
        config = msgspec.json.decode(raw, type=RedactionConfig)
        return config.redactor()
    except (msgspec.DecodeError, msgspec.ValidationError, InvalidSettings) as exc:
        raise InvalidSettings(f"{os.fspath(path)}: {exc}") from None
