"""The MCP server over stdio, on the core dependencies alone (ADR 0053; it replaces the SDK's
of ADR 0038).

One thread reads the client's lines and answers what needs no archive at once: ``initialize``
(with the protocol version negotiated), ``ping``, ``tools/list`` (made once from
:mod:`.schemas`), and every error (:mod:`.jsonrpc`). ``tools/call`` goes to one worker thread
that runs the calls one at a time, in order (the store's handles are not shared between
threads), so a ping is answered while a search reads. ``notifications/cancelled`` drops a call
not yet started and the answer of one that runs (the spec: no response to a cancelled
request).

Nothing heavy is imported before ``initialize`` is answered: the archive, the store, the tools
(search's numpy) and the sentence encoder load in a background thread started right after it,
so the first fused search finds the model loaded. A call that comes before they are ready waits
for the part it needs. Whatever a tool raises becomes a tool error (``isError``) of one line;
the server never stops on a call, and answers every request, malformed ones with a JSON-RPC
error.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from continuity.mcp_server import jsonrpc as rpc
from continuity.mcp_server.schemas import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS

if TYPE_CHECKING:
    from continuity.mcp_server.archive import Archive

__all__ = ["PROTOCOL_VERSIONS", "Server", "listed_tools", "run_stdio"]

PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP revisions this server speaks (the initialize handshake's), newest first: a client
asking for one gets it; any other gets the newest, and decides whether to go on."""

_STRUCTURED_SINCE: Final = "2025-06-18"  # structuredContent is in the revisions from this one
_WARM_QUERY: Final = "error"  # any query: the warm-up search loads what every search needs


def listed_tools() -> list[dict[str, Any]]:
    """The tools as ``tools/list`` gives them: :mod:`.schemas` with their annotations."""
    return [
        {
            "name": t["name"],
            "description": t["description"],
            "inputSchema": t["inputSchema"],
            "annotations": {
                "readOnlyHint": t["name"] != "remember",
                "destructiveHint": False,
                "idempotentHint": t["name"] != "remember",
                "openWorldHint": False,
            },
        }
        for t in TOOLS
    ]


def _version() -> str:
    from continuity._version import __version__

    return __version__


@dataclass(slots=True)
class _Call:
    id: rpc.RequestId
    name: str
    arguments: dict[str, Any]


