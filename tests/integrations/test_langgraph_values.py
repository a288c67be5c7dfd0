"""Channel values stored as deltas against a durable base (ADR 0059): a growing conversation
costs an artifact now and then, not one per put, every checkpoint reads back what was put (in
another saver, with nothing in memory), and a writer killed at any moment leaves no record
whose base is missing."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

import continuity.integrations._langgraph_log as lg
from continuity import Store
from continuity.context.records import records
from continuity.integrations._langgraph_values import DELTA
from continuity.integrations.langgraph import ContinuitySaver
from tests.integrations.test_langgraph_graphs import config, texts, tool_graph


def _turns(saver: object, n: int) -> None:
    graph = tool_graph(saver)
    for i in range(n):
        graph.invoke({"messages": [HumanMessage(f"what is 2 + {i}?", id=f"h{i}")]}, config("t"))


def _entries(saver: ContinuitySaver) -> list[list[object]]:
    """The messages channel's entry of every checkpoint record of thread t, newest first."""
    return [
        rec.data["blobs"]["messages"]
        for rec in records(saver.store.thread("t"), lg.CHECKPOINT)
        if "messages" in rec.data["blobs"]
    ]


class _Recording(ContinuitySaver):
    """A saver that keeps a copy of the values of every checkpoint it was given."""

    given: dict[str, Any]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.given[checkpoint["id"]] = copy.deepcopy(checkpoint["channel_values"])
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_growing_conversation_is_stored_as_deltas_and_reads_back_whole(tmp_path: Path) -> None:
    ours = _Recording(Store(tmp_path / "s", create=True))
    ours.given = {}
    _turns(ours, 12)
    entries = _entries(ours)
    deltas = [e for e in entries if len(e) > 3 and str(e[2]).startswith(DELTA)]
    bases = [e for e in entries if len(e) == 3]
    assert bases, "the first large value is an artifact"
    assert len(deltas) > 3 * len(bases), (len(deltas), len(bases))
    ours.close()
    # another saver, nothing in memory: every checkpoint, listed and by id, as it was put
    again = ContinuitySaver(Store(tmp_path / "s"))
    listed = list(again.list(config("t")))
    assert len(listed) == len(ours.given) >= 12 * 4
    for tup in listed:
        want = ours.given[tup.checkpoint["id"]]
        assert tup.checkpoint["channel_values"] == want
        by_id = again.get_tuple(tup.config)
        assert by_id is not None
        assert by_id.checkpoint["channel_values"] == want


def test_a_base_gone_from_the_store_is_an_error_not_a_wrong_value(tmp_path: Path) -> None:
    saver = ContinuitySaver(Store(tmp_path / "s", create=True))
    _turns(saver, 4)
    entry = next(e for e in _entries(saver) if str(e[2]).startswith(DELTA))
    saver.close()
    aid = str(entry[2])[len(DELTA) :]
    store = Store(tmp_path / "s")
    assert store.artifacts.delete(aid)
    again = ContinuitySaver(store)
    try:
        list(again.list(config("t")))
    except Exception as exc:  # the store's own error for a missing artifact
        assert aid in str(exc)
    else:
        raise AssertionError("a delta without its base was read")


_WRITER = textwrap.dedent(
    """
    import sys
    from langchain_core.messages import HumanMessage
    from continuity import Store
    from continuity.integrations.langgraph import ContinuitySaver
    from tests.integrations.test_langgraph_graphs import config, tool_graph

    graph = tool_graph(ContinuitySaver(Store(sys.argv[1], create=True)))
    i = 0
    while True:
        graph.invoke({"messages": [HumanMessage(f"2 + {i}?", id=f"h{i}")]}, config("t"))
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.slow
def test_a_writer_killed_at_any_moment_leaves_every_checkpoint_readable(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for n, wait in enumerate((0.0, 0.017, 0.041)):
        folder = tmp_path / f"s{n}"
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(folder)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        try:
            assert proc.stdout is not None
            for _ in range(3 + n):  # some turns done, so deltas and bases are being written
                assert proc.stdout.readline(), "the writer died"
            time.sleep(wait)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        saver = ContinuitySaver(Store(folder))
        tuples = list(saver.list(config("t")))
        assert len(tuples) >= 3
        for tup in tuples:  # every value loads: no record names a base that is not there
            again = saver.get_tuple(tup.config)
            assert again is not None
            assert isinstance(again.checkpoint["channel_values"].get("messages", []), list)
        saver.close()


# --- a put answered from what the saver wrote itself (ADR 0059) ------------------------------


def _put(saver: ContinuitySaver, parent: str | None, cid: str, texts_: list[str]) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = cid
    checkpoint["channel_values"] = {
        "messages": [HumanMessage(t, id=f"m-{t}") for t in texts_],
    }
    checkpoint["channel_versions"] = {"messages": f"{cid}.v"}
    configurable: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    saver.put({"configurable": configurable}, checkpoint, {"step": 0}, {"messages": f"{cid}.v"})


def _shown(saver: ContinuitySaver) -> list[str]:
    return [text for _id, text in texts(saver, "t")]


@pytest.mark.parametrize("other_kind", ["saver", pytest.param("process", marks=pytest.mark.slow)])
def test_a_write_by_another_writer_is_seen_by_the_next_put(tmp_path: Path, other_kind: str) -> None:
    """Saver A knows the thread as its own puts left it; another writer then puts a branch.
    A's next put (a branch from A's checkpoint) must see that write, as a saver that knows
    nothing does: the other branch is kept as a fork and the thread shows A's branch."""
    folder = tmp_path / "s"
    a = ContinuitySaver(Store(folder, create=True))
    _put(a, None, "c1", ["one"])
    _put(a, "c1", "c2", ["one", "two"])
    if other_kind == "saver":
        _put(ContinuitySaver(Store(folder)), "c2", "c3", ["one", "two", "three"])
    else:
        code = (
            "import sys; from tests.integrations.test_langgraph_values import _put;"
            "from continuity import Store;"
            "from continuity.integrations.langgraph import ContinuitySaver;"
            "_put(ContinuitySaver(Store(sys.argv[1])), 'c2', 'c3', ['one', 'two', 'three'])"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        root = Path(__file__).resolve().parents[2]
        subprocess.run([sys.executable, "-c", code, str(folder)], check=True, env=env, cwd=root)
    _put(a, "c2", "c4", ["one", "two", "four"])  # a branch from c2, beside c3
    # the reference: one saver that knows nothing, the same puts
    ref = ContinuitySaver(Store(tmp_path / "ref", create=True))
    for parent, cid, says in [
        (None, "c1", ["one"]),
        ("c1", "c2", ["one", "two"]),
        ("c2", "c3", ["one", "two", "three"]),
        ("c2", "c4", ["one", "two", "four"]),
    ]:
        _put(ContinuitySaver(ref.store), parent, cid, says)
    assert _shown(a) == _shown(ref) == ["one", "two", "four"]
    forks = [t for t in a.store.threads() if t != "t"]
    assert len(forks) == 1
    assert _shown_thread(a, forks[0]) == ["one", "two", "three"]
    tup = a.get_tuple(config("t"))
    assert tup is not None and tup.checkpoint["id"] == "c4"
    assert [m.content for m in tup.checkpoint["channel_values"]["messages"]] == [
        "one",
        "two",
        "four",
    ]


def _shown_thread(saver: ContinuitySaver, thread_id: str) -> list[str]:
    return [text for _id, text in texts(saver, thread_id)]
