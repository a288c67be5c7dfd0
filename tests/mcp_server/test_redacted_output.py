"""What the MCP tools show is redacted before it is cut, whatever wrote the frames, and never
cut inside a token (issue 40, "MCP cuts before it redacts"): on a store written without a
redactor, ``read`` shows no piece of a key whose lines run past a cut, ``search`` no tail of a
token whose prefix fell before a snippet, and no cut leaves a token's prefix at its end."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.mcp_server.archive import Archive
from continuity.mcp_server.tools import call_tool
from continuity.store.jsonl import Store

PROJECT = "/work/numbat"
_B64 = string.ascii_letters + string.digits + "+/"


def _fake(n: int, alphabet: str, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


TOKEN = "ghp_" + _fake(36, string.ascii_letters + string.digits, 1)
KEY_LINES = [_fake(64, _B64, 100 + i) for i in range(25)]
SERVICE_ACCOUNT = json.dumps(
    {
        "type": "service_account",
        "project_id": "numbat-prod",
        "private_key": "-----BEGIN PRIVATE KEY-----\n"
        + "\n".join(KEY_LINES)
        + "\n-----END PRIVATE KEY-----\n",
        "client_email": "deploy@numbat-prod.iam.gserviceaccount.com",
    },
    indent=2,
)  # as `cat sa.json` prints it: the key's line breaks are \n escapes


def _pieces(secret: str, width: int) -> list[str]:
    return [secret[i : i + width] for i in range(0, len(secret) - width + 1)]


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    store = Store(tmp_path / "s", create=True, durable=False)  # no redactor: written as is
    filler = "the numbat survey notes say nothing of interest here " * 4
    store.thread("cc-n1").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            fr.message("user", "show me the service account file for the numbat deploy"),
            fr.message(
                "user",
                content=[
                    fr.ToolResultBlock(
                        tool_use_id="toolu_1",
                        content=SERVICE_ACCOUNT,
                        size=len(SERVICE_ACCOUNT),
                    )
                ],
            ),
            fr.message("user", f"{filler}{TOKEN} is the token that the wombat service uses"),
            fr.message("assistant", "word " * 118 + TOKEN + " and then the quoll report" * 30),
        ]
    )
    return Archive(store, PROJECT)


def test_read_never_shows_a_piece_of_a_key_cut_short(archive: Archive) -> None:
    pieces = [p for line in KEY_LINES for p in _pieces(line, 16)]
    reads = [
        call_tool(archive, "read", {"thread": "cc-n1", "from_seq": 0}),
        call_tool(archive, "read", {"thread": "cc-n1", "seq": 2}),
        call_tool(archive, "read", {"thread": "cc-n1", "from_seq": 2, "to_seq": 2}),
    ]
    assert "service_account" in reads[0].text
    for read in reads:
        shown = [p for p in pieces if p in read.text]
        assert not shown, (shown[:3], read.text[:1500])


def test_a_search_snippet_never_shows_the_tail_of_a_token_cut_before_it(archive: Archive) -> None:
    found = call_tool(archive, "search", {"query": "wombat service", "scope": "all"})
    assert "cc-n1 #3" in found.text
    line = next(x for x in found.text.splitlines() if "cc-n1 #3" in x)
    assert "wombat" in line
    leaked = [p for p in _pieces(TOKEN, 10) if p in found.text or p in repr(found.data)]
    assert not leaked, line


def test_a_cut_never_ends_inside_a_token(archive: Archive) -> None:
    read = call_tool(archive, "read", {"thread": "cc-n1", "from_seq": 4, "to_seq": 4 + 0})
    whole = call_tool(archive, "read", {"thread": "cc-n1", "from_seq": 3, "to_seq": 4})
    for text in (read.text, whole.text):
        assert "ghp_" not in text.replace("[REDACTED:github-token]", ""), text[-900:]
    cut_line = next(x for x in whole.text.splitlines() if x.startswith("#4"))
    assert "more chars" in cut_line  # the range read cut this long reply
    shown = cut_line.split("… [")[0]
    assert shown.endswith(("word", "]", "report")), shown[-60:]
