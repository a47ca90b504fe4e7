"""Label selectors as WHERE clauses, so a list selects before its page is cut (LIMIT).

Labels are stored as a JSON object in a text column (migration 0020 and, for clusters, 0001);
each requirement becomes one EXISTS over the object's (key, value) pairs, in the dialect's
JSON table function (SQLite's json_each, PostgreSQL's jsonb_each_text). Each requirement
binds at most two parameters and names no ids, so a clause is the same size whatever the
number of rows (no chunking needed) on both backends.

`labels` is the SQL expression holding the object: a table's own column (`w.labels`) or a
scalar subquery reaching the owning workload's (replicas, allocations); NULL (no workload)
reads as no labels, which `k!=v` and `!k` match, as Kubernetes' selectors match an object
without labels.
"""

from __future__ import annotations

from hub.filters import LabelSelector
from hub.store.port import Transaction


def selected(
    conn: Transaction, selector: LabelSelector, labels: str
) -> tuple[list[str], list[str]]:
    """The clauses (to AND together) and their parameters selecting `selector`'s matches."""
    pairs = conn.dialect.label_pairs(labels)
    clauses: list[str] = []
    params: list[str] = []
    for r in selector.requirements:
        if r.op in ("=", "!="):
            test, values = "l.key = ? AND l.value = ?", [r.key, r.value]
        else:
            test, values = "l.key = ?", [r.key]
        negated = "NOT " if r.op in ("!=", "!exists") else ""
        clauses.append(f"{negated}EXISTS (SELECT 1 FROM {pairs} WHERE {test})")
        params += values
    return clauses, params


# The workload labels of a deployment's row `d` (its workload_id column).
OF_DEPLOYMENT = "(SELECT wl.labels FROM workloads wl WHERE wl.workload_id = {d}.workload_id)"
# The workload labels of a replica's row `r` (its deployment_id; none for a pod of no deployment).
OF_REPLICA = (
    "(SELECT wl.labels FROM deployments dl JOIN workloads wl ON wl.workload_id = dl.workload_id"
    " WHERE dl.deployment_id = {r}.deployment_id)"
)