class Server:
    """An MCP server on ``stdin``/``stdout`` (binary streams) whose tools run over the
    :class:`~.archive.Archive` ``open_archive`` makes (called once, off the handshake's path).
    ``structured``: results carry their data as ``structuredContent`` too. ``warm``: load the
    archive, the tools and the model in the background once ``initialize`` is answered."""

    def __init__(
        self,
        open_archive: Callable[[], Archive],
        *,
        stdin: BinaryIO,
        stdout: BinaryIO,
        structured: bool = False,
        warm: bool = True,
    ) -> None:
        self._open_archive = open_archive
        self._archive: Archive | None = None
        self._stdin = stdin
        self._stdout = stdout
        self._structured = structured
        self._warm = warm
        self._version: str | None = None
        self._tools_result = {"tools": listed_tools()}
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._write_lock = threading.Lock()
        self._call_lock = threading.Lock()  # the archive: one user at a time
        self._state_lock = threading.Lock()
        self._cancelled: set[rpc.RequestId] = set()
        self._pending: set[rpc.RequestId] = set()
        self._closed = False
        self.warming: threading.Thread | None = None
        self.warmed = threading.Event()
        """Set once the background loading is over (done or failed)."""

    # -- the loop -----------------------------------------------------------------------------

    def serve(self) -> None:
        """Answer until the client closes stdin (or stdout); the calls already queued run to
        their end first."""
        worker = threading.Thread(target=self._work, name="continuity-mcp-calls", daemon=True)
        worker.start()
        try:
            while not self._closed:
                line = self._stdin.readline(rpc.MAX_LINE + 1)
                if not line:
                    break
                if len(line) > rpc.MAX_LINE and not line.endswith(b"\n"):
                    self._skip_rest_of_line()
                    self._send(rpc.error(None, rpc.INVALID_REQUEST, "Invalid Request: too long"))
                    continue
                if line.strip():
                    self.handle(line)
        finally:
            self._calls.put(None)
            worker.join()
            # a warm-up still running holds the archive (or soon will): run_stdio ends the
            # process without waiting for it, and closing is the process's exit then
            if self.warming is None or self.warmed.is_set() or not self.warming.is_alive():
                with self._call_lock:
                    if self._archive is not None:
                        self._archive.close()

    def _skip_rest_of_line(self) -> None:
        while True:
            more = self._stdin.readline(rpc.MAX_LINE)
            if not more or more.endswith(b"\n"):
                return

    def handle(self, line: bytes) -> None:
        """Answer one line (a call is queued and answered by the worker)."""
        found = rpc.parse(line)
        if isinstance(found, rpc.Rejected):
            if not found.notification:
                self._send(rpc.error(found.id, found.code, found.message))
            return
        if found.method is None:  # a reply: we send no requests
            return
        if found.id is None:
            self._notified(found.method, found.params)
            return
        try:
            self._request(found.id, found.method, found.params)
        except Exception as exc:  # a bug of ours: still an answer, and the server goes on
            what = " ".join(f"{type(exc).__name__}: {exc}".split())
            self._send(rpc.error(found.id, rpc.INTERNAL_ERROR, f"Internal error: {what}"))

    def _request(self, request_id: rpc.RequestId, method: str, params: dict[str, Any]) -> None:
        if method == "tools/call":
            self._queue_call(request_id, params)
        elif method == "initialize":
            warming = None
            if self._warm and self.warming is None:
                warming = self.warming = threading.Thread(
                    target=self._warm_up, name="continuity-mcp-warm", daemon=True
                )
            self._send(self._initialize(request_id, params))
            if warming is not None:  # started once the answer is out: it never delays it
                warming.start()
        elif method == "ping":
            self._send(rpc.result(request_id, {}))
        elif method == "tools/list":
            self._send(rpc.result(request_id, self._tools_result))
        else:
            self._send(rpc.error(request_id, rpc.METHOD_NOT_FOUND, f"Method not found: {method}"))

    def _initialize(self, request_id: rpc.RequestId, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            why = "Invalid params: initialize needs protocolVersion (a string)"
            return rpc.error(request_id, rpc.INVALID_PARAMS, why)
        self._version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return rpc.result(
            request_id,
            {
                "protocolVersion": self._version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": _version()},
                "instructions": SERVER_INSTRUCTIONS,
            },
        )

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                with self._state_lock:
                    if request_id in self._pending:
                        self._cancelled.add(request_id)
        # notifications/initialized and any other notification: nothing to do

    def _queue_call(self, request_id: rpc.RequestId, params: dict[str, Any]) -> None:
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str):
            why = "Invalid params: tools/call needs name (a string)"
            self._send(rpc.error(request_id, rpc.INVALID_PARAMS, why))
        elif arguments is not None and not isinstance(arguments, dict):
            why = "Invalid params: arguments must be an object"
            self._send(rpc.error(request_id, rpc.INVALID_PARAMS, why))
        elif name not in {t["name"] for t in TOOLS}:
            known = ", ".join(t["name"] for t in TOOLS)
            why = f"Unknown tool: {name} (the tools are {known})"
            self._send(rpc.error(request_id, rpc.INVALID_PARAMS, why))
        else:
            with self._state_lock:
                self._pending.add(request_id)
            self._calls.put(_Call(request_id, name, arguments or {}))

    # -- the worker ---------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            if not self._take(call.id):
                continue
            try:
                reply = rpc.result(call.id, self._run(call))
            except Exception as exc:  # a bug of ours: an answer still, and the worker goes on
                what = " ".join(f"{type(exc).__name__}: {exc}".split())
                reply = rpc.error(call.id, rpc.INTERNAL_ERROR, f"Internal error: {what}")
            if self._take(call.id, done=True):
                self._send(reply)

    def _take(self, request_id: rpc.RequestId, *, done: bool = False) -> bool:
        """False when the request was cancelled (it is then forgotten); ``done``: forget it."""
        with self._state_lock:
            cancelled = request_id in self._cancelled
            if cancelled or done:
                self._cancelled.discard(request_id)
                self._pending.discard(request_id)
            return not cancelled

    def archive(self) -> Archive:
        """The archive, made on first use (the caller holds the call lock)."""
        if self._archive is None:
            self._archive = self._open_archive()
        return self._archive

    def _run(self, call: _Call) -> dict[str, Any]:
        from continuity.mcp_server.archive import ToolError
        from continuity.mcp_server.tools import call_tool

        with self._call_lock:
            try:
                found = call_tool(self.archive(), call.name, call.arguments)
            except ToolError as exc:
                return _tool_error(" ".join(str(exc).split()))
            except Exception as exc:
                what = " ".join(str(exc).split())
                return _tool_error(f"{call.name} failed: {type(exc).__name__}: {what}")
        answer: dict[str, Any] = {
            "content": [{"type": "text", "text": found.text}],
            "isError": False,
        }
        # Text only by default: a client given structuredContent may show the model that in
        # place of the text (Claude Code 2.1 does), and the text is what is written for a model.
        if self._structured and found.data and self._speaks_structured():
            answer["structuredContent"] = found.data
        return answer

    def _speaks_structured(self) -> bool:
        return self._version is None or self._version >= _STRUCTURED_SINCE

    def _warm_up(self) -> None:
        """Import and open what the first call needs, load the sentence encoder the search
        would (outside the call lock: a ``read`` need not wait for the model) and run it once,
        then one search, which loads the store's index and vectors: the first search an agent
        makes is then as fast as the next. A failure here is left for the call that meets it
        to report."""
        try:
            with self._call_lock:
                archive = self.archive()
                import continuity.mcp_server.tools
                import continuity.retrieval.search  # search's own modules, loaded here

                chosen = archive.model_choice()
            if chosen is not None:
                from continuity.retrieval.embedders import embed_queries

                embed_queries(archive.load_model(*chosen), [_WARM_QUERY])
            with self._call_lock:
                continuity.mcp_server.tools.call_tool(
                    archive, "search", {"query": _WARM_QUERY, "scope": "all", "limit": 1}
                )
        except Exception:  # the call that needs it says what is wrong, in one line
            return
        finally:
            self.warmed.set()

    # -- output -------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        data = rpc.encode(message)
        with self._write_lock:
            if self._closed:
                return
            try:
                self._stdout.write(data)
                self._stdout.flush()
            except (OSError, ValueError):  # the client is gone: stop reading too
                self._closed = True


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def run_stdio(open_archive: Callable[[], Archive], *, structured: bool = False) -> None:
    """Serve over this process's stdin and stdout until the client closes them. Anything else
    that prints goes to stderr: stdout carries the protocol alone."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    server = Server(open_archive, stdin=stdin, stdout=stdout, structured=structured)
    server.serve()
    warming = server.warming
    if warming is not None and warming.is_alive():
        # A model still loading (native code in a daemon thread) is not waited for, nor left
        # to race the interpreter's shutdown: the answers are all written and flushed.
        import os

        sys.stderr.flush()
        os._exit(0)
