"""The MCP server (``continuity mcp``): start-up, ``search``, ``read`` and memory over many calls.

    python -m tools.bench.bench_mcp [--frames 100000] [--threads 10000] [--repeat 15]
        [--calls 2000] [--baseline REV] [--start-only] [--json]

* start: ``python -m continuity mcp`` as a fresh process until it answers ``initialize``, and
  until it answers ``tools/list`` after it (raw JSON-RPC over its stdin and stdout, no client
  library in the way), interleaved round by round with the same for the server of the tree at
  ``--baseline`` (default: the commit before ADR 0053, the SDK-based server; extracted once
  with ``git archive``) and a fresh ``python -c pass``. Target 300 ms quiet, 1 s under load
  (issue 44);
* first fused search: on a store whose model is all-MiniLM-L6-v2 (the dev extra's wheel; the
  store's vectors built ahead by ``continuity index``), a fresh server's first ``search`` sent
  right after the handshake and after a pause (an agent's first turn), against the next ones,
  for both trees (issue 44: "the first fused search is as fast as the next");
* ``search``: the tool's function in-process (what a call runs), p50 over a fixed set of
  queries, on the shared fixture sessions ingested by the real ingest (target 150 ms) and on a
  generated store of ``--threads`` threads (``tools/bench/gen_threads.py``; target 300 ms at
  10,000), after one untimed pass that builds the search caches as a first call would; and the
  same over stdio against a running server (the fixture store);
* ``read``: a page (the default 2,000 tokens) around a random seq of a ``--frames`` thread (the
  cached generated thread; the 1M case: ``--frames 1000000``), target 50 ms;
* memory: one server process answering ``--calls`` calls (searches and reads, alternating; the
  issue's figure is 10,000), its RSS after the first tenth and at the end (target: flat).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

from tools.bench._common import (
    BENCH_THREAD,
    Report,
    Row,
    bench_dir,
    cached_thread,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    short_size,
    time_row,
)

__all__ = ["main", "run"]

FIXTURES: Final = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "claude-code"
QUERIES: Final = (
    "error",
    "test failed",
    "import module",
    "config file",
    "database migration",
    "fix the bug",
    "README",
    "git commit",
    "timeout",
    "function returns None",
)
_INIT: Final = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench_mcp", "version": "0"},
    },
}


class RawServer:
    """``continuity mcp`` spoken to in raw JSON-RPC lines."""

    def __init__(
        self, store: Path, cwd: Path, *, tree: Path | None = None, project: str | None = None
    ) -> None:
        """``tree``: run ``python -m continuity`` from that folder (its ``continuity/``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
        command = [*continuity_command(), "mcp", "--store", str(store)]
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
            command = [sys.executable, "-m", "continuity", "mcp", "--store", str(store)]
        if project is not None:
            command += ["--project", project]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self.n = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        return self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("continuity mcp stopped answering")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise SystemExit(f"continuity mcp: {reply['error']}")
                return reply

    def initialize(self) -> None:
        self.send(_INIT)
        self.notify_initialized()

    def notify_initialized(self) -> None:
        assert self.proc.stdin is not None
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.proc.stdin.write(json.dumps(note).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": name, "arguments": args})
        result: dict[str, Any] = reply["result"]
        if result.get("isError"):
            raise SystemExit(f"{name} {args}: {result['content'][0]['text']}")
        return result

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


# --- stores ---------------------------------------------------------------------------------


def fixture_store() -> tuple[Path, str] | None:
    """The shared fixture sessions ingested once (None: the fixtures are not there), and the
    project that holds the most of them."""
    if not FIXTURES.is_dir():
        return None
    root = bench_dir() / "mcp-fixtures"
    if not (root / "store.json").is_file():
        log("bench_mcp: ingesting the fixture sessions")
        subprocess.run([*continuity_command(), "--store", str(root), "init"], check=True)
        subprocess.run(
            [*continuity_command(), "--store", str(root), "ingest", str(FIXTURES)],
            check=True,
            capture_output=True,
        )
    from continuity.caches.catalog import catalog_view
    from continuity.store.jsonl import Store

    store = Store(root)
    counts: dict[str, int] = {}
    for row in catalog_view(store).rows:
        if row.project:
            counts[row.project] = counts.get(row.project, 0) + row.messages
    store.close()
    return root, max(counts, key=lambda p: counts[p])


def threads_store(n: int, seed: int) -> tuple[Path, str]:
    """A generated store of ``n`` Claude-Code-like threads (made once), and one project."""
    from continuity.store.jsonl import Store
    from tools.bench.gen_threads import write_threads

    root = bench_dir() / f"mcp-threads-{n}-s{seed}"
    if not (root / "done").is_file():
        log(f"bench_mcp: generating {n:,} threads")
        store = Store(root, create=True, durable=False)
        write_threads(store, n, seed=seed)
        store.close()
        (root / "done").write_text("ok\n")
    return root, "/home/dev/continuity"


# --- measures -------------------------------------------------------------------------------


def _fresh(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=cwd)
    return time.perf_counter() - started


BASELINE_REV: Final = "8d549d4"
"""The tree before ADR 0053: ``continuity mcp`` on the official SDK."""
ROOT: Final = Path(__file__).resolve().parents[2]


def baseline_tree(rev: str) -> Path:
    """The package ``continuity/`` of ``rev`` (extracted once) as a folder to run it from."""
    root = bench_dir() / f"mcp-baseline-{rev}"
    if not (root / "continuity" / "__main__.py").is_file():
        root.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", rev, "continuity"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def _handshake(tree: Path, store: Path, project: str) -> tuple[float, float]:
    """Seconds from spawn until ``initialize`` is answered, and until ``tools/list`` is."""
    started = time.perf_counter()
    server = RawServer(store, tree, tree=tree, project=project)
    server.send(_INIT)
    answered = time.perf_counter() - started
    server.notify_initialized()
    server.request("tools/list", {})
    listed = time.perf_counter() - started
    server.close()
    return answered, listed


def _start(store: Path, project: str, repeat: int, baseline: Path) -> list[Row]:
    trees = {"this tree": ROOT, "baseline": baseline}
    init: dict[str, list[float]] = {name: [] for name in trees}
    listed: dict[str, list[float]] = {name: [] for name in trees}
    floors: list[float] = []
    for i in range(repeat):
        floors.append(_fresh([sys.executable, "-c", "pass"], store))
        order = list(trees) if i % 2 == 0 else list(reversed(trees))
        for name in order:
            a, b = _handshake(trees[name], store, project)
            init[name].append(a)
            listed[name].append(b)
    ours, base = median(init["this tree"]), median(init["baseline"])
    ours_list, base_list = median(listed["this tree"]), median(listed["baseline"])
    return [
        time_row("start until initialize is answered", init["this tree"], target=300.0),
        time_row("start until tools/list is answered", listed["this tree"], target=300.0),
        time_row("baseline (SDK): start until initialize", init["baseline"]),
        time_row("baseline (SDK): start until tools/list", listed["baseline"]),
        time_row("floor: python -c pass", floors),
        Row("initialize: this tree / baseline", ours / base, "x"),
        Row("tools/list: this tree / baseline", ours_list / base_list, "x"),
    ]


def fused_store() -> tuple[Path, str] | None:
    """The fixture sessions with all-MiniLM-L6-v2 as the store's model and its vectors built
    (made once); None without the fixtures or the model's wheel."""
    fixtures = fixture_store()
    if fixtures is None:
        return None
    from tools.bench.bench_encoder import default_model

    model = default_model()
    if model is None:
        return None
    root = bench_dir() / "mcp-fused"
    if not (root / "indexed").is_file():
        import shutil

        log("bench_mcp: copying the fixture store, building its MiniLM vectors")
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(fixtures[0], root)
        base = [*continuity_command(), "--store", str(root)]
        subprocess.run([*base, "model", "use", str(model)], check=True, capture_output=True)
        subprocess.run([*base, "index"], check=True, capture_output=True)
        (root / "indexed").write_text("ok\n")
    return root, fixtures[1]


def _first_search(tree: Path, store: Path, project: str, pause: float) -> tuple[float, float]:
    """A fresh server's first fused search (sent ``pause`` seconds after the handshake), and
    the median of the next three."""
    server = RawServer(store, tree, tree=tree, project=project)
    server.initialize()
    server.request("tools/list", {})
    time.sleep(pause)
    times = []
    for q in QUERIES[:4]:
        started = time.perf_counter()
        server.call("search", {"query": q, "scope": "all"})
        times.append(time.perf_counter() - started)
    server.close()
    return times[0], median(times[1:])


def _first_search_rows(store: Path, project: str, repeat: int, baseline: Path) -> list[Row]:
    trees = {"this tree": ROOT, "baseline": baseline}
    rows = []
    for pause in (0.0, 3.0):
        first: dict[str, list[float]] = {name: [] for name in trees}
        nxt: dict[str, list[float]] = {name: [] for name in trees}
        for i in range(repeat):
            for name in list(trees) if i % 2 == 0 else list(reversed(trees)):
                a, b = _first_search(trees[name], store, project, pause)
                first[name].append(a)
                nxt[name].append(b)
        when = "right after the handshake" if not pause else f"{pause:.0f} s after it"
        for name in trees:
            label = "" if name == "this tree" else "baseline (SDK): "
            rows.append(time_row(f"{label}first fused search, {when}", first[name]))
            rows.append(time_row(f"{label}next fused searches, {when}", nxt[name]))
            ratio = median(first[name]) / median(nxt[name])
            rows.append(Row(f"{label}first / next, {when}", ratio, "x"))
    return rows


def _timed_calls(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _search_rows(label: str, store: Path, project: str, target: float) -> list[Row]:
    from continuity.mcp_server.archive import Archive
    from continuity.mcp_server.tools import call_tool
    from continuity.store.jsonl import Store

    opened = Store(store, durable=False)
    archive = Archive(opened, project)
    for q in QUERIES:  # the first call's catch-up of the caches, untimed
        call_tool(archive, "search", {"query": q, "scope": "all"})
    rows = []
    for scope in ("project", "all"):
        samples: list[float] = []
        for q in QUERIES:
            args = {"query": q, "scope": scope}
            samples += _timed_calls(partial(call_tool, archive, "search", args), 3)
        rows.append(time_row(f"search ({scope}) on {label}", samples, target=target))
    opened.close()
    return rows


def _search_over_stdio(store: Path, project: str) -> Row:
    server = RawServer(store, Path(project) if Path(project).is_dir() else store)
    server.initialize()
    samples: list[float] = []
    for _ in range(3):
        for q in QUERIES:
            started = time.perf_counter()
            server.call("search", {"query": q, "scope": "all"})
            samples.append(time.perf_counter() - started)
    server.close()
    return time_row("search over stdio (all, fixtures)", samples, target=150.0)


def _read_rows(frames: int, repeat: int, seed: int) -> list[Row]:
    from continuity.mcp_server.archive import Archive
    from continuity.mcp_server.tools import call_tool
    from continuity.store.jsonl import Store

    store = Store(cached_thread(frames), durable=False)
    archive = Archive(store, "/nowhere")
    call_tool(archive, "read", {"thread": BENCH_THREAD})  # the caches brought up to date
    rng = random.Random(seed)
    around: list[float] = []
    latest: list[float] = []
    for _ in range(repeat):
        args: dict[str, Any] = {"thread": BENCH_THREAD, "seq": rng.randrange(frames)}
        around += _timed_calls(partial(call_tool, archive, "read", args), 1)
        latest += _timed_calls(lambda: call_tool(archive, "read", {"thread": BENCH_THREAD}), 1)
    store.close()
    n = short_size(frames)
    return [
        time_row(f"read a page around a seq at {n}", around, target=50.0),
        time_row(f"read the latest page at {n}", latest, target=50.0),
    ]


def _memory(store: Path, project: str, calls: int) -> list[Row]:
    server = RawServer(store, store)
    server.initialize()
    first = calls // 10
    at_first = 0.0
    for i in range(calls):
        q = QUERIES[i % len(QUERIES)]
        if i % 2:
            server.call("search", {"query": q, "scope": "all", "limit": 8})
        else:
            found = server.call("search", {"query": q, "scope": "all", "limit": 1})
            hits = found.get("structuredContent", {}).get("hits", [])
            if hits:
                server.call("read", {"thread": hits[0]["thread"], "seq": hits[0]["seq"]})
        if i + 1 == first:
            at_first = server.rss_mb()
    at_end = server.rss_mb()
    server.close()
    return [
        Row(f"server RSS after {first:,} calls", at_first, "MB"),
        Row(f"server RSS after {calls:,} calls", at_end, "MB"),
        Row("RSS growth, last 90% of the calls", at_end - at_first, "MB", target=10.0),
    ]


def run(
    *,
    frames: int = 100_000,
    threads: int = 10_000,
    repeat: int = 15,
    calls: int = 2_000,
    seed: int = 0,
    baseline: str = BASELINE_REV,
    start_only: bool = False,
) -> Report:
    rows: list[Row] = []
    notes: list[str] = [f"baseline: the tree at {baseline} (the SDK-based server)"]
    fixtures = fixture_store()
    base = baseline_tree(baseline)
    if fixtures is not None:
        start_store, project = fixtures
    else:
        from continuity.store.jsonl import Store

        start_store, project = bench_dir() / "mcp-empty", "/nowhere"
        Store(start_store, create=True).close()
    log("bench_mcp: start-up, paired with the baseline")
    rows += _start(start_store, project, repeat, base)
    fused = fused_store()
    if fused is not None:
        log("bench_mcp: first fused search against the next, paired with the baseline")
        rows += _first_search_rows(fused[0], fused[1], max(3, repeat // 3), base)
    else:
        notes.append("no fixtures or no MiniLM wheel (dev extra): no first-fused-search rows")
    params = {"frames": frames, "threads": threads, "repeat": repeat, "calls": calls}
    if start_only:
        return Report("bench_mcp", params, rows, notes)
    gen, gen_project = threads_store(threads, seed)
    if fixtures is not None:
        log("bench_mcp: search on the fixture sessions")
        rows += _search_rows("fixtures", fixtures[0], fixtures[1], 150.0)
        rows.append(_search_over_stdio(fixtures[0], fixtures[1]))
    else:
        notes.append(f"the shared fixtures are not at {FIXTURES}: no fixture rows")
    log(f"bench_mcp: search on {threads:,} threads")
    rows += _search_rows(f"{short_size(threads)} threads", gen, gen_project, 300.0)
    log(f"bench_mcp: read at {short_size(frames)} frames")
    rows += _read_rows(frames, max(repeat, 30), seed)
    log(f"bench_mcp: memory over {calls:,} calls")
    rows += _memory(fixtures[0] if fixtures else gen, "", calls)
    return Report("bench_mcp", params, rows, notes)


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--frames", type=int, default=100_000, help="the read thread's size")
    parser.add_argument("--threads", type=int, default=10_000, help="the generated store's size")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2_000, help="calls for the memory figure")
    parser.add_argument(
        "--baseline", default=BASELINE_REV, help="the git revision whose server is the baseline"
    )
    parser.add_argument(
        "--start-only", action="store_true", help="start-up and first fused search only"
    )
    args = parser.parse_args(argv)
    report = run(
        frames=args.frames,
        threads=args.threads,
        repeat=args.repeat,
        calls=args.calls,
        seed=args.seed,
        baseline=args.baseline,
        start_only=args.start_only,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
