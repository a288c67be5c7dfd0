"""A fifth agent, test-only: "Scribe", a made-up coding agent, archived by an adapter that lives in
this one folder and is registered the way an outside package registers one (an entry point in
the ``continuity.agents`` group), over the wing's foundation (``continuity.agents.base``).

Scribe keeps each session as ``~/.scribe/sessions/<session>.jsonl``: a ``meta`` line, then
``user`` and ``assistant`` lines, and a ``compact`` line with its summary when it compacts. It
runs command hooks from ``~/.scribe/hooks.json`` (``{"hooks": {"<event>": "<command>"}}``)
with ``{"session_id", "transcript_path", "hook_event_name"}`` on stdin, and puts the
``context`` of a SessionStart hook's JSON answer in front of its model.
"""
