"""Vectorised field parsers shared by the usage parsers.

Each returns the parsed values plus a boolean mask of values that did not parse, so callers
turn the mask into line-numbered issues in one step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

SLURM_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# Words Slurm prints for a time that has not happened (running or never-started jobs).
MISSING_TIME_WORDS = ("Unknown", "None", "", "N/A")
_ELAPSED_RE = re.compile(r"^\s*(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*$")
# Times outside this window are typos or garbage (year 0, -1, 9999), not scheduler records;
# they would also overflow later conversions.
EARLIEST_TIME = pd.Timestamp("1970-01-01")
LATEST_TIME = pd.Timestamp("2200-01-01")


def drop_implausible_times(parsed: pd.Series) -> pd.Series:
    """NaT instead of times before 1970 or from 2200 on (naive or UTC-aware series)."""
    low, high = EARLIEST_TIME, LATEST_TIME
    if getattr(parsed.dt, "tz", None) is not None:
        low, high = low.tz_localize("UTC"), high.tz_localize("UTC")
    return parsed.where((parsed >= low) & (parsed < high))


@dataclass
class ParsedTimes:
    values: pd.Series  # datetime64[us, UTC], NaT where missing or bad
    missing: np.ndarray  # the field said "no time" (Unknown, None, empty)
    bad: np.ndarray  # the field held something that is not a time


def localize_to_utc(naive: pd.Series, timezone: str) -> pd.Series:
    """Interpret naive wall-clock times in ``timezone`` and convert to UTC.

    Ambiguous autumn hours are read as standard time and spring-gap times shift forward:
    sacct prints no offset, so one hour a year cannot be told apart.
    """
    naive = naive.astype("datetime64[us]")
    if timezone.upper() == "UTC":
        return naive.dt.tz_localize("UTC")
    localized = naive.dt.tz_localize(
        timezone, ambiguous=np.zeros(len(naive), dtype=bool), nonexistent="shift_forward"
    )
    return localized.dt.tz_convert("UTC")


def parse_slurm_times(text: pd.Series, timezone: str) -> ParsedTimes:
    """Parse ``YYYY-MM-DDTHH:MM:SS`` local times; Slurm's words (Unknown, None) are missing."""
    missing = text.isin(MISSING_TIME_WORDS).to_numpy(copy=True)
    parsed = pd.to_datetime(text, format=SLURM_TIME_FORMAT, errors="coerce")
    retry = parsed.isna().to_numpy() & ~missing
    if retry.any():
        # Padded fields, a space instead of T, or fractional seconds (SLURM_TIME_FORMAT).
        stripped = text[retry].str.strip()
        missing[retry] = stripped.isin(MISSING_TIME_WORDS).to_numpy()
        parsed.loc[retry] = pd.to_datetime(stripped, format="ISO8601", errors="coerce")
    parsed = drop_implausible_times(parsed.astype("datetime64[us]"))
    bad = parsed.isna().to_numpy() & ~missing
    return ParsedTimes(localize_to_utc(parsed, timezone), missing, bad)


def _elapsed_hours_of(text: object) -> float:
    match = _ELAPSED_RE.match(str(text))
    if match is None:
        return math.nan
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 24.0 + int(hours or 0) + int(minutes) / 60.0 + float(seconds) / 3600.0


