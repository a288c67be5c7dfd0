"""The fresh-process timings users wait for, this tree against another revision, in one run.

    python -m tools.bench.bench_versions [--baseline REV] [--frames N] [--transcript-mb M]
                                         [--repeat R] [--json]

A change that moves code around (or any change) must not make a process slower. This runs the
same commands from two source trees, round after round, the two interleaved (the order flips
every round), on the same data, so the machine's drift hits both alike:

* ``before``: ``--baseline`` (a git revision, default ``HEAD``), extracted with ``git archive``
  into the scratch folder;
* ``after``: this working tree, uncommitted changes included.

Both run through the same installed ``continuity`` script; ``PYTHONPATH`` picks the tree (each
is checked to import its own code). The commands, each a fresh process:

* ``continuity hook user-prompt-submit`` after one new turn (~3 KB) of a ``--transcript-mb``
  transcript built from ``../shared/fixtures`` (skipped without them), ingested first in full;
* ``continuity hook session-start`` with source ``compact`` after a new turn, a pre-compact
  (untimed) and Claude's compaction: the restore;
* ``continuity compile --dry-run`` and ``continuity search`` on a ``--frames`` generated thread
  (its caches and search index built first, untimed; each tree compiles and searches its own
  copy of the store, its caches and index built by that tree in the warm-up round, so two
  versions with different cache formats do not rebuild each other's);
* ``python -c pass``, the interpreter's own start.

The ``after`` rows give ``after / before`` as their ratio; below 1 is faster. Bytecode is
cached as users have it, and every command runs once per tree before timing.
"""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.caches.thread_index import ThreadIndex
from continuity.store.jsonl import Store
from tools.bench._common import (
    BENCH_THREAD,
    Report,
    cached_thread,
    common_parser,
    continuity_command,
    copy_store,
    emit,
    log,
    median,
    short_size,
    time_row,
    work_dir,
)
from tools.bench.bench_hooks import (
    FIXTURES,
    Session,
    cached_transcript,
    child_env,
    run_process,
)
from tools.bench.bench_search import QUERIES

__all__ = [
    "added_by",
    "baseline_trees",
    "check_tree",
    "extract_revision",
    "main",
    "run",
    "tree_env",
]

