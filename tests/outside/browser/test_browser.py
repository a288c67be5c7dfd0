"""The viewer in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium against ``continuity serve`` run as a subprocess, the
way a person would use it. Each test checks what the page shows (and that no script from the
store ever runs), and leaves a screenshot in ``test-artifacts/browser/`` (pass or fail).

Skips, saying why, without a browser or its driver; ``.ci/run`` installs both, so CI always
runs these. Selenium is pointed at the system browser and driver, so Selenium Manager never
goes to the network.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.store.jsonl import Store
from continuity.store.locate import open_store
from tests.support.viewer import (
    BIG_OUTPUT_LINES,
    CHROMIUM_FLAGS,
    HOSTILE,
    ViewerStore,
    build_viewer_store,
    holding_caches,
    served,
)

ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "test-artifacts" / "browser"
WAIT = 15.0
"""Seconds to wait for something a page does by itself (a fetch, the live view): a bound on a
hang, not a timing assertion."""


def _find(env: str, default: str, name: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if Path(given).is_file() else None
    return default if Path(default).is_file() else shutil.which(name)


CHROMIUM = _find("CONTINUITY_CHROMIUM", "/usr/bin/chromium", "chromium")
CHROMEDRIVER = _find("CONTINUITY_CHROMEDRIVER", "/usr/bin/chromedriver", "chromedriver")
_MISSING = [
    f"{what} ({os.environ.get(env) or default})"
    for what, env, default, found in (
        ("chromium", "CONTINUITY_CHROMIUM", "/usr/bin/chromium", CHROMIUM),
        ("chromedriver", "CONTINUITY_CHROMEDRIVER", "/usr/bin/chromedriver", CHROMEDRIVER),
    )
    if found is None
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"no headless browser: {' and '.join(_MISSING)} not found "
        "(apt-get install chromium chromium-driver; .ci/run installs them)",
    ),
]

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.chromium.webdriver import ChromiumDriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

# --- the server and the browser --------------------------------------------------------------


@dataclass
class Site:
    base: str
    """``http://127.0.0.1:PORT`` (no trailing slash)."""
    token_url: str
    store_dir: Path
    vs: ViewerStore

    def head(self, thread_id: str) -> int:
        """The thread's head seq, read through the store (not the viewer)."""
        with open_store(self.store_dir) as store:
            head = store.existing_thread(thread_id).head()
            assert head is not None
            return head.seq

    def frame(self, thread_id: str, seq: int) -> fr.Frame:
        with open_store(self.store_dir) as store:
            thread = store.existing_thread(thread_id)
            for found, line in thread.read_lines(from_seq=seq, to_seq=seq):
                return thread.decode(found, line)
        raise LookupError(seq)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("viewer-browser")
    store_dir = root / "store"
    with Store(store_dir, create=True, durable=False) as store:
        vs = build_viewer_store(store)
    try:
        with served(store_dir, "--poll", "0.1", stderr=root / "serve.stderr") as (_proc, url):
            yield Site(url.split("/?", 1)[0], url, store_dir, vs)
    except RuntimeError as exc:  # it did not start: say what it printed
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def driver(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromiumDriver]:
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, "--window-size=1280,1000"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        pytest.fail(f"{CHROMIUM} with {CHROMEDRIVER} would not start: {exc.msg}")
    browser.set_page_load_timeout(30)
    try:
        browser.get(site.token_url)  # sets the cookie and sends the browser on without it
        assert "token=" not in browser.current_url
        yield browser
    finally:
        browser.quit()


