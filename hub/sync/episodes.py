"""A fault told once: when it starts (with its cause), a summary while it lasts, and when it
clears. Used by the hub's periodic loops (liveness flush, staleness, node reporters, the hub
heartbeat), which retry every second or so: logging each failure with its traceback buried
the log under one identical traceback a second while a disk was full (docs/operations.md
"Faults in the log").

A storage fault (hub.errors.StoreError: the disk is full, the database is unavailable) is a
condition of the machine, told without a traceback. Anything else is a defect: its first
occurrence is logged with the traceback, then summarized like any other fault.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from hub import errors

SUMMARY_EVERY_S = 60.0


class FaultEpisode:
    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        summary_every_s: float = SUMMARY_EVERY_S,
    ) -> None:
        self._log = log
        self._what = what
        self._clock = clock
        self._summary_every_s = summary_every_s
        self._since: float | None = None
        self._told = 0.0
        self._failures = 0
        self._last = ""

    @property
    def active(self) -> bool:
        return self._since is not None

    def failed(self, error: BaseException) -> None:
        """One more failed attempt: logged when the episode starts and once a summary period
        after, never per attempt."""
        now = self._clock()
        cause = error.message if isinstance(error, errors.WingsmithError) else repr(error)
        self._failures += 1
        self._last = cause
        if self._since is None:
            self._since = self._told = now
            defect = not isinstance(error, errors.StoreError)
            self._log.warning(
                "%s failed: %s; retrying, and saying so again every %.0f s while it lasts",
                self._what,
                cause,
                self._summary_every_s,
                exc_info=error if defect else None,
            )
        elif now - self._told >= self._summary_every_s:
            self._told = now
            self._log.warning(
                "%s still failing: %d attempts failed over %.0f s; last cause: %s",
                self._what,
                self._failures,
                now - self._since,
                cause,
            )

    def succeeded(self) -> None:
        """An attempt worked: the end of the episode is told once."""
        if self._since is None:
            return
        self._log.warning(
            "%s works again after %d failed attempts over %.0f s (last cause: %s)",
            self._what,
            self._failures,
            self._clock() - self._since,
            self._last,
        )
        self._since, self._failures, self._last = None, 0, ""