def parse_elapsed_hours(text: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slurm durations ``[D-]HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm`` -> hours.

    Parsed once per distinct value (steps repeat their job's Elapsed). Returns (hours float64
    with NaN where missing/bad, missing mask, bad mask).
    """
    codes, unique_index = pd.factorize(text, use_na_sentinel=False)
    uniques = unique_index.to_numpy(dtype=object)
    unique_hours = np.array([_elapsed_hours_of(value) for value in uniques], dtype="float64")
    unique_missing = np.array(
        [str(value).strip() in ("", "Unknown", "None") for value in uniques], dtype=bool
    )
    hours = unique_hours[codes] if len(uniques) else np.array([], dtype="float64")
    missing = unique_missing[codes] if len(uniques) else np.array([], dtype=bool)
    bad = np.isnan(hours) & ~missing
    return hours, missing, bad


@dataclass
class Durations:
    """A job's wall time as sacct printed it: ``Elapsed`` or ``ElapsedRaw`` (seconds)."""

    hours: np.ndarray  # float64, NaN where missing or bad
    missing: np.ndarray
    bad: np.ndarray
    column: str  # the file's column the hours came from ("" when it has neither)
    hint: str  # what a good value looks like, for the error


def job_durations(frame: pd.DataFrame) -> Durations:
    """Hours from ``Elapsed`` (``[D-]HH:MM:SS``) or, without it, ``ElapsedRaw`` (seconds)."""
    if "elapsed" in frame:
        hours, missing, bad = parse_elapsed_hours(frame["elapsed"])
        return Durations(hours, missing, bad, "Elapsed", "[D-]HH:MM:SS, MM:SS or MM:SS.mmm")
    if "elapsedraw" in frame:
        seconds, missing, bad = parse_numbers(frame["elapsedraw"])
        bad |= (seconds < 0).to_numpy()
        hours = (seconds / 3600.0).where(~pd.Series(bad, index=seconds.index)).to_numpy()
        return Durations(hours, missing, bad, "ElapsedRaw", "whole seconds")
    nothing = np.zeros(len(frame), dtype=bool)
    return Durations(np.full(len(frame), np.nan), ~nothing, nothing, "", "")


# TimelimitRaw: minutes, or the words sacct prints for no limit of the job's own.
TIMELIMIT_WORDS = frozenset({"UNLIMITED", "Partition_Limit", "INVALID", ""})


def bad_time_limits(text: pd.Series) -> np.ndarray:
    """Rows of a ``TimelimitRaw`` column that are neither minutes nor one of sacct's words."""
    words = text.str.strip().isin(TIMELIMIT_WORDS).to_numpy()
    minutes, _, bad = parse_numbers(text.where(~words, "0"))
    return bad | (minutes < 0).to_numpy() | ((minutes % 1) != 0).to_numpy()


def number_after(text: pd.Series, key: str) -> np.ndarray:
    """The number following ``key`` up to the next comma (``gres/gpuutil=680,...``), else NaN.

    Uses numpy string ufuncs, so the search runs in C over the whole column.
    """
    values = text.to_numpy(dtype="U")
    found = np.strings.find(values, key)
    rest = np.strings.slice(values, np.maximum(found, 0) + len(key), None)
    comma = np.strings.find(rest, ",")
    figure = np.strings.slice(rest, 0, np.where(comma < 0, np.strings.str_len(rest), comma))
    present = (found >= 0) & (np.strings.str_len(figure) > 0)
    numbers = np.full(len(values), np.nan)
    try:
        numbers[present] = figure[present].astype(np.float64)
    except ValueError:
        # Something that is not a plain number: let pandas turn it into NaN.
        numbers[present] = pd.to_numeric(pd.Series(figure[present]), errors="coerce")
    return numbers


def parse_numbers(text: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Finite decimal numbers -> float64. Returns (values, missing mask, bad mask)."""
    stripped = text.str.strip()
    missing = (stripped == "").to_numpy()
    values = pd.to_numeric(stripped.where(~missing), errors="coerce").astype("float64")
    # "nan", "inf" and overflowing figures such as 1e999 are not usable numbers.
    values = values.where(np.isfinite(values))
    bad = values.isna().to_numpy() & ~missing
    return values, missing, bad


def blank_to_na(text: pd.Series, *, strip: bool = True) -> pd.Series:
    """Empty strings become NA (str dtype); ``strip`` trims whitespace first."""
    text = text.astype("str")
    if strip:
        text = text.str.strip()
    return text.where(text != "").astype("str")


def map_distinct(values: pd.Series, function: Callable[[Any], Hashable]) -> np.ndarray:
    """Apply a Python function once per distinct value (factorize), not once per row."""
    codes, unique_index = pd.factorize(values, use_na_sentinel=False)
    uniques = np.asarray(unique_index, dtype=object)
    mapped = np.array([function(value) for value in uniques], dtype=object)
    return mapped[codes] if len(mapped) else np.array([], dtype=object)
