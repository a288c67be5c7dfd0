"""Search hits that lead somewhere (ADR 0034, issue 17): a summary hit names the messages it
stands for, a subagent's hit names its parent session, and the parts of one merged assistant
response are one hit — through the library, the CLI (both paths) and the web viewer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.cli.fast_search import fast_search
from continuity.context.compaction import create_checkpoint
from continuity.retrieval.leads import candidates, lead, response_of
from continuity.retrieval.ranking import Hit
from continuity.retrieval.search import search
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore

MAIN, AGENT = "cc-s1", "cc-s1.agent-a1"
CONTRACT = Path(__file__).resolve().parents[2] / "contracts" / "search_hits.md"


def _say(thread: Thread, role: fr.Role, text: str, message_id: str = "") -> int:
    frame = fr.MessageAppended(message_id=message_id, role=role, content=[fr.TextBlock(text=text)])
    return thread.append(frame)[0]


def _build(store: BaseStore) -> dict[str, int]:
    """A session with a checkpoint and a response in two parts, and a subagent under it."""
    main = store.thread(MAIN)
    main.append(fr.ThreadCreated(thread_id=MAIN, title="export"))
    seqs = {"first": _say(main, "user", "Make the invoice export handle commas.", "u1")}
    _say(main, "assistant", "Looking at the exporter.", "a1")
    seqs["last"] = _say(main, "user", "It breaks on the customer name.", "u2")
    cp = create_checkpoint(main, seqs["last"], text="The walrus exporter needed quoting fixes.")
    seqs["summary"] = cp.seq
    seqs["part1"] = _say(main, "assistant", "The pelican quoting is wrong here.", "m1")
    seqs["part2"] = _say(main, "assistant", "More pelican output of it.", "m1#abcd1234")
    seqs["other"] = _say(main, "assistant", "A pelican in another response.", "m2")
    agent = store.thread(AGENT)
    agent.append(fr.ThreadCreated(thread_id=AGENT, parent_thread_id=MAIN))
    seqs["agent"] = _say(agent, "user", "Find the narwhal in the exporter.", "x1")
    _say(main, "user", "Where is the narwhal?", "u3")
    return seqs


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "s", create=True, durable=False)
    return MemoryStore()


def test_a_summary_hit_covers_the_messages_it_stands_for(store: BaseStore) -> None:
    seqs = _build(store)
    (hit,) = search(store, "walrus")
    assert (hit.kind, hit.seq) == ("summary", seqs["summary"])
    assert hit.covers == [0, seqs["last"]]  # the first checkpoint starts at the thread's start
    assert hit.parent_thread_id == "" and hit.also == []


def test_a_subagent_hit_names_its_parent_and_a_session_hit_names_none(store: BaseStore) -> None:
    seqs = _build(store)
    hits = {h.thread_id: h for h in search(store, "narwhal")}
    assert set(hits) == {MAIN, AGENT}
    assert (hits[AGENT].seq, hits[AGENT].parent_thread_id) == (seqs["agent"], MAIN)
    assert hits[MAIN].parent_thread_id == ""
    assert hits[MAIN].covers == [] and hits[AGENT].covers == []


def test_the_parts_of_one_response_are_one_hit(store: BaseStore) -> None:
    seqs = _build(store)
    hits = search(store, "pelican")
    assert [h.seq for h in hits if h.seq in (seqs["part1"], seqs["part2"])] != []
    by_seq = {h.seq: h for h in hits}
    assert len(hits) == 2 and seqs["other"] in by_seq
    (merged,) = (h for h in hits if h.seq != seqs["other"])
    assert {merged.seq, *merged.also} == {seqs["part1"], seqs["part2"]}
    assert len(merged.also) == 1 and by_seq[seqs["other"]].also == []
    # the best-ranked part stands for the response: the same as ranking without collapsing
    assert merged.seq == search(store, "pelican", k=candidates(1))[0].seq
    assert response_of("m1#abcd1234") == response_of("m1") == "m1"


def _response(thread: Thread, rid: str, parts: int, text: str) -> list[int]:
    return [
        _say(thread, "assistant", text, rid if i == 0 else f"{rid}#{i:08x}") for i in range(parts)
    ]


def test_k_hits_come_back_when_parts_of_one_response_fill_the_candidates(
    store: BaseStore,
) -> None:
    t = store.thread("many")
    t.append(fr.ThreadCreated(thread_id="many"))
    big = _response(t, "r0", candidates(2) + 3, "orca orca orca orca")  # outranks every other
    small = [_response(t, f"r{i}", 2, f"orca and filler words number {i}") for i in range(1, 4)]
    hits = search(store, "orca", k=2)
    assert len(hits) == 2
    assert {hits[0].seq, *hits[0].also} == set(big)
    assert {hits[1].seq, *hits[1].also} in [set(s) for s in small]
    # and without having to ask again: enough candidates for k
    three = search(store, "orca", k=3)
    assert [h.seq for h in three][:2] == [h.seq for h in hits]
    assert len(search(store, "orca", k=10)) == 4  # every response once, no more exist


def test_lead_keeps_the_ranking_and_fills_defaults_for_plain_hits(store: BaseStore) -> None:
    _build(store)
    plain = [Hit(thread_id=AGENT, seq=1, kind="message", role="user", score=1.0)]
    threads = {AGENT: store.thread(AGENT)}
    assert lead(threads, plain, 5) == [msgspec.structs.replace(plain[0], parent_thread_id=MAIN)]
    assert lead(threads, plain, 0) == []


def test_old_hit_json_still_decodes() -> None:
    old = b'{"thread_id":"t","seq":3,"kind":"message","role":"user","score":1.5,"ts_ms":1}'
    hit = msgspec.json.decode(old, type=Hit)
    assert (hit.covers, hit.parent_thread_id, hit.also) == ([], "", [])


def test_every_hit_field_is_in_the_contract() -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    missing = [
        f.encode_name
        for f in msgspec.structs.fields(Hit)
        if not re.search(rf"^\|\s*`{f.encode_name}`", text, re.MULTILINE)
    ]
    assert not missing


# --- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, int]]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    root = tmp_path / "cli"
    return root, _build(Store(root, create=True, durable=False))


def _both(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """What ``continuity search`` prints, the same by typer and by the fast path."""
    argv = ["--store", str(root), "search", *args]
    by_typer = CliRunner().invoke(app, argv)
    assert by_typer.exit_code == 0, by_typer.stderr
    assert fast_search(argv) == 0
    assert capsys.readouterr().out == by_typer.stdout
    return by_typer.stdout


def test_the_cli_says_where_each_hit_leads(
    store_dir: tuple[Path, dict[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, seqs = store_dir
    out = _both(root, capsys, "walrus")
    (cp,) = search(Store(root), "walrus")
    assert f"seq {seqs['summary']}  " in out
    assert f"[summary of seq {cp.covers[0]}–{cp.covers[1]}]" in out
    out = _both(root, capsys, "narwhal")
    lines = out.splitlines()
    (agent_line,) = [line for line in lines if line.startswith(AGENT)]
    assert agent_line.endswith(f"[subagent of {MAIN}]")
    (main_line,) = [line for line in lines if line.startswith(MAIN + " ")]
    assert "subagent" not in main_line
    out = _both(root, capsys, "pelican")
    assert out.count("[+1 more part of this response]") == 1


def test_the_cli_json_carries_the_new_fields(
    store_dir: tuple[Path, dict[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, seqs = store_dir
    rows = [
        json.loads(line)
        for line in _both(root, capsys, "walrus narwhal pelican", "--json").splitlines()
    ]
    assert all({"covers", "parent_thread_id", "also"} <= set(r) for r in rows)
    by = {(r["thread_id"], r["seq"]): r for r in rows}
    assert by[(MAIN, seqs["summary"])]["covers"][1] == seqs["last"]
    assert by[(AGENT, seqs["agent"])]["parent_thread_id"] == MAIN
    merged = [r for r in rows if r["also"]]
    assert len(merged) == 1 and {merged[0]["seq"], *merged[0]["also"]} == {
        seqs["part1"],
        seqs["part2"],
    }


# --- the web viewer ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_viewer_search_page_links_where_hits_lead(
    store_dir: tuple[Path, dict[str, int]],
) -> None:
    pytest.importorskip("starlette", reason="the viewer needs the serve extra")
    from starlette.testclient import TestClient

    from continuity.viewer.app import create_app

    root, seqs = store_dir
    with TestClient(create_app(Store(root, durable=False), token=None)) as client:
        html = client.get("/search?q=walrus+narwhal+pelican").text
        (cp,) = search(Store(root), "walrus")
        lo, hi = cp.covers
        assert f'href="/t/{MAIN}?start={lo}#f{lo}">seq {lo}–{hi}</a>' in html
        assert f'class="parent" href="/t/{MAIN}">{MAIN}</a>' in html
        assert "+1 more part of this response" in html
        api = client.get("/api/search?q=narwhal").json()
        assert {h["thread_id"]: h["parent_thread_id"] for h in api} == {MAIN: "", AGENT: MAIN}
        page = client.get(f"/t/{MAIN}?start={lo}")
        assert page.status_code == 200 and f'id="f{lo}"' in page.text
        assert seqs["summary"] >= 0
