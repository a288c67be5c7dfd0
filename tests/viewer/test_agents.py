"""The viewer shows every agent's threads side by side: the threads page names each thread's
agent and filters by it (the API too), and a thread's page names its agent."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the viewer needs the serve extra")

from starlette.testclient import TestClient

from continuity import frames as fr
from continuity.store.jsonl import Store
from continuity.viewer.app import create_app
from tests.support.archive import agent_session

T0 = 1_767_603_600_000


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    store = Store(tmp_path / "s", create=True, durable=False)
    for n, source in enumerate(["claude-code", "codex", "gemini-cli", "opencode"]):
        agent_session(
            store,
            source,
            f"s{n}",
            project="/work/shop",
            start_ms=T0 + n,
            compaction=True,
            prompts=(f"the wombat migration, by {source}",),
        )
    agent_session(store, "codex", "sub", project="/work/shop", start_ms=T0, parent="codex-s1")
    store.thread("notes").append(fr.message("user", "by hand"))
    with TestClient(create_app(store, token=None, wait_seconds=60.0)) as c:
        yield c


def _agents(html: str) -> dict[str, str]:
    rows = re.findall(
        r'<tr class="thread-row" data-thread="([^"]+)">.*?<td class="agent">([^<]*)</td>',
        html,
        re.S,
    )
    return dict(rows)


def test_the_threads_page_names_each_agent(client: TestClient) -> None:
    r = client.get("/")
    assert _agents(r.text) == {
        "cc-s0": "Claude Code",
        "codex-s1": "Codex",
        "codex-s1.agent-sub": "Codex",
        "gemini-s2": "Gemini CLI",
        "oc-s3": "opencode",
        "notes": "-",
    }
    assert "<th>agent</th>" in r.text
    options = re.findall(
        r'<option value="([^"]*)">([^<]*)</option>',
        r.text.split('name="agent"')[1].split("</select>")[0],
    )
    assert options == [
        ("", "every agent"),
        ("claude-code", "Claude Code"),
        ("codex", "Codex"),
        ("gemini", "Gemini CLI"),
        ("opencode", "opencode"),
    ]


def test_the_threads_filter_by_agent(client: TestClient) -> None:
    r = client.get("/?agent=codex")
    assert set(_agents(r.text)) == {"codex-s1", "codex-s1.agent-sub"}
    assert '<option value="codex" selected>Codex</option>' in r.text
    assert set(_agents(client.get("/?agent=gemini&kind=gemini-cli+session").text)) == {"gemini-s2"}
    assert _agents(client.get("/?agent=cursor").text) == {}
    got = client.get("/api/threads?agent=opencode").json()
    assert [(g["thread_id"], g["agent"], g["compactions"]) for g in got] == [
        ("oc-s3", "opencode", 1)
    ]


def test_a_threads_page_names_its_agent(client: TestClient) -> None:
    r = client.get("/t/gemini-s2")
    assert r.status_code == 200
    facts = r.text.split('<p class="facts">', 1)[1].split("</p>", 1)[0]
    assert '<span class="agent">Gemini CLI</span> · gemini-cli session' in facts
    assert "(1 compactions)" in facts
    assert '<span class="agent">' not in client.get("/t/notes").text


def test_the_search_page_filters_by_agent(client: TestClient) -> None:
    def found(query: str) -> set[str]:
        r = client.get("/api/search?q=wombat" + query)
        assert r.status_code == 200, r.text
        return {h["thread_id"] for h in r.json()}

    assert found("") == {"cc-s0", "codex-s1", "gemini-s2", "oc-s3"}
    assert found("&agent=codex") == {"codex-s1"}
    assert found("&agent=Gemini+CLI&project=/work/shop") == {"gemini-s2"}
    page = client.get("/search?q=wombat&agent=opencode").text
    assert '<option value="opencode" selected>opencode</option>' in page
    assert re.findall(r'class="where" href="[^"]*">([^ ]+) ·', page) == ["oc-s3"]
    bad = client.get("/search?q=wombat&agent=cursor")
    assert bad.status_code == 400
    assert "unknown agent &#39;cursor&#39;: the agents are claude-code, codex" in bad.text
