"""GET /v1/openapi.json: every route the gateway serves is in it and nothing else, and a live
hub, fuzzed from it by schemathesis with the admin token and with none, answers no 5xx and
nothing the document does not describe.

The fuzzing is bounded (FUZZ_CASES per operation and credential) and derandomized, so a run
is repeatable and stays within seconds; it prints its figures (cases, responses by status,
failures) for the record.
"""

from __future__ import annotations

import collections
import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.errors
import hypothesis.strategies as st
import pytest
import schemathesis
import yaml
from google.api import annotations_pb2
from schemathesis import checks
from schemathesis.generation.modes import GenerationMode

from hub.api import contract
from hub.api.openapi import OPENAPI_PATH
from hub.service import validate
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until, workload
from tests.integration.test_rejects_and_paging import FOREIGN_DGD
from wingsmith.v1 import control_pb2

FUZZ_CASES = 15
# Every check this schemathesis has, positive data acceptance included: a request the
# document allows is answered 2xx, or 401/403/404/409/429 (who may, what exists: no schema
# can know), never 400.
# (None: schemathesis' default set, which is all of them; their names are printed.)
checks.load_all_checks()
CHECK_NAMES = sorted(checks.CHECKS.get_all_names())
# The document's `format: page-token` (hub/service/validate.py PAGE_TOKEN_RULE): only a
# next_page_token the hub handed out. Here, tokens it would hand out after a key that every
# list has the form of (the audit log's keys are record numbers; the others' are names).
schemathesis.openapi.format(
    "page-token",
    st.one_of(
        st.just(""),
        st.from_regex(r"[1-9][0-9]{0,9}", fullmatch=True).map(
            lambda key: validate.next_token([key], 1)
        ),
    ),
)


def fetch_document(hub: Hub) -> dict[str, Any]:
    url = f"http://127.0.0.1:{hub.http_port}{OPENAPI_PATH}"
    with urllib.request.urlopen(url, timeout=10) as response:  # no token: it holds no data
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")
        document: dict[str, Any] = json.loads(response.read())
    return document


def proto_rules() -> set[tuple[str, str]]:
    """(METHOD, path) of every google.api.http rule, read straight off the proto descriptor."""
    rules: set[tuple[str, str]] = set()
    service = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
    for method in service.methods:
        options = method.GetOptions()
        if not options.HasExtension(annotations_pb2.http):
            continue
        rule = options.Extensions[annotations_pb2.http]
        for binding in (rule, *rule.additional_bindings):
            kind = binding.WhichOneof("pattern")
            assert kind != "custom", "extend this test for custom verbs"
            rules.add((kind.upper(), getattr(binding, kind)))
    return rules


def test_the_document_lists_every_route_and_nothing_else(hub: Hub) -> None:
    document = fetch_document(hub)
    assert document["openapi"].startswith("3.1")
    listed = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert listed == proto_rules() | {("GET", OPENAPI_PATH)}
    # Each listed operation really routes (no "no route" 404, no 405) with made-up values.
    for method, path in sorted(listed):
        concrete = path.replace("{", "x").replace("}", "")
        if streams(document["paths"][path][method.lower()]):
            # A stream does not end: a revision never handed out is refused at once (410).
            concrete += "?since_revision=999999999"
        status, body = hub.rest(method, concrete, check=False)
        message = body.get("error", {}).get("message", "")
        assert status != 405 and not message.startswith("no route"), (method, path, body)
    # A route the document lacks is not served.
    status, body = hub.rest("GET", "/v1/nothing-here", check=False)
    assert status == 404 and body["error"]["message"].startswith("no route")


