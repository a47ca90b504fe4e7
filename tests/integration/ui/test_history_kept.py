"""The charts' history is kept in the store (migration 0021): a hub restarted on the same
store still draws the points sampled before it stopped (before, the history was in memory and
a restart started empty)."""

from __future__ import annotations

import json
from typing import Any

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.harness import Hub, wait_until
from tests.integration.ui.test_dashboard import base, login


def history(browser: webdriver.Chrome, hub: Hub, path: str) -> dict[str, Any]:
    browser.get(f"{base(hub)}/history/{path}")
    text = wait_until(lambda: browser.find_element(By.TAG_NAME, "body").text, what="the JSON")
    return dict(json.loads(text))


def quota(chart: dict[str, Any]) -> list[int]:
    by = {(s["class"], s["field"]): s["values"] for s in chart["series"]}
    return list(by[("H100-80GB", "quota")])


def test_a_restarted_hub_still_shows_the_points_sampled_before(
    hub: Hub, browser: webdriver.Chrome
) -> None:
    hub.create_project("search", H100_80GB=16)
    login(browser, hub, "projects")
    before = history(browser, hub, "projects/search")
    assert before["times"], "sampled"
    assert quota(before)[-1] == 16

    hub.stop()
    hub.start()  # same store and ports: the session is kept too
    hub.patch("/v1/projects/search", {"quotas": {"H100-80GB": 24}})
    after = wait_until(
        lambda: (h := history(browser, hub, "projects/search")) and quota(h)[-1] == 24 and h,
        what="the new quota sampled",
    )
    assert set(before["times"]) <= set(after["times"]), (before["times"], after["times"])
