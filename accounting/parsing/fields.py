"""Vectorised field parsers shared by the usage parsers.

Each returns the parsed values plus a boolean mask of values that did not parse, so callers
turn the mask into line-numbered issues in one step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

SLURM_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# Words Slurm prints for a time that has not happened (running or never-started jobs).
MISSING_TIME_WORDS = ("Unknown", "None", "", "N/A")
_ELAPSED_RE = (
    r"^\s*(?:(?P<days>\d+)-)?(?:(?P<hours>\d+):)?(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)\s*$"
)


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
    """Parse ``YYYY-MM-DDTHH:MM:SS`` (also with a space) local times; Slurm's words are missing."""
    stripped = text.str.strip()
    missing = stripped.isin(MISSING_TIME_WORDS).to_numpy()
    parsed = pd.to_datetime(stripped, format=SLURM_TIME_FORMAT, errors="coerce")
    retry = parsed.isna().to_numpy() & ~missing
    if retry.any():
        # Some exports (spreadsheets, SLURM_TIME_FORMAT) use a space or fractional seconds.
        parsed.loc[retry] = pd.to_datetime(stripped[retry], format="ISO8601", errors="coerce")
    bad = parsed.isna().to_numpy() & ~missing
    return ParsedTimes(localize_to_utc(parsed, timezone), missing, bad)


def parse_elapsed_hours(text: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Slurm durations ``[D-]HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm`` -> hours.

    Returns (hours float64 with NaN where missing/bad, missing mask, bad mask).
    """
    stripped = text.str.strip()
    missing = stripped.isin(("", "Unknown", "None")).to_numpy()
    parts = stripped.str.extract(_ELAPSED_RE)
    numbers = parts.astype("float64").fillna({"days": 0.0, "hours": 0.0})
    hours = (
        numbers["days"] * 24.0
        + numbers["hours"]
        + numbers["minutes"] / 60.0
        + numbers["seconds"] / 3600.0
    )
    bad = hours.isna().to_numpy() & ~missing
    return hours.astype("float64"), missing, bad


def parse_numbers(text: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Decimal numbers -> float64. Returns (values, missing mask, bad mask)."""
    stripped = text.str.strip()
    missing = (stripped == "").to_numpy()
    values = pd.to_numeric(stripped.where(~missing), errors="coerce").astype("float64")
    bad = values.isna().to_numpy() & ~missing
    return values, missing, bad


def blank_to_na(text: pd.Series) -> pd.Series:
    """Strip whitespace; empty strings become NA (str dtype)."""
    stripped = text.astype("str").str.strip()
    return stripped.where(stripped != "").astype("str")


def map_distinct(values: pd.Series, function: Callable[[Any], Hashable]) -> np.ndarray:
    """Apply a Python function once per distinct value (factorize), not once per row."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    mapped = np.array([function(value) for value in uniques], dtype=object)
    return mapped[codes] if len(mapped) else np.array([], dtype=object)
