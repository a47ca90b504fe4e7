"""Adoption: discovered workloads and what users decide about them (docs/adoption.md).

- list / get: what agents found running that the hub never declared (ignored ones hidden by
  default; gone ones kept and marked);
- track: keep it in the inventory, observed only; no deployment;
- ignore: not interesting; it leaves the default list;
- promote: a workload pinned to that cluster with one deployment, authority observed, its
  serving config read off the DGD (hub/adoption.py), imported_args recorded and engine_args
  left for the user to decide. Its quota is charged for what runs: promotion goes through
  admission like any demand (an adopted deployment that does not fit its project's quota
  stays pending, and cannot be promoted to managed until it does).
"""

from __future__ import annotations

import secrets

from hub import adoption, errors, serving
from hub.model import Deployment, Discovered, Placement, Workload
from hub.service import admit, dryrun, scoped, selectors, validate, views
from hub.service import workloads as workloads_service
from hub.service.context import ServiceContext, Tx, snapshot, transaction
from hub.service.workloads import MAX_WORKLOAD_NAME
from hub.store import accounting, deployments, discovered, projects, workloads
from hub.store import replicas as replica_store
from hub.store.port import Transaction, project_lock


def list_page(
    ctx: ServiceContext,
    *,
    cluster_id: str,
    include_ignored: bool,
    page_size: int,
    page_token: str,
    label_selector: str = "",
) -> tuple[list[Discovered], str]:
    """A page of discovered workloads; `label_selector` tests the labels of the workload each
    was promoted to (an entry not promoted has none)."""
    limit, after = validate.page(page_size, page_token)
    selector = selectors.parse(label_selector)
    with snapshot(ctx) as conn:
        found = discovered.list_page(
            conn,
            cluster_id=cluster_id,
            include_ignored=include_ignored,
            after=after,
            limit=limit,
            selector=selector,
        )
    return found, validate.next_token([d.discovered_id for d in found], limit)


def get(ctx: ServiceContext, ref: str) -> Discovered:
    with snapshot(ctx) as conn:
        return _get(conn, ref)


def track(ctx: ServiceContext, ref: str) -> Discovered:
    return _decide(ctx, ref, "tracked")


def ignore(ctx: ServiceContext, ref: str) -> Discovered:
    return _decide(ctx, ref, "ignored")


def promote(
    ctx: ServiceContext, ref: str, *, project: str, workload_name: str = "", device_class: str = ""
) -> views.WorkloadView:
    # Scoped to the cluster it was found on (`_promote` checks it again) and the project's
    # lock, as a workload create: everything it reads and writes is that cluster's (the
    # discovered row, its pods, held devices, admission there) or the new workload's.
    with snapshot(ctx) as conn:
        found = discovered.get(conn, ref)
    scope = {found.cluster_id} if found is not None else set()
    workload_id = scoped.write(
        ctx, scope, lambda tx: _promote(ctx, tx, ref, project, workload_name, device_class)
    )
    return workloads_service.get(ctx, workload_id)


def preview_promote(
    ctx: ServiceContext, ref: str, *, project: str, workload_name: str = "", device_class: str = ""
) -> dryrun.DryRun:
    """What `promote` would do (validate_only), writing nothing."""
    return dryrun.preview(
        ctx,
        lambda c, tx: _promote(c, tx, ref, project, workload_name, device_class),
        workload_ref="",
    )


def _promote(
    ctx: ServiceContext, tx: Tx, ref: str, project: str, workload_name: str, device_class: str
) -> str:
    found = _get(tx.conn, ref)
    # Its cluster's lock before anything is read of it (two promotes of one DGD run one after
    # the other: the second finds it promoted); the project's lock before the project is
    # read, as a workload create (hub/service/workloads.py).
    scoped.need(tx, [found.cluster_id])
    _check_promotable(found)
    name = workload_name or found.name
    validate.dns_label(name, "workload_name", max_length=MAX_WORKLOAD_NAME)
    validate.dns_label(project, "project")
    tx.conn.serialize(project_lock(project))
    if projects.get(tx.conn, project) is None:
        raise errors.NotFound("project", project)
    device = device_class or found.observation.device_class
    if not device:
        raise errors.InvalidArgument(
            "device_class",
            "the cluster has not placed its pods on devices yet: name the device class",
        )
    validate.device_class(device, "device_class")
    workload, deployment = _adopted(found, name=name, project=project, device=device, now=tx.now)
    workloads.insert(tx.conn, workload)
    deployments.save(tx.conn, deployment)
    # Its pods already hold devices: counted as held from now, not reserved beside them until
    # the agent reports the deployment (one heartbeat later).
    replica_store.adopt_replicas(
        tx.conn,
        cluster_id=found.cluster_id,
        deployment_id=deployment.deployment_id,
        pods=found.observation.pods,
        observe_ns=found.observation.observe_ns,
    )
    accounting.refresh_held(tx.conn, found.cluster_id)
    tx.touched.add(found.cluster_id)
    discovered.set_state(
        tx.conn,
        discovered_id=found.discovered_id,
        state="promoted",
        workload_id=workload.workload_id,
    )
    admit.run(ctx, tx, cluster_ids=[found.cluster_id])
    return workload.workload_id


def _adopted(
    found: Discovered, *, name: str, project: str, device: str, now: float
) -> tuple[Workload, Deployment]:
    observation = found.observation
    normalized = serving.normalize(adoption.serving_of(observation), field="serving")
    shape = adoption.shape(observation)
    replicas = shape.replicas
    workload = Workload(
        workload_id="wl_" + secrets.token_hex(8),
        name=name,
        project=project,
        replicas=replicas,
        device_class=device,
        serving=normalized,
        placement=Placement(clusters=(found.cluster_id,)),
        create_time=now,
        update_time=now,
    )
    deployment = Deployment(
        deployment_id="dep_" + secrets.token_hex(8),
        workload_id=workload.workload_id,
        workload_name=name,
        project=project,
        cluster_id=found.cluster_id,
        desired_replicas=replicas,
        admitted_replicas=0,
        admission_reason="",
        admission_message="",
        generation=1,
        authority="observed",
        enabled=True,
        engine_args=(),
        imported_args=observation.imported_args,
        serving=normalized,
        serving_digest=serving.digest(normalized),
        device_class=device,
        # What its workers request, as it runs (hub/adoption.py): its charge is what it holds.
        devices_per_replica=shape.devices_per_replica or normalized.devices_per_replica,
        revision=0,
        create_time=now,
        update_time=now,
        pending_since=now,
        dgd_namespace=found.namespace,
        dgd_name=found.name,
        adopted_from=found.discovered_id,
    )
    return workload, deployment


def _check_promotable(found: Discovered) -> None:
    if found.state == "promoted":
        raise errors.FailedPrecondition(
            f"{found.ref} is already promoted", [f"see workload {found.workload_id}"]
        )
    if found.gone:
        raise errors.FailedPrecondition(f"{found.ref} is gone from its cluster")


def _decide(ctx: ServiceContext, ref: str, state: str) -> Discovered:
    with transaction(ctx) as tx:
        found = _get(tx.conn, ref)
        if found.state == "promoted":
            raise errors.FailedPrecondition(
                f"{found.ref} is promoted to workload {found.workload_id}",
                ["delete the workload first to change the decision"],
            )
        discovered.set_state(tx.conn, discovered_id=found.discovered_id, state=state)
        return _get(tx.conn, found.discovered_id)


def _get(conn: Transaction, ref: str) -> Discovered:
    found = discovered.get(conn, ref)
    if found is None:
        raise errors.NotFound("discovered workload", ref)
    return found