@dataclass
class Page:
    """The browser, on behalf of one test: pages opened by path, console errors gathered,
    screenshots named after the test."""

    driver: ChromiumDriver
    site: Site
    name: str
    errors: list[str] = field(default_factory=list)

    def open(self, path: str) -> None:
        self._gather()
        self.driver.get(self.site.base + path)

    def _gather(self) -> None:
        # selenium leaves the Chromium driver's get_log unannotated
        for entry in self.driver.get_log("browser"):  # type: ignore[no-untyped-call]
            text = str(entry.get("message", ""))
            # a browser asks for /favicon.ico by itself; the viewer has none
            if entry.get("level") == "SEVERE" and "favicon.ico" not in text:
                self.errors.append(text)

    def console_errors(self) -> list[str]:
        self._gather()
        return self.errors

    def shot(self, step: str = "") -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(SHOTS / f"{self.name}{'-' + step if step else ''}.png"))

    def one(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, until: Callable[[ChromiumDriver], Any], what: str) -> Any:
        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05).until(until, what)

    def seqs(self) -> list[int]:
        return [int(li.get_attribute("data-seq") or -1) for li in self.all("#timeline > li")]

    def no_script_ran(self) -> None:
        """Nothing the store holds ran as script: the hostile text set no global."""
        assert self.js("return typeof window.pwned") == "undefined"


@pytest.fixture
def page(driver: ChromiumDriver, site: Site, request: pytest.FixtureRequest) -> Iterator[Page]:
    seen = Page(driver, site, request.node.name)
    seen._gather()  # what earlier tests left in the log is theirs
    seen.errors.clear()
    try:
        yield seen
    finally:
        seen.shot()  # the page as the test left it, passed or failed


def _text(el: WebElement) -> str:
    return str(el.get_attribute("textContent"))


# --- threads ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_threads_page_lists_and_filters(page: Page, site: Site) -> None:
    vs = site.vs
    page.open("/")
    rows = page.all("tr.thread-row")
    assert {r.get_attribute("data-thread") for r in rows} == {vs.main, vs.agent, vs.fork}
    assert page.one("h1").text == "Threads 3"
    by_id = {r.get_attribute("data-thread"): r.find_elements(By.TAG_NAME, "td") for r in rows}
    assert by_id[vs.main][1].text == "Claude Code"
    assert by_id[vs.fork][1].text == "-"
    assert by_id[vs.main][2].text == "claude-code session"
    assert by_id[vs.agent][2].text == "claude-code subagent"
    assert by_id[vs.main][3].text == "/work/shop"
    assert by_id[vs.main][5].text == str(site.head(vs.main) + 1)
    assert HOSTILE in by_id[vs.main][0].text  # the title, as text
    page.no_script_ran()
    page.shot("all")

    box = page.one("form.filters input[name=q]")
    box.send_keys("agent")
    box.submit()
    page.wait(lambda d: "q=agent" in d.current_url, "the filter's address")
    assert [r.get_attribute("data-thread") for r in page.all("tr.thread-row")] == [vs.agent]
    assert page.one("h1").text == "Threads 1 of 3"
    page.shot("text-filter")

    page.open("/")
    Select(page.one("select[name=kind]")).select_by_visible_text("claude-code session")
    page.one("form.filters button[type=submit]").click()
    page.wait(lambda d: "kind=" in d.current_url, "the kind filter's address")
    assert [r.get_attribute("data-thread") for r in page.all("tr.thread-row")] == [vs.main]

    page.open("/")
    Select(page.one("select[name=project]")).select_by_visible_text("/work/shop")
    page.one("form.filters button[type=submit]").click()
    page.wait(lambda d: "project=" in d.current_url, "the project filter's address")
    shown = {r.get_attribute("data-thread") for r in page.all("tr.thread-row")}
    assert shown == {vs.main, vs.agent}  # the fork carries no project

    page.open("/?q=no-such-thread")
    assert page.all("tr.thread-row") == []
    assert page.one("p.empty").text == "no thread matches"
    assert page.console_errors() == []


