"""The web viewer (``continuity serve``): its pages at 10k and 1M frames, in-process and over HTTP.

    python -m tools.bench.bench_serve [--sizes 10000,1000000] [--repeat 30] [--http-repeat 15]
        [--json]

The threads are the cached generated ones (a checkpoint about every 200 messages). The viewer
only reads, so they are served as they are (their ``cache/`` folder is brought up to date once,
untimed, as any first reader would).

* in-process: Starlette's ``TestClient`` calls the app (the whole request: routing, the store's
  reads, the templates, the response), ``--repeat`` times per page, the sizes interleaved round
  by round. Pages: the thread's first view (its latest page), its start (``?start=0``), a page
  in the middle (``?seq=``), the same page as JSON, the hierarchy (every checkpoint), the
  decisions (none in a generated thread: the bounded backwards scan costs its whole length), a
  compile-here dry run, and the threads list. Row ``1M/10k`` is the ratio of the first view's
  medians (target: flat); the target for the first view at 1M is 100 ms p50;
* over HTTP: ``continuity serve --port 0`` as a fresh process (time until it answers, the
  baseline ``continuity --help``) and the first view fetched through a real socket
  (``--http-repeat`` times, after one warm-up).
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Final

from tools.bench._common import (
    BENCH_THREAD,
    Report,
    Row,
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

_URL: Final = re.compile(rb"(http://\S+)")


def _pages(head: int) -> dict[str, str]:
    t = f"/t/{BENCH_THREAD}"
    return {
        "first view (latest page)": t,
        "start (?start=0)": f"{t}?start=0",
        "middle (?seq=head/2)": f"{t}?seq={head // 2}",
        "latest page as JSON": f"/api{t}",
        "hierarchy": f"{t}/hierarchy",
        "decisions": f"{t}/decisions",
        "compile here (dry run)": f"{t}/compile",
        "threads list": "/",
    }


def _in_process(sizes: list[int], repeat: int) -> tuple[list[Row], dict[int, float]]:
    from starlette.testclient import TestClient

    from continuity.store.jsonl import Store
    from continuity.viewer.app import create_app

    clients: dict[int, tuple[TestClient, dict[str, str]]] = {}
    for n in sizes:
        store = Store(cached_thread(n), durable=False)
        client = TestClient(create_app(store, token=None))
        head = store.thread(BENCH_THREAD).head()
        assert head is not None
        pages = _pages(head.seq)
        for path in pages.values():  # bring the caches up to date; check every page answers
            response = client.get(path)
            if response.status_code != 200:
                raise SystemExit(f"{path} at {n} frames: {response.status_code} {response.text}")
        clients[n] = (client, pages)
    samples: dict[tuple[int, str], list[float]] = {}
    for _ in range(repeat):
        for n, (client, pages) in clients.items():
            for name, path in pages.items():
                started = time.perf_counter()
                response = client.get(path)
                samples.setdefault((n, name), []).append(time.perf_counter() - started)
                assert response.status_code == 200
    rows = [
        time_row(
            f"{name} at {short_size(n)}",
            values,
            target=100.0 if name.startswith("first") and n >= 1_000_000 else None,
        )
        for (n, name), values in samples.items()
    ]
    firsts = {n: median(samples[(n, "first view (latest page)")]) for n in sizes}
    return rows, firsts


def _serve(store: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*continuity_command(), "--store", str(store), "serve", "--port", "0", "--no-token"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = _URL.search(line)
    if found is None:
        proc.kill()
        raise SystemExit(f"continuity serve printed {line!r}")
    url = found.group(1).decode()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
            break
        except OSError:
            time.sleep(0.01)
    return proc, url, time.perf_counter() - started


def _fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
    return time.perf_counter() - started


def _over_http(size: int, repeat: int) -> list[Row]:
    store = cached_thread(size)
    startups: list[float] = []
    helps: list[float] = []
    firsts: list[float] = []
    for _ in range(max(3, repeat // 5)):
        started = time.perf_counter()
        subprocess.run([*continuity_command(), "--help"], check=True, capture_output=True)
        helps.append(time.perf_counter() - started)
        proc, url, took = _serve(store)
        startups.append(took)
        try:
            page = url + f"t/{BENCH_THREAD}"
            _fetch(page)  # warm-up
            firsts.extend(_fetch(page) for _ in range(max(1, repeat // max(3, repeat // 5))))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    n = short_size(size)
    return [
        time_row(f"serve: start until it answers (at {n})", startups),
        time_row("baseline: continuity --help", helps),
        time_row(f"first view over HTTP at {n}", firsts, target=100.0),
    ]


def run(*, sizes: list[int], repeat: int = 30, http_repeat: int = 15) -> Report:
    log(f"bench_serve: in-process pages at {', '.join(short_size(n) for n in sizes)}")
    rows, firsts = _in_process(sizes, repeat)
    if len(sizes) > 1:
        lo, hi = min(sizes), max(sizes)
        rows.append(
            Row(f"first view {short_size(hi)}/{short_size(lo)}", firsts[hi] / firsts[lo], "x")
        )
    log("bench_serve: over HTTP")
    rows += _over_http(max(sizes), http_repeat)
    return Report(
        "bench_serve", {"sizes": sizes, "repeat": repeat, "http_repeat": http_repeat}, rows
    )


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__ or "", sizes=(10_000, 1_000_000))
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--http-repeat", type=int, default=15)
    args = parser.parse_args(argv)
    sizes = list(args.sizes)
    emit([run(sizes=sizes, repeat=args.repeat, http_repeat=args.http_repeat)], args.json)


if __name__ == "__main__":
    main()
