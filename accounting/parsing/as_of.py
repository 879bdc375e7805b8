"""An export's "as of" time, and running jobs counted only up to it.

A usage file is a picture of the accounting at one moment. That moment is, in this order:

1. the latest time printed in the file: a job's Submit, or the Start or End of a job that
   held cards (a pending job's times may lie in the future, ``--begin``, so they are not
   used; Eligible is never later than Start for a job that started);
2. the as-of time the caller was given (``--as-of``, the form or API field);
3. the upload time (the caller passes it as the given one when nothing was given).

A running job (End ``Unknown``) holds its cards up to the as-of time and no further: its
``duration_h`` is ``min(Elapsed, as_of − Start)`` (``as_of − Start`` without Elapsed), so
every card-hour it brings lies inside the hours the export covers. The parsers hold running
records back until the whole file has been read (the latest time is known only then) and
yield them last, clipped; their number is bounded by the cluster's cards, not the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from accounting.parsing.fields import localize_to_utc

# Where the as-of time came from (stored on the import as it is).
AS_OF_FROM_FILE = "file"
AS_OF_GIVEN = "given"
RUNNING_STATE = "running"


@dataclass
class AsOf:
    """The latest time seen in a file so far, and (once resolved) the export's as-of time."""

    latest: pd.Timestamp | None = None  # UTC
    value: pd.Timestamp | None = None  # UTC, set by resolve()
    source: str = ""  # AS_OF_FROM_FILE or AS_OF_GIVEN; "" while unresolved

    def observe(self, *times: pd.Series) -> None:
        """Note the latest of these UTC times (NaT ignored)."""
        for series in times:
            if series.empty:
                continue
            top = series.max()
            if pd.notna(top) and (self.latest is None or top > self.latest):
                self.latest = pd.Timestamp(top)

    def resolve(self, given: datetime | None, timezone: str) -> pd.Timestamp | None:
        """The file's latest time, else ``given`` (naive: read in ``timezone``); None: neither."""
        if self.latest is not None:
            self.value, self.source = self.latest, AS_OF_FROM_FILE
        elif given is not None:
            self.value, self.source = utc_moment(given, timezone), AS_OF_GIVEN
        return self.value


def utc_moment(moment: datetime, timezone: str) -> pd.Timestamp:
    """A datetime as a UTC timestamp; a naive one is wall-clock time in ``timezone``."""
    stamp = pd.Timestamp(moment)
    if stamp.tzinfo is None:
        return pd.Timestamp(localize_to_utc(pd.Series([stamp]), timezone).iloc[0])
    return stamp.tz_convert("UTC")


def clip_running(records: pd.DataFrame, as_of: pd.Timestamp | None) -> pd.DataFrame:
    """Running records held up to ``as_of``: duration ``min(duration_h, as_of − start)``.

    Without an as-of time (a file with no time at all cannot hold a started job) the
    durations stay as they are.
    """
    if records.empty or as_of is None:
        return records
    start = pd.to_datetime(records["start"], utc=True)
    so_far_h = ((as_of - start).dt.total_seconds() / 3600.0).clip(lower=0.0).to_numpy()
    given_h = records["duration_h"].to_numpy(dtype="float64")
    duration_h = np.fmin(np.where(np.isnan(given_h), np.inf, given_h), so_far_h)
    clipped = records.copy()
    clipped["duration_h"] = duration_h
    clipped["card_hours"] = clipped["cards"].to_numpy(dtype="float64") * duration_h
    return clipped


def hold_running(
    chunks: Iterable[pd.DataFrame], clock: AsOf, given: datetime | None, timezone: str
) -> Iterator[pd.DataFrame]:
    """Yield ``chunks`` without their running records, then those, clipped at the as-of time.

    The parser feeds ``clock`` with every time it reads (skipped lines too); the records'
    own Submit, Start and End are noted here as well. Nothing is yielded after a parser
    error: the running records of a refused file are dropped with it.
    """
    held: list[pd.DataFrame] = []
    for chunk in chunks:
        clock.observe(chunk["submit"], chunk["start"], chunk["end"])
        running = (chunk["state"].astype("object") == RUNNING_STATE).to_numpy()
        if running.any():
            held.append(chunk.loc[running])
            chunk = chunk.loc[~running].reset_index(drop=True)
        if len(chunk):
            yield chunk
    as_of = clock.resolve(given, timezone)
    if held:
        yield clip_running(pd.concat(held, ignore_index=True), as_of)
