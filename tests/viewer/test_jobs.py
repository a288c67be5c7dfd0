"""Long work in the viewer (issue 26): verify and a first search run as background jobs; a
request answers at once with the job's progress (and asks again by itself), a second request
for the same work joins the job, and a reload after it ended checks the store again.

The work is held up for real, not mocked: the test holds the lock a thread's caches are written
under, so the search that must bring them up to date waits — as it would behind another process
catching the same caches up — and a viewer with one worker queues everything behind it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the viewer needs the serve extra")

from starlette.testclient import TestClient

from continuity import frames as fr
from continuity.caches.thread_index import SMALL_LOG_BYTES
from continuity.store.jsonl import Store
from continuity.viewer import model
from continuity.viewer.app import create_app
from continuity.viewer.jobs import Busy, Job, Jobs
from tests.support.viewer import holding_caches

HANG = 60.0
"""Seconds to wait for a job to end: a bound on a hang, not a timing assertion."""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s", create=True, durable=False)
    long = store.thread("long")
    long.append(fr.ThreadCreated(thread_id="long", title="long enough to keep caches"))
    batch = [
        fr.MessageAppended(
            role="user", content=[fr.TextBlock(text=f"message {i}: " + "words to index " * 20)]
        )
        for i in range(400)
    ]
    long.append(batch)
    small = store.thread("small")
    small.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="a small one")]))
    log = store.root / "threads" / "long.jsonl"
    assert log.stat().st_size > SMALL_LOG_BYTES  # so it keeps caches, written under their lock
    return store


def _until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"still waiting for {what} after {HANG} s")


def _settled(c: TestClient, url: str) -> Any:
    """Ask ``url`` again (as the page does) until the job's result is the answer."""

    def ended() -> Any:
        r = c.get(url)
        assert r.status_code in (200, 202), (url, r.status_code, r.text)
        return r if r.status_code == 200 else None

    return _until(url, ended)


@pytest.mark.slow
def test_a_first_search_is_a_job_that_shows_progress_and_is_joined(store: Store) -> None:
    c = TestClient(create_app(store, token=None, workers=1, wait_seconds=0))
    search = "/api/search?q=index&thread=long"
    assert store.cache_dir is not None
    with holding_caches(store.cache_dir, "long"):
        first = c.get(search + "&path=%2F&path=x")  # other parameters are kept, as given
        assert first.status_code == 202
        job = first.json()
        assert job["state"] in ("queued", "running")
        assert job["what"] == "searching for 'index' in thread long"
        assert job["poll"] == f"/api/search?q=index&thread=long&path=%2F&path=x&job={job['job']}"
        again = c.get(search)  # a second request for the same work joins it
        assert again.status_code == 202
        assert again.json()["job"] == job["job"]
        page = c.get("/search?q=index&thread=long")
        assert page.status_code == 202
        assert f'data-job="{job["job"]}"' in page.text  # the page and the API: one job
        assert '<meta http-equiv="refresh" content="1; url=/search?' in page.text
        assert f"job={job['job']}" in page.text
        assert 'value="index"' in page.text  # the form stays, to search for something else

        def running() -> bool:
            return bool(c.get(job["poll"]).json()["state"] == "running")

        _until("the search to hold the one worker", running)
        told = c.get(job["poll"]).json()
        assert "offset index" in told["phase"]  # where it waits: catching the caches up

        # one worker, busy: verify waits in the queue, and says behind what
        verify = c.get("/api/t/small/verify")
        assert verify.status_code == 202
        queued = verify.json()
        assert queued["state"] == "queued"
        assert queued["waiting_for"] == ["searching for 'index' in thread long"]
        shown = c.get("/t/small/verify")
        assert shown.status_code == 202
        assert f'data-job="{queued["job"]}"' in shown.text
        assert "waiting for a free worker (busy searching for" in shown.text
        assert c.get("/integrity").status_code == 202
    hits = _settled(c, job["poll"]).json()
    assert hits
    assert {h["thread_id"] for h in hits} == {"long"}
    result = _settled(c, queued["poll"]).json()
    assert result["ok"] is True
    assert result["frames"] == 2  # its thread_created and the message
    html = _settled(c, f"/search?q=index&thread=long&job={job['job']}").text
    assert 'class="hit"' in html
    assert "http-equiv" not in html  # the result: the page stops asking


