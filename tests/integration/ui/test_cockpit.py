"""The dashboard's cockpit in a real browser: the workload and cluster pages and their forms.

Each action is clicked in headless Chromium and its effect read back from the REST API;
cordon, uncordon and drain show a dry-run preview that changes nothing until confirmed; a
refusal shows the hub's message on the page; a scoped token sees only the forms it may use;
an unknown page is the dashboard's 404 page. Screenshots go under the test's tmp_path.
"""

from __future__ import annotations

import pathlib
import urllib.request
from collections.abc import Callable
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.harness import Hub, SimAgent, wait_until, workload
from tests.integration.ui.test_dashboard import (
    base,
    csp_violations,
    login,
    present,
    settled,
    shot,
    text_of,
)


def click(browser: webdriver.Chrome, css: str) -> None:
    """Click `css` once it is there; again when htmx swapped the live block between finding
    the element and clicking it (the click then reached nothing)."""

    def clicked() -> bool:
        if not present(browser, css):
            return False
        try:
            browser.find_element(By.CSS_SELECTOR, css).click()
        except StaleElementReferenceException:
            return False
        except WebDriverException as e:
            if "does not belong to the document" not in str(e):
                raise
            return False
        return True

    wait_until(clicked, timeout=10, interval=0.05, what=f"{css} clicked")


def notice_is(browser: webdriver.Chrome, text: str) -> None:
    """The page's answer reads `text` (awaited: the page before may show an older answer)."""
    wait_until(
        lambda: present(browser, "#notice") and text_of(browser, "#notice") == text,
        what=f"the answer {text!r}",
    )


def login_as(browser: webdriver.Chrome, hub: Hub, token: str, page: str) -> None:
    browser.get(f"{base(hub)}/{page}")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "login").click()
    wait_until(lambda: browser.current_url.endswith(f"/ui/{page}"), what=f"on {page}")


