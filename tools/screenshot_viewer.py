"""The documentation's screenshots of ``continuity serve``: the viewer's test store
(``tests/support/viewer.py``) built in a temporary folder, served, and photographed by headless
Chromium (Debian's ``chromium`` and ``chromedriver``, through Selenium) at 1280×1000:

* ``docs/viewer-decision.png``: what the model saw at the latest decision;
* ``docs/viewer-thread.png``: the first page of the thread's timeline.

Run from the repository: ``.venv/bin/python tools/screenshot_viewer.py [--out docs]``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 1000


def _viewer_support() -> ModuleType:
    """``tests/support/viewer.py``: the store the viewer's tests show (``tests`` is a package
    of the checkout, not an installed one)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tests.support.viewer")


@contextmanager
def _browser(profile: Path, flags: tuple[str, ...]) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    extra = (
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={WIDTH},{HEIGHT}",
    )
    for flag in (*flags, *extra, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        # the page's viewport exactly, whatever the window's frame takes
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    args = parser.parse_args(argv)
    for needed in (CHROMIUM, CHROMEDRIVER):
        if not Path(needed).is_file():
            raise SystemExit(f"{needed} not found: apt-get install chromium chromium-driver")

    from continuity.store.jsonl import Store

    support = _viewer_support()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="continuity-demo-") as tmp:
        store_dir = Path(tmp) / "store"
        with Store(store_dir, create=True, durable=False) as store:
            vs = support.build_viewer_store(store)
        with (
            support.served(store_dir) as (_proc, url),
            _browser(Path(tmp) / "profile", support.CHROMIUM_FLAGS) as driver,
        ):
            driver.get(url)  # the token: a cookie, then the threads page
            base = url.split("/?", 1)[0]
            shots = {
                "viewer-decision.png": f"/t/{vs.main}/d/{vs.decisions[-1]}",
                "viewer-thread.png": f"/t/{vs.main}?start=0",
            }
            for name, path in shots.items():
                driver.get(base + path)
                driver.execute_script("window.scrollTo(0, 0)")
                target = out / name
                target.write_bytes(driver.get_screenshot_as_png())
                print(
                    f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: "
                    f"{path} ({target.stat().st_size // 1024} KB)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
