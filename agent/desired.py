"""The desired state the agent holds: what the hub last sent, by revision.

Read-only mode keeps it too (flow 10: sync down and store). A delta must start at the
revision held; anything else (a gap) is refused, and the agent reconnects asking for a
snapshot.
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

    def replace(self, *, epoch: str, revision: int, specs: Iterable[DeploymentSpec]) -> None:
        self.epoch = epoch
        self.revision = revision
        self.deployments = {spec.deployment_id: spec for spec in specs}

    def apply_delta(
        self,
        *,
        epoch: str,
        from_revision: int,
        revision: int,
        upserts: Iterable[DeploymentSpec],
        removals: Iterable[str],
    ) -> None:
        if epoch != self.epoch or from_revision != self.revision:
            raise RevisionGap(self.revision, from_revision)
        for spec in upserts:
            self.deployments[spec.deployment_id] = spec
        for deployment_id in removals:
            self.deployments.pop(deployment_id, None)
        self.revision = revision

    def forget(self) -> None:
        """Drop everything: the next hello asks for a snapshot."""
        self.epoch, self.revision, self.deployments = "", 0, {}
