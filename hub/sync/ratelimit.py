"""A token bucket limiting how fast the hub accepts stream handshakes.

After a hub restart every agent reconnects at once; each handshake costs an auth lookup, a
session write and a delta read. A refused handshake gets RESOURCE_EXHAUSTED with a time to come
back (`retry_after`): refused agents are given successive slots at the bucket's rate, so a herd
of 10,000 becomes a queue that drains at that rate, instead of agents backing off blindly and
exponentially (up to 30 s each), which left the hub idle while agents waited and took minutes
for a large fleet.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self, *, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock()
        # The next slot promised to a refused caller (see retry_after).
        self._next_slot = 0.0

    def try_take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def retry_after(self) -> float:
        """For a refused caller: seconds until its slot, the next one after every slot already
        promised, one per token the bucket refills."""
        now = self._clock()
        slot = max(now, self._next_slot) + 1.0 / self._rate
        self._next_slot = slot
        return slot - now
