"""Secret redaction (continuity.redaction): every rule on realistic samples and on the near
misses it must leave alone, idempotence and determinism, frames, the API path through a store,
and the configuration.

The secrets here are made up at run time from a hash of a label (:func:`fake`): the same every
run, and no file of the project holds a string a secret scanner would flag.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from continuity import frames as fr
from continuity.errors import InvalidSettings
from continuity.redaction import (
    BUILTIN_RULES,
    MARKER_PREFIX,
    RedactionRule,
    Redactor,
    load_redactor,
    redaction_count,
)
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tests.support.fixtures import SHARED_FIXTURES
from tools.redaction_corpus import SAMPLES

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = UPPER.lower()
DIGITS = "0123456789"
ALNUM = UPPER + LOWER + DIGITS
URLSAFE = ALNUM + "_-"
BASE64 = ALNUM + "+/"


def fake(label: str, n: int, alphabet: str = ALNUM) -> str:
    """``n`` characters of ``alphabet`` derived from ``label``: a made-up secret, the same
    every run. It always holds a digit and a letter (as real keys do)."""
    out: list[str] = []
    counter = 0
    while len(out) < n:
        digest = hashlib.blake2b(f"{label}:{counter}".encode()).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    body = out[:n]
    if n >= 4 and any(c in alphabet for c in DIGITS) and any(c in alphabet for c in LOWER):
        body[1], body[2] = "7", "q"
    return "".join(body)


def marker(rule: str) -> str:
    return f"{MARKER_PREFIX}{rule}]"


ANTHROPIC = "sk-ant-api03-" + fake("anthropic", 93, URLSAFE) + "AA"
OPENAI_PROJECT = "sk-proj-" + fake("openai-p1", 74, URLSAFE) + "T3BlbkFJ" + fake("p2", 74, URLSAFE)
AWS_KEY_ID = "AKIA" + fake("aws-id", 16, UPPER + "234567")
AWS_SECRET = fake("aws-secret", 40, BASE64)
GITHUB_PAT = "ghp_" + fake("github", 36)
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(fake(f"ssh{i}", 70, BASE64) for i in range(5))
    + "\n-----END OPENSSH PRIVATE KEY-----"
)

# (rule, text before, the secret, text after): the redacted text is before + marker + after.
POSITIVES: list[tuple[str, str, str, str]] = [
    ("anthropic-api-key", "export ANTHROPIC_API_KEY=", ANTHROPIC, "\n"),
    ("anthropic-api-key", "token: ", "sk-ant-oat01-" + fake("oauth", 100, URLSAFE), ""),
    ("openai-api-key", "OPENAI_API_KEY=", OPENAI_PROJECT, ""),
    (
        "openai-api-key",
        "client = OpenAI(api_key='",
        "sk-" + fake("legacy1", 20) + "T3BlbkFJ" + fake("legacy2", 20),
        "')",
    ),
    ("openai-api-key", "key: ", "sk-" + fake("legacy48", 48), " (old style)"),
    ("aws-access-key-id", "[default]\naws_access_key_id = ", AWS_KEY_ID, "\n"),
    ("aws-access-key-id", '"AccessKeyId": "', "ASIA" + fake("sts", 16, UPPER + DIGITS), '",'),
    ("aws-secret-access-key", "aws_secret_access_key = ", AWS_SECRET, "\nregion = eu-west-1"),
    ("aws-secret-access-key", '"SecretAccessKey": "', fake("sts-secret", 40, BASE64), '",'),
    ("aws-secret-access-key", '"SessionToken": "', fake("sts-session", 300, BASE64), '"'),
    ("github-token", "remote: https://x-access-token:", "ghs_" + fake("ghs", 36), "@github.com"),
    ("github-token", "GITHUB_TOKEN=", GITHUB_PAT, ""),
    (
        "github-token",
        "gh auth login --with-token <<< ",
        "github_pat_" + fake("fine1", 22) + "_" + fake("fine2", 59),
        "",
    ),
    ("gitlab-token", "PRIVATE_TOKEN ", "glpat-" + fake("gitlab", 20, URLSAFE), " ok"),
    (
        "slack-token",
        "SLACK_BOT=",
        "xoxb-" + fake("sb1", 12, DIGITS) + "-" + fake("sb2", 13, DIGITS) + "-" + fake("sb3", 24),
        "",
    ),
    (
        "slack-webhook",
        "curl -X POST https://hooks.slack.com/services/",
        "T0" + fake("hook1", 8, UPPER + DIGITS) + "/B0" + fake("hook2", 8) + "/" + fake("h3", 24),
        " -d '{}'",
    ),
    ("stripe-key", "stripe.api_key = ", "sk_live_" + fake("stripe", 24), ""),
    ("stripe-key", "restricted: ", "rk_live_" + fake("stripe-rk", 99), "."),
    ("google-api-key", "https://maps.googleapis.com/maps/api?key=", "AIza" + fake("g", 35), "&x=1"),
    ("huggingface-token", "HF: ", "hf_" + fake("hf", 34), ""),
    ("npm-token", "//registry.npmjs.org/:_authToken=", "npm_" + fake("npm", 36), "\n"),
    ("pypi-token", "password = ", "pypi-AgEIcHlwaS5vcmc" + fake("pypi", 60, URLSAFE), "\n"),
    ("private-key", "$ cat ~/.ssh/id_ed25519\n", PRIVATE_KEY, "\n$ ls"),
    (
        "private-key",
        '{"type": "service_account", "private_key": "',
        "-----BEGIN PRIVATE KEY-----\\n"
        + "\\n".join(fake(f"sa{i}", 64, BASE64) for i in range(4))
        + "\\n-----END PRIVATE KEY-----",
        '\\n", "client_email": "x@y.iam.gserviceaccount.com"}',
    ),
    (
        "private-key",  # `cat sa.json` cut mid-key: escaped line breaks, no END line (issue 40)
        '{"type": "service_account", "private_key": "',
        "-----BEGIN PRIVATE KEY-----\\n"
        + "\\n".join(fake(f"sac{i}", 64, BASE64) for i in range(6))
        + "\\n"
        + fake("sac-tail", 20, BASE64),
        "",
    ),
    (
        "private-key",  # cut short by an output limit: the key material after BEGIN still goes
        "output truncated:\n",
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        + fake("rsa0", 64, BASE64)
        + "\n"
        + fake("r1", 30),
        "\n\nThe key above was cut short (see the file).",
    ),
    (
        "jwt",
        "Cookie: session=",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ"
        + fake("jwt-body", 60, URLSAFE)
        + "."
        + fake("jwt-sig", 43, URLSAFE),
        "; Path=/",
    ),
    (
        "bearer-token",
        "curl -H 'Authorization: Bearer ",
        fake("bearer", 40, URLSAFE + "."),
        "' https://api.example.com/v1",
    ),
    ("basic-auth", "Authorization: Basic ", fake("basic", 32, BASE64) + "==", "\r\n"),
    ("api-key-header", "x-api-key: ", fake("header", 40), "\nanthropic-version: 2023-06-01"),
    ("url-password", "DATABASE_URL=postgres://app:", fake("dbpw", 20), "@db:5432/app"),
    ("url-password", "git clone https://me:", "hunter2hunter2", "@git.example.com/r.git"),
    ("curl-user", "curl -s -u admin:", "Tr0ub4dor&3", " https://example.com/api"),
    ("secret-assignment", "DB_PASSWORD=", "correcthorsebattery", "\nDB_HOST=localhost\n"),
    ("secret-assignment", "export API_TOKEN=", fake("api-token", 32), " && ./deploy.sh"),
    ("secret-assignment", "SECRET_KEY_BASE=", fake("rails", 64, "0123456789abcdef"), "\n"),
    ("secret-assignment", 'config = {"password": "', "s3cr3t-P@ss", '", "user": "app"}'),
    ("secret-assignment", "  client_secret: ", fake("yaml", 24), "\n  client_id: abc\n"),
    ("secret-assignment", 'webhookSecret := "', fake("go", 20), '"'),
    ("secret-assignment", "STRIPE_KEY=", fake("weak-key", 24), "\n"),
]

NEGATIVES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "id 123e4567-e89b-12d3-a456-426614174000 digest " + "ab" * 32,
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChw",
    "the docs write keys as sk-ant-api03-... or sk-proj-...; never paste one here",
    "TOKEN=1\nMAX_TOKENS=4096\nmax_tokens=1024\nSORT_KEY=created_at\nCACHE_KEY=user\n",
    "def f(token=None, key=lambda x: x):\n    password = get_password()\n"
    "    secret = self.secret\n",
    "api_key = os.environ['OPENAI_API_KEY']\ntoken = settings.GITHUB_TOKEN\n",
    'headers = {"Authorization": f"Bearer {token}"}\nprint("Bearer token required")',
    "API_KEY=your-api-key-here\nPASSWORD=${DB_PASSWORD}\nSECRET=<secret>\nTOKEN=********\n",
    "password: str = field(default='')\ntoken: Optional[TokenType] = None\n",
    '"password": "must be at least 8 characters"',
    "http://localhost:8080/path and git@github.com:org/repo.git and https://user@example.com",
    "the bearer of this letter; Bearer authentication uses a token",
    "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
    "key_file = ~/.ssh/id_ed25519\nSSH_KEY=~/.ssh/id_rsa\n",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "docker run -u 1000:1000 image; git push -u origin main",
]


def test_the_positive_cases_cover_every_builtin_rule() -> None:
    # the provider and context rules of issue 26 have theirs in test_redaction_rules.py
    more = {s.rule for s in SAMPLES}
    assert {rule for rule, *_ in POSITIVES} | more == {r.id for r in BUILTIN_RULES}


@pytest.mark.parametrize(
    ("rule", "before", "secret", "after"),
    POSITIVES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(POSITIVES)],
)
def test_each_rule_replaces_exactly_its_secret(
    rule: str, before: str, secret: str, after: str
) -> None:
    text = before + secret + after
    out, n = Redactor().redact_text(text)
    assert (out, n) == (before + marker(rule) + after, 1)


@pytest.mark.parametrize(
    ("rule", "before", "secret", "after"),
    POSITIVES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(POSITIVES)],
)
def test_a_disabled_rule_leaves_its_secret_to_the_others_or_alone(
    rule: str, before: str, secret: str, after: str
) -> None:
    out, _ = Redactor(disable=[rule]).redact_text(before + secret + after)
    assert marker(rule) not in out


@pytest.mark.parametrize("text", NEGATIVES)
def test_near_misses_are_left_alone(text: str) -> None:
    out, n = Redactor().redact_text(text)
    assert (out, n) == (text, 0)
    assert out is text


def test_sk_inside_a_word_is_no_openai_key() -> None:
    # the random run after it is a token all the same (the rule that finds any random run)
    text = "pip install scikit-learn; see task-sk-" + fake("task", 40) + " and disk-usage"
    out, n = Redactor().redact_text(text)
    want = "pip install scikit-learn; see " + marker("random-token") + " and disk-usage"
    assert (out, n) == (want, 1)


def test_a_text_full_of_secrets_loses_all_of_them_and_redacting_again_changes_nothing() -> None:
    text = "\n".join(before + secret + after for _, before, secret, after in POSITIVES)
    redactor = Redactor()
    out, n = redactor.redact_text(text)
    assert n == len(POSITIVES)
    for _, _, secret, _ in POSITIVES:
        assert secret not in out
    assert redactor.redact_text(out) == (out, 0)
    assert Redactor().redact_text(text) == (out, n)  # deterministic, in a fresh redactor too


def test_a_provider_key_in_an_assignment_is_named_by_its_provider() -> None:
    out, n = Redactor().redact_text(f"ANTHROPIC_API_KEY={ANTHROPIC}\nGH_TOKEN={GITHUB_PAT}")
    assert (out, n) == (
        f"ANTHROPIC_API_KEY={marker('anthropic-api-key')}\nGH_TOKEN={marker('github-token')}",
        2,
    )


def test_text_that_lowers_to_another_length_is_still_searched_in_place() -> None:
    # "İ" lowers to two characters: the lowered-text fast path cannot be used for this text.
    text = f"İİİ DB_PASSWORD=correcthorsebattery İ Authorization: Bearer {fake('b', 30)} İ"
    out, n = Redactor().redact_text(text)
    assert out == (
        f"İİİ DB_PASSWORD={marker('secret-assignment')} İ "
        f"Authorization: Bearer {marker('bearer-token')} İ"
    )
    assert n == 2


@pytest.mark.parametrize("sep", ["=", ": "])
def test_a_value_over_a_kilobyte_after_a_secret_name_goes_whole(sep: str) -> None:
    long = fake("kilobyte", 2500, BASE64)
    text = f"REGISTRY_PASSWORD{sep}{long}\nnext line"
    assert Redactor().redact_text(text) == (
        f"REGISTRY_PASSWORD{sep}{marker('secret-assignment')}\nnext line",
        1,
    )


def test_bytes_that_are_not_utf8_survive() -> None:
    data = b"\xff\xfe binary " + f"key={GITHUB_PAT}".encode() + b" \x80 end"
    out, n = Redactor().redact_bytes(data)
    assert (
        n == 1 and out == b"\xff\xfe binary key=" + marker("github-token").encode() + b" \x80 end"
    )
    clean = b"\x00\xff nothing here"
    assert Redactor().redact_bytes(clean) == (clean, 0)


# --- frames ---------------------------------------------------------------------------------


def _secret_message() -> fr.MessageAppended:
    return fr.message(
        "assistant",
        content=[
            fr.TextBlock(text=f"I set ANTHROPIC_API_KEY={ANTHROPIC} for you."),
            fr.ThinkingBlock(text=f"The key is {GITHUB_PAT}.", signature="sig-" + "x" * 40),
            fr.ToolUseBlock(
                id="toolu_1",
                name="Bash",
                input={
                    "command": f"aws configure set aws_access_key_id {AWS_KEY_ID}",
                    "env": [{"name": "X", "value": f"token {GITHUB_PAT}"}],
                    "password": "hunter2hunter2",
                    "timeout": 120,
                },
            ),
            fr.ToolResultBlock(tool_use_id="toolu_1", content=PRIVATE_KEY, size=len(PRIVATE_KEY)),
            fr.ToolResultBlock(
                tool_use_id="toolu_2",
                artifact_id="a" * 64,
                preview=f"DB_PASSWORD=correcthorsebattery\n{'x' * 10}",
                size=99_999,
            ),
            fr.ImageBlock(media_type="image/png", artifact_id="b" * 64, size=10),
        ],
        message_id="m-1",
    )


def test_a_message_loses_every_secret_and_keeps_everything_else() -> None:
    frame = _secret_message()
    out = Redactor()(frame)
    assert isinstance(out, fr.MessageAppended)
    text, thinking, use, result, external, image = out.content
    assert isinstance(text, fr.TextBlock) and text.text == (
        f"I set ANTHROPIC_API_KEY={marker('anthropic-api-key')} for you."
    )
    assert isinstance(thinking, fr.ThinkingBlock)
    assert thinking.text == f"The key is {marker('github-token')}."
    assert thinking.signature == "sig-" + "x" * 40  # not a text anyone reads
    assert isinstance(use, fr.ToolUseBlock) and (use.id, use.name) == ("toolu_1", "Bash")
    assert use.input == {
        "command": f"aws configure set aws_access_key_id {marker('aws-access-key-id')}",
        "env": [{"name": "X", "value": f"token {marker('github-token')}"}],
        "password": marker("secret-assignment"),
        "timeout": 120,
    }
    assert isinstance(result, fr.ToolResultBlock) and result.content == marker("private-key")
    assert result.size == len(marker("private-key"))  # the size of the output as stored
    assert isinstance(external, fr.ToolResultBlock)
    assert external.preview.startswith(f"DB_PASSWORD={marker('secret-assignment')}\n")
    assert (external.artifact_id, external.size) == ("a" * 64, 99_999)
    assert image == frame.content[5]
    assert out.message_id == "m-1" and out.role == "assistant"
    assert redaction_count(out) == 7 and out.meta == {"redacted": "7"}
    assert out.tokens == 0  # re-estimated by the store for the new content
    assert frame.content[0] == fr.TextBlock(text=f"I set ANTHROPIC_API_KEY={ANTHROPIC} for you.")


def test_a_frame_without_secrets_is_returned_as_is() -> None:
    redactor = Redactor()
    clean: list[fr.Frame] = [
        fr.message("user", "Please run the tests", message_id="m"),
        fr.ThreadCreated(thread_id="t", title="a title", meta={"project": "/p"}),
        fr.ObservationRecorded(tool_use_id="t1", text="3 passed"),
        fr.JobSpawned(job_id="j", kind="compaction", params={"cuts": [3]}),
        fr.JobEnded(job_id="j", status="failed", error="boom", result={"n": 1}),
        fr.CompactionCheckpointCreated(
            checkpoint_id="c",
            cut_rule_id="r",
            summary_kind="cumulative_v1",
            summary_artifact_id="a" * 64,
            from_seq=0,
            to_seq=3,
        ),
    ]
    for frame in clean:
        assert redactor(frame) is frame


def test_every_free_text_field_of_the_other_frames_is_redacted() -> None:
    redactor = Redactor()
    created = redactor(fr.ThreadCreated(thread_id="t", title=f"set {GITHUB_PAT}", meta={"a": "b"}))
    assert isinstance(created, fr.ThreadCreated)
    assert created.title == f"set {marker('github-token')}"
    assert created.meta == {"a": "b", "redacted": "1"}
    obs = redactor(fr.ObservationRecorded(tool_use_id="t1", text=f"key {AWS_KEY_ID}"))
    assert isinstance(obs, fr.ObservationRecorded) and AWS_KEY_ID not in obs.text
    spawned = redactor(fr.JobSpawned(job_id="j", kind="k", params={"token": fake("job", 20)}))
    assert isinstance(spawned, fr.JobSpawned)
    assert spawned.params == {"token": marker("secret-assignment")}
    ended = redactor(
        fr.JobEnded(job_id="j", status="failed", error=f"401 for {GITHUB_PAT}", result={})
    )
    assert isinstance(ended, fr.JobEnded) and ended.error == f"401 for {marker('github-token')}"
    decided = redactor(
        fr.ContextSelectionDecided(
            compiler_id="c",
            strategy="s",
            anchor_seq=1,
            bundle_artifact_id="a" * 64,
            recall_query=f"where did I use {GITHUB_PAT}",
        )
    )
    assert isinstance(decided, fr.ContextSelectionDecided)
    assert decided.recall_query == f"where did I use {marker('github-token')}"


def test_counts_add_up_and_a_caller_estimate_is_kept() -> None:
    frame = fr.MessageAppended(
        role="user",
        content=[fr.TextBlock(text=f"{GITHUB_PAT} {AWS_KEY_ID}")],
        tokens=777,  # a real tokenizer's count: not the estimate, so not ours to change
        meta={"redacted": "2", "source": "x"},
    )
    out = Redactor()(frame)
    assert isinstance(out, fr.MessageAppended)
    assert out.meta == {"redacted": "4", "source": "x"} and out.tokens == 777


def test_content_given_as_dicts_is_redacted_too() -> None:
    raw = fr.MessageAppended(role="user", content=[{"type": "text", "text": GITHUB_PAT}])  # type: ignore[list-item]
    out = Redactor()(raw)
    assert isinstance(out, fr.MessageAppended)
    assert out.content == [fr.TextBlock(text=marker("github-token"))]
    bad = fr.MessageAppended(role="user", content=[{"type": "nope"}])  # type: ignore[list-item]
    assert Redactor()(bad) is bad  # left for the store to refuse, naming the field


# --- the API path: a store with a redactor --------------------------------------------------


def _stores(tmp_path: Path) -> list[BaseStore]:
    return [
        Store(tmp_path / "s", create=True, durable=False, redactor=Redactor()),
        MemoryStore(redactor=Redactor()),
    ]


def test_a_store_with_a_redactor_never_writes_a_secret(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        thread = store.thread("agent-1")
        thread.append([_secret_message(), fr.message("user", "thanks", message_id="m-2")])
        lines = b"\n".join(line for _, line in thread.read_lines())
        for secret in (ANTHROPIC, GITHUB_PAT, AWS_KEY_ID, "hunter2hunter2", "correcthorse"):
            assert secret.encode() not in lines
        first, second = (f for f in thread.read(from_seq=1))
        assert isinstance(first, fr.MessageAppended) and first.meta == {"redacted": "7"}
        assert first.tokens == fr.estimate_message_tokens(first.content)
        assert isinstance(second, fr.MessageAppended) and second.meta == {}


def test_the_same_frames_give_the_same_bytes(tmp_path: Path) -> None:
    logs = []
    for i in range(2):
        store = Store(tmp_path / f"s{i}", create=True, durable=False, clock=lambda: 1)
        store.redactor = Redactor()
        store.thread("t").append(
            [_secret_message(), fr.message("user", GITHUB_PAT, message_id="u")]
        )
        logs.append(store.thread("t").path.read_bytes())
    assert logs[0] == logs[1]


# --- stats: the count per thread, from the frames' meta --------------------------------------


@pytest.mark.parametrize("chunk", [None, 40, 1000])
def test_stats_count_redactions_per_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    import continuity.caches.catalog as catalog_module
    import continuity.maintenance.stats as stats_module

    if chunk is not None:  # lines cut across the reads of the log
        monkeypatch.setattr(catalog_module, "_CHUNK", chunk)
    for store in _stores(tmp_path / str(chunk)):
        a, b = store.thread("a"), store.thread("b")
        a.append(_secret_message())  # 7
        a.append(fr.message("user", f"{GITHUB_PAT} and {AWS_KEY_ID}", message_id="u1"))  # 2
        b.append(fr.message("user", "nothing secret here", message_id="u2"))
        # a member named like the counter, in a tool's input, is not a count
        b.append(
            fr.message(
                "assistant",
                content=[fr.ToolUseBlock(id="t", name="x", input={"redacted": "5"})],
                message_id="u3",
            )
        )
        store.thread("c").append(fr.ThreadCreated(title=f"about {AWS_KEY_ID}"))  # 1
        stats = stats_module.store_stats(store)
        assert stats.redactions_by_thread == {"a": 9, "c": 1}
        assert stats.redactions == 10


# --- configuration --------------------------------------------------------------------------


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config))
    return path


def test_no_config_file_means_the_builtin_rules(tmp_path: Path) -> None:
    redactor = load_redactor(tmp_path / "redaction.json")
    assert redactor is not None
    assert redactor.rule_ids == [r.id for r in BUILTIN_RULES]


def test_a_config_turns_redaction_off(tmp_path: Path) -> None:
    assert load_redactor(write_config(tmp_path / "r.json", {"enabled": False})) is None


def test_a_config_disables_rules_and_adds_its_own(tmp_path: Path) -> None:
    config = {
        "disable": ["jwt", "url-password"],
        "rules": [
            {"id": "acme-token", "pattern": "acme_[A-Za-z0-9]{16}", "keywords": ["acme_"]},
            {
                "id": "internal-pin",
                "pattern": r"pin(?: code)?\s*[:=]\s*(?P<secret>\d{4,8})",
                "ignore_case": True,
            },
        ],
    }
    redactor = load_redactor(write_config(tmp_path / "r.json", config))
    assert redactor is not None
    ids = redactor.rule_ids
    assert "jwt" not in ids and "url-password" not in ids
    # the config's rules come before the generic assignment rule
    assert ids[-4:] == ["acme-token", "internal-pin", "secret-assignment", "random-token"]
    token = "acme_" + fake("acme", 16)
    out, n = redactor.redact_text(f"ACME_TOKEN={token}; PIN Code: 123456; https://a:b2b2b2@h")
    assert (
        out
        == f"ACME_TOKEN={marker('acme-token')}; PIN Code: {marker('internal-pin')}; https://a:b2b2b2@h"
    )
    assert n == 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"rules": [{"id": "x", "pattern": "("}]}, "redaction rule 'x'"),
        ({"rules": [{"id": "Bad Id", "pattern": "x"}]}, "redaction rule 'Bad Id'"),
        ({"disable": ["no-such-rule"]}, "no redaction rule named no-such-rule"),
        ({"enabeld": False}, "unknown field"),
        ({"rules": [{"id": "x"}]}, "missing required field"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_file(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    path = write_config(tmp_path / "redaction.json", config)
    with pytest.raises(InvalidSettings, match=message) as info:
        load_redactor(path)
    assert str(path) in str(info.value)
    path.write_text("{not json")
    with pytest.raises(InvalidSettings, match=r"redaction\.json"):
        load_redactor(path)


def test_a_custom_rule_is_a_redaction_rule_too() -> None:
    rule = RedactionRule("ticket-secret", r"TKT-(?P<secret>[0-9a-f]{12})", keywords=["TKT-"])
    out, n = Redactor(rules=[rule]).redact_text("see TKT-0123456789ab, TKT-zz")
    assert (out, n) == (f"see TKT-{marker('ticket-secret')}, TKT-zz", 1)
    with pytest.raises(ValueError, match="rule id"):
        RedactionRule("Not an id!", "x")


# --- the module's place in the layers, and the real transcripts -----------------------------


def test_redaction_is_ground_it_imports_only_frames_errors_and_tokens() -> None:
    """The ground layer's rule (tests/project/test_layers.py, ADR 0012): it may be imported by the
    store and everything above, so it imports nothing of the project above the ground."""
    source = Path(__file__).parents[2] / "continuity" / "redaction.py"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("continuity"):
            imported.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name.startswith("continuity"))
    assert imported <= {
        "continuity.frames",
        "continuity.errors.BadFrame",
        "continuity.errors.InvalidSettings",
    }


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_real_transcripts_hold_nothing_the_rules_take_for_a_secret() -> None:
    """Two megabytes of real sessions (code, commands, outputs, prose): no false positive."""
    root = SHARED_FIXTURES / "claude-code"
    if not root.is_dir():
        pytest.skip(f"shared fixtures not found at {root}")
    redactor = Redactor()
    found: list[str] = []
    seen = 0
    for path in sorted(root.rglob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            try:
                line = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                continue
            message = line.get("message") if isinstance(line, dict) else None
            for text in _strings(message.get("content") if isinstance(message, dict) else None):
                seen += len(text)
                out, n = redactor.redact_text(text)
                if n:
                    found.append(f"{path.name}: {out[:200]!r}")
    assert seen > 1_000_000
    assert found == []
