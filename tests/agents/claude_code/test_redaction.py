"""Redaction at the Claude Code ingest and through the whole pipeline: a session full of secrets
goes through the hooks' ingest, compaction, compile, search and stats, and no secret is left
anywhere under the store folder (artifacts decompressed), nor found by search; the same session
with redaction turned off shows that the check would have seen them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from continuity import frames as fr
from continuity.agents.claude_code.hooks import run_hook
from continuity.agents.claude_code.ingest import ARTIFACT_THRESHOLD, ingest_transcript
from continuity.context.compaction import StrideMessages, run_compaction
from continuity.context.compiler import compile_context
from continuity.errors import InvalidSettings
from continuity.maintenance.stats import store_stats
from continuity.redaction import Redactor
from continuity.retrieval.ranking import query_terms
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from continuity.summary import decode_summary
from continuity.testing import FixedClock
from tests.agents.claude_code.test_hooks import Transcript, call_main, read_errors
from tests.redaction.test_redaction import (
    ANTHROPIC,
    AWS_KEY_ID,
    AWS_SECRET,
    GITHUB_PAT,
    PRIVATE_KEY,
    fake,
    marker,
)

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ" + fake("jwt-1", 40) + "." + fake("jwt-2", 43)
DB_PASSWORD = "Pg" + fake("db-password", 18)
SUMMARY_TOKEN = "glpat-" + fake("summary-token", 20)
TITLE_TOKEN = "xoxb-" + fake("t1", 12, "0123456789") + "-" + fake("t2", 12, "0123456789") + "-"
TITLE_TOKEN += fake("t3", 24)

# What must never be stored, each with a piece the search index would keep as a term of its own.
SECRETS = {
    "anthropic": ANTHROPIC,
    "github": GITHUB_PAT,
    "aws-id": AWS_KEY_ID,
    "aws-secret": AWS_SECRET,
    "jwt": JWT,
    "db-password": DB_PASSWORD,
    "summary": SUMMARY_TOKEN,
    "title": TITLE_TOKEN,
    "private-key-line": PRIVATE_KEY.splitlines()[2],
}


def session(path: Path) -> Transcript:
    """A session that meets secrets everywhere: a prompt, a tool's input, a `.env` read, a
    huge log (an artifact) with credentials past its preview, an answer, Claude's own summary
    of the session, and the title of an old-style summary line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"type": "summary", "summary": f"Rotate {TITLE_TOKEN}", "leafUuid": "x"}) + "\n"
    )
    t = Transcript(path)
    t.prompt(f"Use this key for the API calls: {ANTHROPIC}")
    t.tool("Bash", {"command": f"export GITHUB_TOKEN={GITHUB_PAT} && gh pr list"}, "no PRs")
    t.tool(
        "Read",
        {"file_path": "/work/demo/.env"},
        f"DATABASE_HOST=db\nDB_PASSWORD={DB_PASSWORD}\nDEBUG=1\n",
    )
    noise = "".join(f"line {i}: GET /health 200 in {i % 7} ms\n" for i in range(900))
    big = (
        noise[:3000]
        + f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n"
        + noise
        + PRIVATE_KEY
        + "\n"
    )
    assert len(big) > ARTIFACT_THRESHOLD
    t.tool("Bash", {"command": "cat /var/log/deploy.log"}, big)
    t.say(f"The service token in the log is a JWT: {JWT}. Revoke it.")
    t.compaction(f"The user gave a GitLab token {SUMMARY_TOKEN} and asked to rotate keys.")
    t.prompt("Now rotate the database password please")
    t.tool("Bash", {"command": "./rotate.sh"}, "rotated")
    t.say("Done: the password is rotated.")
    t.flush()
    return t


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, zstd artifacts decompressed."""
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".zst":
                data = zstandard.ZstdDecompressor().decompress(data)
            out[str(p.relative_to(root))] = data
    return out


def where(files: dict[str, bytes], secret: str) -> list[str]:
    needles = {secret.encode(), secret.lower().encode()}
    return [name for name, data in files.items() if any(n in data for n in needles)]


def distinctive_terms() -> list[str]:
    """The search terms of the secrets that no ordinary text holds (8 characters or more)."""
    terms = sorted({t for s in SECRETS.values() for t in query_terms(s) if len(t) >= 8})
    assert len(terms) >= 6
    return terms


def run_everything(store: Store, thread_id: str) -> None:
    """What the archive does with a session afterwards: summaries, a compiled context, the
    search index, the stats."""
    run_compaction(store, thread_id, StrideMessages(3))
    compile_context(store, thread_id)
    assert search(store, "rotate the database password")
    store_stats(store)


@pytest.fixture
def transcript(tmp_path: Path) -> Transcript:
    return session(
        tmp_path / "projects" / "-work-demo" / "11111111-2222-4333-8444-555555555555.jsonl"
    )


def new_store(path: Path) -> Store:
    return Store(path, create=True, durable=False, clock=FixedClock())


def test_no_secret_is_left_anywhere_in_the_store(tmp_path: Path, transcript: Transcript) -> None:
    store = new_store(tmp_path / "store")
    # through the hook, as Claude Code runs it: on by default, nothing to configure
    run_hook(store, "pre-compact", transcript.payload("PreCompact"))
    run_everything(store, transcript.thread_id)
    files = files_under(store.root)
    assert any(name.startswith("artifacts") for name in files)
    assert any(name.startswith("cache/search") for name in files)
    leaks = {label: where(files, secret) for label, secret in SECRETS.items()}
    assert leaks == {label: [] for label in SECRETS}
    for term in distinctive_terms():
        assert search(store, term) == [], term
    for secret in SECRETS.values():
        assert all(secret not in hit.snippet for hit in search(store, secret))
    assert search(store, "GITHUB_TOKEN")  # what was around the secret is still found


def test_the_same_session_unredacted_shows_every_secret_the_check_looks_for(
    tmp_path: Path, transcript: Transcript
) -> None:
    store = new_store(tmp_path / "store")
    (store.root / "redaction.json").write_text('{"enabled": false}')
    run_hook(store, "pre-compact", transcript.payload("PreCompact"))
    run_everything(store, transcript.thread_id)
    files = files_under(store.root)
    for label, secret in SECRETS.items():
        assert where(files, secret), label
    # (the secrets past the big log's preview are in no index: its artifact is not searched)
    found = [term for term in distinctive_terms() if search(store, term)]
    assert len(found) >= 3, found
    assert store_stats(store).redactions == 0


def test_what_ingest_stores_instead(tmp_path: Path, transcript: Transcript) -> None:
    store = new_store(tmp_path / "store")
    report = ingest_transcript(store, transcript.path, final=True)
    assert report.checkpoints == 1
    thread = store.thread(transcript.thread_id)
    frames = list(thread.read())
    created = frames[0]
    assert isinstance(created, fr.ThreadCreated)
    assert created.title == f"Rotate {marker('slack-token')}"
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
    prompt = messages[0]
    assert prompt.content == [
        fr.TextBlock(text=f"Use this key for the API calls: {marker('anthropic-api-key')}")
    ]
    assert prompt.meta["redacted"] == "1"
    uses = [b for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)]
    assert uses[0].input == {
        "command": f"export GITHUB_TOKEN={marker('github-token')} && gh pr list"
    }
    results = [b for m in messages for b in m.content if isinstance(b, fr.ToolResultBlock)]
    assert results[1].content == (
        f"DATABASE_HOST=db\nDB_PASSWORD={marker('secret-assignment')}\nDEBUG=1\n"
    )
    big = results[2]
    assert big.artifact_id is not None and big.content == ""
    stored = store.artifacts.get(big.artifact_id).decode()
    assert f"aws_access_key_id = {marker('aws-access-key-id')}" in stored
    assert f"aws_secret_access_key = {marker('aws-secret-access-key')}" in stored
    assert stored.endswith(marker("private-key") + "\n")
    assert big.size == len(stored.encode()) and big.preview == stored[:2000]
    counts = {m.message_id: int(m.meta.get("redacted", "0")) for m in messages}
    assert sum(counts.values()) == 1 + 1 + 1 + 3 + 1  # prompt, input, .env, log, answer
    (checkpoint,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    summary = decode_summary(store.artifacts.get(checkpoint.summary_artifact_id))
    assert SUMMARY_TOKEN not in summary.text and marker("gitlab-token") in summary.text
    stats = store_stats(store)
    assert stats.redactions == 7
    assert stats.redactions_by_thread == {transcript.thread_id: 7}


def test_ingest_is_the_same_with_the_store_redactor_or_an_explicit_one(
    tmp_path: Path, transcript: Transcript
) -> None:
    logs = []
    for name, store_redactor, given in (
        ("default", None, "store"),
        ("store", Redactor(), "store"),
        ("given", None, Redactor()),
    ):
        store = new_store(tmp_path / name)
        store.redactor = store_redactor
        ingest_transcript(store, transcript.path, final=True, redactor=given)  # type: ignore[arg-type]
        logs.append(
            store.thread(transcript.thread_id)
            .path.read_bytes()
            .replace(str(tmp_path / name).encode(), b"<store>")
        )
    assert logs[0] == logs[1] == logs[2]


def test_a_broken_config_stops_the_ingest_until_it_is_fixed(
    tmp_path: Path, transcript: Transcript
) -> None:
    store = new_store(tmp_path / "store")
    config = store.root / "redaction.json"
    config.write_text('{"rules": [{"id": "x", "pattern": "("}]}')
    with pytest.raises(InvalidSettings, match=r"redaction\.json"):
        ingest_transcript(store, transcript.path, final=True)
    assert store.threads() == []  # nothing stored while the config cannot be honoured
    config.write_text(json.dumps({"rules": [{"id": "log-route", "pattern": "GET /health"}]}))
    report = ingest_transcript(store, transcript.path, final=True)
    assert report.messages > 0
    big = next(
        b
        for m in store.thread(transcript.thread_id).read(types=["message_appended"])
        if isinstance(m, fr.MessageAppended)
        for b in m.content
        if isinstance(b, fr.ToolResultBlock) and b.artifact_id
    )
    assert big.artifact_id is not None
    assert "GET /health" not in store.artifacts.get(big.artifact_id).decode()
    assert store_stats(store).redactions > 900  # the config's own rule counts too


def test_a_hook_with_a_broken_config_logs_it_exits_0_and_archives_after_the_fix(
    tmp_path: Path,
    transcript: Transcript,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "hook-store"
    monkeypatch.setenv("CONTINUITY_HOME", str(home))
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)
    new_store(home)
    (home / "redaction.json").write_text('{"enabeld": false}')  # a typo: not silently "on"
    payload = json.dumps(transcript.payload("UserPromptSubmit")).encode()
    assert call_main(monkeypatch, ["user-prompt-submit"], payload) == 0
    assert "redaction.json" in capsys.readouterr().err
    (line,) = read_errors(home)
    assert "InvalidSettings" in line and "enabeld" in line
    assert Store(home).threads() == []
    (home / "redaction.json").unlink()
    assert call_main(monkeypatch, ["user-prompt-submit"], payload) == 0
    stored = Store(home).thread(transcript.thread_id).path.read_bytes()
    assert ANTHROPIC.encode() not in stored and marker("anthropic-api-key").encode() in stored
