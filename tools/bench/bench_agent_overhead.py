"""What continuity adds to a real coding agent's session, as its user waits for it (issue 43).

    python -m tools.bench.bench_agent_overhead [--rounds 5] [--agents claude-code,codex]
                                               [--turns 3] [--json]

The real CLIs, pinned and cached by ``python -m tools.agents install`` (an agent whose CLI is not
in the cache is left out, said in a note), run headless against the tests' scripted model server
(``tests/support/model_server.py``; ``../shared/design/real-agents.md``), each in worlds of its
own (``HOME``, project, store, all in a scratch folder) that differ in one thing:

* ``without``: no continuity at all;
* ``hooks``: ``continuity install <agent> --no-mcp``;
* ``hooks + MCP``: ``continuity install <agent>`` (the hooks and the MCP server).

A session is ``--turns`` runs of the CLI in a new project folder: the first runs a shell command
(the model asks for it; the CLI runs it; the model answers), the others continue the session
(``claude -p … --continue``; ``codex exec resume --last …``) and get a text answer. The rounds
interleave the worlds, their order rotated each round, so the machine's drift falls on all
alike; the first round warms up (bytecode, the CLIs' own caches) and is not counted.

Measured per session: the wall time of its runs, and the CPU time (user + system) of every
process it started: the CLI, the hooks, the MCP server. The bench makes itself the subreaper of
its children (Linux ``PR_SET_CHILD_SUBREAPER``), so a hook the CLI left running in the
background when it exited (Claude Code's ``async`` hooks) is waited for, counted, and done
before the next session starts. Rows: the medians, and each world's ratio to ``without`` in the
same run (target: within 1.15x).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tools import agents
from tools.bench._common import Report, Row, common_parser, emit, log, median, time_row, work_dir

__all__ = ["VARIANTS", "main", "run"]

TARGET: Final = 1.15
VARIANTS: Final = ("without", "hooks", "hooks + MCP")
INSTALL: Final = {"without": None, "hooks": ("--no-mcp",), "hooks + MCP": ()}
COMMAND: Final = "echo hello > greeting-7f3a.txt"
FIRST: Final = "Please write the greeting file."
LATER: Final = "Anything else to do? (turn {n})"
RUN_TIMEOUT_S: Final = 120
CLEARED: Final = ("ANTHROPIC_", "CLAUDE", "CONTINUITY_", "XDG_", "MCP_", "OPENAI_", "CODEX_")
"""The environment of the bench's own that must not reach a client (its keys, its session)."""
QUIET: Final = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
_PR_SET_CHILD_SUBREAPER: Final = 36


