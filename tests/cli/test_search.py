"""``continuity search`` and ``continuity compile --recall`` through typer's CliRunner.

Errors follow the CLI's contract: one ``error:`` line on stderr, nothing on stdout, exit 1 (usage
errors, typer's own or ``--recall ""``, exit 2), and nothing appended to any log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.context.bundle import ContextBundle, decode_bundle
from continuity.context.compaction import create_checkpoint
from continuity.retrieval.search import Hit
from continuity.store.jsonl import Store
from tests.support.compile import call, result, text

Run = Callable[..., Result]

SHOP, BLOG = "/work/shop", "/work/blog"
MIGRATE = "alembic upgrade head"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the real default store."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "s"


@pytest.fixture
def run(store_dir: Path) -> Run:
    runner = CliRunner()

    def _run(*args: str) -> Result:
        return runner.invoke(app, ["--store", str(store_dir), *args])

    return _run


@pytest.fixture
def threads(store_dir: Path) -> Store:
    """Three threads in two projects:

    * ``shop`` (project /work/shop): a migration that failed, a retry file, a summary to seq 6,
      then unrelated frontend work and a question about the migration;
    * ``shop2`` (project /work/shop): a later session mentioning alembic once;
    * ``blog`` (project /work/blog): a post about alembic.
    """
    store = Store(store_dir, create=True, durable=False)
    store.thread("shop").append(
        [
            fr.ThreadCreated(thread_id="shop", meta={"project": SHOP}),
            text("user", "Migrate the orders table schema.", "u1"),
            call("a1", "tu1", "Bash", command=MIGRATE),
            result("r1", "tu1", "ERROR: relation orders already exists", is_error=True),
            call("a2", "tu2", "Read", file_path="src/net/retry_backoff.py"),
            result("r2", "tu2", "def retry(delay):\n    return delay * 2"),
            text("assistant", "The relation clash blocks the migration.", "a3"),
        ]
    )
    create_checkpoint(store, "shop", 6, text="Schema work; a migration failed.")
    store.thread("shop").append(
        [
            text("user", "Style the frontend header.", "u2"),
            text("assistant", "Styled with flexbox.", "a4"),
            text("user", "Which alembic command did we run for the migration?", "u3"),
        ]
    )
    store.thread("shop2").append(
        [
            fr.ThreadCreated(thread_id="shop2", meta={"project": SHOP}),
            text("user", "Is the alembic history clean now?", "v1"),
        ]
    )
    store.thread("blog").append(
        [
            fr.ThreadCreated(thread_id="blog", meta={"project": BLOG}),
            text("user", "Write a post about alembic migrations and their pitfalls.", "b1"),
        ]
    )
    return store


def log_bytes(store: Store) -> dict[str, bytes]:
    return {t: (store.root / "threads" / f"{t}.jsonl").read_bytes() for t in store.threads()}


def hits_of(res: Result) -> list[Hit]:
    assert res.exit_code == 0, res.stderr
    return [msgspec.json.decode(line, type=Hit) for line in res.stdout.splitlines()]


def assert_one_line_error(res: Result, *needles: str, code: int = 1) -> None:
    assert res.exit_code == code, res.stdout
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


# --- search ----------------------------------------------------------------------------------


def test_search_prints_thread_seq_role_and_a_snippet(run: Run, threads: Store) -> None:
    res = run("search", "alembic upgrade")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) % 2 == 0 and lines
    heads, snippets = lines[0::2], lines[1::2]
    # The best hit: the command itself (a command counts four times).
    assert heads[0].startswith("shop  seq 2  ")
    assert "message assistant" in heads[0]
    assert MIGRATE in snippets[0] and snippets[0].startswith("    ")
    threads_seen = {h.split()[0] for h in heads}
    assert threads_seen == {"shop", "shop2", "blog"}
    assert all("\x1b[" not in line for line in lines), "no colour when stdout is no terminal"
    assert res.stderr == ""


def test_json_lines_decode_to_hits(run: Run, threads: Store) -> None:
    hits = hits_of(run("search", "alembic", "--json"))
    assert len(hits) >= 4
    assert all(isinstance(h, Hit) and "alembic" in h.terms for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    # Ties are broken by (thread, seq): the order is total and repeatable.
    keys = [(-h.score, h.thread_id, h.seq) for h in hits]
    assert keys == sorted(keys)
    assert hits_of(run("search", "alembic", "--json")) == hits
    text_heads = run("search", "alembic").stdout.splitlines()[0::2]
    assert [tuple(line.split()[:3]) for line in text_heads] == [
        (h.thread_id, "seq", str(h.seq)) for h in hits
    ]


def test_thread_and_project_filters(run: Run, threads: Store) -> None:
    only_shop = hits_of(run("search", "alembic", "--json", "--thread", "shop"))
    assert only_shop and {h.thread_id for h in only_shop} == {"shop"}
    shop_project = hits_of(run("search", "alembic", "--json", "--project", SHOP))
    assert {h.thread_id for h in shop_project} == {"shop", "shop2"}
    blog_project = hits_of(run("search", "alembic", "--json", "--project", BLOG))
    assert {h.thread_id for h in blog_project} == {"blog"}
    none = run("search", "alembic", "--project", "/nowhere")
    assert none.exit_code == 0 and "no hits" in none.stdout


def test_k_limits_the_hits(run: Run, threads: Store) -> None:
    all_hits = hits_of(run("search", "alembic migration", "--json"))
    assert len(all_hits) >= 3
    top2 = hits_of(run("search", "alembic migration", "--json", "--k", "2"))
    assert top2 == all_hits[:2]
    assert len(run("search", "alembic migration", "--k", "1").stdout.splitlines()) == 2
    bad = run("search", "alembic", "--k", "0")
    assert bad.exit_code == 2 and bad.stdout == "" and "--k" in bad.stderr


@pytest.mark.parametrize("query", ["", "   ", "!!!", "?? ... --", "the of a"])
def test_a_query_with_nothing_to_search_is_one_error_line(
    run: Run, threads: Store, query: str
) -> None:
    before = log_bytes(threads)
    assert_one_line_error(run("search", query), "query")
    assert_one_line_error(run("search", query, "--json"), "query")
    assert log_bytes(threads) == before


@pytest.mark.parametrize("thread", ["nope", "../shop", "a b"])
def test_an_unknown_or_invalid_thread_is_an_error(run: Run, threads: Store, thread: str) -> None:
    assert_one_line_error(run("search", "alembic", "--thread", thread), thread)


def test_the_retired_rerank_option_says_what_replaced_it(run: Run, threads: Store) -> None:
    result = run("search", "alembic migration", "--rerank")
    assert result.exit_code == 1 and result.stdout == ""
    assert "--rerank was retired" in result.stderr and "--model" in result.stderr


def test_a_huge_query_and_odd_characters_are_searched_not_refused(run: Run, threads: Store) -> None:
    huge = "alembic " + "zzz " * 20_000
    assert hits_of(run("search", huge, "--json", "--k", "1"))[0].thread_id in {"shop", "blog"}
    odd = hits_of(run("search", "«alembic»\x00 ☃ retry_backoff.py", "--json"))
    assert odd[0].thread_id == "shop" and odd[0].seq == 4


def test_a_store_without_threads_has_no_hits(run: Run) -> None:
    assert run("init").exit_code == 0
    res = run("search", "alembic")
    assert (res.exit_code, res.stderr) == (0, "")
    assert res.stdout == "no hits for 'alembic'\n"
    assert run("search", "alembic", "--json").stdout == ""


# --- compile --recall ------------------------------------------------------------------------


def bundle_of(res: Result) -> ContextBundle:
    assert res.exit_code == 0, res.stderr
    return decode_bundle(res.stdout_bytes.rstrip(b"\n"))


def test_compile_recall_adds_items_and_logs_the_query(run: Run, threads: Store) -> None:
    plain = bundle_of(run("compile", "shop", "--dry-run"))
    assert plain.recalled == []
    res = run("compile", "shop", "--recall", "alembic migration command")
    bundle = bundle_of(res)
    assert bundle.recalled and bundle.recalled[0].seq == 2
    assert MIGRATE in bundle.recalled[0].text
    assert all(r.seq <= 6 for r in bundle.recalled)  # the summary's to_seq
    assert bundle.messages == plain.messages and bundle.summaries == plain.summaries
    decision = threads.thread("shop").tail(1, types=["context_selection_decided"])[0]
    assert isinstance(decision, fr.ContextSelectionDecided)
    assert decision.recall_query == "alembic migration command"
    assert [h.seq for h in decision.recall_hits if h.included] == [r.seq for r in bundle.recalled]
    assert decision.tokens == bundle.tokens


def test_compile_recall_budget(run: Run, threads: Store) -> None:
    query = "alembic migration relation orders retry delay"
    wide = bundle_of(run("compile", "shop", "--dry-run", "--recall", query))
    assert len(wide.recalled) >= 2
    tight = bundle_of(
        run("compile", "shop", "--dry-run", "--recall", query, "--recall-budget-tokens", "20")
    )
    assert 0 < len(tight.recalled) < len(wide.recalled)
    assert sum(r.tokens for r in tight.recalled) <= 20
    assert tight.limits.recall_budget_tokens == 20
    bad = run("compile", "shop", "--recall", query, "--recall-budget-tokens", "0")
    assert bad.exit_code == 2 and bad.stdout == ""


def test_compile_recall_at_anchor_searches_for_the_anchor_message(run: Run, threads: Store) -> None:
    res = run("compile", "shop", "--recall", "@anchor")
    bundle = bundle_of(res)
    assert bundle.recalled and bundle.recalled[0].seq == 2
    decision = threads.thread("shop").tail(1, types=["context_selection_decided"])[0]
    assert isinstance(decision, fr.ContextSelectionDecided)
    assert decision.recall_query == "Which alembic command did we run for the migration?"
    # @anchor follows --anchor: at the frontend request there is nothing about migrations.
    earlier = bundle_of(
        run("compile", "shop", "--dry-run", "--anchor", "u2", "--recall", "@anchor")
    )
    assert all(MIGRATE not in r.text for r in earlier.recalled)


@pytest.mark.parametrize("query", ["", "   "])
def test_compile_recall_without_a_query_is_a_usage_error(
    run: Run, threads: Store, query: str
) -> None:
    before = log_bytes(threads)
    assert_one_line_error(run("compile", "shop", "--recall", query), "--recall", code=2)
    assert log_bytes(threads) == before


def test_compile_recall_text_format_shows_the_recalled_section(run: Run, threads: Store) -> None:
    res = run("compile", "shop", "--dry-run", "--format", "text", "--recall", "alembic")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "## Recalled from earlier in this thread" in out
    assert f"[seq 2 assistant] Bash {MIGRATE}" in out


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "openai-responses"])
def test_recalled_items_go_into_the_system_text(run: Run, threads: Store, fmt: str) -> None:
    res = run("compile", "shop", "--dry-run", "--format", fmt, "--recall", "alembic")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    if fmt == "anthropic":  # text blocks, with cache breakpoints after the stable prefix
        system = "".join(block["text"] for block in body["system"])
        messages = body["messages"]
    else:
        assert body[0]["role"] == "system"
        system, messages = body[0]["content"], body[1:]
    assert "## Recalled from earlier in this thread" in system
    assert f"[seq 2 assistant] Bash {MIGRATE}" in system
    # Recalled text appears in the system text only, not as a message of its own.
    rest = json.dumps(messages)
    assert MIGRATE not in rest
