"""What of the frameworks' own test suites runs against continuity, and how (issue 27).

Each :class:`Run` is one child pytest in a framework's extracted sdist (``tools/upstream.py``
fetches it): its files, the backend, the session kind, a stable sample for the bounded CI run,
and the floor of tests that must pass on continuity (so a silent collapse fails). The child
runs with the framework's own conftest and fixtures plus our shims (``shims/continuity_shims``)
and our deselect list (``deselect.toml``, each entry with its reason).

``$CONTINUITY_UPSTREAM`` chooses the runs: ``ci`` (the default: 2 to 4 minutes on 2 cores, by load),
``full`` (every file on both backends and both session kinds: about 8 minutes) or ``off``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
SHIMS: Final = HERE / "shims"
DESELECT: Final = HERE / "deselect.toml"
MODE_ENV: Final = "CONTINUITY_UPSTREAM"
MODES: Final = ("ci", "full", "off")
CHILD_TIMEOUT_S: Final = 1800

LANGGRAPH_FILES: Final = tuple(
    f"tests/test_{name}.py"
    for name in (
        "checkpoint_migration",
        "delta_channel_exit_mode",
        "delta_channel_fork",
        "delta_channel_parallel_order",
        "delta_channel_subgraph",
        "delta_channel_to_plain",
        "delta_channel_update_state",
        "interrupt_state",
        "interruption",
        "large_cases",
        "large_cases_async",
        "pregel",
        "pregel_async",
        "pydantic",
        "strict_resume",
        "subgraph_persistence",
        "subgraph_persistence_async",
        "time_travel",
        "time_travel_async",
    )
)
"""LangGraph 1.2.24's files with tests that take ``sync_checkpointer`` / ``async_checkpointer``
(only those tests run: the rest of each file does not touch a saver)."""

AGENTS_SESSION_FILES: Final = (
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_compaction_suffix.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/extensions/memory/test_encrypt_session.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_tool_failure_boundaries.py",
)
"""The Agents SDK's files whose tests are about a session (``SQLiteSession``, now ours)."""

AGENTS_RUNNER_FILES: Final = (
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_agent_runner_sync.py",
    "tests/test_max_turns.py",
    "tests/test_soft_cancel.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_run_impl_resume_paths.py",
)
"""Runner files where a few tests take a ``SQLiteSession`` (run whole in the full run)."""


LANGGRAPH_STORE_FILES: Final = ("tests/test_store.py",)
"""langgraph-checkpoint 4.3.2's store tests (``InMemoryStore``, now :class:`ContinuityStore`)."""

COMPACTION_FILES: Final = AGENTS_SESSION_FILES[2:3] + AGENTS_SESSION_FILES[4:5]
"""The SDK's compaction-session files: ``OpenAIResponsesCompactionSession`` over CompiledSession
(its compaction item becomes a checkpoint the compiled history starts at, ADR 0037)."""

COMPILED_FILES: Final = AGENTS_SESSION_FILES[:2] + AGENTS_SESSION_FILES[-3:]
"""Where CompiledSession stands in for SQLiteSession (no compaction rule: its window is all)."""


@dataclass(frozen=True)
class Run:
    suite: str
    """``langgraph`` (the graph tests), ``lgstore`` (the store tests) or ``agents``: the pinned
    sdist (tools/upstream.py) and the shim."""
    backend: str
    files: tuple[str, ...]
    floor: int
    """At least this many tests must pass on continuity (measured, less a small margin)."""
    session: str = "continuity"
    """agents: ``continuity`` (ContinuitySession) or ``compiled`` (CompiledSession)."""
    sample: str = ""
    """``k/n``: only the tests whose id hashes to less than k mod n (the bounded CI run)."""
    label: str = ""
    """Tells apart two runs of one suite, backend and session on other files."""

    @property
    def id(self) -> str:
        kind = f"-{self.session}" if self.suite == "agents" else ""
        part = f"-sample{self.sample.replace('/', 'of')}" if self.sample else ""
        label = f"-{self.label}" if self.label else ""
        return f"{self.suite}-{self.backend}{kind}{label}{part}"

    @property
    def dist(self) -> str:
        return {"langgraph": "langgraph", "lgstore": "langgraph-checkpoint"}.get(
            self.suite, "openai-agents"
        )


