"""The web viewer over HTTP (``continuity serve``; ADR 0027): every page and API route on a real
store, its safety (token, Host, methods, headers, escaping), that it never writes, that a page
of a long thread reads that page only, and the live view through a real server process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="the viewer needs the serve extra")

from starlette.testclient import TestClient

from continuity import frames as fr
from continuity._install import install_line
from continuity.context.bundle import decode_bundle
from continuity.context.compiler import compile_context
from continuity.context.sources import halving, open_source
from continuity.maintenance.stats import list_threads
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.testing import FixedClock
from continuity.viewer import model
from continuity.viewer.app import COOKIE, create_app
from tests.support.viewer import HOSTILE, ViewerStore, build_viewer_store, served

TOKEN = "s3cret-token"
SETTLE = 60.0
"""How long a request here waits for its job (verify, search) before it answers with progress:
a bound on a hang, so these tests always get the result (tests/viewer/test_jobs.py takes the
other path)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ViewerStore]:
    root = tmp_path_factory.mktemp("viewer") / "store"
    store = Store(root, create=True, durable=False)
    return root, build_viewer_store(store)


@pytest.fixture
def store(built: tuple[Path, ViewerStore]) -> Store:
    return Store(built[0], durable=False)


@pytest.fixture
def vs(built: tuple[Path, ViewerStore]) -> ViewerStore:
    return built[1]


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, token=None, wait_seconds=SETTLE)) as c:
        yield c


def _log_state(root: Path) -> dict[str, int]:
    """Every file of the truth (logs, artifacts) and its size."""
    found = {}
    for sub in ("threads", "artifacts"):
        for p in (root / sub).rglob("*"):
            if p.is_file():
                found[str(p.relative_to(root))] = p.stat().st_size
    return found


# --- safety ---------------------------------------------------------------------------------


def test_without_the_token_every_route_is_refused(store: Store, vs: ViewerStore) -> None:
    c = TestClient(create_app(store, token=TOKEN, wait_seconds=SETTLE))
    for path in ("/", f"/t/{vs.main}", "/api/threads", "/static/viewer.css", "/search?q=x"):
        r = c.get(path)
        assert r.status_code == 403, path
        assert "carries the token" in r.text
        assert vs.main not in r.text
    assert c.get("/?token=wrong").status_code == 403
    c.cookies.set(COOKIE, "wrong")
    assert c.get("/").status_code == 403


