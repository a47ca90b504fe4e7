"""Admission: which deployments' demand fits quota and capacity. Pure.

hub/service/admit.py reads an `AdmissionView` and the waiting `Demand`s inside one write
transaction, calls `decide`, and commits the decisions in that same transaction, so two
admissions can never both spend the same quota or the same free device (docs/admission.md).

Accounting, per device class:
- A deployment *charges* max((admitted + surge replicas) x devices_per_replica, devices it
  holds in live allocations): `used` (allocated) plus `reserved` (admitted, not yet allocated).
- A project's quota is spent by the charges of its deployments: admit only if the charge after
  admitting still fits the limit (charged + delta <= limit).
- A cluster's free devices = verified healthy devices - allocated devices (anyone's pods) -
  reservations of admitted deployments. Admit only if delta <= free.
- Demand is first tried whole: the delta (desired - admitted replicas, less what the deployment
  already holds) is admitted whole or waits, so that a demand that fits whole is never cut
  short by an older one that does not. Then, once every whole demand had its turn, a second
  pass admits to each waiting deployment, oldest first, as many whole replicas as quota and
  capacity still allow: whenever some of its replicas could run, some do, and the rest wait as
  its own pending share (reason and message say for what). Admitted replicas keep running
  while the rest waits.
- Scale-downs and disabled deployments release at once (they need no check).
- A stale cluster (silent past the grace period) offers no free device: new demand there waits
  on insufficient_capacity, saying the cluster is stale; what it already admitted stays.
- A cordoned cluster (or one cordoned for the demand's class) likewise offers no free device
  to new demand, which waits on `cordoned`; a cordoned node's idle devices are not free.
- A cluster no agent ever connected for has reported no device: demand there waits on
  insufficient_capacity saying so, not "0 free" (that would claim a count nobody reported).
- A rolling deployment may also get *surge* replicas, so old and new run side by side: as many
  as quota and capacity allow, up to its admitted replicas, granted after every regular demand
  of the pass (a rollout never takes room a waiting deployment could use). With no surge the
  rollout replaces old replicas in place (docs/rollouts.md): it is never blocked.

- A deployment whose replicas no agent of ours creates (observed; on a read-only cluster: the
  demand's idle_reason) is admitted no further than the replicas that exist without it (its
  pods, and what its DGD asks for as the cluster reports it), so nothing is reserved for
  replicas that never will; the rest waits with that reason (docs/admission.md "Replicas no
  agent creates").
- A cluster holding fewer devices than it admitted (back smaller: view.overcommitted) first
  sheds admitted replicas that are only reserved, lowest priority and most recently admitted
  first, until it fits; they wait on insufficient_capacity.

Order: higher priority first, then best-effort FIFO. Demands are considered by priority class
(hub.model.PRIORITIES, highest first), then oldest first (pending_since); one that does not fit
does not block a later, smaller one that does. With every workload at the default priority this
is plain FIFO.

Preemption (only when the view says it is on: the hub's --preemption): a demand that fits its
quota but not the cluster's free devices may take whole replicas back from *managed*, enabled
deployments of the same device class on that cluster whose workload has a strictly lower
priority, of the same project, or of a project whose policy lets other projects preempt it;
never an observed deployment, never its own workload. Victims are chosen lowest priority first,
then the most recently admitted, and only as many replicas as the demand needs (none at all
when even every eligible victim would not make one more of its replicas fit). A victim's
admitted replicas drop (its surge goes), it waits with reason `preempted` and a message naming
the preemptor, and is re-admitted when room returns, like any waiting demand. Devices its pods
still hold are *releasing*: the preemptor waits for them (it claims them for this pass, and is
first in the next one by its priority) instead of preempting again, and the victim itself does
not count them as room. Surge for a rollout never preempts: a rollout takes only free room, so
a preemption never costs the preemptor's workload a ready replica.

Layout: `records` holds what goes in and out (Demand, Cover, AdmissionView, Decision and the
keys), `ledger` what a pass has charged and has free as it admits, `preemption` the victims a
pass takes replicas back from, and `order` the pass itself (`decide`): the order of its steps
and one demand's decision. Importers use the names below, from this package.
"""

from hub.admission.order import decide
from hub.admission.records import (
    AdmissionView,
    CapacityKey,
    Cover,
    Decision,
    Demand,
    QuotaKey,
)

__all__ = [
    "AdmissionView",
    "CapacityKey",
    "Cover",
    "Decision",
    "Demand",
    "QuotaKey",
    "decide",
]
