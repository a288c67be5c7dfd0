"""The glue to the official ``mcp`` SDK: a low-level server over stdio whose tools are
:mod:`.tools` (ADR 0038).

The low-level ``Server`` is given the tool list as written in :mod:`.schemas` (hand-written
JSON schemas and descriptions, the contract) and one ``tools/call`` handler. A call runs in a
worker thread, one at a time (the store's handles are not shared between threads), so the
event loop keeps answering while a search reads; the tools' modules load on the first call
(about 80 ms: search's numpy), so that ``initialize`` waits for the SDK alone. Whatever a
call raises becomes a tool error (``isError``) with one line; the server never stops on a
call.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from continuity.mcp_server.archive import Archive, ToolError, ToolResult
from continuity.mcp_server.schemas import SERVER_INSTRUCTIONS, SERVER_NAME, TOOLS

__all__ = ["build_server", "run_stdio"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from continuity.errors import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0"


def _result(found: ToolResult, structured: bool) -> types.CallToolResult:
    # Text only by default: a client that gets structuredContent may show the model that in
    # place of the text (Claude Code 2.1 does), and the text is what is written for a model.
    data = found.data or None if structured else None
    return types.CallToolResult(
        content=[types.TextContent(text=found.text)], structured_content=data
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def answer(
    archive: Archive,
    lock: threading.Lock,
    name: str,
    args: dict[str, Any] | None,
    structured: bool = False,
) -> types.CallToolResult:
    """One tool call's result: the tool's, or a one-line error for anything it raised."""
    # The tools (search's numpy among them) load on the first call, not before `initialize`.
    from continuity.mcp_server.tools import call_tool

    with lock:
        try:
            return _result(call_tool(archive, name, args), structured)
        except ToolError as exc:
            return _error(" ".join(str(exc).split()))
        except Exception as exc:
            what = " ".join(str(exc).split())
            return _error(f"{name} failed: {type(exc).__name__}: {what}")


def build_server(archive: Archive, *, structured: bool = False) -> Server[Any]:
    """The server: the tools of :mod:`.schemas` answered by :mod:`.tools` over ``archive``;
    ``structured``: results carry their data as ``structuredContent`` too."""
    tools = [
        types.Tool(
            name=t["name"],
            description=t["description"],
            input_schema=t["inputSchema"],
            annotations=types.ToolAnnotations(
                read_only_hint=t["name"] != "remember",
                destructive_hint=False,
                idempotent_hint=t["name"] != "remember",
                open_world_hint=False,
            ),
        )
        for t in TOOLS
    ]
    lock = threading.Lock()

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await anyio.to_thread.run_sync(
            answer, archive, lock, params.name, params.arguments, structured
        )

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


def run_stdio(archive: Archive, *, structured: bool = False) -> None:
    """Serve ``archive`` over stdin and stdout until the client closes them."""
    server = build_server(archive, structured=structured)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