def test_the_token_url_sets_a_cookie_and_drops_the_token(store: Store, vs: ViewerStore) -> None:
    c = TestClient(create_app(store, token=TOKEN, wait_seconds=SETTLE))
    r = c.get(f"/t/{vs.main}?start=0&token={TOKEN}", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == f"/t/{vs.main}?start=0"
    cookie = r.headers["set-cookie"]
    assert f"{COOKIE}={TOKEN}" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    r = c.get(r.headers["location"])
    assert r.status_code == 200
    assert 'id="f0"' in r.text


def test_only_reads_are_served(store: Store, vs: ViewerStore) -> None:
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        r = c.request(method, f"/t/{vs.main}")
        assert r.status_code == 405, method
        assert r.headers["allow"] == "GET, HEAD"
    assert c.head(f"/t/{vs.main}").status_code == 200


def test_a_foreign_host_is_refused(store: Store) -> None:
    c = TestClient(create_app(store, token=None, hosts=["127.0.0.1:8765"], wait_seconds=SETTLE))
    assert c.get("/", headers={"host": "evil.example:8765"}).status_code == 421
    assert c.get("/", headers={"host": "127.0.0.1:8765"}).status_code == 200


def test_every_response_forbids_foreign_scripts(client: TestClient, vs: ViewerStore) -> None:
    for path in ("/", f"/t/{vs.main}", "/t/missing-thread", "/api/threads"):
        r = client.get(path)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "default-src 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"


@pytest.mark.slow
def test_hostile_content_is_shown_as_text_everywhere(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    checkpoint = next(iter(open_source(store.thread(vs.main)).checkpoints()))
    pages = [
        "/",
        f"/t/{vs.main}?start=0",
        f"/t/{vs.main}/f/{vs.hostile_seq}",
        f"/t/{vs.main}/f/{vs.hostile_seq + 2}",
        f"/t/{vs.main}/summary/{checkpoint.summary_artifact_id}",
        f"/t/{vs.main}/d/{vs.decisions[0]}",
        "/search?q=customer+wrote+name+field",
        f"/t/{vs.fork}?start=0",
    ]
    for path in pages:
        r = client.get(path)
        assert r.status_code == 200, path
        assert "<script>window.pwned" not in r.text, path
        assert "<img src=x" not in r.text, path
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in r.text, path
    # The JSON face holds the text as data (a script reads it as a string, never as markup).
    api = client.get(f"/api/t/{vs.main}?start=0").json()
    texts = [b["body"] for f in api["frames"] for b in f["blocks"]]
    assert any(HOSTILE in t for t in texts)


# --- the threads ------------------------------------------------------------------------------


def test_the_threads_page_lists_every_thread_with_its_facts(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    r = client.get("/")
    rows = re.findall(r'<tr class="thread-row" data-thread="([^"]+)">', r.text)
    expected = [t.thread_id for t in reversed(list_threads(store))]
    assert rows == expected
    assert set(rows) == {vs.main, vs.agent, vs.fork}
    assert "/work/shop" in r.text
    assert "fix/csv" in r.text
    assert "claude-code subagent" in r.text


def test_the_threads_filter_narrows_by_text_kind_and_project(client: TestClient) -> None:
    def listed(query: str) -> set[str]:
        r = client.get("/" + query)
        assert r.status_code == 200
        return set(re.findall(r'data-thread="([^"]+)"', r.text))

    assert listed("?q=FORK") == {"viewer-fork"}
    assert listed("?kind=claude-code+subagent") == {"cc-viewer-main.agent-a1"}
    assert listed("?project=/work/shop") == {"cc-viewer-main", "cc-viewer-main.agent-a1"}
    assert listed("?q=fix/csv") == {"cc-viewer-main"}
    assert listed("?q=nothing-like-this") == set()
    assert "no thread matches" in client.get("/?q=nothing-like-this").text


def test_the_threads_api_gives_the_listing(client: TestClient, store: Store) -> None:
    got = client.get("/api/threads").json()
    assert [g["thread_id"] for g in got] == [t.thread_id for t in reversed(list_threads(store))]
    main = next(g for g in got if g["thread_id"] == "cc-viewer-main")
    assert main["project"] == "/work/shop"
    assert main["checkpoints"] == 6
    assert main["quarantined"] == 0


# --- a thread ---------------------------------------------------------------------------------


def _seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<li class="frame [^"]*" id="f(\d+)"', html)]


def test_a_thread_opens_on_its_latest_page(client: TestClient, vs: ViewerStore) -> None:
    r = client.get(f"/t/{vs.main}")
    assert r.status_code == 200
    seqs = _seqs(r.text)
    assert seqs == list(range(vs.head - model.PAGE_SIZE + 1, vs.head + 1))
    assert f'data-live="/t/{vs.main}/live"' in r.text  # the latest page follows new frames
    assert f'rel="prev" href="/t/{vs.main}?before={seqs[0]}"' in r.text


def test_pages_go_back_and_forth_without_gaps(client: TestClient, vs: ViewerStore) -> None:
    seen: list[int] = []
    r = client.get(f"/t/{vs.main}?start=0")
    while True:
        seqs = _seqs(r.text)
        seen += seqs
        assert "data-live" not in r.text or seqs[-1] == vs.head
        nxt = re.search(r'rel="next" href="([^"]+)"', r.text)
        if nxt is None:
            break
        r = client.get(nxt.group(1).replace("&amp;", "&"))
    assert seen == list(range(vs.head + 1))
    older = client.get(f"/t/{vs.main}?before=150")
    assert _seqs(older.text) == list(range(50, 150))


def test_a_seq_opens_the_page_around_it_focused(client: TestClient, vs: ViewerStore) -> None:
    r = client.get(f"/t/{vs.main}?seq=120")
    seqs = _seqs(r.text)
    assert 120 in seqs
    assert seqs[0] == 120 - model.PAGE_SIZE // 2
    assert re.search(r'class="frame [^"]* focus" id="f120"', r.text)


def test_the_timeline_shows_each_kind_of_frame(client: TestClient, vs: ViewerStore) -> None:
    html = client.get(f"/t/{vs.main}?start=0").text
    assert "Bash call" in html
    assert "thinking" in html
    assert "tool output (error)" in html
    retracted = re.search(rf'<li class="frame ([^"]*)" id="f{vs.retracted_seq}"', html)
    assert retracted is not None
    assert "retracted" in retracted.group(1)
    latest = client.get(f"/t/{vs.main}").text
    assert "messages retracted: seq" in latest
    assert "compaction checkpoint created" in latest or "checkpoint cc-" in latest
    assert "what the model saw" in latest
    fork = client.get(f"/t/{vs.fork}?start=0").text
    assert f'forked from <a href="/t/{vs.main}?seq=40#f40">' in fork
    agent = client.get(f"/t/{vs.agent}").text
    assert f'parent <a href="/t/{vs.main}">' in agent
    children = client.get(f"/t/{vs.main}").text
    assert f'<a href="/t/{vs.agent}">' in children
    assert f'<a href="/t/{vs.fork}">' in children


def test_a_large_output_is_clipped_and_opened_on_demand(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    frame = next(store.thread(vs.main).read(from_seq=vs.big_seq, to_seq=vs.big_seq))
    assert isinstance(frame, fr.MessageAppended)
    block = frame.content[0]
    assert isinstance(block, fr.ToolResultBlock)
    whole = block.content
    html = client.get(f"/t/{vs.main}?start=0").text
    src = f"/t/{vs.main}/f/{vs.big_seq}/b/0"
    assert f'data-src="{src}"' in html
    assert whole not in html
    assert whole[: model.INLINE_CHARS] in html
    got = client.get(src).json()
    assert got["body"] == whole
    page = client.get(f"/t/{vs.main}/f/{vs.big_seq}").text
    assert whole in page
    assert "the frame as stored" in page


def test_bad_requests_get_clear_errors(client: TestClient, vs: ViewerStore) -> None:
    cases = {
        "/t/no-such-thread": (404, "no-such-thread"),
        f"/t/{vs.main}?start=abc": (400, "start must be a whole number"),
        f"/t/{vs.main}?start=-1": (400, "start must be at least 0"),
        "/t/bad%20id!": (400, ""),
        f"/t/{vs.main}/f/99999": (404, "no frame at seq 99999"),
        f"/t/{vs.main}/f/0/b/0": (404, "has no block 0"),
        f"/t/{vs.main}/d/3": (404, "not a selection decision"),
        f"/t/{vs.main}/summary/not-an-id": (404, "not an artifact id"),
        "/a/" + "0" * 64: (404, ""),
        "/no/such/page": (404, ""),
        f"/api/t/{vs.main}?before=zz": (400, "before must be a whole number"),
    }
    for path, (status, text) in cases.items():
        r = client.get(path)
        assert r.status_code == status, (path, r.text)
        assert text in r.text, path
    api = client.get("/api/t/no-such-thread")
    assert api.status_code == 404
    assert "no-such-thread" in api.json()["error"]


def test_a_damaged_log_is_an_error_page_not_a_crash(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    for i in range(30):
        t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text=f"m{i}")]))
    path = tmp_path / "s" / "threads" / "t.jsonl"
    data = bytearray(path.read_bytes())
    at = data.index(b'"m12"')
    data[at] = ord("{")  # the line is no longer JSON
    path.write_bytes(bytes(data))
    c = TestClient(
        create_app(Store(tmp_path / "s", durable=False), token=None, wait_seconds=SETTLE)
    )
    verify = c.get("/t/t/verify")
    assert verify.status_code == 200
    assert "problem" in verify.text
    assert 'class="bad"' in verify.text
    frame = c.get("/t/t/f/13")  # seq 0 is the thread's creation: "m12" is seq 13
    assert frame.status_code == 500
    assert "continuity verify" in frame.text


