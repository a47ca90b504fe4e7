"""Dry runs of the maintenance and authority calls (issue 20 section 4): cordon, uncordon,
drain and SetDeploymentAuthority take validate_only like every other mutating call. Each
preview writes nothing (every row of every table compared), tells no agent anything, and
answers exactly what the real call made right after then does: the cluster (or deployment)
as it would be, and the deployments that would change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from hub import errors
from hub.service import authority, clusters, deployments, dryrun, projects, views, workloads
from hub.service.context import ServiceContext
from hub.store import deployments as stored
from hub.store.port import open_store
from tests.unit.hub.test_dry_run import (
    RecordingPublisher,
    dump,
    fleet,
    published,
    spec,
)

H100 = "H100-80GB"


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    return ServiceContext(db=open_store(store_url), publisher=RecordingPublisher())


def fleet_shape(ctx: ServiceContext) -> dict[str, tuple[int, int, str]]:
    """Every deployment of the fleet: desired, admitted, reason."""
    with ctx.db.read() as conn:
        found = stored.on_clusters(conn, ["east", "west"])
        return {
            v.deployment.name: (
                v.deployment.desired_replicas,
                v.deployment.admitted_replicas,
                v.admission_reason,
            )
            for v in views.deployment_views(ctx, conn, found)
        }


def predicted(preview: dryrun.DryRun, now: dict[str, tuple[int, int, str]]) -> dict[str, object]:
    """The fleet as the preview says it would be: today's deployments with its changes."""
    result: dict[str, object] = dict(now)
    for change in preview.changes:
        name = change.current.deployment.name
        if change.after is None:
            result.pop(name, None)
        else:
            d = change.after.deployment
            result[name] = (d.desired_replicas, d.admitted_replicas, change.after.admission_reason)
    return result


def cluster_marks(view: views.ClusterView) -> tuple[bool, bool, tuple[str, ...]]:
    m = view.cluster.maintenance
    return (m.cordoned, m.draining, m.device_classes)


def check_preview_matches(
    ctx: ServiceContext,
    preview: Callable[[], tuple[views.ClusterView, dryrun.DryRun]],
    real: Callable[[], views.ClusterView],
) -> dryrun.DryRun:
    before, told, today = dump(ctx), len(published(ctx)), fleet_shape(ctx)
    view, answer = preview()
    assert dump(ctx) == before, "a dry run writes no row, no revision, no tombstone"
    assert len(published(ctx)) == told, "and tells no agent anything"
    expected = predicted(answer, today)
    done = real()
    assert cluster_marks(done) == cluster_marks(view)
    assert fleet_shape(ctx) == expected, answer.summary
    return answer


def test_a_previewed_drain_places_the_stand_ins_the_real_drain_places(
    ctx: ServiceContext,
) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=2, where=("east", "west")))
    workloads.create(ctx, spec("pinned", replicas=1, where=("east",)))

    answer = check_preview_matches(
        ctx,
        lambda: clusters.preview_drain(ctx, "east"),
        lambda: clusters.drain(ctx, "east"),
    )
    changed = {c.current.deployment.name: c.effects for c in answer.changes}
    assert changed == {"chat.west": ("scaled", "admitted")}, answer.summary
    assert clusters.get(ctx, "east").cluster.maintenance.draining


def test_a_previewed_cordon_and_uncordon_predict_the_real_calls(ctx: ServiceContext) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=1, where=("east",)))

    answer = check_preview_matches(
        ctx,
        lambda: clusters.preview_cordon(ctx, "east", device_class=H100),
        lambda: clusters.cordon(ctx, "east", device_class=H100),
    )
    assert answer.summary == dryrun.NO_CHANGE, "a cordon moves nothing that runs"
    # What waits on the cordon is admitted by the uncordon, in the preview as in the call.
    workloads.update(ctx, "chat", workloads.WorkloadChange(replicas=2))
    assert deployments.get(ctx, "chat.east").admission_reason == "cordoned"
    answer = check_preview_matches(
        ctx,
        lambda: clusters.preview_uncordon(ctx, "east", device_class=H100),
        lambda: clusters.uncordon(ctx, "east", device_class=H100),
    )
    assert "admitted" in answer.summary


def test_a_previewed_drain_of_an_unknown_cluster_is_refused_as_the_real_one(
    ctx: ServiceContext,
) -> None:
    fleet(ctx)
    with pytest.raises(errors.NotFound):
        clusters.preview_drain(ctx, "mars")
    with pytest.raises(errors.InvalidArgument):
        clusters.preview_cordon(ctx, "east", node="n1", device_class=H100)


def test_a_previewed_demotion_predicts_the_real_one(ctx: ServiceContext) -> None:
    fleet(ctx, quota=64)
    workloads.create(ctx, spec("chat", replicas=2, where=("east",)))
    before, told = dump(ctx), len(published(ctx))

    view, _ = authority.preview_set_authority(ctx, "chat.east", authority="observed")

    assert dump(ctx) == before and len(published(ctx)) == told
    assert view.deployment.authority == "observed"
    assert deployments.get(ctx, "chat.east").deployment.authority == "managed"
    real = authority.set_authority(ctx, "chat.east", authority="observed")
    assert real.deployment.authority == view.deployment.authority
    assert (real.deployment.desired_replicas, real.deployment.admitted_replicas) == (
        view.deployment.desired_replicas,
        view.deployment.admitted_replicas,
    )
    assert real.admission_reason == view.admission_reason
    with pytest.raises(errors.InvalidArgument):
        authority.preview_set_authority(ctx, "chat.east", authority="owner")
    # A promotion the real call refuses (the cluster never reported it) is refused alike.
    with pytest.raises(errors.FailedPrecondition) as dry:
        authority.preview_set_authority(ctx, "chat.east", authority="managed")
    with pytest.raises(errors.FailedPrecondition) as wet:
        authority.set_authority(ctx, "chat.east", authority="managed")
    assert str(dry.value) == str(wet.value)


def test_a_dry_run_shows_a_scoped_caller_only_its_projects_changes(ctx: ServiceContext) -> None:
    # One cluster of 8 GPUs: "big" (search) takes it whole, "other" (ads) waits for room.
    fleet(ctx, quota=64, east=8, west=0)
    projects.create(ctx, name="ads", quotas={H100: 64})
    workloads.create(ctx, spec("big", replicas=2, where=("east",)))
    workloads.create(ctx, replace(spec("other", replicas=1, where=("east",)), project="ads"))

    preview = workloads.preview_delete(ctx, "big")
    assert {c.current.deployment.name for c in preview.changes} == {"big.east", "other.east"}

    shown = dryrun.visible(preview, lambda project: project == "search")
    assert [c.current.deployment.name for c in shown.changes] == ["big.east"]
    assert shown.summary == "1 deployment: 1 removed; and 1 deployment of other projects"
    assert dryrun.visible(preview, lambda project: True) == preview
