"""The built-in rules against the corpus of tools/redaction_corpus.py: every format planted in
context (the eleven formats of issue 26 among them) and every provider token bare is replaced,
whole, by its own rule's marker; each rule's near misses, the corpus's benign lines and the real
sessions (claude-code and agents) are left alone; and no rule backtracks without end on a long
adversarial line."""

from __future__ import annotations

import importlib
import re
from typing import Any

import msgspec
import pytest

from continuity.redaction import (
    BUILTIN_RULES,
    MARKER_PREFIX,
    TOKEN_MIN_CHARS,
    Redactor,
    long_words,
)
from tests.support.fixtures import SHARED_FIXTURES
from tools.redaction_corpus import BARE, BENIGN, IN_CONTEXT, NEAR_MISSES, SAMPLES, Sample, fake

ISSUE_26 = [
    "twilio-auth-token",
    "registry-auth",
    "digitalocean-token",
    "shopify-token",
    "square-token",
    "cli-password",
    "vault-token",
    "terraform-cloud-token",
    "age-secret-key",
    "kubeconfig-client-key",
    "postman-api-key",
]
"""The rules of the eleven formats issue 26 found stored verbatim, in its order."""


def marker(rule: str) -> str:
    return f"{MARKER_PREFIX}{rule}]"


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.format for s in SAMPLES])
def test_each_format_is_replaced_whole_by_its_rule(sample: Sample) -> None:
    out, n = Redactor().redact_text(sample.text)
    assert (out, n) == (sample.before + marker(sample.rule) + sample.after, 1)


@pytest.mark.parametrize(
    ("rule", "text"),
    [(rule, text) for rule, texts in NEAR_MISSES.items() for text in texts],
    ids=[f"{rule}-{i}" for rule, texts in NEAR_MISSES.items() for i in range(len(texts))],
)
def test_each_rule_leaves_its_near_misses_alone(rule: str, text: str) -> None:
    out, n = Redactor().redact_text(text)
    assert (out, n) == (text, 0), rule


@pytest.mark.parametrize("line", BENIGN)
def test_benign_lines_are_left_alone(line: str) -> None:
    assert Redactor().redact_text(line) == (line, 0)


def test_every_rule_added_for_issue_26_has_a_sample_and_a_near_miss() -> None:
    by_rule = {s.rule for s in SAMPLES}
    assert {s.rule for s in IN_CONTEXT[: len(ISSUE_26)]} == set(ISSUE_26)
    ids = {r.id for r in BUILTIN_RULES}
    assert set(NEAR_MISSES) <= ids
    # every rule the corpus names exists, and every rule without a sample in the older tests
    # (tests/redaction/test_redaction.py) has one here and a near miss
    assert by_rule <= ids
    for rule in set(NEAR_MISSES):
        assert rule in by_rule, rule


def test_the_corpus_holds_at_least_sixty_formats() -> None:
    assert len({s.format for s in IN_CONTEXT}) + len({s.format for s in BARE}) >= 60
    assert len({s.rule for s in SAMPLES}) >= 60


def test_a_token_under_a_key_is_named_by_its_provider_and_counted_once() -> None:
    text = "\n".join(f"KEY_{i}={s.secret}" for i, s in enumerate(BARE))
    out, n = Redactor().redact_text(text)
    assert n == len(BARE)
    assert out == "\n".join(f"KEY_{i}={marker(s.rule)}" for i, s in enumerate(BARE))


def test_redacting_again_changes_nothing() -> None:
    text = "\n".join(s.text for s in SAMPLES)
    redactor = Redactor()
    out, n = redactor.redact_text(text)
    assert n == len(SAMPLES)
    assert redactor.redact_text(out) == (out, 0)


def test_a_disabled_rule_leaves_its_bare_token_alone() -> None:
    for s in BARE:
        if s.rule in ISSUE_26:
            out, _ = Redactor(disable=[s.rule]).redact_text(s.text)
            assert marker(s.rule) not in out