# --- decisions, the hierarchy, compile here ------------------------------------------------------


def test_decisions_are_listed_newest_first(client: TestClient, vs: ViewerStore) -> None:
    html = client.get(f"/t/{vs.main}/decisions").text
    shown = [int(s) for s in re.findall(r"<tr><td>(\d+)</td>", html)]
    assert shown == sorted(vs.decisions, reverse=True)
    api = client.get(f"/api/t/{vs.main}/decisions").json()
    assert [d["seq"] for d in api["decisions"]] == shown
    assert api["older"] is None


def test_a_decision_shows_its_bundle_budget_and_diff(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    seq, before = vs.decisions[-1], vs.decisions[-2]
    thread = store.thread(vs.main)
    frames = {f.seq: f for f in thread.read(types=["context_selection_decided"])}
    decision, previous = frames[seq], frames[before]
    assert isinstance(decision, fr.ContextSelectionDecided)
    assert isinstance(previous, fr.ContextSelectionDecided)
    bundle = decode_bundle(store.artifacts.get(decision.bundle_artifact_id))
    old = decode_bundle(store.artifacts.get(previous.bundle_artifact_id))
    got = client.get(f"/api/t/{vs.main}/d/{seq}").json()
    assert got["previous_seq"] == before
    assert got["tokens"] == bundle.tokens
    assert sum(p["tokens"] for p in got["parts"]) == bundle.tokens
    assert [i["seq"] for i in got["items"] if i["kind"] == "message"] == [
        m.seq for m in bundle.messages
    ]
    old_seqs = {m.seq for m in old.messages}
    new_seqs = {m.seq for m in bundle.messages}
    statuses = {i["seq"]: i["status"] for i in got["items"] if i["kind"] == "message"}
    assert {s for s, st in statuses.items() if st == "new"} == new_seqs - old_seqs
    dropped = {d["seq"] for d in got["dropped"] if d["kind"] == "message"}
    assert dropped == old_seqs - new_seqs
    assert [s["to_seq"] for s in got["halving"] if s["to_seq"] is not None] == sorted(
        (c.to_seq for c in decision.checkpoints), reverse=True
    )
    html = client.get(f"/t/{vs.main}/d/{seq}").text
    assert f"the decision at seq {before}" in html
    assert html.count('class="item ') == len(bundle.items) + len(got["dropped"])
    assert '<svg viewBox="0 0 1000 28"' in html
    assert "## Recent messages" in html  # the text form, as --format text gives it
    assert "&#34;messages&#34;" in html  # the Anthropic request form


def test_an_output_elided_since_the_previous_decision_is_changed(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    limits = fr.Limits(recent_messages=20, keep_tool_outputs=1, budget_tokens=None)

    def exchange(n: int) -> int:
        t.append(
            fr.MessageAppended(
                role="assistant",
                content=[fr.ToolUseBlock(id=f"c{n}", name="Bash", input={"command": f"ls {n}"})],
            )
        )
        return t.append(
            fr.MessageAppended(
                role="user",
                content=[fr.ToolResultBlock(tool_use_id=f"c{n}", content=f"out {n}\n" * 50)],
            )
        )[0]

    t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="list things")]))
    first_output = exchange(1)
    compile_context(t, limits=limits)
    exchange(2)
    second = compile_context(t, limits=limits)
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    got = c.get(f"/api/t/t/d/{second.decision.seq}").json()
    statuses = {i["seq"]: i["status"] for i in got["items"]}
    assert statuses[first_output] == "changed"  # whole then, a stub now
    assert statuses[first_output + 2] == "new"  # the next call (the decision is in between)
    assert statuses[first_output - 2] == "same"  # the request
    html = c.get(f"/t/t/d/{second.decision.seq}").text
    assert "1 changed" in html
    assert "Bash output (elided)" in html


