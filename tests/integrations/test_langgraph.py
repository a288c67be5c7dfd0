"""The LangGraph checkpoint saver: LangGraph's own conformance suite on both stores, reopening,
caches deleted, bad input (ADR 0023). Graph runs and the message mirror are in
``test_langgraph_graphs.py``."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver

from continuity import MemoryStore, Store
from continuity.integrations.langgraph import ContinuitySaver


@pytest.fixture(params=["jsonl", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuitySaver]:
    if request.param == "jsonl":
        yield ContinuitySaver(Store(tmp_path / "store", create=True, durable=False))
    else:
        yield ContinuitySaver(MemoryStore())


# --- LangGraph's conformance suite ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_conformance_suite_passes_every_capability(kind: str, tmp_path: Path) -> None:
    folders = iter(range(100))

    async def factory() -> AsyncGenerator[BaseCheckpointSaver[Any], None]:
        if kind == "jsonl":
            store: Any = Store(tmp_path / f"s{next(folders)}", create=True, durable=False)
        else:
            store = MemoryStore()
        yield ContinuitySaver(store)

    registered = checkpointer_test(name=f"ContinuitySaver[{kind}]")(factory)
    report = asyncio.run(validate(registered))
    results = report.to_dict()["results"]
    # every capability is detected (none skipped for want of a method) and passes
    assert set(results) == {c.value for c in ALL_CAPABILITIES}
    for name, result in results.items():
        assert result["detected"], name
        assert result["passed"] is True, (name, result["failures"])
        assert result["tests_failed"] == 0 and result["tests_passed"] > 0
    assert report.conformance_level() == "FULL"


# --- the log is the truth: reopen, delete caches ----------------------------------------------


def _fill(saver: ContinuitySaver, thread_id: str, n: int) -> list[str]:
    ids: list[str] = []
    parent: RunnableConfig | None = None
    for i in range(n):
        config = generate_config(thread_id)
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        cp = generate_checkpoint(channel_values={"step": i, "same": "x"})
        cp["channel_versions"] = {"step": i + 1, "same": 1}
        new: ChannelVersions = {"step": i + 1, "same": 1} if i == 0 else {"step": i + 1}
        parent = saver.put(config, cp, generate_metadata(step=i), new)
        saver.put_writes(parent, [("ch", f"w{i}")], f"task-{i}")
        ids.append(cp["id"])
    return ids


def _answers(saver: ContinuitySaver, thread_id: str, ids: list[str]) -> list[Any]:
    latest = saver.get_tuple(generate_config(thread_id))
    assert latest is not None
    by_id = [saver.get_tuple(generate_config(thread_id, checkpoint_id=i)) for i in ids]
    listed = list(saver.list(generate_config(thread_id), limit=3))
    return [
        (latest.checkpoint["id"], latest.checkpoint["channel_values"], latest.pending_writes),
        [(t.checkpoint["channel_values"], t.metadata["step"]) for t in by_id if t],
        [t.checkpoint["id"] for t in listed],
    ]


def test_reopening_the_store_and_deleting_its_caches_give_the_same_answers(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    first = ContinuitySaver(Store(root, create=True))
    ids = _fill(first, "t-1", 12)
    before = _answers(first, "t-1", ids)
    assert before[0][1] == {"step": 11, "same": "x"}
    assert before[0][2] == [("task-11", "ch", "w11")]
    assert before[2] == ids[::-1][:3]

    again = ContinuitySaver(root)  # a path: the store is opened, a new object
    assert _answers(again, "t-1", ids) == before
    shutil.rmtree(root / "cache")
    assert _answers(ContinuitySaver(Store(root)), "t-1", ids) == before


def test_unchanged_channels_are_stored_once(saver: ContinuitySaver) -> None:
    _fill(saver, "t-1", 5)
    # "same" is stored at put 0 only; "step" once per put; the values are content-addressed
    stored = list(saver.store.artifacts.ids())
    blobs = {saver.store.artifacts.get(a) for a in stored}
    assert len([b for b in blobs if b.endswith(b"x")]) <= 1


def test_a_new_process_reads_what_another_wrote(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "store"
    ids = _fill(ContinuitySaver(Store(root, create=True)), "t-1", 3)
    code = (
        "import sys; from continuity.integrations.langgraph import ContinuitySaver\n"
        "s = ContinuitySaver(sys.argv[1])\n"
        "t = s.get_tuple({'configurable': {'thread_id': 't-1', 'checkpoint_ns': ''}})\n"
        "print(t.checkpoint['id'], t.checkpoint['channel_values']['step'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [ids[-1], "2"]


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [{}, {"configurable": {}}, {"configurable": {"x": 1}}])
def test_a_config_without_thread_id_is_a_clear_error(
    saver: ContinuitySaver, config: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple(config)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thread_id"):
        saver.put(config, generate_checkpoint(), generate_metadata(), {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thread_id"):
        list(saver.list(config))  # type: ignore[arg-type]
    with pytest.raises((KeyError, ValueError)):  # what InMemorySaver raises for the same
        InMemorySaver().get_tuple(config)  # type: ignore[arg-type]


def test_put_writes_without_a_checkpoint_id_is_a_clear_error(saver: ContinuitySaver) -> None:
    with pytest.raises(ValueError, match="checkpoint_id"):
        saver.put_writes(generate_config("t"), [("ch", 1)], "task")


def test_prune_with_an_unknown_strategy_is_a_clear_error(saver: ContinuitySaver) -> None:
    with pytest.raises(ValueError, match="keep_latest"):
        saver.prune(["t"], strategy="oldest")


def test_prune_given_one_string_is_a_clear_error_not_a_prune_of_its_letters(
    saver: ContinuitySaver,
) -> None:
    for tid in ("a", "b", "c", "abc"):
        saver.put(generate_config(tid), generate_checkpoint(), generate_metadata(), {})
        saver.put(generate_config(tid), generate_checkpoint(), generate_metadata(), {})
    with pytest.raises(TypeError, match="sequence of thread ids"):
        saver.prune("abc")  # a str is a Sequence[str]: only a check at run time catches it
    for tid in ("a", "b", "c", "abc"):  # nothing was pruned
        assert len(list(saver.list(generate_config(tid)))) == 2
    saver.prune(["abc"])
    assert len(list(saver.list(generate_config("abc")))) == 1
    assert len(list(saver.list(generate_config("a")))) == 2


def test_a_thread_that_is_not_a_langgraph_thread_is_refused(saver: ContinuitySaver) -> None:
    from continuity import message

    saver.store.thread("chat").append(message("user", "hello"))
    with pytest.raises(ValueError, match="not LangGraph thread"):
        saver.put(generate_config("chat"), generate_checkpoint(), generate_metadata(), {})


def test_thread_ids_that_are_not_continuity_ids_are_mapped(saver: ContinuitySaver) -> None:
    odd = "user/42 · session ✓"
    config = saver.put(generate_config(odd), generate_checkpoint(), generate_metadata(), {})
    assert config["configurable"]["thread_id"] == odd
    found = saver.get_tuple(generate_config(odd))
    assert found is not None and found.config["configurable"]["thread_id"] == odd
    mapped = ContinuitySaver.continuity_thread_id(odd)
    assert mapped.startswith("lg-") and mapped in saver.store.threads()
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == [odd]


def test_get_next_version_increases(saver: ContinuitySaver) -> None:
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    assert v1 < v2 and v2.startswith("0" * 31 + "2.")


def test_records_are_in_the_chained_log_and_verify(saver: ContinuitySaver) -> None:
    from continuity import frames as fr
    from continuity.maintenance.verify import verify_store

    _fill(saver, "t-1", 3)
    frames = saver.store.thread("t-1").read(types=["record_appended"])
    kinds = [f.kind for f in frames if isinstance(f, fr.RecordAppended)]
    assert kinds.count("langgraph.checkpoint") == 3
    assert kinds.count("langgraph.writes") == 3
    report = verify_store(saver.store)
    assert report.ok, report.problems
