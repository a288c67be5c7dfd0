"""Our pytest plugins for the frameworks' own test suites (``tests/outside/upstream``).

They run inside a child pytest whose root is the framework's extracted source distribution (its
``tests`` package, its conftest, its fixtures), loaded with ``-p continuity_shims.<name>`` from
this folder's parent on ``PYTHONPATH``. That child cannot import our ``tests`` package (the
framework's own is called ``tests`` too), so nothing here does; everything comes in through the
environment the runner (``tests/outside/upstream/suites.py``) sets:

- ``report``: keeps the tests that concern continuity, drops those on our deselect list (each
  with its reason), and writes every outcome to a JSON report.
- ``lg_saver``: LangGraph's ``sync_checkpointer`` / ``async_checkpointer`` fixtures become
  ``continuity_jsonl`` or ``continuity_postgres``: a :class:`ContinuitySaver` on a fresh store.
- ``agents_session``: the Agents SDK's ``SQLiteSession`` becomes a :class:`ContinuitySession`
  (or :class:`CompiledSession`) on the same ``(session_id, db_path)``.
"""
