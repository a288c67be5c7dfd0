"""AgentContract: what every coding agent's adapter must do (:mod:`continuity.agents.contract`).

A subclass says which adapter it tests and how to make one session of its agent; the suite
checks the rest, the same for a built-in agent and for an outside package's::

    class TestMyAgent(AgentContract):
        adapter = MY_ADAPTER

        def write_session(self, folder: Path) -> Path:
            ...  # a session file (or folder) with messages and one compaction of the agent's

        def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
            ...  # one hook of the agent that archives the session, as the agent would run it

The suite checks that the registry finds the adapter by each of its names and the agents table
holds its row; that it recognises its own sessions and nothing else; that an ingest archives
the session into threads named and marked the table's way, its compaction as a checkpoint the
table calls the agent's own, and that a second ingest appends nothing; that a hook archives and
a hook given nonsense still exits 0 with one line on stderr; that an install is a plan a dry run
prints without writing, made once (a second install changes nothing), and that uninstall gives
back every file as it was; and that a scope the agent does not have is refused, changing
nothing. Each test runs with ``HOME`` (and the agents' own folder variables) in a fresh folder.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import pytest

from continuity import frames as fr
from continuity.agents.contract import AgentAdapter, Scope
from continuity.agents.registry import adapter as adapter_named
from continuity.agents.table import agent_for_source, agent_named, is_own_compaction
from continuity.errors import CommandRefused
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store

__all__ = ["AGENT_HOME_VARIABLES", "AgentContract", "files_under"]

AGENT_HOME_VARIABLES: tuple[str, ...] = (
    "CODEX_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "CLAUDE_PROJECT_DIR",
    "CONTINUITY_HOME",
)
"""Where agents keep their settings and sessions besides ``HOME``: unset for every test."""


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes): what an install may change."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


class AgentContract(ABC):
    """Behaviour every agent's adapter must share. A subclass says which adapter, and how to
    make a session of its agent and run one of its hooks."""

    adapter: ClassVar[AgentAdapter]

    @abstractmethod
    def write_session(self, folder: Path) -> Path:
        """Write one session of the agent under ``folder`` (a fresh folder): at least one user
        message, one reply and one compaction of the agent's own; return its file (or the
        folder or database ``ingest`` is given)."""

    @abstractmethod
    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        """Run one hook of the agent that archives ``session`` into the folder store
        ``store``, as the agent would run it (``env`` sets what it needs); its exit code."""

    # -- fixtures ------------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _found(self) -> None:
        """Every test starts from the adapter as the registry finds it (which puts its row in
        the agents table, where the listings, search and the restore read it)."""
        assert adapter_named(self.adapter.agent.name) is self.adapter

    @pytest.fixture
    def home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        home = tmp_path / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        for name in AGENT_HOME_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        return home

    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        project = tmp_path / "project"
        project.mkdir()
        return project

    @pytest.fixture
    def session(self, tmp_path: Path, home: Path) -> Path:
        folder = tmp_path / "sessions"
        folder.mkdir()
        return self.write_session(folder)

    def _store(self, tmp_path: Path) -> Store:
        return Store(tmp_path / "store", create=True)

    def _next_seqs(self, store: BaseStore, threads: list[str]) -> dict[str, int]:
        heads = {tid: store.thread(tid).head() for tid in threads}
        return {tid: head.next_seq if head is not None else 0 for tid, head in heads.items()}

    def _threads(self, store: BaseStore) -> list[str]:
        prefix = self.adapter.agent.thread_prefix
        return sorted(t for t in store.threads() if t.startswith(prefix))

    # -- who it is -----------------------------------------------------------------------------

    def test_the_registry_finds_it_by_each_of_its_names(self) -> None:
        agent = self.adapter.agent
        for name in (agent.name, agent.source, agent.display, agent.name.upper()):
            assert adapter_named(name) is self.adapter, name
        assert agent_named(agent.name) == agent
        assert agent_for_source(agent.source) == agent

    def test_its_row_and_its_answers_are_well_formed(self) -> None:
        agent = self.adapter.agent
        assert agent.name == agent.name.strip().lower() and " " not in agent.name
        assert agent.thread_prefix.endswith("-") and len(agent.thread_prefix) > 1
        assert agent.compactions and all(p.endswith("/") for p in agent.compactions)
        assert agent.thread_id("s 1/x").startswith(agent.thread_prefix)
        assert "/" not in agent.thread_id("s 1/x") and " " not in agent.thread_id("s 1/x")
        assert self.adapter.restore_channel.strip()
        assert self.adapter.hook_events, "an agent has hook events (or plugin events)"
        assert self.adapter.scopes and set(self.adapter.scopes) <= {"user", "project", "local"}
        assert isinstance(self.adapter.default_sources(), list)

    # -- its sources ---------------------------------------------------------------------------

    def test_it_recognises_its_sessions_and_nothing_else(
        self, session: Path, tmp_path: Path
    ) -> None:
        assert self.adapter.detect(session)
        other = tmp_path / "notes.txt"
        other.write_text("not a session of any agent\n")
        assert not self.adapter.detect(other)
        assert not self.adapter.detect(tmp_path / "missing.jsonl")

    # -- its parser ----------------------------------------------------------------------------

    def test_ingest_archives_its_threads_the_tables_way_and_again_adds_nothing(
        self, session: Path, tmp_path: Path
    ) -> None:
        store = self._store(tmp_path)
        done = self.adapter.ingest(lambda: store, [session])
        assert done.failed is None, done
        assert done.out, "an ingest says what it archived"
        threads = self._threads(store)
        assert threads, f"no thread starts with {self.adapter.agent.thread_prefix!r}"
        messages = 0
        checkpoints: list[fr.CompactionCheckpointCreated] = []
        for tid in threads:
            frames = list(store.thread(tid).read())
            created = frames[0]
            assert isinstance(created, fr.ThreadCreated), tid
            assert created.meta.get("source") == self.adapter.agent.source, tid
            messages += sum(isinstance(f, fr.MessageAppended) for f in frames)
            checkpoints += [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
        assert messages >= 2
        assert checkpoints, "the agent's own compaction is archived as a checkpoint"
        for cp in checkpoints:
            assert cp.cut_rule_id.startswith(self.adapter.agent.compactions), cp.cut_rule_id
            assert is_own_compaction(cp.cut_rule_id)
        heads = self._next_seqs(store, threads)
        again = self.adapter.ingest(lambda: store, [session])
        assert again.failed is None, again
        assert self._next_seqs(store, threads) == heads
        assert self._threads(store) == threads

    def test_ingest_of_nothing_is_refused(self, tmp_path: Path, home: Path) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        store = self._store(tmp_path)
        with pytest.raises(CommandRefused):
            self.adapter.ingest(lambda: store, [empty])
        assert self._threads(store) == []

    # -- its hooks -----------------------------------------------------------------------------

    def test_a_hook_archives_the_session(
        self, session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        folder = tmp_path / "store"
        assert self.run_hook(session, folder, monkeypatch) == 0
        assert self._threads(Store(folder))

    def test_a_hook_given_nonsense_exits_0_with_one_line(
        self, tmp_path: Path, home: Path, capfd: pytest.CaptureFixture[str]
    ) -> None:
        store = tmp_path / "store"
        code = self.adapter.hook(["no-such-event"], store=store, stdin=b"{not json")
        out, err = capfd.readouterr()
        assert code == 0
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("continuity: "), err

    # -- its install ---------------------------------------------------------------------------

    def _scopes(self) -> list[Scope]:
        return [s for s in self.adapter.scopes if s != "local"]

    @pytest.mark.parametrize("mcp", [True, False], ids=["with mcp", "hooks only"])
    def test_install_is_a_plan_made_once_and_uninstall_gives_every_file_back(
        self, home: Path, project: Path, tmp_path: Path, mcp: bool
    ) -> None:
        store = tmp_path / "store"
        for scope in self._scopes():
            before = files_under(tmp_path)
            plans = self.adapter.plan_install(scope, project, store, mcp=mcp)
            assert plans and any(p.changed for p in plans), scope
            shown = self.adapter.install(scope, project, store, mcp=mcp, dry_run=True)
            assert shown.out and files_under(tmp_path) == before, "a dry run writes nothing"
            done = self.adapter.install(scope, project, store, mcp=mcp)
            assert done.failed is None and done.out
            installed = files_under(tmp_path)
            assert installed != before
            for plan in self.adapter.plan_install(scope, project, store, mcp=mcp):
                assert not plan.changed, f"a second install would change {plan.path}"
            self.adapter.install(scope, project, store, mcp=mcp)
            assert files_under(tmp_path) == installed, "a second install changed a file"
            shown = self.adapter.uninstall(scope, project, mcp=mcp, dry_run=True)
            assert shown.out and files_under(tmp_path) == installed
            self.adapter.uninstall(scope, project, mcp=mcp)
            assert files_under(tmp_path) == before, f"uninstall ({scope}) left a change"

    def test_a_scope_it_does_not_have_is_refused_and_changes_nothing(
        self, home: Path, project: Path, tmp_path: Path
    ) -> None:
        every: tuple[Scope, ...] = ("user", "project", "local")
        missing = [s for s in every if s not in self.adapter.scopes]
        before = files_under(tmp_path)
        for scope in missing:
            with pytest.raises(CommandRefused):
                self.adapter.install(scope, project, None, mcp=True)
            with pytest.raises(CommandRefused):
                self.adapter.uninstall(scope, project, mcp=True)
        assert files_under(tmp_path) == before
        if not missing:
            assert os.path.isdir(project)  # every scope is the agent's: nothing to refuse