ROOT: Final = Path(__file__).resolve().parents[2]
VARIANTS: Final = ("before", "after")
SEARCH_QUERY: Final = dict(QUERIES)["command"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def extract_revision(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (``git archive``) extracted into ``into``."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_versions: git archive {rev}: {done.stderr.decode().strip()}")
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(into, filter="data")
    if not (into / "continuity" / "__init__.py").is_file():
        raise SystemExit(f"bench_versions: {rev} has no continuity package")
    return into


def tree_env(tree: Path, store: Path | None = None) -> dict[str, str]:
    """A child's environment that imports continuity from ``tree``."""
    env = child_env(store)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def check_tree(tree: Path, cwd: Path) -> None:
    """Refuse to measure unless a child given :func:`tree_env` imports ``tree``'s continuity."""
    # From a folder without a continuity package: `python -c` puts the current one first.
    probe = [sys.executable, "-c", "import continuity; print(continuity.__file__)"]
    _, out = run_process(probe, tree_env(tree), cwd=cwd)
    where = Path(out.decode().strip()).resolve()
    if where.parent != (tree / "continuity").resolve():
        raise SystemExit(f"bench: PYTHONPATH={tree} imports {where}")


def added_by(path: str) -> str | None:
    """The commit that added ``path`` to the repository, following renames (a module moved
    into a package is still the one it added); None when git cannot say."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--follow", "--format=%H", "--diff-filter=A", "--", path],
        capture_output=True,
        text=True,
        check=False,
    )
    found = done.stdout.split()
    return found[-1] if done.returncode == 0 and found else None


@contextmanager
def baseline_trees(name: str, baseline: str | None) -> Iterator[tuple[Path, dict[str, Path]]]:
    """A scratch folder and the trees to measure in it: ``after`` (this one) and, given a
    ``baseline`` revision, ``before`` (extracted there); each checked to import itself."""
    with work_dir(name) as work:
        trees: dict[str, Path] = {"after": ROOT}
        if baseline:
            trees["before"] = extract_revision(baseline, work / "before")
        for tree in trees.values():
            check_tree(tree, work)
        yield work, trees


class _Commands:
    """The timed commands, each a callable of (variant) -> seconds (setup untimed)."""

    def __init__(
        self,
        trees: dict[str, Path],
        stores: dict[str, Store],
        sessions: dict[str, Session],
    ):
        self.trees = trees
        # Each tree has its own copy of the store and of the session: two versions whose cache
        # or index formats differ would otherwise rebuild each other's on every alternate run.
        self.stores = stores
        self.sessions = sessions
        self.cli = continuity_command()
        self.last = (0.0, 0.0)
        """The wall and CPU seconds of the last command's timed process."""

    def all(self, frames: int, mb: int) -> dict[str, Callable[[str], float]]:
        found: dict[str, Callable[[str], float]] = {}
        if self.sessions:
            found[f"hook user-prompt-submit, one new turn, {mb} MB"] = self.prompt
            found[f"hook session-start (compact) after a compaction, {mb} MB"] = self.restore
            found[f"hook post-tool-use, one new tool call, {mb} MB"] = self.post_tool_use
            found[f"hook stop, nothing new, {mb} MB"] = self.stop
            found[f"hook session-end, one new turn, {mb} MB"] = self.session_end
        if self.stores:
            size = short_size(frames)
            found[f"continuity compile --dry-run @{size}"] = self.compile
            found[f"continuity search (command) @{size}"] = self.search
        return found

    def _timed(self, argv: list[str], env: dict[str, str], stdin: bytes = b"") -> bytes:
        """Run one fresh process; its wall and CPU time (user + system, from the rusage of
        the children waited for: one at a time here) go to :attr:`last`."""
        cpu = _children_cpu()
        seconds, out = run_process(argv, env, stdin)
        self.last = (seconds, _children_cpu() - cpu)
        return out

    def prompt(self, variant: str) -> float:
        s = self.sessions[variant]
        prompt = s.add_turn()
        env = tree_env(self.trees[variant], s.store)
        payload = s.payload("user-prompt-submit", prompt=prompt)
        out = self._timed([*self.cli, "hook", "user-prompt-submit"], env, payload)
        if out:
            raise RuntimeError(f"user-prompt-submit printed {out[:200]!r}")
        return self.last[0]

    def post_tool_use(self, variant: str) -> float:
        s = self.sessions[variant]
        fields = s.add_tool_call()
        env = tree_env(self.trees[variant], s.store)
        payload = s.payload("post-tool-use", **fields)
        self._timed([*self.cli, "hook", "post-tool-use"], env, payload)
        return self.last[0]

    def stop(self, variant: str) -> float:
        """Stop after the hook before it archived everything: the unchanged transcript's
        quick answer (where the tree has one)."""
        s = self.sessions[variant]
        env = tree_env(self.trees[variant], s.store)
        payload = s.payload("stop", stop_hook_active=False)
        self._timed([*self.cli, "hook", "stop"], env, payload)
        return self.last[0]

    def session_end(self, variant: str) -> float:
        s = self.sessions[variant]
        s.add_turn()
        env = tree_env(self.trees[variant], s.store)
        payload = s.payload("session-end", reason="other")
        self._timed([*self.cli, "hook", "session-end"], env, payload)
        return self.last[0]

    def restore(self, variant: str) -> float:
        s = self.sessions[variant]
        env = tree_env(self.trees[variant], s.store)
        s.add_turn()
        pre = s.payload("pre-compact", trigger="auto", custom_instructions=None)
        run_process([*self.cli, "hook", "pre-compact"], env, pre)
        s.add_compaction()
        start = s.payload("session-start", source="compact")
        out = self._timed([*self.cli, "hook", "session-start"], env, start)
        if b"additionalContext" not in out:
            raise RuntimeError(f"session-start restored nothing: {out[:200]!r}")
        return self.last[0]

    def _store_cli(self, variant: str, *args: str) -> float:
        store = self.stores[variant]
        argv = [*self.cli, "--store", str(store.root), *args]
        cpu = _children_cpu()
        seconds, _ = run_process(argv, tree_env(self.trees[variant]), stderr_ok=True)  # its report
        self.last = (seconds, _children_cpu() - cpu)
        return seconds

    def compile(self, variant: str) -> float:
        args = ("compile", BENCH_THREAD, "--recent", "16", "--keep-tool-outputs", "3")
        return self._store_cli(variant, *args, "--dry-run")

    def search(self, variant: str) -> float:
        return self._store_cli(variant, "search", SEARCH_QUERY)


def run(
    baseline: str = "HEAD",
    frames: int = 1_000_000,
    transcript_mb: int = 3,
    repeat: int = 15,
    seed: int = 0,
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_versions",
        {
            "baseline": baseline,
            "frames": short_size(frames),
            "transcript": f"{transcript_mb}MB",
            "repeat": repeat,
        },
    )
    with work_dir("versions") as work:
        trees = {"before": extract_revision(baseline, work / "before"), "after": ROOT}
        for tree in trees.values():
            check_tree(tree, work)
        cached = cached_thread(frames, seed)
        ThreadIndex(Store(cached, durable=False).thread(BENCH_THREAD)).refresh()
        log(f"bench_versions: copying the {short_size(frames)} store, one copy a tree")
        # each tree's caches and search index are made by that tree in the warm-up round
        stores = {v: copy_store(cached, work / f"store-{v}", search_index=False) for v in trees}
        sessions: dict[str, Session] = {}
        if FIXTURES.is_dir():
            log(f"bench_versions: first ingest of the {transcript_mb} MB transcript (untimed)")
            for v in trees:  # the same seed: both sessions get the same turns
                sessions[v] = Session(cached_transcript(transcript_mb), work / f"session-{v}", seed)
                ingest_transcript(
                    Store(sessions[v].store, create=True), sessions[v].path, final=True
                )
        else:
            report.notes.append(f"no fixtures at {FIXTURES}: the hooks were not measured")
        timed = _Commands(trees, stores, sessions)
        commands = timed.all(frames, transcript_mb)
        plain = [sys.executable, "-c", "pass"]
        samples: dict[tuple[str, str], list[float]] = {
            (name, v): [] for name in commands for v in VARIANTS
        }
        cpu: dict[tuple[str, str], list[float]] = {k: [] for k in samples}
        interpreter: list[float] = []
        log(f"bench_versions: {repeat} rounds of {len(commands)} commands × {len(VARIANTS)} trees")
        for i in range(repeat + 1):  # the first round warms up (bytecode, page cache)
            order = VARIANTS if i % 2 else tuple(reversed(VARIANTS))
            seconds, _ = run_process(plain, child_env())
            if i:
                interpreter.append(seconds)
            for name, command in commands.items():
                for variant in order:
                    seconds = command(variant)
                    if i:
                        samples[(name, variant)].append(seconds)
                        cpu[(name, variant)].append(timed.last[1])
    base = median(interpreter)
    report.rows.append(time_row("python -c pass", interpreter))
    for name in commands:
        before = samples[(name, "before")]
        after = samples[(name, "after")]
        row = time_row(f"{name} (before)", before)
        row.baseline, row.ratio = "python -c pass", median(before) / base
        report.rows.append(row)
        row = time_row(f"{name} (after)", after)
        row.baseline, row.ratio = "before", median(after) / median(before)
        report.rows.append(row)
        before, after = cpu[(name, "before")], cpu[(name, "after")]
        report.rows.append(time_row(f"{name}, CPU (before)", before))
        row = time_row(f"{name}, CPU (after)", after)
        row.baseline, row.ratio = "before", median(after) / max(median(before), 1e-9)
        report.rows.append(row)
    report.notes.append(
        f"before: {baseline} (git archive); after: the working tree {ROOT}; the two interleaved, "
        "order flipped every round; bytecode cached; page cache warm"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="HEAD", help="the git revision to compare with")
    parser.add_argument("--frames", type=int, default=1_000_000, help="the generated thread")
    parser.add_argument("--transcript-mb", type=int, default=3, help="the hooks' transcript")
    parser.add_argument("--repeat", type=int, default=15, help="timed rounds")
    args = parser.parse_args(argv)
    emit(
        [
            run(
                baseline=args.baseline,
                frames=args.frames,
                transcript_mb=args.transcript_mb,
                repeat=args.repeat,
                seed=args.seed,
            )
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
