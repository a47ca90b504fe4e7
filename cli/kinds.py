"""The resource kinds the CLI knows: their words, REST paths and what each command may do.

Each kind has kubectl's words too: a singular, a plural and short names (`wl`, `dep`, `cl`,
`proj`, ...), and its manifest shape: the Kubernetes-style `kind` (`Workload`) and which of
the hub's fields are its `spec` (what a person declares) rather than its `status` (what the
hub and the clusters report).

Pure data, read by `cli.main` (argument choices), `cli.commands` (paths) and `cli.output`
(which table to draw). Adding a kind here is the first step of supporting it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

# A manifest's apiVersion (`get -o yaml` writes it, `apply -f` reads it).
API_VERSION = "wingsmith.dev/v1"

# Workload priority classes, lowest first: the API's Priority enum, as REST writes it (the
# CLI speaks REST only; tests/unit/cli checks this against the enum).
PRIORITIES = ("low", "normal", "high", "critical")

# List filters: the CLI option name (without "--") -> the ListXRequest query parameter.
FILTER_PARAMS = {
    "workload": "workload_id",
    "cluster": "cluster_id",
    "deployment": "deployment_id",
    "replica": "replica_id",
    "project": "project",
    # -l/--selector: Kubernetes' equality-based label selector (docs/cli.md "Labels"): over
    # a workload's, project's or cluster's own labels; over their workload's for deployments,
    # replicas, allocations and discovered workloads (promoted ones; the others have none).
    "selector": "label_selector",
}


@dataclass(frozen=True)
class Kind:
    name: str
    plural: str
    # Collection path; a single resource is path + "/" + quoted ref.
    path: str
    # The field that names a resource in messages ("workload/llama deleted").
    name_field: str
    # The CLI filters (keys of FILTER_PARAMS) its list accepts.
    filters: tuple[str, ...] = ()
    # GET path/{ref} exists.
    gettable: bool = True
    # Verbs beyond get: which commands accept this kind.
    creatable: bool = False
    deletable: bool = False
    # The boolean list parameter `get --all` sets to true; "" where --all does not apply.
    all_param: str = ""
    # kubectl's short names (`wl` for workloads).
    short: tuple[str, ...] = ()
    # The hub's fields that are declared (a manifest's `spec`); the rest is `status`.
    spec: tuple[str, ...] = ()
    # Declared fields a manifest holds in `metadata` besides the name (kubectl's labels).
    metadata: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        return (self.name, self.plural, *self.short)

    @property
    def title(self) -> str:
        """The manifest's `kind`: `Workload`, `Discovered`."""
        return self.name.capitalize()


CLUSTER = Kind(
    "cluster",
    "clusters",
    "/v1/clusters",
    "cluster_id",
    filters=("selector",),
    creatable=True,
    deletable=True,
    short=("cl",),
    spec=("labels",),
)
PROJECT = Kind(
    "project",
    "projects",
    "/v1/projects",
    "name",
    creatable=True,
    deletable=True,
    filters=("selector",),
    short=("proj",),
    spec=("quotas", "preemptible_by_other_projects"),
    metadata=("labels",),
)
WORKLOAD = Kind(
    "workload",
    "workloads",
    "/v1/workloads",
    "name",
    filters=("project", "selector"),
    creatable=True,
    deletable=True,
    short=("wl",),
    spec=("project", "replicas", "device_class", "serving", "placement", "rollout", "priority"),
    metadata=("labels",),
)
DEPLOYMENT = Kind(
    "deployment",
    "deployments",
    "/v1/deployments",
    "name",
    filters=("workload", "cluster", "selector"),
    short=("dep",),
    # Set with enable/disable and authority promote/demote; everything else the hub decides.
    spec=("enabled", "authority"),
)
REPLICA = Kind(
    "replica",
    "replicas",
    "/v1/replicas",
    "name",
    filters=("deployment", "cluster", "selector"),
    short=("rep",),
)
ALLOCATION = Kind(
    "allocation",
    "allocations",
    "/v1/allocations",
    "replica_id",
    filters=("replica", "deployment", "project", "cluster", "selector"),
    gettable=False,
    short=("alloc",),
)
# Workloads an agent found running that the hub never declared. "discovered" is both the
# singular and the plural, as in the API ("GET /v1/discovered" lists {"discovered": [...]}).
DISCOVERED = Kind(
    "discovered",
    "discovered",
    "/v1/discovered",
    "name",
    filters=("cluster", "selector"),
    all_param="include_ignored",
    short=("disc",),
)

KINDS = (CLUSTER, PROJECT, WORKLOAD, DEPLOYMENT, REPLICA, ALLOCATION, DISCOVERED)

# `create -f` applies documents in this order whatever the file's order, so that a workload
# never arrives before the project and cluster it names.
CREATION_ORDER = (PROJECT, CLUSTER, WORKLOAD)


def lookup(word: str) -> Kind:
    """The kind a singular or plural word names, case-insensitive; KeyError if none."""
    wanted = word.lower()
    for kind in KINDS:
        if wanted in kind.words:
            return kind
    raise KeyError(word)


def suggest(word: str, choices: Sequence[str]) -> str:
    """ ", did you mean 'x'?" for the closest of `choices` (difflib), or "" when none is close."""
    close = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def words(*, where: str = "") -> list[str]:
    """Every accepted word (singular, then plural) of the kinds with the attribute `where`."""
    found = [w for kind in KINDS if not where or getattr(kind, where) for w in kind.words]
    # dict.fromkeys: once each, in order ("discovered" is its own plural).
    return list(dict.fromkeys(found))
