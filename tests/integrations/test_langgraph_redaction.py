"""On a redacting store the LangGraph saver's checkpoint values hold no secret either (issue 40):
every byte of the store is scanned — the log's lines, the artifacts decompressed, each base64
run decoded, and each msgpack value unpacked to its strings (extension data too) — and a control
run on a store without a redactor finds the secret in the same scan, inline and in an artifact.
The redacted checkpoints still load."""

from __future__ import annotations

import base64
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
import zstandard
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from continuity import Store
from continuity.integrations.langgraph import ContinuitySaver
from continuity.redaction import Redactor

TOKEN = "ghp_" + "Zq8mW3xR7tK2pL9vN4bC6dF1hJ5sG0aE8uY3"
"""A GitHub token: a format the built-in rules know."""
PASSWORD = "okapi-zebra-7f3-Quagga"
"""A password, found by its key name (``"password": …``)."""
_B64: re.Pattern[bytes] = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}")


@dataclass(frozen=True)
class _Ext:
    tag: int
    data: bytes


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, bytes):
        out.append(value.decode("utf-8", "replace"))
    elif isinstance(value, _Ext):
        out.append(value.data.decode("utf-8", "replace"))
        _strings(_unpacked(value.data), out)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(k, out)
            _strings(v, out)


def _unpacked(raw: bytes) -> Any:
    try:
        return ormsgpack.unpackb(raw, ext_hook=_Ext, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ormsgpack.MsgpackDecodeError, ValueError, TypeError):
        return None


def _holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` in whose bytes ``needle`` can be read: as they are,
    zstd-decompressed, base64-decoded, or as a string of a msgpack value in any of those."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        views = [raw]
        if raw.startswith(b"\x28\xb5\x2f\xfd"):
            views.append(zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 28))
        for view in list(views):
            for run in _B64.findall(view):
                try:
                    views.append(base64.b64decode(run + b"=" * (-len(run) % 4)))
                except ValueError:
                    continue
        texts = [v.decode("utf-8", "replace") for v in views]
        for view in views:
            _strings(_unpacked(view), texts)
        if any(needle in t for t in texts):
            found.append(str(path.relative_to(root)))
    return found


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: str
    config: dict[str, Any]
    log: Annotated[list[str], operator.add]


def _note(state: State) -> dict[str, Any]:
    # a value over 64 KiB: an artifact (zstd msgpack); a small one: base64 in the record
    big = ("filler line of a long tool output\n" * 2200) + f"export GITHUB_TOKEN={TOKEN}\n"
    return {
        "notes": big,
        "config": {"password": PASSWORD, "user": "ann"},
        "log": [f"used {TOKEN}"],
    }


def _graph(saver: ContinuitySaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("note", _note)
    builder.add_edge(START, "note")
    builder.add_edge("note", END)
    return builder.compile(checkpointer=saver)


def _run(root: Path, redactor: Redactor | None) -> tuple[ContinuitySaver, Any]:
    saver = ContinuitySaver(Store(root, create=True, redactor=redactor))
    graph = _graph(saver)
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage(f"my token is {TOKEN}", id="h1")]}, config)
    return saver, graph.get_state(config)


def test_the_scan_finds_each_secret_without_a_redactor(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    _run(root, None)
    for secret in (TOKEN, PASSWORD):
        where = _holding(root, secret)
        assert any(p.startswith("threads/") for p in where), (secret, where)
    assert any(p.startswith("artifacts/") for p in _holding(root, TOKEN))


@pytest.mark.parametrize("secret", [TOKEN, PASSWORD])
def test_a_redacting_store_keeps_no_secret_in_any_checkpoint_value(
    tmp_path: Path, secret: str
) -> None:
    root = tmp_path / "redacted"
    _saver, state = _run(root, Redactor())
    assert _holding(root, secret) == []
    # the checkpoints load, with the marker where the secret was
    values = state.values
    assert values["notes"].endswith("export GITHUB_TOKEN=[REDACTED:github-token]\n")
    assert values["notes"].startswith("filler line")
    assert values["config"]["user"] == "ann" and PASSWORD not in str(values["config"])
    assert values["log"] == ["used [REDACTED:github-token]"]
    assert "[REDACTED:github-token]" in values["messages"][0].content
    assert isinstance(values["messages"][0], HumanMessage)


def test_a_value_without_a_secret_is_stored_as_the_serializer_made_it() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from continuity.integrations._langgraph_redact import RedactingSerializer

    inner = JsonPlusSerializer()
    serde = RedactingSerializer(inner, Redactor())
    value = {"messages": [HumanMessage("hello", id="h")], "n": 3, "when": 1.5}
    assert serde.dumps_typed(value) == inner.dumps_typed(value)
    kind, raw = serde.dumps_typed({**value, "k": f"token {TOKEN}"})
    assert TOKEN.encode() not in raw
    assert inner.loads_typed((kind, raw))["messages"] == value["messages"]
