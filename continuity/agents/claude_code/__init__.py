"""The Claude Code adapter: every session archived as it happens, and the right context given
back after Claude compacts.

- :mod:`.transcript` reads Claude Code's transcript files (the line shapes of 2.0 and 2.1);
- :mod:`.ingest` turns them into threads, incrementally and without duplicates;
- :mod:`.hooks` is ``continuity hook <event>``: what each hook event does (it never fails
  Claude Code);
- :mod:`.restore` builds the restored context, the pre-compact guidance and prompt recall;
- :mod:`.sessions` lists the archived sessions;
- :mod:`.install` merges the hooks into Claude Code's settings and takes them out again;
- :mod:`.mcp_install` registers ``continuity mcp`` with Claude Code, Codex, Gemini CLI and
  Cursor (and takes it out again), editing only its own entry of their files;
- :mod:`.quick` is the ingest-only hooks' fast path: nothing new in the transcript, nothing
  imported;
- :mod:`.demo` replays a scripted session through the real hooks.

Nothing is imported here: ``continuity hook`` imports only what its event needs.
"""
