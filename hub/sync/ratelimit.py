"""A token bucket limiting how fast the hub accepts stream handshakes.

After a hub restart every agent reconnects at once; each handshake costs an auth lookup and a
delta read. Refused handshakes get RESOURCE_EXHAUSTED and the agent retries with jittered
backoff, which spreads the herd instead of letting it stall the loop.
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

    def try_take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