def test_a_secret_field_in_a_tool_input_goes_whole() -> None:
    """The dict form of the assignments the issue found: ``PGPASSWORD``, ``VAULT_TOKEN``."""
    vault = "hvs." + fake("vault-field", 24)
    value = {"env": {"PGPASSWORD": "pg" + fake("pg-field", 14), "VAULT_TOKEN": vault}}
    out, n = Redactor().redact_value(value)
    assert n == 2
    assert out == {
        "env": {
            "PGPASSWORD": marker("secret-assignment"),
            "VAULT_TOKEN": marker("secret-assignment"),
        }
    }


@pytest.mark.parametrize(
    "value",
    ["proxy-handled", "REDACTED_API_KEY", "settings.VAULT_TOKEN", "os.environ.API_TOKEN"],
)
def test_names_and_settings_under_a_secret_key_are_left_alone(value: str) -> None:
    for text in (f"apiKey: '{value}',", f'"token": "{value}"', f"API_TOKEN={value}"):
        assert Redactor().redact_text(text) == (text, 0)


def _adversarial_lines() -> list[str]:
    """Long lines made of each rule's keywords and of almost-tokens: the prefix of every sample,
    each followed by a body that stops one short, a thousand times over; and the classic runs."""
    lines = [
        "a" * 200_000,
        "-" * 200_000,
        "0" * 200_000,
        "mysql " + "-x " * 50_000,
        "machine " * 30_000,
        "Authorization: " * 20_000,
        "--password " * 20_000,
        "LS0tLS1CRUdJTi" + "A" * 200_000,
        "Private-Lines: 1" + "\nAAAA" * 40_000 + "-",
        '"auth": "' + "QUFB" * 50_000,
        "AC" + "0" * 32 + ", " * 50_000,
    ]
    for s in SAMPLES:
        almost = s.secret[: max(3, len(s.secret) - 1)]
        lines.append(" ".join([s.before + almost] * 1_000))
    for rule in BUILTIN_RULES:
        for keyword in rule.keywords:
            lines.append((keyword + "a1B2") * 5_000)
    return lines


@pytest.mark.slow
def test_no_rule_backtracks_without_end_on_a_long_adversarial_line() -> None:
    """Each line is searched in linear time or the test would not end: none of them hangs."""
    redactor = Redactor()
    lines = _adversarial_lines()
    assert len(lines) > len(SAMPLES)
    for line in lines:
        out, _ = redactor.redact_text(line)
        assert len(out) > 0


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.slow
def test_the_agent_sessions_hold_nothing_the_rules_take_for_a_secret() -> None:
    """The Codex, Gemini and opencode sessions (code with ``apiKey: 'proxy-handled'`` and
    ``'REDACTED_API_KEY'`` in it): no false positive (claude-code's are in test_redaction.py)."""
    root = SHARED_FIXTURES / "agents"
    if not root.is_dir():
        pytest.skip(f"shared fixtures not found at {root}")
    redactor = Redactor()
    found: list[str] = []
    seen = 0
    for path in sorted([*root.rglob("*.jsonl"), *root.rglob("*.json")]):
        raw = path.read_bytes()
        lines = [raw] if path.suffix == ".json" else raw.splitlines()
        for line in lines:
            try:
                doc = msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue
            for text in _strings(doc):
                seen += len(text)
                out, n = redactor.redact_text(text)
                if n:
                    found.append(f"{path.name}: {out[:200]!r}")
    assert seen > 1_000_000
    assert found == []


def test_a_token_rule_matches_only_runs_long_enough_to_be_gated_by_long_words() -> None:
    """A rule flagged ``token`` has its keywords looked for in the long words of a text alone
    (:func:`continuity.redaction.long_words`): its shortest match must be such a word."""
    parser: Any = importlib.import_module("re._parser")  # the shortest match, as re sees it

    glued = {"twilio-auth-token", "azure-storage-key"}  # keyword in a run, match goes on
    tokens = [r for r in BUILTIN_RULES if r.token and r.id not in glued]
    assert len(tokens) >= 80
    for rule in tokens:
        assert parser.parse(rule.pattern).getwidth()[0] >= TOKEN_MIN_CHARS, rule.id
        assert not re.search(r"\\s|\[\^|\.\*|\\S", rule.pattern), rule.id  # no whitespace
    assert long_words("a sk-ant-key\tLTAI0123456789ab\nshort") == "LTAI0123456789ab"