def become_subreaper() -> bool:
    """Make this process the parent of its descendants' orphans (Linux), so their CPU time is
    counted when they are waited for. False where it cannot (then a background hook that
    outlives its CLI is not counted)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def reap() -> None:
    """Wait for every child left (the orphaned hooks this subreaper adopted)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class World:
    """One agent's private world: ``HOME``, a project folder per session, a store."""

    agent: str
    exe: Path
    root: Path
    server_url: str
    variant: str
    env: dict[str, str] = field(init=False)
    sessions: int = 0

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            CONTINUITY_HOME=str(self.root / "store"),
        )
        if self.agent == "claude-code":
            env.update(QUIET, ANTHROPIC_BASE_URL=self.server_url, ANTHROPIC_API_KEY="sk-ant-none")
            settings = self.home / ".claude" / "settings.json"
            settings.parent.mkdir(parents=True)
            allow = {"permissions": {"allow": ["Bash"]}}
            settings.write_text(json.dumps(allow))
        else:
            from tests.support.model_openai_responses import MODEL

            codex_home = self.home / ".codex"
            codex_home.mkdir()
            env.update(CODEX_HOME=str(codex_home), OPENAI_API_KEY="sk-none")
            (codex_home / "config.toml").write_text(
                f'model = "{MODEL}"\nmodel_provider = "fake"\napproval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\n\n[model_providers.fake]\nname = "fake"\n'
                f'base_url = "{self.server_url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
                'wire_api = "responses"\n'
            )
        self.env = env
        extra = INSTALL[self.variant]
        if extra is not None:
            self._run([sys.executable, "-m", "continuity", "install", self.agent, *extra])

    @property
    def home(self) -> Path:
        return self.root / "home"

    def _run(self, argv: list[str], cwd: Path | None = None) -> None:
        done = subprocess.run(
            argv,
            cwd=cwd or self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{self.variant}: {argv[:4]} exited {done.returncode}: {done.stderr[-1500:]}"
            )

    def turn(self, n: int, project: Path) -> None:
        prompt = FIRST if n == 0 else LATER.format(n=n)
        if self.agent == "claude-code":
            more = [] if n == 0 else ["--continue"]
            argv = [str(self.exe), "-p", prompt, "--output-format", "stream-json", "--verbose"]
            self._run([*argv, *more], project)
        else:
            resume = [] if n == 0 else ["resume", "--last"]
            argv = [str(self.exe), "exec", "--skip-git-repo-check", *resume, prompt]
            self._run(argv, project)

    def session(self, turns: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds) of one session of ``turns`` runs in a new project."""
        self.sessions += 1
        project = self.root / f"project-{self.sessions}"
        project.mkdir()
        cpu = children_cpu()
        start = time.perf_counter()
        for n in range(turns):
            self.turn(n, project)
        wall = time.perf_counter() - start
        reap()
        return wall, children_cpu() - cpu


def _script(agent: str) -> Any:
    from tests.support.model_server import Reply, Rule, Script, ToolCall

    tool = (
        ToolCall("Bash", {"command": COMMAND, "description": "Write the file"})
        if agent == "claude-code"
        else ToolCall("exec_command", {"cmd": COMMAND})
    )
    return Script(
        [
            Rule(Reply(tool_calls=(tool,)), phrase=FIRST, after_tool=False, times=None),
            Rule(Reply(text="Wrote the greeting file."), after_tool=True, times=None),
            Rule(Reply(text="Nothing else."), after_tool=False, times=None),
        ]
    )


@contextlib.contextmanager
def _server(agent: str) -> Iterator[str]:
    from tests.support.model_server import ModelServer

    if agent == "codex":
        from tests.support.model_openai_responses import OpenAIResponses

        server = ModelServer(_script(agent), providers=[OpenAIResponses()])
    else:
        server = ModelServer(_script(agent))
    with server as running:
        yield running.url


def _measure(
    agent: str, exe: Path, work: Path, rounds: int, turns: int
) -> dict[str, tuple[list[float], list[float]]]:
    got: dict[str, tuple[list[float], list[float]]] = {v: ([], []) for v in VARIANTS}
    with _server(agent) as url:
        worlds = {
            v: World(agent, exe, work / agent / f"w{i}", url, v) for i, v in enumerate(VARIANTS)
        }
        for r in range(rounds + 1):  # round 0 warms up
            shift = r % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            for variant in order:
                wall, cpu = worlds[variant].session(turns)
                if r:
                    got[variant][0].append(wall)
                    got[variant][1].append(cpu)
            log(f"bench_agent_overhead: {agent} round {r}/{rounds} done")
    return got


def _rows(agent: str, got: dict[str, tuple[list[float], list[float]]]) -> list[Row]:
    rows: list[Row] = []
    for index, what in ((0, "wall"), (1, "CPU")):
        base = median(got["without"][index])
        for variant in VARIANTS:
            samples = got[variant][index]
            row = time_row(f"{agent}: session {what}, {variant}", samples, unit="s")
            if variant != "without":
                row.baseline, row.ratio = "without", median(samples) / base
                if index == 0:
                    row.target = TARGET * base
            rows.append(row)
    return rows


def available(names: list[str]) -> tuple[dict[str, Path], list[str]]:
    """The cached executables of ``names`` and a note for each one missing (no install here)."""
    found: dict[str, Path] = {}
    notes: list[str] = []
    for name in names:
        exe = agents.executable(agents.pin_of(name))
        if exe is None:
            notes.append(f"{name}: not in the cache (python -m tools.agents install {name})")
        else:
            found[name] = exe
    return found, notes


def run(
    rounds: int = 5, names: tuple[str, ...] = ("claude-code", "codex"), turns: int = 3
) -> Report:
    started = time.perf_counter()
    report = Report("bench_agent_overhead", {"rounds": rounds, "turns": turns})
    exes, report.notes = available(list(names))
    if not become_subreaper():
        report.notes.append("not a subreaper here: background hooks' CPU may be missed")
    with work_dir("agent-overhead") as work:
        for agent, exe in exes.items():
            report.rows.extend(_rows(agent, _measure(agent, exe, work, rounds, turns)))
    report.notes.append(
        f"a session: {turns} CLI runs (a shell command, then text turns); the worlds interleaved, "
        "order rotated each round, one warm-up round; CPU: the CLI, hooks and MCP server; "
        f"target: wall within {TARGET}x of without"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (one more warms up)")
    parser.add_argument("--turns", type=int, default=3, help="CLI runs in a session")
    parser.add_argument(
        "--agents", default="claude-code,codex", help="comma-separated: claude-code, codex"
    )
    args = parser.parse_args(argv)
    names = tuple(n for n in args.agents.split(",") if n)
    for name in names:
        if name not in ("claude-code", "codex"):
            parser.error(f"--agents: {name!r} is not claude-code or codex")
    emit([run(args.rounds, names, args.turns)], args.json)


if __name__ == "__main__":
    main()
