"""How full a session's context is: the agent's own numbers, and the model's window.

Each adapter keeps the token counts the agent reports in the meta of the assistant message they
belong to (ADR 0056):

- Claude Code: the response's ``usage`` as ``usage_input``, ``usage_cache_creation``,
  ``usage_cache_read`` and ``usage_output``; the context is their sum (what the request sent,
  cached or not, plus what it wrote).
- Codex: a ``token_count`` event's last request as ``context_tokens`` (its ``total_tokens``)
  and the model's window as ``context_window``, as Codex itself reports them.
- Gemini CLI: ``tokens_input`` (cached tokens included), ``tokens_output``, ``tokens_thoughts``,
  ``tokens_tool``, ``tokens_cached`` and ``tokens_total``; the context is ``tokens_total``.
- opencode: ``tokens_input`` (cache reads not included), ``tokens_output``,
  ``tokens_reasoning``, ``tokens_cache_read`` and ``tokens_cache_write``; the context is their
  sum.

The window: the one the agent reported (Codex), else the model's by name (:data:`WINDOWS`, the
longest matching prefix; a ``[1m]`` suffix is Claude's million-token window), else the
configured default. ``<store>/rolling.json`` (``windows``: prefix → tokens, ``window``: the
default) and ``CONTINUITY_CONTEXT_WINDOW`` (tokens, over everything) change them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.store.base import Thread

__all__ = [
    "DEFAULT_WINDOW",
    "WINDOWS",
    "WINDOW_ENV",
    "ContextUsage",
    "context_tokens_of",
    "session_usage",
    "window_for",
]

WINDOW_ENV: Final = "CONTINUITY_CONTEXT_WINDOW"
DEFAULT_WINDOW: Final = 200_000
"""The window assumed for a model not known here (Claude's, the agents' most common)."""
WINDOWS: Final[Mapping[str, int]] = {
    "claude-": 200_000,
    "anthropic/claude-": 200_000,
    "gpt-5": 272_000,
    "openai/gpt-5": 272_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "gemini-": 1_048_576,
    "google/gemini-": 1_048_576,
}
"""Known models' windows by name prefix (the longest matching prefix wins)."""
_TAIL: Final = 64  # messages looked back through for the latest figures
_CC_KEYS: Final = ("usage_input", "usage_cache_creation", "usage_cache_read", "usage_output")


class ContextUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A session's context at its latest reported request."""

    tokens: int
    """What the context held: the agent's own count."""
    window: int
    """The model's window in tokens."""
    model: str = ""
    seq: int = -1
    """The seq of the message the figures came with."""
    window_source: str = "default"
    """Where the window came from: ``agent`` (reported), ``model`` (known), ``config`` or
    ``default``."""

    @property
    def fraction(self) -> float:
        """``tokens / window`` (0 when the window is unknown)."""
        return self.tokens / self.window if self.window > 0 else 0.0


def _int(meta: Mapping[str, str], key: str) -> int | None:
    raw = meta.get(key)
    if raw is None or not raw.isdigit():
        return None
    return int(raw)


def context_tokens_of(meta: Mapping[str, str]) -> int | None:
    """The context tokens a message's meta reports (any agent's keys), or None."""
    direct = _int(meta, "context_tokens")
    if direct is not None:
        return direct
    parts = [_int(meta, k) for k in _CC_KEYS]
    if any(p is not None for p in parts):
        return sum(p or 0 for p in parts)
    total = _int(meta, "tokens_total")
    if total is not None:
        return total
    found = [
        v
        for k in meta
        if k.startswith("tokens_") and k != "tokens_cached"
        for v in (_int(meta, k),)
        if v is not None
    ]
    return sum(found) if found else None


def window_for(
    model: str,
    *,
    reported: int | None = None,
    windows: Mapping[str, int] | None = None,
    default: int | None = None,
) -> tuple[int, str]:
    """The window of ``model`` and where it came from: the environment's override, the
    agent's ``reported`` one, the configured ``windows`` then :data:`WINDOWS` by longest
    prefix, else ``default`` (:data:`DEFAULT_WINDOW`)."""
    env = os.environ.get(WINDOW_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env), "config"
    if reported is not None and reported > 0:
        return reported, "agent"
    name = model.strip().lower()
    for table, source in ((windows or {}, "config"), (WINDOWS, "model")):
        best = max((p for p in table if name.startswith(p.lower())), key=len, default=None)
        if best is not None:
            window = table[best]
            if source == "model" and name.endswith("[1m]"):
                window = 1_000_000
            return window, source
    if default is not None and default > 0:
        return default, "config"
    return DEFAULT_WINDOW, "default"


def session_usage(
    thread: Thread, *, windows: Mapping[str, int] | None = None, default: int | None = None
) -> ContextUsage | None:
    """The context of ``thread`` at its latest message that reports one, or None: none of its
    last messages does (a runtime's thread, an agent that reports nothing), or the agent
    compacted since (its context is not what the figures say any more)."""
    from continuity.agents.table import is_own_compaction

    frames = thread.tail(_TAIL, types=["message_appended", "compaction_checkpoint_created"])
    for frame in reversed(frames):
        if isinstance(frame, fr.CompactionCheckpointCreated):
            if is_own_compaction(frame.cut_rule_id):
                return None
            continue
        if not isinstance(frame, fr.MessageAppended) or not frame.meta:
            continue
        tokens = context_tokens_of(frame.meta)
        if tokens is None:
            continue
        model = frame.meta.get("model", "")
        window, source = window_for(
            model, reported=_int(frame.meta, "context_window"), windows=windows, default=default
        )
        return ContextUsage(
            tokens=tokens, window=window, model=model, seq=frame.seq, window_source=source
        )
    return None