def test_a_repeated_decision_opens_the_decision_it_repeats(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    for i in range(6):
        t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text=f"m{i}")]))
    first = compile_context(t)
    again = compile_context(t)
    assert again.record_seq is not None
    assert again.record_seq != first.decision.seq
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    got = c.get(f"/api/t/t/d/{again.record_seq}").json()
    assert got["decision"]["seq"] == first.decision.seq
    listed = c.get("/t/t/decisions").text
    assert f"repeats seq {first.decision.seq}" in listed


def test_the_hierarchy_shows_the_halving_rule(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    thread = store.thread(vs.main)
    source = open_source(thread)
    got = client.get(f"/api/t/{vs.main}/hierarchy").json()
    latest = max(vs.decisions)
    assert got["decision"]["seq"] == latest
    anchor = got["anchor_seq"]
    expected = halving(lambda x: source.latest_checkpoint(x, anchor), anchor, 3)
    assert set(got["selected"]) == {c.checkpoint_id for c in expected}
    assert [s["chosen"]["to_seq"] for s in got["steps"] if s["chosen"]] == [
        c.to_seq for c in reversed(expected)
    ]
    assert [c["to_seq"] for c in got["checkpoints"]] == vs.checkpoints
    html = client.get(f"/t/{vs.main}/hierarchy").text
    assert html.count('<rect class="cp sel"') >= len(expected)
    assert len(re.findall(r'<rect class="cp( sel)?" x="0"', html)) == len(vs.checkpoints)
    older = client.get(f"/api/t/{vs.main}/hierarchy?decision={vs.decisions[0]}").json()
    assert older["anchor_seq"] < anchor


def test_a_summary_reads_whole(client: TestClient, store: Store, vs: ViewerStore) -> None:
    c = open_source(store.thread(vs.main)).checkpoints()[-1]
    html = client.get(f"/t/{vs.main}/summary/{c.summary_artifact_id}").text
    assert f"Summary through seq {c.to_seq}" in html
    assert f"summary of seq 0..{c.to_seq}" in html


def test_compile_here_is_a_dry_run(
    client: TestClient, built: tuple[Path, ViewerStore], store: Store, vs: ViewerStore
) -> None:
    root = built[0]
    before = _log_state(root)
    got = client.get(f"/api/t/{vs.main}/compile?at=150&budget=3000&recent=8").json()
    assert got["dry_run"] is True
    assert got["decision"]["anchor_seq"] == 150
    assert got["decision"]["limits"]["budget_tokens"] == 3000
    expected = compile_context(
        store.thread(vs.main),
        anchor=150,
        limits=model.limits_for(recent=8, refs=None, budget=3000),
        log=False,
    )
    assert got["bundle_artifact_id"] == expected.bundle_id
    assert got["tokens"] == expected.bundle.tokens <= 3000
    assert got["previous_seq"] == max(d for d in vs.decisions if d <= 150)
    html = client.get(f"/t/{vs.main}/compile?at=150&budget=3000").text
    assert "a dry run: nothing is written" in html
    assert 'value="3000"' in html
    assert _log_state(root) == before  # no frame, no artifact
    bad = client.get(f"/t/{vs.main}/compile?at=150&budget=5")
    assert bad.status_code == 400


def test_artifacts_are_served_as_inert_text(
    client: TestClient, store: Store, vs: ViewerStore
) -> None:
    seq = vs.decisions[0]
    frame = next(store.thread(vs.main).read(from_seq=seq, to_seq=seq))
    assert isinstance(frame, fr.ContextSelectionDecided)
    r = client.get(f"/a/{frame.bundle_artifact_id}")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert json.loads(r.text)["thread_id"] == vs.main


# --- search and integrity -----------------------------------------------------------------------


def test_search_highlights_and_links_to_the_frame(client: TestClient, vs: ViewerStore) -> None:
    html = client.get("/search?q=quoting").text
    links = re.findall(r'class="where" href="/t/([^"?]+)\?seq=(\d+)#f(\d+)"', html)
    assert links
    for _tid, seq, anchor in links:
        assert seq == anchor
    assert "<mark>quoting</mark>" in html or "<mark>Quoting</mark>" in html
    only = client.get(f"/api/search?q=quoting&thread={vs.agent}").json()
    assert {h["thread_id"] for h in only} == {vs.agent}
    assert client.get("/search?q=").status_code == 200
    assert client.get("/api/search?q=%21%21").status_code == 400


def test_highlight_marks_word_starts_only() -> None:
    assert model.highlight("Pytest ran; apytest not", ["pytest"]) == [
        ("Pytest", True),
        (" ran; apytest not", False),
    ]
    assert model.highlight("x", []) == [("x", False)]


def test_verify_of_a_sound_thread(client: TestClient, vs: ViewerStore) -> None:
    got = client.get(f"/api/t/{vs.main}/verify").json()
    assert got["ok"] is True
    assert got["frames"] == vs.head + 1
    assert "ok:" in client.get(f"/t/{vs.main}/verify").text


def test_the_integrity_page_verifies_every_thread(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    for tid in ("good", "bad"):
        t = store.thread(tid)
        for i in range(5):
            t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text=f"{tid} {i}")]))
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    sound = c.get("/api/integrity").json()
    assert [(t["thread_id"], t["ok"]) for t in sound["threads"]] == [("bad", True), ("good", True)]
    assert "ok: 2 threads" in c.get("/integrity").text
    path = tmp_path / "s" / "threads" / "bad.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"bad 2"', b'"bad 9"'))  # breaks the chain
    damaged = c.get("/api/integrity").json()
    first = damaged["threads"][0]
    assert first["thread_id"] == "bad"
    assert first["ok"] is False
    assert any("digest" in p or "chain" in p for p in first["problems"])
    assert damaged["threads"][1] == {**damaged["threads"][1], "thread_id": "good", "ok": True}
    html = c.get("/integrity").text
    assert "1 thread with problems" in html


