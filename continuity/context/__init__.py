"""What the model sees: compile, render, compaction and summaries.

- :mod:`.sources` is what compile and compaction read of a thread (through the caches, or by a
  scan of the log: the same answers);
- :mod:`.compiler` is ``compile_context``: the halving rule, the recent window, the budget,
  recall, and the logged decision;
- :mod:`.bundle` is the compiled bundle (``context_bundle.v1``);
- :mod:`.convert` turns a provider's messages into frames, and :mod:`.render` (a package, one
  module per shape) turns a bundle into an Anthropic or OpenAI request, or text; both read the
  layouts of :mod:`.layout`, the hints a converter leaves so that a shape comes back exactly;
- :mod:`.compaction` decides where checkpoints fall and records them as a logged job;
- :mod:`.summarize` is the default, extractive and deterministic summarizer;
- :mod:`.transcript_rules` reads a coding session's text — the user's own words, a command's
  line, whether an output failed and its error line — for the summarizer and the Claude Code
  restore alike;
- :mod:`.records`, :mod:`.retract` and :mod:`.fork`: a runtime's records, undo without deleting,
  and a thread started from another at seq N.

Nothing is imported here: import from the modules. What a runtime's loop uses (compile, the
renderers and converters, compaction) is also at the package root
(``from continuity import compile_context``); undo, records and forks are imported from their
modules (``from continuity.context.retract import retract``).
"""
