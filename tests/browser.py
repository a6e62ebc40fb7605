"""Headless Chromium from Debian's packages, driven with Selenium through Debian's
chromedriver (``make browser`` installs both; no browser is downloaded at test time).

Selenium's calls block, so each runs in a worker thread: the console under test keeps
serving in the test's trio loop meanwhile. Screenshots go under build/console-screenshots/
for a person to look at."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import processes_below, wait_until

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "console-screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Everything Chromium would fetch or start beyond the page under test, off.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
WAIT = 30.0


def skip_without_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} (`make browser` installs Debian's chromium)")
    pytest.importorskip(
        "selenium", reason="selenium is in the test extra: pip install -e '.[test]'"
    )


class Browser:
    """One headless Chromium with a fresh profile."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def run(self, call: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(call)

    async def get(self, url: str) -> None:
        await self.run(lambda: self.driver.get(url))

    async def text(self, css: str) -> str:
        from selenium.webdriver.common.by import By

        def read() -> str:
            found = self.driver.find_elements(By.CSS_SELECTOR, css)
            return "\n".join(e.text for e in found)

        return str(await self.run(read))

    async def wait_text(self, css: str, wanted: Callable[[str], bool]) -> str:
        """The text of ``css`` once ``wanted`` holds for it (polled: the page is live)."""
        with trio.fail_after(WAIT):
            while True:
                text = await self.text(css)
                if wanted(text):
                    return text
                await trio.sleep(0.1)  # the page has no event to wait on from here

    async def click(self, css: str) -> None:
        from selenium.webdriver.common.by import By

        await self.run(lambda: self.driver.find_element(By.CSS_SELECTOR, css).click())

    async def type(self, css: str, text: str) -> None:
        from selenium.webdriver.common.by import By

        def typed() -> None:
            element = self.driver.find_element(By.CSS_SELECTOR, css)
            element.clear()
            element.send_keys(text)

        await self.run(typed)

    async def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        await self.run(lambda: self.driver.save_screenshot(str(path)))
        return path


@asynccontextmanager
async def open_browser() -> AsyncIterator[Browser]:
    skip_without_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="agentrt-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = await trio.to_thread.run_sync(
        lambda: webdriver.Chrome(service=service, options=options)
    )
    try:
        yield Browser(driver)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(driver.quit)
            # quit returns as the browser's main process ends; its zygotes end after it, on
            # their own (the test's leftover check would otherwise find one still asleep,
            # and it still reports one that outlives this bound).
            with contextlib.suppress(trio.TooSlowError):
                await wait_until(lambda: not _chromium_below(os.getpid()), bound=WAIT)
            shutil.rmtree(profile, ignore_errors=True)


def _chromium_below(pid: int) -> bool:
    return any("/chromium" in p.cmdline for p in processes_below(pid))