def test_every_message_offers_compile_here(client: TestClient, vs: ViewerStore) -> None:
    html = client.get(f"/t/{vs.main}?start=0").text
    assert f'href="/t/{vs.main}/compile?at={vs.hostile_seq}"' in html
    got = client.get(f"/api/t/{vs.main}/compile?at={vs.hostile_seq}").json()
    assert got["decision"]["anchor_seq"] == vs.hostile_seq


def test_a_torn_tail_set_aside_shows_on_the_threads_page(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="one")]))
    with open(tmp_path / "s" / "threads" / "t.jsonl", "ab") as f:
        f.write(b'{"type":"message_appended","seq":1,"torn')
    t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="two")]))  # recovers
    c = TestClient(
        create_app(Store(tmp_path / "s", durable=False), token=None, wait_seconds=SETTLE)
    )
    assert "1 torn tail set aside" in c.get("/").text
    assert "torn last line" in c.get("/t/t/verify").text


# --- a long thread, reading only its page --------------------------------------------------------


@pytest.mark.slow
def test_a_page_of_a_long_thread_reads_that_page_only(tmp_path: Path) -> None:
    """After the caches are built, every frame but the first and the last page is overwritten
    with garbage of the same length: the latest page, a page in the middle's neighbourhood of
    the end, and the threads list still answer — they never read the rest."""
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("long")
    t.append(fr.ThreadCreated(thread_id="long", title="long one"))
    batch = [
        fr.MessageAppended(role="user", content=[fr.TextBlock(text=f"message {i}")])
        for i in range(1000)
    ]
    for _ in range(20):
        t.append(batch)
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    assert c.get("/t/long").status_code == 200  # builds the caches and the catalog
    path = tmp_path / "s" / "threads" / "long.jsonl"
    lines = path.read_bytes().split(b"\n")
    # the last page, the frame before it (whose digest the page's first one names) and the
    # empty string after the last newline
    keep_head, keep_tail = 1, model.PAGE_SIZE + 2
    damaged = [
        line if i < keep_head or i >= len(lines) - keep_tail else b"#" * len(line)
        for i, line in enumerate(lines)
    ]
    stat = path.stat()
    path.write_bytes(b"\n".join(damaged))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    c = TestClient(
        create_app(Store(tmp_path / "s", durable=False), token=None, wait_seconds=SETTLE)
    )
    r = c.get("/t/long")
    assert r.status_code == 200, r.text
    assert _seqs(r.text) == list(range(20_001 - model.PAGE_SIZE, 20_001))
    assert "long one" in r.text
    assert c.get(f"/t/long/f/{20_000}").status_code == 200
    assert c.get("/t/long?start=5000").status_code == 500  # that page is garbage: said so


