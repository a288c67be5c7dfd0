"""What ``read`` and ``search`` say about what they show (issue 44): ``read``'s header states
exactly the range of seqs shown, a remembered decision is a "decision" in both tools, and a
search says when a hit matched no word of the query (found by meaning alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.mcp_server.archive import Archive
from continuity.mcp_server.tools import call_tool
from continuity.store.jsonl import Store

PROJECT = "/work/potoroo"


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    store = Store(tmp_path / "s", create=True, durable=False)
    store.thread("cc-p1").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            *[
                fr.message("user" if i % 2 else "assistant", f"potoroo turn {i} " + "burrow " * 60)
                for i in range(40)
            ],
        ]
    )
    return Archive(store, PROJECT)


def _seqs(text: str) -> list[int]:
    return [int(line[1:].split()[0]) for line in text.splitlines() if line[:1] == "#"]


@pytest.mark.parametrize(
    "args",
    [
        {"from_seq": 0, "max_tokens": 400},
        {"seq": 20, "max_tokens": 500},
        {"max_tokens": 300},
        {"from_seq": 3, "to_seq": 9, "max_tokens": 20_000},
    ],
)
def test_the_read_header_states_the_range_it_shows(archive: Archive, args: dict[str, int]) -> None:
    read = call_tool(archive, "read", {"thread": "cc-p1", **args})
    header = read.text.splitlines()[0]
    seqs = _seqs(read.text)
    assert seqs
    assert f"seqs #{seqs[0]}–#{seqs[-1]} of #0–#40" in header, (header, seqs)
    assert (read.data["from_seq"], read.data["to_seq"]) == (seqs[0], seqs[-1])


def test_a_remembered_decision_is_a_decision_in_search_and_read(archive: Archive) -> None:
    said = call_tool(
        archive,
        "remember",
        {"thread": "cc-p1", "text": "we keep the quokka cache in sqlite", "kind": "decision"},
    )
    seq = said.data["seq"]
    found = call_tool(archive, "search", {"query": "quokka cache sqlite", "scope": "all"})
    line = next(x for x in found.text.splitlines() if f"cc-p1 #{seq} " in x)
    assert " decision: " in line and " note: " not in line, line
    assert found.data["hits"][0]["kind"] == "decision"
    read = call_tool(archive, "read", {"thread": "cc-p1", "seq": seq})
    assert f"#{seq} " in read.text and " decision: " in read.text
    noted = call_tool(archive, "remember", {"thread": "cc-p1", "text": "the wallaby is fed"})
    found = call_tool(archive, "search", {"query": "wallaby fed", "scope": "all"})
    assert f"cc-p1 #{noted.data['seq']} " in found.text and " note: " in found.text


def test_a_hit_found_by_meaning_alone_says_no_word_matched(tmp_path: Path) -> None:
    from continuity.retrieval.settings import SearchSettings, write_search_settings
    from tests.support.model import build_tiny_model

    store = Store(tmp_path / "s", create=True, durable=False)
    store.thread("cc-m").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            fr.message("user", "we should persist it to disk"),
            *[fr.message("assistant", f"the router will render page {i}") for i in range(8)],
        ]
    )
    write_search_settings(store, SearchSettings(model=str(build_tiny_model(tmp_path / "tiny"))))
    archive = Archive(store, PROJECT)
    found = call_tool(archive, "search", {"query": "storage", "scope": "all"})
    line = next(x for x in found.text.splitlines() if "persist it to disk" in x)
    assert "no word of the query matched" in line, found.text
    exact = call_tool(archive, "search", {"query": "persist", "scope": "all"})
    line = next(x for x in exact.text.splitlines() if "persist it to disk" in x)
    assert "no word of the query matched" not in line
    assert exact.data["hits"][0]["matched"] == ["persist"]
