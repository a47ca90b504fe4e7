"""A real headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium.

One browser per module (it takes a second or two to start); each test starts with no
cookies. A missing browser fails the tests, it never skips them: .ci/run installs both
packages. Screenshots go under each test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("WINGSMITH_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("WINGSMITH_CHROMEDRIVER", "/usr/bin/chromedriver")


def _found(path: str, name: str) -> str:
    found = path if os.path.exists(path) else shutil.which(name)
    if not found:
        raise AssertionError(
            f"{name} not found at {path}: apt-get install chromium chromium-driver "
            "(.ci/run does); the dashboard is tested in a real browser"
        )
    return found


@pytest.fixture(scope="module")
def chromium() -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = _found(CHROMIUM, "chromium")
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-proxy-server",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=_found(CHROMEDRIVER, "chromedriver"))
    )
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium: webdriver.Chrome) -> Iterator[webdriver.Chrome]:
    # Cookies are per host, not per port: clear them all, whatever page is open, so a
    # session from an earlier test's hub never carries over.
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    yield chromium
    chromium.get("about:blank")