def test_without_the_token_the_viewer_refuses(site: Site) -> None:
    for path in ("/", f"/t/{site.vs.main}", "/api/threads", "/?token=wrong"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(site.base + path, timeout=10)
        with refused.value as answer:  # an HTTPError holds the response and its socket
            assert answer.code == 403, path
            assert b"token" in answer.read()


# --- a thread --------------------------------------------------------------------------------


@pytest.mark.slow
def test_thread_opens_on_its_latest_page_and_pages(page: Page, site: Site) -> None:
    vs = site.vs
    head = site.head(vs.main)
    page.open(f"/t/{vs.main}")
    assert page.seqs() == list(range(head - 99, head + 1))
    assert page.one("#frame-count").text == str(head + 1)
    assert page.one("#timeline").get_attribute("data-live")
    retraction = page.one(f"#f{vs.head}")  # the store's last frame as built
    assert "messages_retracted" in (retraction.get_attribute("class") or "").split()
    assert f"messages retracted: seq {vs.retracted_seq}..{vs.retracted_seq}" in retraction.text
    children = {a.text for a in page.all("p.facts a")}
    assert {vs.agent, vs.fork} <= children
    page.shot("latest")

    page.one("div.pager a[href$='start=0']").click()
    page.wait(lambda d: "start=0" in d.current_url, "the first page")
    assert page.seqs() == list(range(100))
    assert page.one("#timeline").get_attribute("data-live") is None  # not at the head
    assert page.all("#live-status") == []
    page.shot("first")

    page.one("a[rel=next]").click()
    page.wait(lambda d: "start=100" in d.current_url, "the next page")
    assert page.seqs() == list(range(100, 200))
    page.shot("newer")

    page.one("a[rel=prev]").click()
    page.wait(lambda d: "before=100" in d.current_url, "the previous page")
    assert page.seqs() == list(range(100))
    assert page.console_errors() == []


def test_hostile_content_shows_as_text(page: Page, site: Site) -> None:
    vs = site.vs
    page.open(f"/t/{vs.main}?start=0")
    assert page.one("p.facts strong").text == f"Invoice export {HOSTILE}"
    said = page.one(f"#f{vs.hostile_seq} .block.text")
    assert said.text == f"The customer wrote {HOSTILE} in the name field."
    error_output = page.one(f"#f{vs.hostile_seq + 2} details.tool_result.error")
    error_output.find_element(By.TAG_NAME, "summary").click()
    assert _text(error_output.find_element(By.TAG_NAME, "pre")) == HOSTILE
    assert page.js("return document.scripts.length") == 1  # the viewer's own, in <head>
    assert page.all("main img") == []
    page.no_script_ran()
    page.one(f"#f{vs.hostile_seq}").location_once_scrolled_into_view  # noqa: B018
    assert page.console_errors() == []


def test_big_output_opens_whole_on_demand(page: Page, site: Site) -> None:
    vs = site.vs
    whole = "\n".join(f"line {i}: {'x' * 60}" for i in range(BIG_OUTPUT_LINES))
    page.open(f"/t/{vs.main}?start=0")
    details = page.one(f"#f{vs.big_seq} details.tool_result")
    pre = details.find_element(By.CSS_SELECTOR, "pre[data-src]")
    clipped = _text(pre)
    assert len(clipped) < len(whole) and whole.startswith(clipped)
    assert details.find_elements(By.CSS_SELECTOR, ".clip")
    page.js("arguments[0].scrollIntoView({block: 'start'})", details)
    details.find_element(By.TAG_NAME, "summary").click()
    page.wait(lambda d: _text(pre) == whole, "the whole output, fetched")
    assert details.find_elements(By.CSS_SELECTOR, ".clip") == []
    assert details.get_attribute("open") is not None
    assert page.console_errors() == []


def test_retracted_message_shows_as_retracted(page: Page, site: Site) -> None:
    vs = site.vs
    page.open(f"/t/{vs.main}?seq={vs.retracted_seq}")
    frame = page.one(f"#f{vs.retracted_seq}")
    assert "retracted" in (frame.get_attribute("class") or "").split()
    assert "focus" in (frame.get_attribute("class") or "").split()
    assert frame.find_element(By.CSS_SELECTOR, ".meta .warn").text == "retracted"
    assert "Running the tests for case 1." in frame.text  # the message is still shown
    neighbour = page.one(f"#f{vs.retracted_seq + 1}")
    assert "retracted" not in (neighbour.get_attribute("class") or "").split()
    assert page.console_errors() == []


# --- what the model saw ----------------------------------------------------------------------


def _widths(page: Page, css: str) -> list[float]:
    return [float(r.get_attribute("width") or "nan") for r in page.all(css)]


@pytest.mark.slow
def test_decision_view(page: Page, site: Site) -> None:
    vs = site.vs
    seq = vs.decisions[-1]
    decision = site.frame(vs.main, seq)
    assert isinstance(decision, fr.ContextSelectionDecided)
    page.open(f"/t/{vs.main}/d/{seq}")
    assert f"what the model saw at seq {decision.anchor_seq}" in page.one("h1").text

    # the token bar: one rect per part used, then the unused budget; they fill the width
    rects = page.all("#budget svg rect")
    kinds = [r.get_attribute("class") for r in rects]
    assert kinds == ["p-summary", "p-window", "p-free"]
    widths = _widths(page, "#budget svg rect")
    assert all(w > 0 for w in widths)
    assert sum(widths) == pytest.approx(1000, abs=0.05)
    assert all(r.size["width"] > 0 for r in rects)  # drawn, not only described
    budget = decision.limits.budget_tokens
    assert f"of a {budget}-token budget" in page.one("#budget figcaption").text

    # the items as the model got them, each badged against the previous decision
    items = page.all("#items > li.item")
    badges = [i.find_element(By.CSS_SELECTOR, ".badge").text for i in items]
    page.one("details.dropped > summary").click()  # closed until asked for
    dropped = page.all("details.dropped li.item")
    assert badges and dropped
    assert {i.find_element(By.CSS_SELECTOR, ".badge").text for i in dropped} == {"dropped"}
    counts = [int(n) for n in re.findall(r"\d+", page.one("#diff-counts").text)]
    assert counts == [
        badges.count("new"),
        badges.count("changed"),
        len(dropped),
        badges.count("same"),
    ]
    summaries = page.all("#items > li.item.k-summary")
    assert len(summaries) == len(decision.checkpoints)
    assert any(HOSTILE in _text(s) for s in summaries)  # the summary's text, as text
    page.no_script_ran()

    # the halving rule: the summaries the decision took, each at most half the one before
    steps = [li.text for li in page.all("section.halving ol > li")]
    taken = [int(m) for s in steps for m in re.findall(r"checkpoint to seq (\d+)", s)]
    assert sorted(taken) == sorted(c.to_seq for c in decision.checkpoints)
    assert all(b <= a // 2 for a, b in itertools.pairwise(taken))
    page.shot("latest")

    # the bundle the decision stored, as the model got it
    page.one("#decision-facts a[href^='/a/']").click()
    page.wait(lambda d: f"/a/{decision.bundle_artifact_id}" in d.current_url, "the bundle")
    bundle = json.loads(page.one("body").text)
    assert (bundle["thread_id"], bundle["anchor_seq"]) == (vs.main, decision.anchor_seq)
    page.driver.back()

    previous = vs.decisions[-2]
    page.one(f"#diff-against a[href='/t/{vs.main}/d/{previous}']").click()
    page.wait(lambda d: d.current_url.endswith(f"/d/{previous}"), "the previous decision")
    assert f"decision at seq {previous}" in page.one("#decision-facts").text
    assert page.console_errors() == []


def test_hierarchy_draws_the_checkpoints(page: Page, site: Site) -> None:
    vs = site.vs
    decision = site.frame(vs.main, vs.decisions[-1])
    assert isinstance(decision, fr.ContextSelectionDecided)
    page.open(f"/t/{vs.main}/hierarchy")
    rects = page.all("svg#hierarchy rect.cp")
    assert [int(r.get_attribute("data-to") or -1) for r in rects] == vs.checkpoints
    widths = _widths(page, "svg#hierarchy rect.cp")
    assert widths == sorted(widths) and len(set(widths)) == len(widths)  # longer, later
    assert all(r.size["width"] > 0 and r.size["height"] > 0 for r in rects)
    selected = {int(r.get_attribute("data-to") or -1) for r in page.all("svg#hierarchy .cp.sel")}
    assert selected == {c.to_seq for c in decision.checkpoints}
    assert f"the decision at seq {decision.seq}" in page.one("p.facts").text
    steps = [li.text for li in page.all("#steps > li")]
    assert [int(m) for s in steps for m in re.findall(r"checkpoint to seq (\d+)", s)] == [
        c.to_seq for c in sorted(decision.checkpoints, key=lambda c: -c.to_seq)
    ]
    # one row per decision, each with its own selection drawn
    assert len(page.all("table.decisions tbody tr")) == len(vs.decisions)
    assert len(page.all("td.mini rect.cp.sel")) >= len(vs.decisions)
    assert page.console_errors() == []


def test_compile_here_is_a_dry_run(page: Page, site: Site) -> None:
    vs = site.vs
    head = site.head(vs.main)
    page.open(f"/t/{vs.main}/compile")
    assert "a dry run: nothing is written" in page.one("h1").text
    page.shot("defaults")
    budget = page.one("#compile-form input[name=budget]")
    budget.clear()
    budget.send_keys("60")
    page.one("#compile-form button[type=submit]").click()
    page.wait(lambda d: "budget=60" in d.current_url, "the compile form's answer")
    assert "a dry run" in page.one("h1").text
    assert page.one("#compile-form input[name=budget]").get_attribute("value") == "60"
    assert "of a 60-token budget" in page.one("#budget figcaption").text
    facts = page.one("#decision-facts")
    assert "60 tokens" in facts.text
    # a dry run stores no bundle, so there is none to link to
    assert "(not stored: a dry run)" in facts.text
    assert facts.find_elements(By.CSS_SELECTOR, "a[href^='/a/']") == []
    reasons = page.one("ul.reasons").text
    assert "to fit 60 tokens" in reasons
    badges = [b.text for b in page.all("#items > li.item .badge")]
    assert badges and set(badges) <= {"new", "same", "changed"}
    assert page.all("details.dropped li.item")  # the summaries the smaller budget left out
    page.shot("budget-60")

    assert site.head(vs.main) == head  # nothing was appended
    page.open(f"/t/{vs.main}")
    assert page.one("#frame-count").text == str(head + 1)
    assert page.console_errors() == []


# --- search ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_search_highlights_and_links_to_the_frame(page: Page, site: Site) -> None:
    vs = site.vs
    page.open("/")
    box = page.one("header form.find input[name=q]")
    box.send_keys("quoting")
    box.submit()
    page.wait(lambda d: "/search?q=quoting" in d.current_url, "the search page")
    # the hits, or (a search that outlasts the server's wait) its progress and then the hits
    hits = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits > li.hit"), "the hits")
    marks = page.all("#hits mark")
    assert marks and {m.text.lower() for m in marks} == {"quoting"}
    links = [h.find_element(By.CSS_SELECTOR, "a.where") for h in hits]
    to_main = re.compile(rf"/t/{re.escape(vs.main)}\?seq=(\d+)#f\1$")
    in_main = [
        (int(m.group(1)), a) for a in links if (m := to_main.search(a.get_attribute("href") or ""))
    ]
    assert in_main
    seq, link = max(in_main, key=lambda pair: pair[0])
    page.shot("hits")
    page.js("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    page.wait(lambda d: f"seq={seq}" in d.current_url, "the frame the hit names")
    focused = page.all("#timeline > li.focus")
    assert [f.get_attribute("id") for f in focused] == [f"f{seq}"]
    assert "quoting" in _text(focused[0])  # in its thinking, folded away
    top, bottom = page.js(
        "const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom];", focused[0]
    )
    # scrolled to it (the address's #f… puts it at the top, give or take a fraction of a pixel)
    assert top > -1 and bottom < page.js("return window.innerHeight") + 1
    assert page.console_errors() == []


@pytest.mark.slow
def test_a_search_that_waits_shows_progress_and_then_its_hits(page: Page, site: Site) -> None:
    """While the thread's caches are held (as another process catching them up would hold
    them), its search cannot end: the page shows the job's progress and asks again by itself
    (no script: a meta refresh the page's policy allows) until the hits are the page."""
    vs = site.vs
    cache_dir = site.store_dir / "cache"
    with holding_caches(cache_dir, vs.main):
        page.open(f"/search?q=quoting&thread={vs.main}")
        job = page.one("#job")
        assert job.get_attribute("data-state") in ("queued", "running")
        assert f"searching for 'quoting' in thread {vs.main}" in job.text
        assert page.all("#hits") == []
        page.shot("progress")
        asked = page.wait(lambda d: "job=" in d.current_url, "the page asking again")
        assert asked
        assert page.all("#job")  # still under way: the caches are held
    hits = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits > li.hit"), "the hits")
    assert all(
        f"/t/{vs.main}?seq="
        in (h.find_element(By.CSS_SELECTOR, "a.where").get_attribute("href") or "")
        for h in hits
    )
    assert page.all("#job") == []
    assert page.js("return document.querySelector('meta[http-equiv=refresh]')") is None
    page.shot("hits")
    assert page.console_errors() == []


# --- live ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_live_view_follows_new_frames(page: Page, site: Site) -> None:
    vs = site.vs
    head = site.head(vs.main)
    page.open(f"/t/{vs.main}")
    assert page.seqs()[-1] == head
    page.js("window.stayed = 'this page, not a reload'")
    with open_store(site.store_dir) as store:
        thread = store.existing_thread(vs.main)
        added = thread.append(
            [
                fr.MessageAppended(
                    role="user", content=[fr.TextBlock(text="Live: ship the CSV export now.")]
                ),
                fr.MessageAppended(
                    role="assistant", content=[fr.TextBlock(text=f"Live reply with {HOSTILE}")]
                ),
            ]
        )
    last = added[-1]
    page.wait(lambda d: d.find_elements(By.ID, f"f{last}"), "the appended frames")
    assert page.seqs()[-3:] == [head, *added]
    assert page.one(f"#f{added[0]}").find_element(By.CSS_SELECTOR, ".block.text").text == (
        "Live: ship the CSV export now."
    )
    assert page.one(f"#f{last} .block.text").text == f"Live reply with {HOSTILE}"
    assert page.one(f"#f{last} .meta .label").text == "assistant"
    page.wait(lambda d: page.one("#frame-count").text == str(last + 1), "the frame count")
    assert page.js("return window.stayed") == "this page, not a reload"
    page.no_script_ran()
    page.js("arguments[0].scrollIntoView({block: 'end'})", page.one(f"#f{last}"))
    page.shot("first-append")

    # and again, through another process: the CLI a hook would run
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(site.store_dir), "append", vs.main],
        input='{"role": "user", "text": "Live: one more, from the CLI."}\n',
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    again = int(done.stdout.split()[-1])
    page.wait(lambda d: d.find_elements(By.ID, f"f{again}"), "the frame the CLI appended")
    assert "one more, from the CLI" in page.one(f"#f{again}").text
    page.wait(lambda d: page.one("#frame-count").text == str(again + 1), "the frame count")
    assert page.js("return window.stayed") == "this page, not a reload"
    page.js("arguments[0].scrollIntoView({block: 'end'})", page.one(f"#f{again}"))
    assert page.console_errors() == []
