"""How long the agent waits after a failure before trying again: one rule for every retry loop.

The n-th failure in a row waits a delay drawn uniformly from [d/2, d], where
d = min(cap, base x 2^n) ("equal jitter"). Half of it is certain, so a peer that keeps failing
(a hub refusing a handshake, an API server answering 410 to every watch, a kubelet rate
limiting, another agent taking the stream) is never hit again at once; half is random, so a
fleet that failed together spreads out instead of retrying in step. A success resets n.

Callers: the sync stream's reconnects and its superseded wait (agent/sync/client.py), resync
requests (agent/app.py), the Kubernetes adapter's watches and discovery
(agent/cluster/kube/), the kubelet client's rate-limited calls (agent/kubelet/client.py). The
CLI's retries (cli/client.py) draw their pauses by the same rule; it may not import the agent,
so it states the rule again, and tests/unit/test_backoff_and_limits.py holds both to it.
Pure: no clock, no sleeping; the caller waits the delay however it waits.
"""

from __future__ import annotations

import random

# 2^30 times any base is past every cap; the exponent stops growing there.
_MAX_EXPONENT = 30


def ceiling(attempt: int, *, base_s: float, cap_s: float) -> float:
    """The longest wait after `attempt` failures in a row (0: the first)."""
    return min(cap_s, base_s * 2.0 ** min(attempt, _MAX_EXPONENT))


def jittered(longest: float, rng: random.Random | None = None) -> float:
    """A wait in [longest/2, longest]: the rule's jitter."""
    return (rng or random).uniform(longest / 2, longest)


class Backoff:
    """Successive waits by the rule; `reset()` after a success."""

    def __init__(
        self, *, base_s: float = 0.5, cap_s: float = 30.0, rng: random.Random | None = None
    ) -> None:
        if not 0 < base_s <= cap_s:
            raise ValueError(f"backoff needs 0 < base ({base_s}) <= cap ({cap_s})")
        self.base_s, self.cap_s = base_s, cap_s
        self.rng = rng or random.Random()
        self.attempt = 0

    def next_delay(self) -> float:
        delay = jittered(ceiling(self.attempt, base_s=self.base_s, cap_s=self.cap_s), self.rng)
        self.attempt = min(self.attempt + 1, _MAX_EXPONENT)
        return delay

    def reset(self) -> None:
        self.attempt = 0
