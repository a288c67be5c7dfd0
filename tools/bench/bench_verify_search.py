"""``continuity verify`` of a large thread with its search index, against without it (issue 26).

    python -m tools.bench.bench_verify_search [--frames 1000000] [--repeat 3] [--json]

The cached generated thread (``_common.cached_thread``) is copied twice into a scratch folder:
once with every cache and its search index (built by one ``search --thread``), once without
``cache/search``. ``continuity verify --jobs 1`` runs as a fresh process on each, interleaved
(the order flips every round), after one untimed run of each. Target: with the index within 2x
of without (verify checks the index's checksums and structure; it used to tokenize the whole
log again to compare).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.bench._common import (
    BENCH_THREAD,
    Launcher,
    Report,
    cached_thread,
    common_parser,
    continuity_command,
    emit,
    log,
    short_size,
    time_row,
    work_dir,
)

__all__ = ["main", "run"]

TARGET_RATIO: float = 2.0


def run(frames: int = 1_000_000, repeat: int = 3, seed: int = 0) -> Report:
    report = Report("verify_search", {"frames": frames, "repeat": repeat, "seed": seed})
    source = cached_thread(frames, seed)
    cli = continuity_command()
    launcher = Launcher()
    try:
        with work_dir("verify-search") as work:
            indexed, plain = work / "indexed", work / "plain"
            shutil.copytree(source, indexed)
            log(f"building the search index of {short_size(frames)} frames")
            launcher.run(
                [*cli, "--store", str(indexed), "search", "deploy", "--thread", BENCH_THREAD]
            )
            shutil.copytree(indexed, plain, ignore=_no_search)
            times: dict[Path, list[float]] = {indexed: [], plain: []}
            for round_ in range(repeat + 1):
                order = [indexed, plain] if round_ % 2 else [plain, indexed]
                for store in order:
                    argv = [*cli, "--store", str(store), "verify", "--jobs", "1"]
                    seconds, _ = launcher.run(argv)
                    if round_:  # the first round warms the page cache
                        times[store].append(seconds)
    finally:
        launcher.close()
    without = time_row(f"verify @{short_size(frames)}, no search index", times[plain], "s")
    with_index = time_row(
        f"verify @{short_size(frames)}, with its search index",
        times[indexed],
        "s",
        target=without.median * TARGET_RATIO,
        baseline="verify without cache/search",
    )
    with_index.ratio = with_index.median / without.median
    report.rows += [without, with_index]
    return report


def _no_search(folder: str, names: list[str]) -> set[str]:
    return {"search", "search-store"} & set(names) if Path(folder).name == "cache" else set()


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    emit([run(args.frames, args.repeat, args.seed)], args.json)


if __name__ == "__main__":
    main()
