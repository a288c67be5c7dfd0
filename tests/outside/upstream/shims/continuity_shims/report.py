"""Which upstream tests run, and what became of each (``-p continuity_shims.report``).

At collection: keeps only the tests that concern continuity (``$CONTINUITY_UPSTREAM_NEEDS``: the
fixtures a test must use, comma-separated; empty: all), then a stable sample of them
(``$CONTINUITY_UPSTREAM_SAMPLE``, ``k/n``: the tests whose id hashes to less than k mod n, the
bounded CI run), and deselects those on our list (``$CONTINUITY_UPSTREAM_DESELECT``, a TOML file,
the section ``$CONTINUITY_UPSTREAM_SUITE``, entries for the run's ``$CONTINUITY_UPSTREAM_TAGS``),
each with its reason. At the end: writes
``$CONTINUITY_UPSTREAM_REPORT``, a JSON object of every test's outcome, the deselected tests and
their reasons, the list entries that matched no test collected from their file (stale), and
the tests a shim says ran on continuity (``used``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

NEEDS_ENV = "CONTINUITY_UPSTREAM_NEEDS"
SAMPLE_ENV = "CONTINUITY_UPSTREAM_SAMPLE"
DESELECT_ENV = "CONTINUITY_UPSTREAM_DESELECT"
SUITE_ENV = "CONTINUITY_UPSTREAM_SUITE"
REPORT_ENV = "CONTINUITY_UPSTREAM_REPORT"
TAGS_ENV = "CONTINUITY_UPSTREAM_TAGS"
USED_PROPERTY = "continuity_session"
"""The user property a shim gives a test that ran on continuity (``used`` in the report)."""


def load_deselect(path: Path, suite: str, tags: set[str]) -> dict[str, str]:
    """The deselect list's entries for ``suite`` in a run tagged ``tags``: test id -> reason.

    An entry is ``{test = "tests/x.py::test_y", reason = "...", only = [...]}``; ``test`` is
    a whole node id or one without its ``[params]`` (then every parametrization); ``only``
    (optional) limits it to the runs with one of those tags (a backend, ``jsonl`` or
    ``postgres``, or a session, ``continuity`` or ``compiled``).
    """
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get(suite, [])
    chosen: dict[str, str] = {}
    for entry in entries:
        test, reason = entry.get("test"), entry.get("reason")
        if not isinstance(test, str) or not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(
                f"{path}: [[{suite}]] entry {entry!r} needs a test and a reason"
            )
        only = entry.get("only")
        if only is None or tags & set(only):
            chosen[test] = reason
    return chosen


def _sampled(nodeid: str, sample: str) -> bool:
    k, _, n = sample.partition("/")
    digest = int.from_bytes(hashlib.sha256(nodeid.encode()).digest()[:8], "big")
    return digest % int(n) < int(k)


class Outcomes:
    def __init__(self) -> None:
        self.outcome: dict[str, str] = {}
        self.message: dict[str, str] = {}
        self.deselected: dict[str, str] = {}
        self.not_ours = 0
        self.not_sampled = 0
        self.stale: list[str] = []
        self.used: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        needs = [n for n in os.environ.get(NEEDS_ENV, "").split(",") if n]
        sample = os.environ.get(SAMPLE_ENV, "")
        listed: dict[str, str] = {}
        path = os.environ.get(DESELECT_ENV)
        if path:
            suite = os.environ.get(SUITE_ENV, "")
            tags = set(os.environ.get(TAGS_ENV, "").split(","))
            listed = load_deselect(Path(path), suite, tags)
        kept: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        matched: set[str] = set()
        for item in items:
            if needs and not set(needs) & set(getattr(item, "fixturenames", ())):
                self.not_ours += 1
                dropped.append(item)
                continue
            key = next((k for k in (item.nodeid, item.nodeid.split("[")[0]) if k in listed), None)
            if key is not None:
                matched.add(key)
                self.deselected[item.nodeid] = listed[key]
                dropped.append(item)
            elif sample and not _sampled(item.nodeid, sample):
                self.not_sampled += 1
                dropped.append(item)
            else:
                kept.append(item)
        files = {item.nodeid.split("::")[0] for item in items}
        self.stale = sorted(k for k in listed if k not in matched and k.split("::")[0] in files)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid, before = report.nodeid, self.outcome.get(report.nodeid)
        if (USED_PROPERTY, True) in report.user_properties:
            self.used.add(nodeid)
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            if before in ("failed", "error"):
                return
            self.message[nodeid] = _message(report)
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
            self.message[nodeid] = _message(report)
        elif report.when == "call":
            outcome = "xpassed" if hasattr(report, "wasxfail") else "passed"
        else:
            return
        if before in ("failed", "error"):  # a teardown after a failure changes nothing
            return
        self.outcome[nodeid] = outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = os.environ.get(REPORT_ENV)
        if not path:
            return
        counts: dict[str, int] = {}
        for outcome in self.outcome.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        data: dict[str, Any] = {
            "counts": counts,
            "outcome": self.outcome,
            "message": self.message,
            "deselected": self.deselected,
            "not_ours": self.not_ours,
            "not_sampled": self.not_sampled,
            "stale": self.stale,
            "used": sorted(self.used),
            "exitstatus": int(session.exitstatus),
        }
        tmp = Path(path + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)


def _message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)[:2000]
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2])[:2000]
    return str(report.longrepr)[-2000:]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Outcomes(), "continuity-upstream-outcomes")
