"""The dashboard in a real browser: a hub, simulated agents, headless Chromium.

Each page is loaded after logging in with the admin token, and what it shows is checked
against the REST API; a page updates itself (htmx) without a reload; track, ignore and
promote are clicked on the Discovered page and the state change is read back from the API.
Screenshots of every page are saved under the test's tmp_path (their names in docs).
"""

from __future__ import annotations

import copy
import pathlib
import time
from collections.abc import Callable
from typing import TypeVar

import yaml
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload
from tests.integration.test_rejects_and_paging import FOREIGN_DGD

T = TypeVar("T")


def base(hub: Hub) -> str:
    return f"http://127.0.0.1:{hub.http_port}/ui"


def login(browser: webdriver.Chrome, hub: Hub, page: str = "fleet") -> None:
    browser.get(f"{base(hub)}/{page}")
    assert "/ui/login" in browser.current_url, "no page without logging in"
    browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    browser.find_element(By.ID, "login").click()
    wait_until(lambda: browser.current_url.endswith(f"/ui/{page}"), what=f"on {page}")
    # The URL is the page's once its document commits, before it is parsed.
    wait_until(
        lambda: browser.execute_script("return document.readyState") == "complete",
        what=f"{page} loaded",
    )


def settled(read: Callable[[], T]) -> T:
    """`read()`, again when htmx swapped the page's live block in between (a stale element)."""
    for _ in range(50):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read()


def present(browser: webdriver.Chrome, css: str) -> bool:
    return settled(lambda: bool(browser.find_elements(By.CSS_SELECTOR, css)))


def text_of(browser: webdriver.Chrome, css: str) -> str:
    """The text of `css`, once it is on the page.

    A click that submits a form returns before the browser has begun to load the answer, so
    the element may not be there yet: it is awaited rather than looked up once (a lookup on
    the page being left failed CI one run in many).
    """
    wait_until(lambda: present(browser, css), what=f"{css} on the page")
    return settled(lambda: str(browser.find_element(By.CSS_SELECTOR, css).text))


