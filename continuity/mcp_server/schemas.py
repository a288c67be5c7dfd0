"""The tools the server offers: names, descriptions written for a model, JSON input schemas.

This is the contract: ``continuity install`` and the clients' tests rely on the names and the
arguments. Descriptions say when to use a tool, what it returns and how to page; results are
short text (plus ``structuredContent``), pages continue with the ``cursor`` a result names.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["SERVER_INSTRUCTIONS", "SERVER_NAME", "TOOLS", "tool_names"]

SERVER_NAME: Final = "continuity"

SERVER_INSTRUCTIONS: Final = (
    "continuity archives every session of this project whole (every prompt, reply, tool call "
    "and output, and each compaction's summary). Use it when you need something that is no "
    "longer in your context: an exact error, a command and its output, a file you read, what "
    "was decided earlier or in a previous session. Start with `search` (small hits), then "
    "`read` the turns around a hit; `sessions` lists the project's sessions; `restore` gives "
    "back what your last compaction dropped; `remember` records a decision, a note or your own "
    "summary of a stretch so later searches, restores and compiles find it."
)

_CURSOR: Final = {
    "type": "string",
    "description": "The next_cursor a previous call of this tool returned, to get the next "
    "page (the other arguments must be the same).",
}

_THREAD: Final = {
    "type": "string",
    "description": "A thread id as search or sessions show it (e.g. cc-<session id>; a "
    "Claude Code session id alone works too). Default: the current session.",
}

_SEARCH: Final[dict[str, Any]] = {
    "name": "search",
    "description": (
        "Search the archive of past and current sessions for words, paths, commands, error "
        "messages or topics. Use it before asking the user to repeat something or re-running "
        "a command to see an old output. Returns up to `limit` hits, one line each: thread, "
        "seq, time (UTC), role, a short snippet, and where the hit leads (a summary's covered "
        "range, a subagent's parent session). Then call `read` with the hit's thread and seq "
        "to see the turns around it. More hits: pass the returned next_cursor."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for: words, a file path, a command, an error text.",
            },
            "scope": {
                "type": "string",
                "enum": ["project", "session", "all"],
                "default": "project",
                "description": "project: every session of this project (default); session: "
                "the current session only; all: every thread in the archive.",
            },
            "agent": {
                "type": "string",
                "description": "Only threads written by this agent: claude-code, codex, "
                "gemini or opencode (Claude Code, Codex, Gemini CLI also accepted).",
            },
            "thread": {
                "type": "string",
                "description": "Only this thread (overrides scope).",
            },
            "since": {
                "type": "string",
                "description": "Only hits at or after this time: an ISO date or time "
                "(2025-06-01, 2025-06-01T14:00Z) or an age (30m, 6h, 2d, 1w).",
            },
            "until": {
                "type": "string",
                "description": "Only hits before this time (same forms as since).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "default": 8,
                "description": "Hits per page.",
            },
            "cursor": _CURSOR,
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}

_READ: Final[dict[str, Any]] = {
    "name": "read",
    "description": (
        "Read a thread's turns as text: user prompts, assistant replies, tool calls (→) and "
        "their results (←), summaries and notes, each line starting with its #seq. Give `seq` "
        "to read around a search hit, or `from_seq`/`to_seq` for a range; with neither, the "
        "latest turns. Output is bounded by max_tokens; long tool outputs are cut and say how "
        "to get them whole (read that single seq, or `artifact`). Continue with next_cursor. "
        "`artifact`: page through one stored artifact (a long tool output) by its id."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "thread": _THREAD,
            "seq": {
                "type": "integer",
                "minimum": 0,
                "description": "Read the turns around this seq (a search hit's).",
            },
            "from_seq": {"type": "integer", "minimum": 0, "description": "First seq to read."},
            "to_seq": {"type": "integer", "minimum": 0, "description": "Last seq to read."},
            "max_tokens": {
                "type": "integer",
                "minimum": 200,
                "maximum": 20000,
                "default": 2000,
                "description": "Budget for this page (about 4 characters a token).",
            },
            "cursor": _CURSOR,
            "artifact": {
                "type": "string",
                "description": "An artifact id a read line names: its text, paged.",
            },
        },
        "additionalProperties": False,
    },
}

_SESSIONS: Final[dict[str, Any]] = {
    "name": "sessions",
    "description": (
        "List recent sessions, most recently active first: thread id, agent, title, start and "
        "last activity (UTC), size (frames, messages) and compactions; the current session is "
        "marked. Use it to find an earlier session to search or read. Next page: next_cursor."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "scope": {
                "type": "string",
                "enum": ["project", "all"],
                "default": "project",
                "description": "project: sessions of this project (default); all: every one.",
            },
            "agent": {
                "type": "string",
                "description": "Only sessions of this agent: claude-code, codex, gemini or "
                "opencode (Claude Code, Codex, Gemini CLI also accepted).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "default": 10,
                "description": "Sessions per page.",
            },
            "cursor": _CURSOR,
        },
        "additionalProperties": False,
    },
}

_RESTORE: Final[dict[str, Any]] = {
    "name": "restore",
    "description": (
        "Get back the exact details your session's last compaction dropped: commands and their "
        "outcomes, errors, files read and changed, the user's own words, notes you recorded, "
        "then the last turns before the compaction (the same text continuity injects after a "
        "compaction). Use it when your context was compacted and you lack a detail."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {"thread": _THREAD},
        "additionalProperties": False,
    },
}

_REMEMBER: Final[dict[str, Any]] = {
    "name": "remember",
    "description": (
        "Record something in the archive so later searches, restores and context compiles "
        "find it. kind decision or note: a short text (what was decided and why, a fact to "
        "keep). kind summary: your own summary of the stretch from_seq..to_seq of the session "
        "(seqs as read shows them); it becomes a checkpoint that later compiles start from. "
        "Returns the seq it was written at."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "What to record (at most 20,000 chars)."},
            "kind": {
                "type": "string",
                "enum": ["decision", "note", "summary"],
                "default": "note",
                "description": "decision, note (default), or summary of from_seq..to_seq.",
            },
            "from_seq": {
                "type": "integer",
                "minimum": 0,
                "description": "summary: the first seq the summary covers (default 0).",
            },
            "to_seq": {
                "type": "integer",
                "minimum": 0,
                "description": "summary: the last seq it covers (required for a summary, "
                "unless segment names it).",
            },
            "segment": {
                "type": "string",
                "description": "summary: the segment it compresses (seg-N, as a reminder "
                "names it); its range when from_seq and to_seq are not given.",
            },
            "key_decisions": {
                "type": "array",
                "items": {"type": "string"},
                "description": "summary: the decisions to keep, one a line.",
            },
            "key_files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "summary: the files read or changed that matter, one a line.",
            },
            "thread": _THREAD,
        },
        "required": ["text"],
        "additionalProperties": False,
    },
}

TOOLS: Final[tuple[dict[str, Any], ...]] = (_SEARCH, _READ, _SESSIONS, _RESTORE, _REMEMBER)
"""Each tool as ``tools/list`` shows it: name, description, inputSchema."""


def tool_names() -> list[str]:
    return [t["name"] for t in TOOLS]
