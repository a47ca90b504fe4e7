"""The dashboard's live updates follow the Watch feed, in a real browser (hub/ui/live.py).

A change made through the API appears on an open page without a reload, and the page makes
no fragment request but the ones an event caused: the hub's heartbeats (bookmarks, every 4 s
here, longer than the old 3 s poll) come and go with no request in between. After the hub
restarts on the same store and ports, the page's stream resumes and the next change appears.
A project-scoped session's stream carries only its projects' objects; without a session the
stream is refused.
"""

from __future__ import annotations

import dataclasses
import http.client
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.harness import FAST, Hub, LoopThread, running_hub, wait_until, workload
from tests.integration.ui.test_dashboard import base, login, settled, shot, text_of

# Longer than the old poll interval (3 s): a page that polled would have asked meanwhile.
HEARTBEAT_S = 4.0


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Iterator[tuple[LoopThread, Hub]]:
    settings = dataclasses.replace(FAST, watch_heartbeat_s=HEARTBEAT_S)
    with running_hub(tmp_path, settings) as pair:
        yield pair


def fragment_requests(browser: webdriver.Chrome, path: str) -> int:
    """The page's own requests for `path` after it loaded (htmx's, XMLHttpRequest)."""
    return int(
        browser.execute_script(
            "var path = arguments[0];"
            " return performance.getEntriesByType('resource').filter(function (e) {"
            " return e.initiatorType === 'xmlhttprequest'"
            " && new URL(e.name).pathname === path; }).length;",
            path,
        )
    )


def settled_requests(browser: webdriver.Chrome) -> tuple[int] | None:
    """(the fragment requests made) once none is pending and each refresh was answered."""
    made = fragment_requests(browser, "/ui/workloads/llama")
    pending = counter(browser, "livePending")
    return (made,) if not pending and made == counter(browser, "liveRefreshes") else None


def counter(browser: webdriver.Chrome, name: str) -> int:
    return int(browser.execute_script(f"return Number(document.body.dataset.{name} || 0);"))