def test_cluster_page_cordon_uncordon_drain_with_a_preview_first(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    agents(cluster_id="east", token=hub.register_cluster("east", region="us-east"))
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", replicas=2, tp=2, clusters=("east",)))
    wait_until(
        lambda: (hub.get("/v1/deployments/llama.east")["status"] or {}).get("ready_replicas") == 2,
        what="llama running",
    )
    login(browser, hub)

    # The fleet page links each cluster to its page.
    click(browser, 'tr[data-cluster="east"] a')
    wait_until(lambda: browser.current_url.endswith("/ui/clusters/east"), what="cluster page")
    east = hub.get("/v1/clusters/east")
    for name, devices in east["devices"].items():
        assert text_of(browser, f'#classes tr[data-class="{name}"] .total') == str(devices["total"])
    for node in east["nodes"]:
        assert present(browser, f'#nodes tr[data-node="{node["node_id"]}"]')
    assert present(browser, '#deployments tr[data-deployment="llama.east"]')
    # GPU allocation over time: the vendored uPlot draws the hub's samples of east.
    wait_until(lambda: present(browser, "#cluster-chart .uplot canvas"), what="the chart")
    assert int(str(browser.find_element(By.ID, "cluster-chart").get_attribute("data-series"))) == 2
    browser.execute_script("document.getElementById('cluster-chart').scrollIntoView()")
    shot(browser, tmp_path, "cluster-chart")
    browser.execute_script("window.scrollTo(0, 0)")
    shot(browser, tmp_path, "cluster")

    # Cordon: a preview first, which changes nothing; then the confirmation does.
    click(browser, "#cordon")
    assert text_of(browser, "#preview h2") == "Preview: cordon the whole cluster"
    assert not hub.get("/v1/clusters/east")["cordoned"], "a preview writes nothing"
    shot(browser, tmp_path, "cluster-cordon-preview")
    click(browser, "#cordon-confirm")
    notice_is(browser, "cordon: done (the whole cluster)")
    assert hub.get("/v1/clusters/east")["cordoned"]
    assert "cordoned" in text_of(browser, "#marks")
    browser.get(f"{base(hub)}/fleet")
    assert "cordoned" in text_of(browser, 'tr[data-cluster="east"] .state')
    shot(browser, tmp_path, "fleet-cordoned")

    # Uncordon one node only when it was the node that was cordoned: cordon a node first.
    browser.get(f"{base(hub)}/clusters/east")
    click(browser, "#uncordon")
    click(browser, "#uncordon-confirm")
    wait_until(lambda: not hub.get("/v1/clusters/east")["cordoned"], what="uncordoned")
    node = east["nodes"][0]["node_id"]
    wait_until(lambda: present(browser, "#cordon-target"), what="the cordon form")
    Select(browser.find_element(By.ID, "cordon-target")).select_by_value(f"node:{node}")
    click(browser, "#cordon")
    assert text_of(browser, "#preview h2") == f"Preview: cordon {node}"
    click(browser, "#cordon-confirm")
    wait_until(lambda: hub.get("/v1/clusters/east")["cordoned_nodes"] == [node], what="node")
    assert "cordoned" in text_of(browser, f'#nodes tr[data-node="{node}"] .node-marks')

    # Drain: previewed only; the cluster stays as it is.
    click(browser, "#drain")
    assert text_of(browser, "#preview h2") == "Preview: drain the whole cluster"
    assert present(browser, "#dry-run")
    assert not hub.get("/v1/clusters/east")["draining"]
    click(browser, "#cancel")
    wait_until(lambda: not present(browser, "#preview"), what="preview gone")
    browser.get(f"{base(hub)}/fleet")
    assert "partly cordoned" in text_of(browser, 'tr[data-cluster="east"] .state')


def test_workload_page_scale_disable_delete_and_history(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    agents(cluster_id="east", token=hub.register_cluster("east"))
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", replicas=2, tp=2, clusters=("east",)))
    wait_until(
        lambda: (hub.get("/v1/deployments/llama.east")["status"] or {}).get("ready_replicas") == 2,
        what="llama running",
    )
    login(browser, hub, "workloads")
    click(browser, 'tr[data-workload="llama"] strong a')
    wait_until(lambda: browser.current_url.endswith("/ui/workloads/llama"), what="workload page")
    link = '#deployments tr[data-deployment="llama.east"] a[href$="/clusters/east"]'
    assert present(browser, link)

    # Scale: the answer in place, the API agrees; a bad number is refused in place.
    field = browser.find_element(By.ID, "replicas")
    field.clear()
    field.send_keys("3")
    click(browser, "#scale")
    notice_is(browser, "scaled to 3 replicas")
    assert hub.get("/v1/workloads/llama")["replicas"] == 3
    field = browser.find_element(By.ID, "replicas")
    field.clear()
    field.send_keys("100000")
    click(browser, "#scale")
    assert text_of(browser, "#error"), "the hub's refusal is shown"
    assert hub.get("/v1/workloads/llama")["replicas"] == 3

    # Disable and enable the deployment.
    click(browser, '#deployments tr[data-deployment="llama.east"] button.toggle')
    notice_is(browser, "llama.east disabled")
    assert hub.get("/v1/deployments/llama.east")["enabled"] is False
    click(browser, '#deployments tr[data-deployment="llama.east"] button.toggle')
    notice_is(browser, "llama.east enabled")
    assert hub.get("/v1/deployments/llama.east")["enabled"] is True

    # History: the audited changes, newest first.
    wait_until(lambda: present(browser, '#history tr[data-action="UpdateWorkload"]'), what="hist")
    assert present(browser, '#history tr[data-action="UpdateDeployment"]')
    # Its timeline: created, then the four audited changes, in the admission lane.
    wait_until(
        lambda: (
            len(browser.find_elements(By.CSS_SELECTOR, '#timeline [data-lane="admission"]')) >= 5
        ),
        what="the timeline's events",
    )
    shot(browser, tmp_path, "workload")

    # A managed deployment is not offered "Promote to managed".
    browser.get(f"{base(hub)}/deployments/llama.east/promote")
    assert "managed already" in text_of(browser, "#already-managed")
    assert not present(browser, "#promote")
    browser.get(f"{base(hub)}/workloads/llama")

    # Delete: a confirmation page with the dry run; a wrong name deletes nothing.
    click(browser, "#delete")
    assert text_of(browser, "#dry-run .summary")
    shot(browser, tmp_path, "workload-delete")
    browser.find_element(By.ID, "confirm").send_keys("not-llama")
    click(browser, "#confirm-delete")
    assert "to confirm" in text_of(browser, "#error")
    assert hub.rest("GET", "/v1/workloads/llama", check=False)[0] == 200
    browser.find_element(By.ID, "confirm").send_keys("llama")
    click(browser, "#confirm-delete")
    wait_until(lambda: browser.current_url.endswith("/ui/workloads"), what="back on the list")
    assert hub.rest("GET", "/v1/workloads/llama", check=False)[0] == 404


def test_scoped_tokens_see_only_their_forms_and_unknown_pages_are_404(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    agents(cluster_id="east", token=hub.register_cluster("east"))
    hub.create_project("a", H100_80GB=8)
    hub.create_project("b", H100_80GB=8)
    hub.post("/v1/workloads", workload("alpha", project="a", replicas=1, clusters=("east",)))
    hub.post("/v1/workloads", workload("beta", project="b", replicas=1, clusters=("east",)))
    operator = hub.post("/v1/tokens", {"name": "team-a", "role": "operator", "projects": ["a"]})
    login_as(browser, hub, operator["secret"], "workloads/alpha")
    assert text_of(browser, "#scale-form button"), "an operator of a scales a's workload"
    assert present(browser, "#history-note"), "the audit log is the admin's"
    browser.get(f"{base(hub)}/clusters/east")
    wait_until(lambda: present(browser, "#nodes"), what="cluster page")
    assert not present(browser, "#cluster-actions"), "maintenance is the admin's"

    # A form it was not shown is still refused by the hub, in place, and audited.
    browser.get(f"{base(hub)}/workloads/alpha")
    wait_until(lambda: present(browser, "#scale-form"), what="scale form")
    browser.execute_script(
        "document.getElementById('scale-form').action ="
        " document.getElementById('scale-form').action.replace('/alpha/', '/beta/');"
    )
    click(browser, "#scale")
    assert "may change only its own projects" in text_of(browser, "#error")
    assert hub.get("/v1/workloads/beta")["replicas"] == 1

    # Authority hand-over from the deployment page, by the operator of its project.
    browser.get(f"{base(hub)}/deployments/alpha.east")
    click(browser, "#demote")
    wait_until(lambda: hub.get("/v1/deployments/alpha.east")["authority"] == "observed", what="x")
    assert text_of(browser, "#review-promote") == "Review and promote…"

    # Unknown pages: the dashboard's own 404 page, with the session's navigation.
    browser.get(f"{base(hub)}/no-such-page")
    assert text_of(browser, "h1") == "Not found"
    assert present(browser, "header nav")
    shot(browser, tmp_path, "not-found")
    browser.get(f"{base(hub)}/clusters/nowhere")
    assert text_of(browser, "h1") == "Not found"

    # The favicon is a vendored file the page links to.
    icon = browser.find_element(By.CSS_SELECTOR, 'link[rel="icon"]').get_attribute("href")
    assert icon and icon.endswith("/ui/static/favicon.svg")
    with urllib.request.urlopen(icon, timeout=10) as answer:
        assert answer.status == 200 and b"<svg" in answer.read()


def test_a_paused_rollout_is_resumed_then_aborted_from_the_workload_page(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    """Two clusters, one wave at a time; wave-b's pods never become ready, so its wave misses
    its deadline and the rollout pauses (docs/rollouts.md "Waves")."""
    hub.create_project("search", H100_80GB=64)
    for cluster_id, ready_after in (("wave-a", "0.3s"), ("wave-b", "60m")):
        agents(
            cluster_id=cluster_id,
            token=hub.register_cluster(cluster_id),
            spec=f"nodes=1,gpus=8,class=H100-80GB,ready_after={ready_after}",
        )
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    body = workload("chat", replicas=2, clusters=("wave-a", "wave-b"))
    body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 3}
    hub.post("/v1/workloads", body)
    wait_until(
        lambda: (hub.get("/v1/deployments/chat.wave-a")["status"] or {}).get("ready_replicas"),
        what="wave-a running",
    )
    hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})

    def state() -> str:
        return str((hub.get("/v1/workloads/chat")["rollout_status"] or {}).get("state"))

    wait_until(lambda: state() == "paused", what="paused at wave-b's deadline")
    login(browser, hub, "workloads/chat")
    assert "rollout paused" in text_of(browser, "#rollout-state")
    assert present(browser, '#waves tr[data-wave="wave-b"]')
    # The timeline: created, the rollout's start and its waves, in their lanes.
    lanes = settled(
        lambda: [
            e.get_attribute("data-lane")
            for e in browser.find_elements(By.CSS_SELECTOR, "#timeline rect.event")
        ]
    )
    assert "admission" in lanes and lanes.count("rollout") >= 3, lanes
    shot(browser, tmp_path, "workload-rollout-paused")
    click(browser, "#resume")
    notice_is(browser, "rollout resumed")
    assert state() in ("rolling", "paused"), "resumed (it may pause again: wave-b never readies)"
    click(browser, "#abort")
    notice_is(browser, "rollout aborted")
    assert state() == "aborted"
    assert hub.get("/v1/workloads/chat")["serving"]["engine_version"] == "0.11.0"


def test_a_rolling_rollout_is_paused_by_hand_then_resumed_from_the_workload_page(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    """wave-a converges, then wave-b stays in flight (its pods never become ready, its
    deadline is far): the rollout is rolling, the page offers **Pause rollout**."""
    hub.create_project("search", H100_80GB=64)
    for cluster_id, ready_after in (("wave-a", "0.3s"), ("wave-b", "60m")):
        agents(
            cluster_id=cluster_id,
            token=hub.register_cluster(cluster_id),
            spec=f"nodes=1,gpus=8,class=H100-80GB,ready_after={ready_after}",
        )
        wait_until(lambda c=cluster_id: hub.get(f"/v1/clusters/{c}")["devices"], what="devices")
    body = workload("chat", replicas=2, clusters=("wave-a", "wave-b"))
    body["rollout"] = {"max_clusters_in_flight": 1, "wave_deadline_seconds": 3600}
    hub.post("/v1/workloads", body)
    wait_until(
        lambda: (hub.get("/v1/deployments/chat.wave-a")["status"] or {}).get("ready_replicas"),
        what="wave-a running",
    )
    hub.patch("/v1/workloads/chat", {"serving": {"engine_version": "0.11.1"}})

    def status() -> dict[str, Any]:
        return dict(hub.get("/v1/workloads/chat")["rollout_status"] or {})

    def waves() -> dict[str, str]:
        return {c["cluster_id"]: c["state"] for c in status().get("clusters", [])}

    wait_until(lambda: waves().get("wave-b") == "rolling", what="wave-b in flight")
    login(browser, hub, "workloads/chat")
    assert "rollout rolling" in text_of(browser, "#rollout-state")
    assert not present(browser, "#resume")
    click(browser, "#pause")
    notice_is(browser, "rollout paused")
    assert (status()["state"], status()["reason"]) == ("paused", "paused_by_operator")
    assert "paused_by_operator" in text_of(browser, "#rollout-state")
    assert not present(browser, "#pause")
    shot(browser, tmp_path, "workload-rollout-paused-by-hand")
    (record, *_) = hub.get("/v1/audit?action=PauseWorkloadRollout")["records"]
    assert (record["outcome"], record["edge"]) == ("OK", "dashboard")

    # Paused twice (the API paused it meanwhile, the page still shows the old answer): the
    # hub's refusal shows in place.
    click(browser, "#resume")
    notice_is(browser, "rollout resumed")
    assert status()["state"] == "rolling"
    hub.post("/v1/workloads/chat:pause", {})
    browser.execute_script(
        "var f = document.querySelector('#rollout-actions form');"
        " f.action = f.action.replace(/resume$|pause$/, 'pause'); f.submit();"
    )
    wait_until(lambda: present(browser, "#error"), what="the refusal shown")
    assert "has no rolling rollout to pause" in text_of(browser, "#error")


def test_projects_page_lists_the_demand_waiting_for_its_quota_in_admission_order(
    hub: Hub, agents: Callable[..., SimAgent], browser: webdriver.Chrome, tmp_path: pathlib.Path
) -> None:
    agents(cluster_id="east", token=hub.register_cluster("east"))
    hub.create_project("search", H100_80GB=4)
    wait_until(lambda: hub.get("/v1/clusters/east")["devices"], what="east's devices")
    hub.post("/v1/workloads", workload("first", replicas=1, tp=4, clusters=("east",)))
    wait_until(
        lambda: hub.get("/v1/deployments/first.east")["admitted_replicas"] == 1, what="admitted"
    )
    hub.post("/v1/workloads", workload("second", replicas=2, tp=4, clusters=("east",)))
    urgent = workload("urgent", replicas=1, tp=4, clusters=("east",))
    urgent["priority"] = "high"
    hub.post("/v1/workloads", urgent)
    second = hub.get("/v1/deployments/second.east")
    assert second["admission_reason"] == "insufficient_quota"
    login(browser, hub, "projects")
    queue = '[data-queue="search"]'
    wait_until(lambda: present(browser, f"{queue} tr[data-waiting]"), what="the queue")
    ranks = settled(
        lambda: [
            (row.get_attribute("data-waiting"), row.find_element(By.CSS_SELECTOR, ".rank").text)
            for row in browser.find_elements(By.CSS_SELECTOR, f"{queue} tr[data-waiting]")
        ]
    )
    api = {
        name: (d["admitted_replicas"], d["admission_reason"])
        for name in ("first.east", "second.east", "urgent.east")
        for d in [hub.get(f"/v1/deployments/{name}")]
    }
    assert ranks == [("urgent.east", "1"), ("second.east", "2")], api
    why = text_of(browser, f'{queue} tr[data-waiting="second.east"] .why')
    assert why.startswith("insufficient_quota")
    assert text_of(browser, f'{queue} tr[data-waiting="second.east"] .short') == "2 of 2"
    shot(browser, tmp_path, "projects-waiting")
    chart = '.chart[data-chart="search"]'
    wait_until(lambda: present(browser, f"{chart} .uplot canvas"), what="the project's chart")
    assert browser.find_element(By.CSS_SELECTOR, chart).get_attribute("data-series") == "3"
    assert csp_violations(browser) == []