def test_the_document_speaks_the_hubs_json(hub: Hub) -> None:
    document = fetch_document(hub)
    schemas = document["components"]["schemas"]
    deployment = schemas["wingsmith.v1.Deployment"]
    # Enum words and null for the unspecified value; int64 as numbers; presence as null.
    assert deployment["properties"]["authority"]["enum"] == ["managed", "observed", None]
    assert deployment["properties"]["generation"]["type"] == "integer"
    assert {"type": "null"} in deployment["properties"]["status"]["anyOf"]
    assert set(deployment["required"]) == set(deployment["properties"])
    engine = schemas["wingsmith.v1.ServingConfig.Input"]["properties"]["engine"]
    assert "vllm" in engine["enum"] and "ENGINE_VLLM" in engine["enum"]
    error = document["paths"]["/v1/projects/{name}"]["get"]["responses"]["default"]
    assert error["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


# One request breaking each cross-field rule of the contract: (method, HTTP method, path,
# body, query). The rule's own predicate must say it breaks, and the hub must refuse it.
_SINCE, _UNTIL = "2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"
CROSS_FIELD_BREAKS: list[tuple[str, str, str, dict[str, Any], dict[str, str]]] = [
    ("CreateWorkload", "POST", "/v1/workloads", workload("x", tp=4, expert_parallel=3), {}),
    ("CreateWorkload", "POST", "/v1/workloads", workload("x", image="mirror/vllm:latest"), {}),
    (
        "CreateWorkload",
        "POST",
        "/v1/workloads",
        {**workload("x"), "placement": {"clusters": ["east"], "cluster_selector": {"a": "b"}}},
        {},
    ),
    ("UpdateWorkload", "PATCH", "/v1/workloads/llama", {"serving": {"expert_parallel": 3}}, {}),
    (
        "CreateApiToken",
        "POST",
        "/v1/tokens",
        {"name": "t", "role": "admin", "projects": ["search"]},
        {},
    ),
    ("CreateApiToken", "POST", "/v1/tokens", {"name": "t", "role": "operator"}, {}),
    ("ListAuditRecords", "GET", "/v1/audit", {}, {"since": _SINCE, "until": _UNTIL}),
    ("CordonCluster", "POST", "/v1/clusters/east:cordon", {"node": "n", "device_class": "A"}, {}),
    (
        "UncordonCluster",
        "POST",
        "/v1/clusters/east:uncordon",
        {"node": "n", "device_class": "A"},
        {},
    ),
]


def test_every_cross_field_rule_the_document_states_is_one_the_hub_enforces(hub: Hub) -> None:
    hub.register_cluster("east")
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", tp=2, clusters=("east",)))
    assert {case[0] for case in CROSS_FIELD_BREAKS} == set(contract.CROSS_FIELD)
    for method, verb, path, body, query in CROSS_FIELD_BREAKS:
        rules = contract.CROSS_FIELD[method]
        assert not all(rule.holds(body, query) for rule in rules), (method, body, query)
        url = f"{path}?{urllib.parse.urlencode(query)}" if query else path
        status, answer = hub.rest(verb, url, body or None, check=False)
        assert (status, answer["error"]["status"]) == (400, "INVALID_ARGUMENT"), (method, answer)


def streams(operation: dict[str, Any]) -> bool:
    return "text/event-stream" in operation["responses"]["200"]["content"]


@pytest.mark.slow
def test_schemathesis_finds_no_5xx_and_no_response_outside_the_document(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: Path
) -> None:
    # Something to read: a cluster with an agent and a discovered DGD, a project, a workload.
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    agents(cluster_id="east", token=hub.register_cluster("east"), seed_path=str(seed))
    hub.create_project("search", H100_80GB=16)
    hub.post("/v1/workloads", workload("llama", replicas=1, tp=2, clusters=("east",)))
    wait_until(lambda: hub.get("/v1/deployments/llama.east")["status"], what="reported")
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")

    schema = schemathesis.openapi.from_dict(fetch_document(hub))
    base_url = f"http://127.0.0.1:{hub.http_port}"
    figures: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    # Streams (Server-Sent Events) never end, so no response would come back to validate:
    # tests/integration/test_watch.py holds them.
    operations = [
        op
        for op in (result.ok() for result in schema.get_all_operations())
        if not streams(op.definition.raw)
    ]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        for token in (ADMIN_TOKEN, None):
            headers = {"authorization": f"Bearer {token}"} if token else {}
            for operation in operations:
                run_operation(
                    operation,
                    base_url,
                    headers,
                    mode=mode,
                    figures=figures,
                    failed=failed,
                    failures=failures,
                )

    cases = sum(v for k, v in figures.items() if k.split()[-1].isdigit())
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(figures.items()))
    print(f"\nschemathesis checks: {', '.join(CHECK_NAMES)}")
    print(f"schemathesis: {len(operations)} operations x 2 credentials x 2 modes, {cases} cases")
    print(f"responses by mode and status: {statuses}")
    print(f"failures: {len(failures)}; by mode and kind: {dict(sorted(failed.items())) or 'none'}")
    (tmp_path / "failures.txt").write_text("\n\n".join(failures))  # all of them, to read
    assert not failures, "\n".join(failures[:10])
    assert cases >= len(operations) * 2 * 3, "too few cases ran to mean anything"
    assert figures["positive 200"] > 0 and figures["positive 401"] > 0
    assert figures["negative 400"] > 0, "no request the document refuses was refused"


def _sends_nothing_invalid(case: Any) -> bool:
    """A negative case whose fault may be a query value that HTTP cannot carry: `[]`, None or
    `{}` sends no key at all (`{"": []}`, `{"page_token": {}}`), and an object's members go
    out as keys of their own (form style, exploded: `page_token={"a": 1}` is `?a=1`), so the
    hub may see a valid query. Not sent: whether it is invalid depends on the rest of the
    query. (Which such cases hypothesis draws depends on what else the session ran: the
    `page_token={}` case came only beside other test files.)"""
    return any(
        value in ([], None) or isinstance(value, dict) for value in (case.query or {}).values()
    )


def run_operation(
    operation: Any,
    base_url: str,
    headers: dict[str, str],
    *,
    mode: GenerationMode,
    figures: collections.Counter[str],
    failed: collections.Counter[str],
    failures: list[str],
) -> None:
    @hypothesis.settings(
        max_examples=FUZZ_CASES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        body = case.body if isinstance(case.body, dict) else {}
        rules = contract.CROSS_FIELD.get(operation.definition.raw["operationId"], ())
        positive = mode is GenerationMode.POSITIVE
        if positive and not all(rule.holds(body, case.query or {}) for rule in rules):
            # A rule over two fields, which the document says in words only: not sent.
            figures["skipped: breaks a cross-field rule"] += 1
            return
        if mode is GenerationMode.NEGATIVE and _sends_nothing_invalid(case):
            figures["skipped: nothing invalid sent"] += 1
            return
        response = case.call(base_url=base_url, headers=headers, timeout=10)
        figures[f"{mode.value} {response.status_code}"] += 1
        try:
            case.validate_response(
                response, headers=headers, transport_kwargs={"base_url": base_url}
            )
        # schemathesis raises a FailureGroup (a BaseExceptionGroup): every one is kept, and
        # the test fails on the list with the first ten.
        except (Exception, BaseExceptionGroup) as e:
            for f in getattr(e, "exceptions", [e]):
                failed[f"{mode.value} {type(f).__name__}"] += 1
            failures.append(
                f"{case.method} {case.formatted_path} {case.body!r} {case.query!r}: {e}"
            )

    try:
        fuzz()
    except hypothesis.errors.Unsatisfiable:
        # Nothing of the operation can be made invalid (a GET by name takes any segment).
        assert mode is GenerationMode.NEGATIVE, operation.label
        figures["negative: nothing to break"] += 1
