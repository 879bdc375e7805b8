"""When a live Slurm source pulls, what it asks for, and where the next pull starts.

Pure: no Django, no HTTP. A pull reads the jobs slurmdbd knows in the window
``[cursor − overlap, now]``; the cursor then moves to the last end time seen, held back to
the start of any job still running (its record is re-read, and replaced, once it ends).
A failed pull leaves the cursor where it was and waits longer each time (capped).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass

# A source that never pulled reads this far back (older history: import sacct files).
FIRST_PULL_LOOKBACK_S = 24 * 3600
# Back-off after failures: the interval doubled per failure, never longer than this.
MAX_BACKOFF_S = 6 * 3600


@dataclass(frozen=True)
class Window:
    """The time span one pull asks slurmdbd for (aware datetimes, UTC)."""

    start: dt.datetime
    end: dt.datetime

    def start_age_s(self) -> int:
        """Seconds from the start to the end, rounded up: the pull asks for ``now-<age>`` so
        slurmrestd's own clock and time zone place the window (no local-time guessing)."""
        return max(0, math.ceil((self.end - self.start).total_seconds()))


def pull_window(
    cursor: dt.datetime | None,
    now: dt.datetime,
    overlap_s: int,
    first_lookback_s: int = FIRST_PULL_LOOKBACK_S,
) -> Window:
    """``[cursor − overlap, now]``; without a cursor, the last ``first_lookback_s``."""
    if cursor is None:
        return Window(now - dt.timedelta(seconds=first_lookback_s), now)
    start = min(cursor, now) - dt.timedelta(seconds=overlap_s)
    return Window(start, now)


def next_cursor(
    window: Window,
    previous: dt.datetime | None,
    ends: Iterable[dt.datetime],
    running_starts: Iterable[dt.datetime],
) -> dt.datetime:
    """The last end time seen (never before ``previous``, never after the window), held
    back to the earliest start of a job still running.

    Nothing ended: the cursor stays (a first pull keeps its window's start), so a job whose
    end reaches slurmdbd late is still inside the next window.
    """
    seen = [end for end in ends if end <= window.end]
    floor = previous if previous is not None else window.start
    last_end = max([floor, *seen])
    return min([last_end, *running_starts])
