"""The tests that need something from outside the venv, and nothing else: the real agent
clients from npm (``clients/``, marker ``agents``), headless Chromium (``browser/``, marker
``browser``), the frameworks' own suites from their sdists (``upstream/``, marker ``upstream``)
and PgBouncer (``pgbouncer/``, marker ``pgbouncer``). Each skips, saying why, without its
binary; ``.ci/run`` installs them all. A test marked so lives here and only here
(``tests/project/test_mirror.py``); the tests of the tools that fetch these binaries need none
of them and live in ``tests/project/``.
"""
