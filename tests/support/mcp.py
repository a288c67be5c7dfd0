"""What the MCP server's tests share: a Claude Code transcript writer, and the real SDK client
talking to ``python -m continuity mcp`` over stdio.

The client is the official ``mcp`` SDK's own (``mcp.client.stdio`` + ``ClientSession``); a
test without the SDK installed skips, saying why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.transcripts import Transcript

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["Transcript", "mcp_client", "require_sdk", "server_env", "text_of"]


def require_sdk() -> None:
    """Skip the test when the ``mcp`` extra is not installed."""
    pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install '.[mcp]')")


def server_env(**extra: str) -> dict[str, str]:
    """The environment a client gives the server: ours without continuity's and Claude's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_client(
    store: Path | str, *, cwd: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with a fresh ``continuity mcp --store STORE``
    process, whose working directory (its project) is ``cwd``."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "continuity", "mcp", "--store", str(store), *args],
        cwd=str(cwd),
        env=server_env() if env is None else env,
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def text_of(result: Any) -> str:
    """The text of a tool result (its one text block)."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    assert len(texts) == 1, result
    return str(texts[0])
