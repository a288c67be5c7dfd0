"""Adapters for coding agents other than Claude Code: each turns an agent's own session files
into threads of the archive, incrementally and idempotently, as :mod:`continuity.agents.claude_code`
does for Claude Code (whose reader, redaction, restore and install machinery they reuse).

- :mod:`continuity.agents.base.ingest` — what every adapter needs, written once: a per-file cursor
  in the store's adapter cache, a per-file lock, reading the complete JSON lines after an
  offset, source keys re-derived from a thread's log (re-ingest never duplicates), the
  ``thread_created`` frame with its ``meta`` convention, large tool outputs to artifacts, and
  the checkpoint frame for an agent's own compaction.
- :mod:`continuity.agents.codex` — OpenAI Codex CLI: rollout files (``.jsonl``, ``.jsonl.zst``)
  under ``$CODEX_HOME/sessions`` and ``archived_sessions``, its lifecycle hooks and install.
- :mod:`continuity.agents.opencode` — opencode: its SQLite store ``opencode.db`` (read-only),
  the legacy ``storage/`` tree and ``opencode export`` files; a capture plugin instead of hooks.
- :mod:`continuity.agents.gemini` — Google Gemini CLI: ``~/.gemini/tmp/<project>/chats/``
  sessions in both forms (the whole-file ``.json`` up to v0.38, the ``.jsonl`` with ``$set``
  and ``$rewindTo`` from v0.39), sub-agent recordings, its compression as a checkpoint, its
  hooks (``continuity hook <Event> --agent gemini``) and ``continuity install gemini``.

Each adapter package exposes ``detect(path) -> bool`` and ``ingest_paths(store, paths, *,
final) -> report``. Nothing here is imported by ``import continuity``: the hook path loads only
the adapter it runs.
"""