# --- the command and the live view -----------------------------------------------------------


@pytest.mark.slow
def test_serve_prints_a_token_url_and_follows_appends_live(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = Store(root, create=True, durable=False)
    t = store.thread("live")
    t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="first")]))
    with served(root, "--poll", "0.05") as (_proc, url):
        assert url.startswith("http://127.0.0.1:")
        assert "?token=" in url
        base = url.split("?")[0]
        with httpx.Client(base_url=base, timeout=10) as c:
            assert c.get("/").status_code == 403
            assert c.get(url, follow_redirects=True).status_code == 200
            assert c.get("/t/live").status_code == 200  # the cookie now
            got: list[dict[str, object]] = []
            head = t.head()
            assert head is not None
            with c.stream("GET", f"/t/live/live?after={head.seq}") as events:
                lines = events.iter_lines()
                for _ in range(3):
                    t.append(
                        fr.MessageAppended(role="user", content=[fr.TextBlock(text="more <b>x")])
                    )
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        line = next(lines)
                        if line.startswith("data: "):
                            got.append(json.loads(line[6:]))
                            break
            assert [g["last"] for g in got] == [head.seq + 1, head.seq + 2, head.seq + 3]
            html = str(got[0]["html"])
            assert f'id="f{head.seq + 1}"' in html
            assert "more &lt;b&gt;x" in html


