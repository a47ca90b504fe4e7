"""The desired state the agent holds: what the hub last sent, by revision.

Read-only mode keeps it too (flow 10: sync down and store). A delta must start at the
revision held; anything else (a gap) is refused, and the agent reconnects asking for a
snapshot.

Beside the deployments it remembers how each one it stops holding went, for the reconciler
(agent/reconcile.py): `released` (the hub released it, or it was observed when last held: its
DGD stays and only our labels come off) and `removed` (deleted while managed: its DGD goes).
`settle` forgets both once no DGD carries the id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.model import DeploymentSpec


class RevisionGap(Exception):
    def __init__(self, held: int, starts_at: int) -> None:
        super().__init__(f"delta starts at revision {starts_at}, but revision {held} is held")


@dataclass
class DesiredState:
    epoch: str = ""
    revision: int = 0
    deployments: dict[str, DeploymentSpec] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)

    def replace(
        self,
        *,
        epoch: str,
        revision: int,
        specs: Iterable[DeploymentSpec],
        releases: Iterable[str] = (),
    ) -> None:
        held = self.deployments
        self.epoch = epoch
        self.revision = revision
        self.deployments = {spec.deployment_id: spec for spec in specs}
        # Held as observed and gone from the snapshot: never deleted, whatever happened since.
        dropped = [i for i, spec in held.items() if i not in self.deployments]
        self.released.update(i for i in dropped if held[i].authority != "managed")
        self.released.update(releases)
        self._forget_ids(self.deployments)

    def apply_delta(
        self,
        *,
        epoch: str,
        from_revision: int,
        revision: int,
        upserts: Iterable[DeploymentSpec],
        removals: Iterable[str],
        releases: Iterable[str] = (),
    ) -> None:
        if epoch != self.epoch or from_revision != self.revision:
            raise RevisionGap(self.revision, from_revision)
        for spec in upserts:
            self.deployments[spec.deployment_id] = spec
        self._forget_ids({spec.deployment_id for spec in self.deployments.values()})
        for deployment_id in removals:
            held = self.deployments.pop(deployment_id, None)
            # Observed when last held: its DGD is not ours to delete (a demotion the agent
            # never applied still counts).
            observed = held is not None and held.authority != "managed"
            (self.released if observed else self.removed).add(deployment_id)
        for deployment_id in releases:
            self.deployments.pop(deployment_id, None)
            self.removed.discard(deployment_id)
            self.released.add(deployment_id)
        self.revision = revision

    def settle(self, carried: Iterable[str]) -> None:
        """Forget how the deployments no DGD carries any more went (nothing left to do)."""
        ids = set(carried)
        self.released &= ids
        self.removed &= ids

    def forget(self) -> None:
        """Drop everything: the next hello asks for a snapshot."""
        self.epoch, self.revision, self.deployments = "", 0, {}

    def _forget_ids(self, ids: Iterable[str]) -> None:
        for deployment_id in ids:
            self.released.discard(deployment_id)
            self.removed.discard(deployment_id)