def shot(browser: webdriver.Chrome, tmp_path: pathlib.Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 1000


def csp_violations(browser: webdriver.Chrome) -> list[str]:
    return [
        str(entry["message"])
        for entry in browser.get_log("browser")
        if "Content Security Policy" in str(entry["message"])
    ]


def seed_file(tmp_path: pathlib.Path, *names: str) -> str:
    documents = []
    for name in names:
        dgd = copy.deepcopy(FOREIGN_DGD)
        dgd["metadata"]["name"] = name
        documents.append(dgd)
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return str(path)


def test_every_page_shows_what_the_api_says_and_updates_itself(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    agents(cluster_id="east", token=hub.register_cluster("east", region="us-east"))
    hub.register_cluster("west")  # registered, never connected
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", replicas=2, tp=2, clusters=("east",)))
    wait_until(
        lambda: (hub.get("/v1/deployments/llama.east")["status"] or {}).get("ready_replicas") == 2,
        what="llama running",
    )

    browser.get(f"{base(hub)}/fleet")
    browser.find_element(By.ID, "token").send_keys("not-the-token-at-all")
    browser.find_element(By.ID, "login").click()
    assert text_of(browser, "#error") == "unknown or revoked token"
    shot(browser, tmp_path, "login-refused")
    login(browser, hub)

    # Fleet: each cluster's state and its GPUs per class, as the API has them.
    east = hub.get("/v1/clusters/east")
    row = 'tr[data-cluster="east"]'
    assert text_of(browser, f"{row} .state") == "connected"
    for name, devices in east["devices"].items():
        counts = text_of(browser, f'{row} [data-class="{name}"] .counts')
        expected = (
            f"{devices['allocated']}/{devices['reserved']}/{devices['free']}/"
            f"{devices['unusable']} of {devices['total']}"
        )
        assert counts == expected
        assert present(browser, f'{row} [data-class="{name}"] rect.seg-allocated')
    # The Dynamo API version its agent writes (h10's dgd_version), once the agent reported it.
    version = wait_until(lambda: hub.get("/v1/clusters/east")["dgd_version"], what="dgd_version")
    wait_until(lambda: text_of(browser, f"{row} .dynamo") == version, what="the Dynamo version")
    assert text_of(browser, 'tr[data-cluster="west"] .state') == "never connected"
    shot(browser, tmp_path, "fleet")

    # Workloads: phase, ready/desired, the deployment with its phase and a digest bar.
    browser.get(f"{base(hub)}/workloads")
    api = hub.get("/v1/workloads/llama")
    row = 'tr[data-workload="llama"]'
    assert text_of(browser, f"{row} td.ready") == f"{api['ready_replicas']}/2"
    assert text_of(browser, f"{row} .phase-cell").startswith(api["phase"])
    item = f'{row} li[data-deployment="llama.east"]'
    assert "running" in text_of(browser, item)
    assert present(browser, f"{item} svg rect.seg-target")
    shot(browser, tmp_path, "workloads")

    # It updates itself: scaled through the API, the row changes without a reload.
    browser.execute_script("window.wingsmithMarker = 'same page';")
    hub.patch("/v1/workloads/llama", {"replicas": 3})
    wait_until(
        lambda: text_of(browser, 'tr[data-workload="llama"] td.ready').endswith("/3"),
        timeout=15,
        what="the workloads page refreshed itself",
    )
    assert browser.execute_script("return window.wingsmithMarker") == "same page"

    # A serving change in waves: the workload says where its rollout stands.
    hub.patch(
        "/v1/workloads/llama",
        {"rollout": {"max_clusters_in_flight": 1}, "serving": {"engine_version": "0.11.1"}},
    )
    # (Converged before going on: the deployment page below compares replicas.)
    badge = 'tr[data-workload="llama"] .rollout-status'
    wait_until(
        lambda: present(browser, badge) and text_of(browser, badge) == "rollout converged",
        timeout=15,
        what="the rollout's state on the workloads page",
    )
    assert hub.get("/v1/workloads/llama")["rollout_status"]["state"] == "converged"

    # A deployment: its replicas with their nodes and devices, its allocations.
    settled(
        lambda: browser.find_element(By.CSS_SELECTOR, 'li[data-deployment="llama.east"] a').click()
    )
    wait_until(lambda: "/ui/deployments/llama.east" in browser.current_url, what="deployment")
    deployment = hub.get("/v1/deployments/llama.east")
    replicas = hub.get(f"/v1/replicas?deployment_id={deployment['deployment_id']}")["replicas"]
    for replica in replicas:
        row = f'#replicas tr[data-replica="{replica["name"]}"]'
        wait_until(lambda row=row: present(browser, row), what=f"replica {replica['name']}")
        assert text_of(browser, f"{row} .node") == replica["node_id"]
        assert text_of(browser, f"{row} .devices") == ", ".join(replica["device_ids"])
    assert "managed" in text_of(browser, "#authority")
    # The object the agent applied, as the agent reported it (the page fills it in itself).
    wait_until(
        lambda: (
            present(browser, "#applied")
            and "kind: DynamoGraphDeployment" in text_of(browser, "#applied")
        ),
        timeout=15,
        what="the applied object",
    )
    applied = hub.get("/v1/deployments/llama.east/applied")
    assert applied["digest"] in text_of(browser, "#applied-meta")
    shot(browser, tmp_path, "deployment")

    # Projects: used and reserved against the quota, per class.
    browser.get(f"{base(hub)}/projects")
    usage = hub.get("/v1/projects/search")["usage"]["H100-80GB"]
    row = 'tr[data-project="search"][data-class="H100-80GB"]'
    assert text_of(browser, f"{row} .used") == str(usage["used"])
    assert text_of(browser, f"{row} .reserved") == str(usage["reserved"])
    assert text_of(browser, f"{row} .quota") == "16"
    shot(browser, tmp_path, "projects")

    assert csp_violations(browser) == [], "every script and style comes from /ui/static"


def test_track_ignore_and_promote_from_the_discovered_page(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    token = hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    agents(cluster_id="east", token=token, seed_path=seed_file(tmp_path, "chat", "legacy"))
    wait_until(lambda: len(hub.get("/v1/discovered")["discovered"]) == 2, what="both found")
    login(browser, hub, "discovered")

    def click(name: str, css: str) -> None:
        # Awaited, not looked up once: right after the login the URL is the page's while its
        # document is still being parsed (CI found no button there once).
        target = f'tr[data-discovered="{name}"] {css}'
        wait_until(lambda: present(browser, target), what=f"{target} on the page")
        settled(lambda: browser.find_element(By.CSS_SELECTOR, target).click())

    def state(ref: str) -> str:
        return str(hub.get(f"/v1/discovered/{ref}")["state"])

    click("east.wingsmith.chat", "button.track")
    wait_until(lambda: state("east.wingsmith.chat") == "tracked", what="tracked")
    wait_until(
        lambda: text_of(browser, 'tr[data-discovered="east.wingsmith.chat"] .state') == "tracked",
        what="the page shows it tracked",
    )
    click("east.wingsmith.legacy", "button.ignore")
    wait_until(lambda: state("east.wingsmith.legacy") == "ignored", what="ignored")
    shot(browser, tmp_path, "discovered")

    # Promote asks for the project, then shows the deployment with imported vs declared.
    click("east.wingsmith.chat", "a.promote")
    wait_until(lambda: browser.find_elements(By.ID, "promote-form"), what="the promote form")
    Select(browser.find_element(By.ID, "project")).select_by_value("search")
    shot(browser, tmp_path, "promote-discovered")
    browser.find_element(By.ID, "promote").click()
    wait_until(lambda: "/ui/deployments/" in browser.current_url, what="the new deployment")
    promoted = hub.get("/v1/discovered/east.wingsmith.chat")
    assert promoted["workload_id"], "the API shows the promotion"
    workload = hub.get(f"/v1/workloads/{promoted['workload_id']}")
    assert workload["project"] == "search"
    assert "observed" in text_of(browser, "#authority")
    assert present(browser, "#review"), "imported vs declared is shown"
    shot(browser, tmp_path, "deployment-observed")

    # Review (once the cluster reported it: live values to compare), then promote to
    # managed, accepting the differences when there are any.
    name = workload["deployments"][0]["name"]
    wait_until(lambda: hub.get(f"/v1/deployments/{name}")["status"], what="reported")
    settled(lambda: browser.find_element(By.ID, "review-promote").click())
    wait_until(lambda: browser.find_elements(By.ID, "authority-form"), what="the review page")
    shot(browser, tmp_path, "review")
    if browser.find_elements(By.ID, "accept"):
        browser.find_element(By.ID, "accept").click()
    assert "not reported" not in text_of(browser, "#review")
    browser.find_element(By.ID, "promote").click()
    wait_until(lambda: hub.get(f"/v1/deployments/{name}")["authority"] == "managed", what="managed")
    wait_until(lambda: "managed" in text_of(browser, "#authority"), what="the page says managed")
    assert csp_violations(browser) == []

    # Adopted with its pod template kept, its pods keep their own labels: the hub reads them
    # on target (converged), so the digest bar shows no older version beside "converged".
    adopted = wait_until(
        lambda: (
            (d := hub.get(f"/v1/deployments/{name}"))["rollout"]
            and d["rollout"]["state"] == "converged"
            and d["live_digests"]
            and d
        ),
        what="converged",
    )
    assert adopted["live_digests"]

    def converged_all_green() -> bool:
        return (
            "converged" in text_of(browser, "#rollout")
            and present(browser, "#rollout rect.seg-target")
            and not present(browser, "#rollout rect.seg-older")
        )

    # The page refreshes itself (3 s): awaited, as it may show the state before converging.
    wait_until(converged_all_green, what="converged with no amber bar beside it")