@pytest.mark.slow
def test_serve_refuses_bad_options(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store(root, create=True, durable=False)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "continuity", "--store", str(root), "serve", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    open_port = run("--host", "0.0.0.0", "--no-token", "--port", "0")
    assert open_port.returncode == 1
    assert "--no-token is only for a loopback --host" in open_port.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(tmp_path / "nope"), "serve"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 1
    assert "continuity init" in missing.stderr or "no store" in missing.stderr.lower()
    with served(root) as (_proc, url):
        port = url.split(":")[2].split("/")[0]
        taken = run("--port", port)
        assert taken.returncode == 1
        assert "the port is in use" in taken.stderr


# --- any backend -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_the_viewer_shows_a_store_without_caches(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The viewer knows only the store interface: the in-memory store (no caches at all) and a
    PostgreSQL store (its derived rows) give the same pages' facts as the JSONL store."""
    if backend == "memory":
        from continuity.store.memory import MemoryStore

        other: BaseStore = MemoryStore(clock=FixedClock())
    else:
        other = request.getfixturevalue("pg_stores").open(tmp_path / "pg", clock=FixedClock())
    reference = Store(tmp_path / "jsonl", create=True, durable=False, clock=FixedClock())
    vs = build_viewer_store(other)
    build_viewer_store(reference)
    c, ref = (
        TestClient(create_app(other, token=None, wait_seconds=SETTLE)),
        TestClient(create_app(reference, token=None, wait_seconds=SETTLE)),
    )

    def facts(client: TestClient, path: str) -> object:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        got = r.json()
        if isinstance(got, dict):
            got.pop("thread", None)
            if "decision" in got and isinstance(got["decision"], dict):
                got["decision"].pop("ts_ms", None)
        return got

    for path in (
        f"/api/t/{vs.main}?start=0",
        f"/api/t/{vs.main}",
        f"/api/t/{vs.main}/decisions",
        f"/api/t/{vs.main}/d/{vs.decisions[-1]}",
        f"/api/t/{vs.main}/hierarchy",
        f"/api/t/{vs.main}/compile?at=150&budget=3000",
    ):
        assert _stable(facts(c, path)) == _stable(facts(ref, path)), path
    for path in ("/", f"/t/{vs.main}", f"/t/{vs.main}/hierarchy", f"/t/{vs.main}/verify"):
        assert c.get(path).status_code == 200, path
    assert [h["seq"] for h in c.get("/api/search?q=quoting").json()] == [
        h["seq"] for h in ref.get("/api/search?q=quoting").json()
    ]


def _stable(value: object) -> object:
    """``value`` without the sizes of logs (a server keeps no file)."""
    if isinstance(value, dict):
        skip = ("log_bytes",)
        return {k: _stable(v) for k, v in value.items() if k not in skip}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_serve_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store(root, create=True, durable=False)
    code = (
        "import sys; sys.modules['uvicorn'] = None\n"  # as if the extra were not installed
        "from continuity.__main__ import main\n"
        f"sys.argv = ['continuity', '--store', {str(root)!r}, 'serve', '--port', '0']\n"
        "main()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert "needs the `serve` extra (uvicorn is missing)" in run.stderr
    assert install_line("serve") in run.stderr


@pytest.mark.slow
def test_the_threads_list_comes_in_pages(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    n = model.THREADS_PER_PAGE + 37
    for i in range(n):
        store.thread(f"t{i:04d}").append(
            fr.MessageAppended(role="user", content=[fr.TextBlock(text=f"thread {i}")])
        )
    c = TestClient(create_app(store, token=None, wait_seconds=SETTLE))
    first = c.get("/").text
    rows = re.findall(r'data-thread="([^"]+)"', first)
    assert len(rows) == model.THREADS_PER_PAGE
    assert f'Threads <span class="muted">{n}</span>' in first
    assert "page 1 of 2" in first
    second = c.get("/?page=2").text
    more = re.findall(r'data-thread="([^"]+)"', second)
    assert len(more) == 37
    everything = [t.thread_id for t in reversed(list_threads(store))]
    assert rows + more == everything
    assert c.get("/?page=99").text.count('data-thread="') == 37  # past the end: the last page
    narrowed = c.get("/?q=t000&page=1").text
    assert "page 1 of" not in narrowed  # ten threads match: one page
    assert len(re.findall(r'data-thread="([^"]+)"', narrowed)) == 10
    assert c.get("/?page=0").status_code == 400