CI_RUNS: Final = (
    # measured on 2 busy cores: ~100 s, ~45 s, ~40 s, ~20 s, ~15 s
    Run("langgraph", "jsonl", LANGGRAPH_FILES, floor=641),  # 647 pass (one timing deselected)
    Run("langgraph", "postgres", LANGGRAPH_FILES, floor=54, sample="1/10"),  # 56 pass
    Run("agents", "jsonl", AGENTS_SESSION_FILES, floor=305),  # 315 pass on a continuity session
    Run("agents", "postgres", AGENTS_SESSION_FILES[:1], floor=30),
    Run("agents", "jsonl", AGENTS_SESSION_FILES[:1], floor=31, session="compiled"),  # 33
    # 169 pass, 56 of them on a continuity session (the rest build sessions of their own); ~10 s
    Run("agents", "jsonl", COMPACTION_FILES, floor=53, session="compiled", label="compaction"),
    Run("lgstore", "jsonl", LANGGRAPH_STORE_FILES, floor=110),  # 117 pass, 86 build a store
    Run("lgstore", "postgres", LANGGRAPH_STORE_FILES, floor=110),  # ~10 s each
)
FULL_RUNS: Final = (
    Run("langgraph", "jsonl", LANGGRAPH_FILES, floor=641),  # 647 pass (one timing deselected)
    Run("langgraph", "postgres", LANGGRAPH_FILES, floor=640),  # 648 pass
    Run("agents", "jsonl", AGENTS_SESSION_FILES + AGENTS_RUNNER_FILES, floor=230),  # 238
    Run("agents", "postgres", AGENTS_SESSION_FILES + AGENTS_RUNNER_FILES, floor=230),
    Run("agents", "jsonl", COMPILED_FILES, floor=170, session="compiled"),
    Run("lgstore", "jsonl", LANGGRAPH_STORE_FILES, floor=110),  # 117 pass
    Run("lgstore", "postgres", LANGGRAPH_STORE_FILES, floor=110),
)


def mode() -> str:
    chosen = os.environ.get(MODE_ENV, "ci")
    if chosen not in MODES:
        raise ValueError(f"${MODE_ENV} is {chosen!r}: it must be one of {', '.join(MODES)}")
    return chosen


def runs() -> tuple[Run, ...]:
    chosen = mode()
    return {"ci": CI_RUNS, "full": FULL_RUNS, "off": ()}[chosen]


@dataclass
class Outcome:
    """What a child run reported (``shims/continuity_shims/report.py``)."""

    report: dict[str, Any]
    command: list[str]
    output: str

    def ids(self, *outcomes: str) -> list[str]:
        return sorted(k for k, v in self.report["outcome"].items() if v in outcomes)

    @property
    def passed_on_continuity(self) -> int:
        passed = set(self.ids("passed"))
        used = self.report["used"]
        # LangGraph's kept tests all take the saver; the Agents SDK's say when they made a session
        return len(passed & set(used)) if used else len(passed)

    def counts(self) -> dict[str, int]:
        counts = dict(self.report["counts"])
        counts["deselected"] = len(self.report["deselected"])
        counts["on continuity"] = self.passed_on_continuity
        return counts


def child_env(run: Run, *, pg_url: str | None, scratch: Path, report: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(SHIMS),
        NO_DOCKER="true",  # LangGraph's conftest: no Redis, no Docker PostgreSQL of theirs
        CONTINUITY_UPSTREAM_SUITE=run.suite,
        CONTINUITY_UPSTREAM_BACKEND=run.backend,
        CONTINUITY_UPSTREAM_SESSION=run.session,
        CONTINUITY_UPSTREAM_TAGS=f"{run.backend},{run.session}",
        CONTINUITY_UPSTREAM_DESELECT=str(DESELECT),
        CONTINUITY_UPSTREAM_REPORT=str(report),
        CONTINUITY_UPSTREAM_TMP=str(scratch),
        CONTINUITY_UPSTREAM_SAMPLE=run.sample,
        CONTINUITY_UPSTREAM_NEEDS=(
            "sync_checkpointer,async_checkpointer" if run.suite == "langgraph" else ""
        ),
    )
    if pg_url is not None:
        env["CONTINUITY_UPSTREAM_PG_URL"] = pg_url
    return env


def command(run: Run) -> list[str]:
    shim = {"langgraph": "lg_saver", "lgstore": "lg_store"}.get(run.suite, "agents_session")
    plugins = ["-p", "continuity_shims.report", "-p", f"continuity_shims.{shim}"]
    # each suite's own async plugin (LangGraph: anyio; langgraph-checkpoint and the Agents SDK:
    # pytest-asyncio, auto)
    plugins += ["-p", "no:asyncio"] if run.suite == "langgraph" else ["-p", "no:anyio"]
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:langsmith_plugin",
        *plugins,
        "-W",
        "ignore::DeprecationWarning",
        *run.files,
    ]


def execute(run: Run, tree: Path, *, pg_url: str | None) -> Outcome:
    """Run ``run`` in the framework's tree ``tree``; what it reported."""
    with tempfile.TemporaryDirectory(prefix="continuity-upstream-") as tmp:
        report = Path(tmp) / "report.json"
        scratch = Path(tmp) / "stores"
        scratch.mkdir()
        argv = command(run)
        done = subprocess.run(
            argv,
            cwd=tree,
            env=child_env(run, pg_url=pg_url, scratch=scratch, report=report),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        output = done.stdout[-6000:] + done.stderr[-4000:]
        if not report.is_file():
            raise AssertionError(
                f"the upstream run {run.id} wrote no report (exit {done.returncode}):\n{output}"
            )
        return Outcome(json.loads(report.read_text(encoding="utf-8")), argv, output)
