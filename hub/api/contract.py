"""The REST contract's rules as data: which input rule guards which proto field, which fields a
call requires, which fields an update may change. One table, read twice.

- The hub enforces it: the handlers take their update masks from `MUTABLE`, the dispatcher
  refuses control characters by `STRINGS` / `FREE_TEXT`, the use cases check values with the
  very `validate.Rule`s named here (hub/service/validate.py).
- The OpenAPI document states it (hub/api/openapi.py): each rule's pattern, bounds and
  description on the field it guards, `required` from `REQUIRED`, the update bodies and their
  `update_mask` paths from `MUTABLE`.
Held together by tests: tests/unit/api/test_document_rules.py (every `validate.*` call of
the use cases names a field whose documented schema carries that rule) and
tests/integration/test_openapi.py (schemathesis: the hub accepts what the document allows
and refuses what it refuses; each cross-field rule here is one the hub enforces).

Rules are keyed by proto full name (`wingsmith.v1.Workload.name`) or, for the paging and
selector fields every list request shares, by field name (`BY_NAME`): a new list RPC or a
new `label_selector` field is covered without an entry here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hub import access, placement, serving
from hub.service import validate
from hub.service import workload_checks as workload_rules
from hub.service.workloads import MAX_WORKLOAD_NAME

# C0 control characters and DEL. Nothing a caller names (a resource, a label, a model, a
# node) has a use for one: a CR/LF once reached the rendered DGD through serving.model.
_CONTROL = r"\u0000-\u001f\u007f"
STRINGS = validate.Rule("no control character (U+0000..U+001F, U+007F)", pattern=f"[^{_CONTROL}]*")
CONTROL = re.compile(f"[{_CONTROL}]")
# Free text: an engine argument may be a multi-line value (a chat template), so a tab or a
# line feed is kept there; every other control character is refused there too.
_FREE_TEXT_CONTROL = r"\u0000-\u0008\u000b-\u001f\u007f"
FREE_TEXT = validate.Rule(
    "free text: no control character but tab and line feed", pattern=f"[^{_FREE_TEXT_CONTROL}]*"
)
FREE_TEXT_CONTROL = re.compile(f"[{_FREE_TEXT_CONTROL}]")
FREE_TEXT_FIELDS = frozenset({"wingsmith.v1.ServingConfig.engine_args"})
# The request paths of free-text fields, as the dispatcher's check spells them.
FREE_TEXT_PATH = re.compile(r"(^|\.)engine_args\[\d+\]\Z")


def _body(regex: re.Pattern[str]) -> str:
    """The body of an anchored `^...\\Z` pattern, for a `validate.Rule`."""
    text = regex.pattern
    assert text.startswith("^") and text.endswith("\\Z"), text
    return text[1:-2]


_WORKLOAD_NAME = validate.name_rule(MAX_WORKLOAD_NAME)
_PARALLEL = validate.Rule(
    f"0..{serving.MAX_PARALLEL} (0 means 1)", minimum=0, maximum=serving.MAX_PARALLEL
)
_FAILOVER_S = validate.Rule(
    f"seconds, 1..{workload_rules.MAX_FAILOVER_S} (0: {workload_rules.DEFAULT_FAILOVER_S})",
    minimum=0,
    maximum=workload_rules.MAX_FAILOVER_S,
)
_WORKERS = validate.Rule(
    f"0..{serving.MAX_WORKERS} workers (0 means 1)", minimum=0, maximum=serving.MAX_WORKERS
)
_SERVING: dict[str, validate.Rule] = {
    "engine_version": validate.Rule(
        "the engine's version, e.g. 0.11.0 (a Kubernetes label value)",
        pattern=_body(serving._VERSION),
    ),
    "model": validate.Rule(
        serving.MODEL_RULE,
        pattern=f"{_body(serving._HF_REPO)}|{_body(serving._LOCAL_PATH)}",
        max_length=serving.MAX_MODEL_LENGTH,
        # A repo id has no '--' or '..'; a path no '.' or '..' part.
        forbidden=r"^[^/].*(--|\.\.)|/\.\.?(/|$)",
    ),
    "tensor_parallel": _PARALLEL,
    "pipeline_parallel": _PARALLEL,
    "expert_parallel": _PARALLEL,
    "context_length": validate.Rule("tokens, >= 0 (0: the model's default)", minimum=0),
    "quantization": validate.Rule("e.g. fp8", pattern=_body(serving._QUANTIZATION), optional=True),
    "image": validate.Rule(
        "a container image reference", pattern=_body(serving._IMAGE), optional=True
    ),
    "runtime_version": validate.Rule(
        "MAJOR.MINOR.PATCH, e.g. 1.5.0", pattern=_body(serving._RUNTIME_VERSION), optional=True
    ),
    "engine_args": validate.Rule(
        f"at most {serving.MAX_ENGINE_ARGS} arguments",
        items=validate.Rule(
            f"one argument, 1..{serving.MAX_ENGINE_ARG_LENGTH} characters",
            pattern=FREE_TEXT.pattern.replace("*", "+"),
            max_length=serving.MAX_ENGINE_ARG_LENGTH,
        ),
        limit=serving.MAX_ENGINE_ARGS,
    ),
}
_NAMES = validate.Rule("names of resources", items=validate.NAME)

FIELDS: dict[str, validate.Rule] = {
    "wingsmith.v1.Project.name": validate.NAME,
    "wingsmith.v1.Project.quotas": validate.QUOTAS_RULE,
    "wingsmith.v1.Project.labels": validate.LABELS_RULE,
    "wingsmith.v1.Cluster.cluster_id": validate.NAME,
    "wingsmith.v1.Cluster.labels": validate.LABELS_RULE,
    "wingsmith.v1.Workload.name": _WORKLOAD_NAME,
    "wingsmith.v1.Workload.project": validate.NAME,
    "wingsmith.v1.Workload.device_class": validate.DEVICE_CLASS_RULE,
    "wingsmith.v1.Workload.replicas": validate.REPLICAS_RULE,
    "wingsmith.v1.Workload.labels": validate.LABELS_RULE,
    **{f"wingsmith.v1.ServingConfig.{name}": rule for name, rule in _SERVING.items()},
    "wingsmith.v1.KvCacheConfig.dtype": validate.Rule(
        "e.g. fp8 or auto", pattern=_body(serving._KV_DTYPE), optional=True
    ),
    "wingsmith.v1.KvCacheConfig.gpu_memory_utilization": validate.Rule(
        "a fraction in [0, 1] (0: the engine's default)", minimum=0, maximum=1
    ),
    "wingsmith.v1.KvCacheConfig.block_size": validate.Rule(
        f"0..{serving.MAX_BLOCK_SIZE} tokens", minimum=0, maximum=serving.MAX_BLOCK_SIZE
    ),
    "wingsmith.v1.Disaggregation.prefill_workers": _WORKERS,
    "wingsmith.v1.Disaggregation.decode_workers": _WORKERS,
    "wingsmith.v1.Placement.clusters": _NAMES,
    "wingsmith.v1.Placement.cluster_selector": validate.LABELS_RULE,
    "wingsmith.v1.PlacementPreference.clusters": _NAMES,
    "wingsmith.v1.PlacementPreference.cluster_selector": validate.LABELS_RULE,
    "wingsmith.v1.PlacementPreference.weights": validate.Rule(
        f"weights by cluster id, each 0..{placement.MAX_WEIGHT}",
        keys=validate.NAME,
        values=validate.Rule("a weight", minimum=0, maximum=placement.MAX_WEIGHT),
    ),
    "wingsmith.v1.Placement.preferences": validate.Rule(
        f"at most {placement.MAX_PREFERENCES} steps", limit=placement.MAX_PREFERENCES
    ),
    "wingsmith.v1.Failover.toleration_seconds": _FAILOVER_S,
    "wingsmith.v1.Failover.stabilization_seconds": _FAILOVER_S,
    "wingsmith.v1.RolloutPolicy.max_clusters_in_flight": validate.Rule(
        f"0..{workload_rules.MAX_CLUSTERS_IN_FLIGHT} (0: every cluster at once)",
        minimum=0,
        maximum=workload_rules.MAX_CLUSTERS_IN_FLIGHT,
    ),
    "wingsmith.v1.RolloutPolicy.wave_deadline_seconds": validate.Rule(
        f"0..{workload_rules.MAX_WAVE_DEADLINE_S} seconds (0: the default)",
        minimum=0,
        maximum=workload_rules.MAX_WAVE_DEADLINE_S,
    ),
    "wingsmith.v1.ApiToken.name": validate.NAME,
    "wingsmith.v1.ApiToken.projects": _NAMES,
    "wingsmith.v1.PromoteDiscoveredRequest.project": validate.NAME,
    "wingsmith.v1.PromoteDiscoveredRequest.workload_name": _WORKLOAD_NAME.optional_form(),
    "wingsmith.v1.PromoteDiscoveredRequest.device_class": (
        validate.DEVICE_CLASS_RULE.optional_form()
    ),
    "wingsmith.v1.CordonClusterRequest.node": validate.NODE_RULE.optional_form(),
    "wingsmith.v1.CordonClusterRequest.device_class": validate.DEVICE_CLASS_RULE.optional_form(),
    "wingsmith.v1.UncordonClusterRequest.node": validate.NODE_RULE.optional_form(),
    "wingsmith.v1.UncordonClusterRequest.device_class": (
        validate.DEVICE_CLASS_RULE.optional_form()
    ),
}

# Fields every request of their name shares (the list calls' paging and selectors).
BY_NAME: dict[str, validate.Rule] = {
    "page_size": validate.PAGE_SIZE_RULE,
    "page_token": validate.PAGE_TOKEN_RULE,
    "label_selector": validate.SELECTOR_RULE,
}

# What a call refuses to go without, as request field paths: each is `required` in the
# document and never null (an enum: no null, which is its *_UNSPECIFIED value).
REQUIRED: dict[str, tuple[str, ...]] = {
    "CreateProject": ("project", "project.name"),
    "CreateCluster": ("cluster", "cluster.cluster_id"),
    "CreateWorkload": (
        "workload",
        "workload.name",
        "workload.project",
        "workload.device_class",
        "workload.serving",
        "workload.serving.engine",
        "workload.serving.engine_version",
        "workload.serving.model",
    ),
    "CreateApiToken": ("token", "token.name", "token.role"),
    "SetDeploymentAuthority": ("authority",),
    "PromoteDiscovered": ("project",),
}

# The fields each update call may change (its update_mask paths start with one of them). The
# handlers read their masks' rules from here; the document lists them as the update body's
# only properties and spells every path they allow in the update_mask parameter.
MUTABLE: dict[str, tuple[str, ...]] = {
    "UpdateWorkload": ("replicas", "serving", "placement", "rollout", "priority", "labels"),
    "UpdateProject": ("quotas", "preemptible_by_other_projects", "labels"),
    "UpdateDeployment": ("enabled",),
    "UpdateCluster": ("labels",),
}


def rule_for(field: FieldDescriptor) -> validate.Rule | None:
    """The rule guarding `field`, if any."""
    rule = FIELDS.get(field.full_name)
    parent = field.containing_type
    if rule is None and parent is not None and parent.full_name.endswith("Request"):
        rule = BY_NAME.get(field.name)
    return rule


def mask_paths(resource: Descriptor, allowed: tuple[str, ...]) -> list[str]:
    """Every update_mask path an update call takes: each mutable field, and the fields below
    it as far as singular messages go (protobuf's FieldMask rule: a path may not pass through
    a repeated field or a map)."""
    return [path for name in allowed for path in _paths(resource.fields_by_name[name], name)]


def _paths(field: FieldDescriptor, path: str) -> Iterator[str]:
    yield path
    message = field.message_type
    if message is None or field.is_repeated or message.full_name.startswith("google.protobuf."):
        return
    for child in message.fields:
        yield from _paths(child, f"{path}.{child.name}")


@dataclass(frozen=True)
class CrossField:
    """A rule over two fields of one request, which JSON Schema cannot state: the document
    says it in the operation's description; `holds` tells a request (its JSON body and query,
    as sent) that keeps it (the schemathesis test sends only those)."""

    description: str
    holds: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


def _divides(body: Mapping[str, Any], _: Mapping[str, Any]) -> bool:
    spec = body.get("serving") or {}
    tp = spec.get("tensor_parallel") or 1
    ep = spec.get("expert_parallel") or 1
    return isinstance(tp, int) and isinstance(ep, int) and tp % ep == 0


def _update_divides(body: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    spec = body.get("serving") or {}
    # The stored tensor_parallel is not in the request: only ep <= 1 surely divides it.
    return (spec.get("expert_parallel") or 1) == 1 or _divides(body, query)


def _image_versioned(body: Mapping[str, Any], _: Mapping[str, Any]) -> bool:
    spec = body.get("serving") or {}
    image = spec.get("image") or ""
    return not image or bool(spec.get("runtime_version")) or serving.image_versioned(image)


def _token_projects(body: Mapping[str, Any], _: Mapping[str, Any]) -> bool:
    role = str(body.get("role") or "").lower().removeprefix("api_role_")
    named = bool(body.get("projects"))
    return named if role in access.PROJECT_ROLES else not named


def _window(_: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    since, until = query.get("since"), query.get("until")
    if not since or not until:
        return True
    try:
        return datetime.fromisoformat(since) < datetime.fromisoformat(until)
    except (TypeError, ValueError):
        return True


def _one_way_of_placing(body: Mapping[str, Any], _: Mapping[str, Any]) -> bool:
    where = body.get("placement") or {}
    if where.get("clusters") and where.get("cluster_selector"):
        return False
    for step in where.get("preferences") or []:
        given = [k for k in ("clusters", "cluster_selector", "weights") if (step or {}).get(k)]
        if len(given) != 1:
            return False
    return True


_PLACING = CrossField(
    "placement: clusters or cluster_selector, not both; each preference gives exactly one of"
    " clusters, cluster_selector or weights",
    _one_way_of_placing,
)


def _one_scope(body: Mapping[str, Any], _: Mapping[str, Any]) -> bool:
    return not (body.get("node") and body.get("device_class"))


_SCOPE = CrossField("node or device_class, not both", _one_scope)
_EXPERTS = CrossField(
    "serving.expert_parallel must divide serving.tensor_parallel (experts are spread over a"
    " worker's devices)",
    _divides,
)
_IMAGE = CrossField(
    "serving.image whose tag is not a semantic version (e.g. 1.5.0) needs serving.runtime_version",
    _image_versioned,
)
CROSS_FIELD: dict[str, tuple[CrossField, ...]] = {
    "CreateWorkload": (_EXPERTS, _IMAGE, _PLACING),
    "UpdateWorkload": (CrossField(_EXPERTS.description, _update_divides), _IMAGE, _PLACING),
    "CreateApiToken": (
        CrossField(
            "token.projects: at least one for a viewer or operator token, none for any other role",
            _token_projects,
        ),
    ),
    "ListAuditRecords": (CrossField("since must be before until", _window),),
    "CordonCluster": (_SCOPE,),
    "UncordonCluster": (_SCOPE,),
}