@pytest.mark.slow
def test_a_request_after_the_job_ended_checks_the_store_again(store: Store) -> None:
    c = TestClient(create_app(store, token=None, workers=1, wait_seconds=0))
    first = c.get("/api/t/long/verify")
    answer = first if first.status_code == 200 else _settled(c, first.json()["poll"])
    assert answer.json()["frames"] == 401
    store.thread("long").append(
        fr.MessageAppended(role="user", content=[fr.TextBlock(text="one more")])
    )
    fresh = c.get("/api/t/long/verify")
    assert (fresh if fresh.status_code == 200 else _settled(c, fresh.json()["poll"])).json()[
        "frames"
    ] == 402
    if first.status_code == 202:  # the ended job is still there, by its own address
        assert c.get(first.json()["poll"]).json()["frames"] == 401


def test_refused_work_starts_no_job(store: Store) -> None:
    c = TestClient(create_app(store, token=None, workers=1, wait_seconds=0))
    assert c.get("/api/t/nope/verify").status_code == 404
    assert c.get("/api/search?q=index&thread=nope").status_code == 404
    assert c.get("/api/search?q=%21%21").status_code == 400
    assert c.get("/t/bad%20id!/verify").status_code == 400


@pytest.mark.slow
def test_progress_is_told_as_the_work_goes(store: Store) -> None:
    heard: list[tuple[str, int, int, str]] = []

    def tell(phase: str, done: int = 0, total: int = 0, unit: str = "") -> None:
        heard.append((phase, done, total, unit))

    found = model.verify_all(store, tell=tell)
    assert all(t.ok for t in found.threads)
    counted = [(d, n) for _p, d, n, unit in heard if unit == "threads"]
    assert counted == [(1, 2), (2, 2)]
    heard.clear()
    result = model.verify_thread(store, "long", tell=tell)
    assert result.ok
    assert heard[0][0].startswith("checking 401 frames")
    assert heard[-1][1:] == (401, 401, "frames")
    heard.clear()
    hits = model.search_hits(store, "index", thread="long", tell=tell)
    assert hits
    log_bytes = (store.root / "threads" / "long.jsonl").stat().st_size
    read = [(d, n) for _p, d, n, unit in heard if unit == "bytes"]
    assert read
    assert read[-1] == (log_bytes, log_bytes)  # the whole log read into the offset index
    assert "search index" in heard[-1][0]


# --- the job queue itself ----------------------------------------------------------------------


def _blocked(gate: threading.Event, value: object = "done") -> Callable[[Job], object]:
    def work(job: Job) -> object:
        job.tell("held", 1, 2, "steps")
        if not gate.wait(HANG):
            raise AssertionError("never released")
        return value

    return work


def test_jobs_are_bounded_and_joined() -> None:
    jobs = Jobs(1, limit=2)
    gate = threading.Event()
    try:
        a = jobs.submit("a", "work a", _blocked(gate, "A"))
        b = jobs.submit("b", "work b", _blocked(gate, "B"))
        assert jobs.submit("a", "work a", _blocked(gate)) is a  # joined, even when full
        with pytest.raises(Busy, match="2 long jobs under way"):
            jobs.submit("c", "work c", _blocked(gate))
        _until("a to run", lambda: a.state == "running")
        assert jobs.status(b).waiting_for == ["work a"]
        assert jobs.status(a).done == 1
    finally:
        gate.set()
    assert a.wait(HANG)
    assert b.wait(HANG)
    assert (a.outcome(), b.outcome()) == ("A", "B")
    assert jobs.submit("a", "work a", _blocked(gate), job_id=a.id) is a  # by its address
    again = jobs.submit("a", "work a", _blocked(gate, "A2"))
    assert again is not a  # without it: the work again
    assert again.wait(HANG)
    assert again.outcome() == "A2"


def test_a_job_that_fails_raises_its_error_to_every_asker() -> None:
    jobs = Jobs(1)

    def broken(job: Job) -> None:
        raise LookupError("no such thing")

    job = jobs.submit("x", "broken", broken)
    assert job.wait(HANG)
    assert job.state == "failed"
    for _ in range(2):
        with pytest.raises(LookupError, match="no such thing"):
            job.outcome()
    ok = jobs.submit("y", "fine", lambda job: 42)  # the worker goes on
    assert ok.wait(HANG)
    assert ok.outcome() == 42
