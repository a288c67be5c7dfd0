"""The rolling context manager: context managed before the window fills (ADR 0056).

- :mod:`.usage`: how full a session's context is, from the agent's own token counts, and the
  model's window (known models, configurable);
- :mod:`.segments` and :mod:`.cache`: a thread cut into tasks and topics, deterministically,
  with a derived, rebuildable cache of its turns;
- :mod:`.queue`: the cold segments queued past the hot threshold, and the reminder a coding
  agent's prompt hook adds (each one logged);
- :mod:`.warm`: compressed segments (the agent's or a summarizer's words over a range, a
  checkpoint plus a record of its token ratio), which restores prefer;
- :mod:`.policy`: the runtimes' context policy, which compresses cold segments with their own
  summarizer before a request passes the hot threshold;
- :mod:`.settings`: ``<store>/rolling.json`` and ``CONTINUITY_ROLLING=0``.

Nothing is imported here: import from the modules (the prompt hook pays for what it uses).
"""
