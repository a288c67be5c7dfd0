"""The MCP server's protocol (ADR 0053), spoken in raw JSON-RPC lines to a real ``continuity
mcp`` process with the ``mcp`` SDK made unimportable: the handshake, version negotiation, and an
answer to every request, malformed ones with a JSON-RPC error, the server going on after each.
The server's threads (a call waits, a ping does not; a cancelled call gets no answer; the
handshake does not wait for the archive; the model loads in the background) are checked on a
:class:`Server` in this process, over pipes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from continuity import frames as fr
from continuity.mcp_server.archive import Archive
from continuity.mcp_server.schemas import TOOLS
from continuity.mcp_server.server import PROTOCOL_VERSIONS, Server
from continuity.store.jsonl import Store
from tests.support.mcp import server_env
from tests.support.processes import reap

PROJECT = "/work/wombat"

# The server started with the SDK unimportable (sys.modules["mcp"] = None): it must not need it.
_NO_SDK = (
    "import runpy, sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None; "
    "sys.argv = ['continuity'] + sys.argv[1:]; runpy.run_module('continuity', run_name='__main__')"
)


def _init(version: str = "2025-06-18", request_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        },
    }


class Raw:
    """``continuity mcp`` without the SDK, spoken to in lines."""

    def __init__(self, store: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _NO_SDK, "mcp", "--store", str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=server_env(CLAUDE_PROJECT_DIR=PROJECT),
        )

    def send(self, line: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else json.dumps(line).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the server stopped: {self._stderr()}"
        found: dict[str, Any] = json.loads(line)
        return found

    def ask(self, line: bytes | dict[str, Any]) -> dict[str, Any]:
        self.send(line)
        return self.reply()

    def _stderr(self) -> str:
        assert self.proc.stderr is not None
        self.proc.kill()
        return self.proc.stderr.read().decode(errors="replace")[-3000:]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        finally:
            code = reap(self.proc)
        return code


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    s = Store(root, create=True, durable=False)
    s.thread("cc-w1").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            fr.message("user", "where did the wombat burrow go"),
            fr.message("assistant", "the wombat burrow is under the shed"),
        ]
    )
    s.close()
    return root


@pytest.fixture
def raw(store: Path, tmp_path: Path) -> Iterator[Raw]:
    server = Raw(store, tmp_path)
    yield server
    reap(server.proc)


def _call(request_id: int, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.mark.slow
def test_the_handshake_and_a_call_without_the_sdk(raw: Raw) -> None:
    init = raw.ask(_init())
    assert init["id"] == 0
    result = init["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "continuity" and result["instructions"]
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = raw.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    tools = listed["result"]["tools"]
    assert [t["name"] for t in tools] == [t["name"] for t in TOOLS]
    assert [t["inputSchema"] for t in tools] == [t["inputSchema"] for t in TOOLS]
    assert raw.ask({"jsonrpc": "2.0", "id": "p", "method": "ping"}) == {
        "jsonrpc": "2.0",
        "id": "p",
        "result": {},
    }
    found = raw.ask(_call(2, "search", {"query": "wombat burrow"}))
    assert found["id"] == 2 and found["result"]["isError"] is False
    assert "cc-w1" in found["result"]["content"][0]["text"]
    assert raw.close() == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("asked", "given"),
    [(v, v) for v in PROTOCOL_VERSIONS] + [("1999-01-01", PROTOCOL_VERSIONS[0])],
)
def test_the_protocol_version_is_negotiated(
    store: Path, tmp_path: Path, asked: str, given: str
) -> None:
    server = Raw(store, tmp_path)
    try:
        assert server.ask(_init(asked))["result"]["protocolVersion"] == given
    finally:
        server.close()


DEEP = b"[" * 100_000 + b"]" * 100_000
MALFORMED: list[tuple[str, bytes | dict[str, Any], int, Any]] = [
    ("not JSON", b"this is not json", -32700, None),
    ("not UTF-8", b'{"jsonrpc":"2.0","id":9,"method":"ping","x":"\xff\xfe"}', -32700, None),
    ("cut short", b'{"jsonrpc":"2.0","id":9,"method":"pi', -32700, None),
    (
        "a lone surrogate in search",
        b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"search",'
        b'"arguments":{"query":"wombat \\ud800"}}}',
        -32602,
        11,
    ),
    (
        "a lone surrogate in read",
        b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"read",'
        b'"arguments":{"thread":"cc-\\udfff"}}}',
        -32602,
        12,
    ),
    (
        "a lone surrogate in remember",
        b'{"jsonrpc":"2.0","id":"r13","method":"tools/call","params":{"name":"remember",'
        b'"arguments":{"text":"keep \\ud83d this"}}}',
        -32602,
        "r13",
    ),
    (
        "100,000-deep nesting",
        b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"search",'
        b'"arguments":{"query":' + DEEP + b"}}}",
        -32700,
        14,
    ),
    ("a bare deep array", DEEP, -32700, None),
    ("a batch", b'[{"jsonrpc":"2.0","id":15,"method":"ping"}]', -32600, None),
    ("a number", b"42", -32600, None),
    ("an object id", {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, -32600, None),
    ("no jsonrpc", {"id": 16, "method": "ping"}, -32600, 16),
    ("no method", {"jsonrpc": "2.0", "id": 17}, -32600, 17),
    ("a method that is a number", {"jsonrpc": "2.0", "id": 18, "method": 5}, -32600, 18),
    (
        "params a list",
        {"jsonrpc": "2.0", "id": 19, "method": "tools/call", "params": [1]},
        -32602,
        19,
    ),
    ("a tool name that is a number", _call(20, "x", {}) | {"params": {"name": 3}}, -32602, 20),
    ("arguments a string", _call(21, "search", "wombat"), -32602, 21),
    ("an unknown tool", _call(22, "dig", {}), -32602, 22),
    ("an unknown method", {"jsonrpc": "2.0", "id": 23, "method": "resources/list"}, -32601, 23),
    (
        "initialize without a version",
        {"jsonrpc": "2.0", "id": 24, "method": "initialize"},
        -32602,
        24,
    ),
]


@pytest.mark.slow
def test_every_malformed_request_gets_an_error_and_the_server_goes_on(raw: Raw) -> None:
    raw.ask(_init())
    for what, line, code, request_id in MALFORMED:
        got = raw.ask(line)
        assert set(got) == {"jsonrpc", "id", "error"}, (what, got)
        assert (got["error"]["code"], got["id"]) == (code, request_id), what
        assert got["error"]["message"] and "\n" not in got["error"]["message"], what
        # a malformed notification is never answered: the next answer is the ping's
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [what]})
        raw.send(b'{"jsonrpc":"2.0","method":"notifications/x","params":{"q":"\\ud800"}}')
        assert raw.ask({"jsonrpc": "2.0", "id": "after", "method": "ping"})["id"] == "after"
    found = raw.ask(_call(99, "search", {"query": "wombat"}))
    assert found["result"]["isError"] is False
    assert raw.close() == 0


@pytest.mark.slow
def test_bad_tool_arguments_are_tool_errors_the_model_can_act_on(raw: Raw) -> None:
    raw.ask(_init())
    got = raw.ask(_call(1, "search", {"query": "wombat", "limit": "many"}))
    assert got["result"]["isError"] is True
    assert "limit must be an integer" in got["result"]["content"][0]["text"]


def test_the_server_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, continuity.cli.fast_mcp, continuity.mcp_server.server; "
        "heavy = ('numpy', 'typer', 'mcp', 'continuity.store.base', "
        "'continuity.mcp_server.archive', 'continuity.redaction'); "
        "print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=server_env()
    )
    assert done.stdout.strip() == "[]"


# --- the server's threads, in this process -------------------------------------------------------


class Piped:
    """A :class:`Server` on two pipes, serving in a thread."""

    def __init__(self, open_archive: Any, *, warm: bool = False) -> None:
        rin, self._win = os.pipe()
        self._rout, wout = os.pipe()
        self.to_server: IO[bytes] = os.fdopen(self._win, "wb")
        self.from_server: IO[bytes] = os.fdopen(self._rout, "rb")
        self._theirs = (os.fdopen(rin, "rb"), os.fdopen(wout, "wb"))
        self.server = Server(open_archive, stdin=self._theirs[0], stdout=self._theirs[1], warm=warm)
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any]) -> None:
        self.to_server.write(json.dumps(message).encode() + b"\n")
        self.to_server.flush()

    def reply(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.from_server.readline())
        return found

    def close(self) -> None:
        self.to_server.close()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        for f in (*self._theirs, self.from_server):
            f.close()


def test_a_ping_is_answered_while_a_call_waits_and_a_cancelled_call_is_not(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    let_go = threading.Event()

    def open_archive() -> Archive:
        let_go.wait(60)
        return Archive(store, PROJECT)

    piped = Piped(open_archive)
    piped.send(_init())
    assert piped.reply()["id"] == 0
    piped.send(_call(1, "sessions", {}))  # waits for the archive
    piped.send(_call(2, "sessions", {}))
    piped.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    piped.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert piped.reply() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    let_go.set()
    piped.send(_call(4, "sessions", {}))
    assert [piped.reply()["id"], piped.reply()["id"]] == [1, 4]  # 2 was cancelled: no answer
    piped.close()
    store.close()


def test_the_handshake_does_not_wait_for_the_archive(tmp_path: Path) -> None:
    let_go = threading.Event()
    opened: list[Archive] = []

    def open_archive() -> Archive:
        let_go.wait(60)
        opened.append(Archive(Store(tmp_path / "s", create=True, durable=False), PROJECT))
        return opened[0]

    piped = Piped(open_archive, warm=True)
    piped.send(_init())
    assert piped.reply()["result"]["serverInfo"]["name"] == "continuity"
    piped.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert len(piped.reply()["result"]["tools"]) == len(TOOLS)
    assert not opened  # the warm-up is still waiting for the archive
    let_go.set()
    assert piped.server.warmed.wait(60)
    piped.close()
    opened[0].close()


def test_the_model_loads_in_the_background_once_initialize_is_answered(tmp_path: Path) -> None:
    from continuity.retrieval.settings import SearchSettings, write_search_settings
    from tests.support.model import build_tiny_model

    store = Store(tmp_path / "s", create=True, durable=False)
    write_search_settings(store, SearchSettings(model=str(build_tiny_model(tmp_path / "tiny"))))
    archive = Archive(store, PROJECT)
    piped = Piped(lambda: archive, warm=True)
    before = archive.loaded_model
    assert before is None
    piped.send(_init())
    assert piped.reply()["id"] == 0
    assert piped.server.warmed.wait(60)
    model = archive.loaded_model
    assert model is not None
    piped.send(_call(1, "search", {"query": "anything", "scope": "all"}))
    assert piped.reply()["id"] == 1
    assert archive.loaded_model is model  # the search used the one loaded, not another
    piped.close()


def test_an_archive_that_cannot_be_made_is_a_tool_error_on_each_call() -> None:
    def open_archive() -> Archive:
        raise RuntimeError("the disk is gone")

    piped = Piped(open_archive, warm=True)
    piped.send(_init())
    assert piped.reply()["id"] == 0
    assert piped.server.warmed.wait(60)  # the warm-up met it too, and said nothing
    for request_id in (1, 2):
        piped.send(_call(request_id, "sessions", {}))
        got = piped.reply()
        assert got["id"] == request_id and got["result"]["isError"] is True
        assert "the disk is gone" in got["result"]["content"][0]["text"]
    piped.close()