def fleet(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", replicas=1, clusters=("east",)))


def test_a_change_through_the_api_appears_on_the_open_page_without_polling(
    hub: Hub, browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    fleet(hub)
    login(browser, hub, "workloads/llama")
    assert text_of(browser, "#ready") == "0/1 ready"
    assert not browser.execute_script(
        "return Array.from(document.querySelectorAll('[hx-trigger]'))"
        ".some(function (e) { return /every/.test(e.getAttribute('hx-trigger')); });"
    ), "no element polls"

    # The stream is open (its first bookmark came); from then on heartbeats come and go, and
    # the page asks for nothing meanwhile. (The very first stream of a hub starts from
    # revision 0, the whole state, which may cost one refresh: counted, not periodic.)
    wait_until(lambda: counter(browser, "liveBookmarks") >= 1, timeout=60, what="a bookmark")
    assert browser.execute_script("return document.body.dataset.live") == "open"
    quiet = wait_until(lambda: settled_requests(browser), timeout=60, what="refreshes done")[0]
    assert quiet <= 1
    marks = counter(browser, "liveBookmarks")
    wait_until(
        lambda: counter(browser, "liveBookmarks") >= marks + 2, timeout=60, what="two heartbeats"
    )
    assert fragment_requests(browser, "/ui/workloads/llama") == quiet, "no periodic request"

    hub.patch("/v1/workloads/llama", {"replicas": 3})
    wait_until(lambda: text_of(browser, "#ready") == "0/3 ready", timeout=60, what="scaled")
    # Every fragment request was one an event asked for (a burst of events: one request).
    requests = wait_until(lambda: settled_requests(browser), timeout=60, what="refreshes done")[0]
    assert quiet < requests <= counter(browser, "liveEvents")
    shot(browser, tmp_path, "workload-live")

    # An event for another workload refreshes nothing here.
    hub.post("/v1/workloads", workload("other", replicas=1, clusters=("east",)))
    before = counter(browser, "liveRefreshes")
    bookmarks = counter(browser, "liveBookmarks")
    wait_until(
        lambda: counter(browser, "liveBookmarks") > bookmarks, timeout=60, what="a heartbeat"
    )
    assert counter(browser, "liveRefreshes") == before


def test_the_page_resumes_its_stream_after_the_hub_restarts(
    hub: Hub, browser: webdriver.Chrome
) -> None:
    fleet(hub)
    login(browser, hub, "workloads/llama")
    wait_until(lambda: counter(browser, "liveBookmarks") >= 1, timeout=60, what="a heartbeat")
    hub.patch("/v1/workloads/llama", {"replicas": 2})
    wait_until(lambda: text_of(browser, "#ready") == "0/2 ready", timeout=60, what="scaled")

    hub.stop()
    hub.start()  # same store, same ports: the session and the feed's revisions are kept
    hub.patch("/v1/workloads/llama", {"replicas": 4})
    wait_until(
        lambda: text_of(browser, "#ready") == "0/4 ready", timeout=90, what="scaled after restart"
    )
    assert "/ui/workloads/llama" in browser.current_url, "no reload, no login"


def field_value(browser: webdriver.Chrome, css: str) -> str:
    """The value of the input `css`, once it is on the page: right after a login the browser
    may still be between documents, where a lookup finds nothing (awaited, as `text_of`
    awaits its element; a single lookup failed CI once on a busy machine)."""
    found: list[str] = []

    def read() -> bool:
        value = browser.execute_script(
            "const e = document.querySelector(arguments[0]); return e === null ? null : e.value;",
            css,
        )
        found[:] = [] if value is None else [str(value)]
        return bool(found)

    wait_until(read, what=f"{css} on the page")
    return found[0]


def focused_id(browser: webdriver.Chrome) -> str:
    return str(browser.execute_script("return document.activeElement.id;"))


def test_the_scale_field_follows_the_replicas_unless_the_user_is_editing_it(
    hub: Hub, browser: webdriver.Chrome
) -> None:
    fleet(hub)
    login(browser, hub, "workloads/llama")
    assert field_value(browser, "#replicas") == "1"
    wait_until(lambda: counter(browser, "liveBookmarks") >= 1, timeout=60, what="a heartbeat")

    # Scaled elsewhere (the API): the open page's field shows the new count, as #ready does.
    hub.patch("/v1/workloads/llama", {"replicas": 3})
    wait_until(lambda: text_of(browser, "#ready") == "0/3 ready", timeout=60, what="scaled")
    wait_until(lambda: field_value(browser, "#replicas") == "3", timeout=30, what="field 3")

    # While the user types a count of their own, a refresh keeps it, and the focus.
    replicas = browser.find_element(By.ID, "replicas")
    replicas.clear()
    replicas.send_keys("7")
    hub.patch("/v1/workloads/llama", {"replicas": 5})
    wait_until(lambda: text_of(browser, "#ready") == "0/5 ready", timeout=60, what="scaled")
    assert field_value(browser, "#replicas") == "7"
    assert focused_id(browser) == "replicas"

    # Left typed but not submitted, it is still the user's: kept.
    browser.execute_script("document.activeElement.blur();")
    hub.patch("/v1/workloads/llama", {"replicas": 2})
    wait_until(lambda: text_of(browser, "#ready") == "0/2 ready", timeout=60, what="scaled")
    assert field_value(browser, "#replicas") == "7"

    # Submitted, the field shows the hub's count again, and follows it.
    settled(lambda: browser.find_element(By.ID, "scale").click())
    wait_until(lambda: hub.get("/v1/workloads/llama")["replicas"] == 7, what="scaled to 7")
    wait_until(lambda: text_of(browser, "#ready") == "0/7 ready", timeout=60, what="7 ready")
    hub.patch("/v1/workloads/llama", {"replicas": 4})
    wait_until(lambda: text_of(browser, "#ready") == "0/4 ready", timeout=60, what="scaled")
    wait_until(lambda: field_value(browser, "#replicas") == "4", timeout=30, what="field 4")


def stream(hub: Hub, cookie: str, query: str) -> tuple[int, str]:
    """GET /ui/watch: its status and, for a stream, its events up to the first bookmark."""
    connection = http.client.HTTPConnection("127.0.0.1", hub.http_port, timeout=30)
    try:
        connection.request("GET", f"/ui/watch?{query}", headers={"Cookie": cookie})
        answer = connection.getresponse()
        if answer.status != 200:
            return answer.status, answer.read().decode()
        lines: list[str] = []
        while not lines or not lines[-1].startswith("event: bookmark"):
            line = answer.readline().decode()
            assert line, f"the stream ended before a bookmark: {lines}"
            lines.append(line)
        return answer.status, "".join(lines)
    finally:
        connection.close()


def session_cookie(browser: webdriver.Chrome) -> str:
    # Awaited: the URL may read the page's before the browser has stored the login's cookie.
    found: dict[str, Any] = wait_until(
        lambda: browser.get_cookie("wingsmith_session"), what="the session cookie"
    )
    return f"wingsmith_session={found['value']}"


def test_the_stream_serves_the_session_scoped_as_its_reads(
    hub: Hub, browser: webdriver.Chrome
) -> None:
    fleet(hub)
    hub.create_project("other", H100_80GB=16)
    hub.post("/v1/workloads", workload("hidden", project="other", clusters=("east",)))
    viewer = hub.post("/v1/tokens", {"name": "team", "role": "viewer", "projects": ["search"]})
    browser.get(f"{base(hub)}/workloads")
    browser.find_element(By.ID, "token").send_keys(viewer["secret"])
    browser.find_element(By.ID, "login").click()
    wait_until(lambda: browser.current_url.endswith("/ui/workloads"), what="logged in")
    cookie = session_cookie(browser)

    status, body = stream(hub, cookie, "kinds=workloads&since_revision=0")
    assert status == 200
    assert '"name":"llama"' in body and '"name":"hidden"' not in body
    status, body = stream(hub, cookie, "kinds=workloads&project=other")
    assert status == 403 and "PERMISSION_DENIED" in body
    status, body = stream(hub, cookie, "kinds=gadgets")
    assert status == 400 and "unknown kind 'gadgets'" in body
    status, body = stream(hub, cookie, "kinds=workloads&since_revision=99999")
    assert status == 410 and "OUT_OF_RANGE" in body
    # No session: sent to the login form, as for any page (an EventSource gives up on it).
    status, _ = stream(hub, "wingsmith_session=forged", "kinds=workloads")
    assert status == 303
