"""An encrypting serializer keeps the conversation out of the store's plaintext (issue 27): with
``EncryptedSerializer`` nothing is mirrored, and no byte of the store — log, artifacts, caches,
search index — holds the conversation, before or after ``delete_thread``."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import zstandard
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from continuity import Store, compile_context, search
from continuity.integrations.langgraph import ContinuitySaver
from tests.integrations.test_langgraph_graphs import config, texts, tool_graph

pytest.importorskip("Crypto", reason="pycryptodome (the dev extra) is not installed")

SECRET = "zebra-okapi-7f3"
_B64: re.Pattern[bytes] = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}")


def _readable(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle``: as they are, zstd-decompressed
    (artifacts), or in a base64 run (record data)."""
    want = needle.encode()
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        views = [raw]
        if raw.startswith(b"\x28\xb5\x2f\xfd"):
            views.append(zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 26))
        for view in list(views):
            for run in _B64.findall(view):
                try:
                    views.append(base64.b64decode(run + b"=" * (-len(run) % 4)))
                except ValueError:
                    continue
        if any(want in v for v in views):
            found.append(str(path.relative_to(root)))
    return found


def _run(saver: ContinuitySaver) -> None:
    graph = tool_graph(saver)
    question = f"What is 2 + 3? My password is {SECRET}"
    out = graph.invoke({"messages": [HumanMessage(question, id="h1")]}, config())
    assert out["messages"][-1].content == "The sum is 5."
    # the caches a reader makes: compile, search (the store-wide index too)
    compile_context(saver.store, "t1", log=False)
    search(saver.store, SECRET)
    search(saver.store, SECRET, thread="t1")


def test_the_scan_finds_the_plaintext_without_a_cipher(tmp_path: Path) -> None:
    root = tmp_path / "store"
    saver = ContinuitySaver(Store(root, create=True))
    _run(saver)
    assert texts(saver, "t1")  # mirrored
    assert any(p.startswith("threads/") for p in _readable(root, SECRET))
    assert any(p.startswith("artifacts/") for p in _readable(root, SECRET))


def test_an_encrypting_serializer_leaves_no_plaintext_anywhere(tmp_path: Path) -> None:
    root = tmp_path / "store"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
    saver = ContinuitySaver(Store(root, create=True), serde=serde)
    assert saver.encrypts()
    _run(saver)
    graph = tool_graph(saver)
    state = graph.get_state(config())
    assert SECRET in state.values["messages"][0].content  # LangGraph reads it back
    assert texts(saver, "t1") == []  # no mirror under a cipher
    assert saver.mirror_thread_id(config()) is None
    assert _readable(root, SECRET) == []
    assert _readable(root, "The sum is 5.") == []
    saver.delete_thread("t1")
    assert saver.get_tuple(config()) is None
    assert _readable(root, SECRET) == []
    # a saver cloned with another allowlist keeps the cipher
    clone = saver.with_allowlist([])
    assert isinstance(clone, ContinuitySaver) and clone.encrypts()


def test_delete_thread_without_a_cipher_retracts_the_mirror(tmp_path: Path) -> None:
    root = tmp_path / "store"
    saver = ContinuitySaver(Store(root, create=True))
    _run(saver)
    saver.delete_thread("t1")
    assert texts(saver, "t1") == []  # retracted: compile and search no longer see it
    assert all(hit.retracted for hit in search(saver.store, SECRET))  # marked, as retractions are
