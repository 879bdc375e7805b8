"""Slurm ``sreport -P -t hours -T gres/gpu cluster utilization`` -> card-hours per cluster.

Typical input (the banner is optional; ``Planned`` was called ``Reserved`` before 21.08)::

    --------------------------------------------------------------------------------
    Cluster Utilization 2024-03-01T00:00:00 - 2024-03-31T23:59:59
    Usage reported in TRES Hours
    --------------------------------------------------------------------------------
    Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported
    alpha|gres/gpu|8866|800|0|3294|0|12960

Chunk columns (dtype): ``cluster`` (str), ``tres_name`` (str), ``accelerator_model`` (str, NA
unless the TRES is typed like ``gres/gpu:h100``), ``period_start`` / ``period_end``
(datetime64[us, UTC]; end exclusive: the banner's ``23:59:59`` + 1 s), ``allocated_card_hours``,
``down_card_hours``, ``planned_down_card_hours``, ``idle_card_hours``, ``planned_card_hours``,
``reported_card_hours`` (float64), ``source_line`` (int64).

Down is unplanned node downtime; PLND Down is planned downtime (maintenance reservations),
which :mod:`planner.engine.usage` subtracts from available hours. Minutes in the banner are
converted to hours; percentages are rejected (they carry no card-hours).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

from accounting.parsing.aliases import DEFAULT_GRES_ALIASES, resolve_gres_types
from accounting.parsing.blocks import (
    ParseProgress,
    ProgressCallback,
    RecordBlock,
    UsageSource,
    iter_record_blocks,
    open_source,
    read_block_frame,
)
from accounting.parsing.errors import DEFAULT_MAX_ERRORS, IssueCollector, TooManyIssues
from accounting.parsing.fields import blank_to_na, localize_to_utc

# Header word (lower case) -> output column; Reserved is the pre-21.08 name of Planned.
SREPORT_COLUMNS: dict[str, str] = {
    "allocated": "allocated_card_hours",
    "down": "down_card_hours",
    "plnd down": "planned_down_card_hours",
    "idle": "idle_card_hours",
    "planned": "planned_card_hours",
    "reserved": "planned_card_hours",
    "reported": "reported_card_hours",
}
SREPORT_DTYPES: dict[str, str] = {
    "cluster": "str",
    "tres_name": "str",
    "accelerator_model": "str",
    "period_start": "datetime64[us, UTC]",
    "period_end": "datetime64[us, UTC]",
    "allocated_card_hours": "float64",
    "down_card_hours": "float64",
    "planned_down_card_hours": "float64",
    "idle_card_hours": "float64",
    "planned_card_hours": "float64",
    "reported_card_hours": "float64",
    "source_line": "int64",
}
_HOURS_PER_UNIT = {"hours": 1.0, "minutes": 1 / 60, "seconds": 1 / 3600}
_BANNER_PERIOD_RE = re.compile(
    r"Utilization\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\s+-\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
)
_BANNER_UNIT_RE = re.compile(r"Usage reported in\s+(?:\w+\s+)?(Hours|Minutes|Seconds|Percentage)")
# Sum of the five parts may differ from Reported by rounding of each printed figure.
SUM_TOLERANCE_CARD_HOURS = 5.0
SUM_TOLERANCE_SHARE = 0.001
MAX_BANNER_LINES = 40


@dataclass
class SreportStats:
    rows: int = 0
    time_unit: str | None = None
    warnings: list[str] = field(default_factory=list)


def iter_sreport_chunks(
    source: UsageSource,
    *,
    columns: Sequence[str] | None = None,
    time_unit: str | None = None,
    period_start: datetime | None = None,
    period_end: datetime | None = None,
    aliases: dict[str, str] | None = None,
    timezone: str = "UTC",
    chunk_lines: int = 10_000,
    max_errors: int = DEFAULT_MAX_ERRORS,
    progress: ProgressCallback | None = None,
    stats: SreportStats | None = None,
) -> Iterator[pd.DataFrame]:
    """Yield validated sreport cluster-utilization rows (columns in :data:`SREPORT_DTYPES`).

    ``columns`` is for header-less output (``-n``); ``time_unit`` ("hours", "minutes") and the
    period override the banner, and are required when the banner is absent.
    Raises :class:`~accounting.parsing.errors.UsageValidationError` like the sacct parser.
    """
    stats = stats if stats is not None else SreportStats()
    issues = IssueCollector(max_errors=max_errors)
    alias_table = aliases if aliases is not None else DEFAULT_GRES_ALIASES
    header: _Header | None = None
    emitted = 0
    try:
        with open_source(source) as (stream, total_bytes):
            blocks = iter_record_blocks(
                stream, delimiter="|", quotechar=None, records_per_block=chunk_lines
            )
            for block in blocks:
                skip_until = -1
                if header is None:
                    header, skip_until = _find_header(block, columns, time_unit, issues)
                    if header is None:
                        continue
                    _apply_period(header, period_start, period_end, timezone, issues)
                    stats.time_unit = header.time_unit
                chunk = _read_rows(block, header, skip_until, alias_table, issues, stats)
                deliver = not issues and len(chunk) > 0
                emitted += len(chunk) if deliver else 0
                if progress is not None:
                    progress(
                        ParseProgress(block.bytes_read, block.lines_read, emitted, total_bytes)
                    )
                if deliver:
                    stats.rows += len(chunk)
                    yield chunk
            if header is None:
                issues.add(1, "Cluster", "no sreport header line (Cluster|...|Reported) found")
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()


def read_sreport(source: UsageSource, **options: object) -> pd.DataFrame:
    """Whole-file convenience: all rows in one frame."""
    chunks = list(iter_sreport_chunks(source, **options))  # type: ignore[arg-type]
    if chunks:
        return pd.concat(chunks, ignore_index=True)
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in SREPORT_DTYPES.items()})


@dataclass
class _Header:
    names: list[str]
    labels: list[str]
    field_count: int
    line: int
    time_unit: str | None
    period_start: pd.Timestamp | None = None
    period_end: pd.Timestamp | None = None
    banner_period: tuple[str, str] | None = None


def _find_header(
    block: RecordBlock,
    columns: Sequence[str] | None,
    time_unit: str | None,
    issues: IssueCollector,
) -> tuple[_Header | None, int]:
    """Read banner lines up to the header; returns the header and its record index."""
    banner_period: tuple[str, str] | None = None
    banner_unit: str | None = None
    for index in range(min(len(block), MAX_BANNER_LINES)):
        text = block.record_text(index)
        if period := _BANNER_PERIOD_RE.search(text):
            banner_period = (period[1], period[2])
        if unit := _BANNER_UNIT_RE.search(text):
            banner_unit = unit[1].lower()
        labels = [name.strip() for name in text.split("|")]
        fields = [label.lower() for label in labels]
        is_header = "cluster" in fields and "allocated" in fields
        is_data = columns is not None and block.field_counts[index] >= len(columns)
        if not (is_header or is_data) or not text.strip():
            continue
        if not is_header:
            labels = [name.strip() for name in columns or ()]
        names = [label.lower() for label in labels]
        line = int(block.record_lines[index])
        unit = (time_unit or banner_unit or "").lower()
        if unit == "percentage":
            issues.add(line, "Allocated", "percent output carries no card-hours; use -t hours")
        elif unit not in _HOURS_PER_UNIT:
            issues.add(line, "Allocated", "unknown time unit: pass time_unit (sreport -t hours)")
        trailing = names[-1] == ""
        names = names[:-1] if trailing else names
        labels = labels[: len(names)]
        for required in ("cluster", "allocated", "down", "plnd down", "idle", "reported"):
            if required not in names:
                issues.add(line, required, "required column is missing")
        if "planned" not in names and "reserved" not in names:
            issues.add(line, "Planned", "required column is missing (Planned or Reserved)")
        if issues:
            raise issues.error()
        header = _Header(
            names=names,
            labels=labels,
            field_count=len(names) + (1 if trailing else 0),
            line=line,
            time_unit=unit,
            banner_period=banner_period,
        )
        return header, index if is_header else index - 1
    return None, -1


def _apply_period(
    header: _Header,
    period_start: datetime | None,
    period_end: datetime | None,
    timezone: str,
    issues: IssueCollector,
) -> None:
    start_text, end_text = header.banner_period or (None, None)
    start = pd.Timestamp(period_start) if period_start is not None else None
    end = pd.Timestamp(period_end) if period_end is not None else None
    if start is None and start_text:
        start = pd.Timestamp(start_text)
    if end is None and end_text:
        # sreport prints the last second of the period; store the exclusive end.
        end = pd.Timestamp(end_text) + pd.Timedelta(seconds=1)
    if start is None or end is None:
        issues.add(header.line, "Cluster", "no report period: keep the banner or pass the period")
        raise issues.error()
    stamps = [
        moment.tz_convert("UTC")
        if moment.tzinfo is not None
        else localize_to_utc(pd.Series([moment]), timezone).iloc[0]
        for moment in (start, end)
    ]
    header.period_start, header.period_end = stamps


def _read_rows(
    block: RecordBlock,
    header: _Header,
    skip_until: int,
    aliases: dict[str, str],
    issues: IssueCollector,
    stats: SreportStats,
) -> pd.DataFrame:
    keep = ~block.blank
    keep[: skip_until + 1] = False
    # Banner rules after the header (several reports in one file) are not data.
    first_bytes = block.data[np.minimum(block.record_starts, len(block.data) - 1)]
    rules = (first_bytes == ord("-")) & (block.field_counts == 1)
    keep &= ~rules
    wrong = keep & (block.field_counts != header.field_count)
    lines = block.record_lines
    for position in np.flatnonzero(wrong)[: issues.max_errors]:
        found = int(block.field_counts[position])
        issues.add(
            int(lines[position]),
            header.labels[min(found, len(header.labels) - 1)],
            f"line has {found} fields, the header {header.field_count}",
        )
    good = keep & ~wrong
    names = header.names + (["_trailing"] if header.field_count > len(header.names) else [])
    raw = read_block_frame(block.select_bytes(good), names, delimiter="|")
    source_line = lines[good]
    hours_per_unit = _HOURS_PER_UNIT.get(header.time_unit or "", 1.0)
    out: dict[str, object] = {
        "cluster": blank_to_na(raw["cluster"]),
        "tres_name": blank_to_na(raw["tres name"])
        if "tres name" in raw
        else pd.Series("gres/gpu", index=raw.index, dtype="str"),
    }
    issues.add_where(raw["cluster"].str.strip() == "", source_line, "Cluster", "empty cluster")
    for word, column in SREPORT_COLUMNS.items():
        if word not in raw:
            continue
        # -t hourper prints "12960(95.00%)": keep the figure before the bracket.
        text = raw[word].str.replace(r"\(.*\)\s*$", "", regex=True).str.strip()
        values = pd.to_numeric(text, errors="coerce").astype("float64")
        # NaN, inf and overflowing figures (1e999) are no card-hours either.
        bad = ~np.isfinite(values.to_numpy()) | (values < 0).to_numpy()
        issues.add_where(
            bad, source_line, word.title(), "'{value}' is not a non-negative number", raw[word]
        )
        out[column] = values.astype("float64") * hours_per_unit
    frame = pd.DataFrame(out)
    if not issues and len(frame):
        parts = frame[
            [
                "allocated_card_hours",
                "down_card_hours",
                "planned_down_card_hours",
                "idle_card_hours",
                "planned_card_hours",
            ]
        ].sum(axis=1)
        gap = (parts - frame["reported_card_hours"]).abs()
        tolerance = np.maximum(
            SUM_TOLERANCE_CARD_HOURS, SUM_TOLERANCE_SHARE * frame["reported_card_hours"]
        )
        for position in np.flatnonzero((gap > tolerance).to_numpy())[:10]:
            stats.warnings.append(
                f"line {int(source_line[position])}: Allocated+Down+PLND Down+Idle+Planned "
                f"differs from Reported by {gap.iloc[position]:.1f} card-hours"
            )
    typed = frame["tres_name"].str.extract(r"^gres/gpu:(.+)$")[0]
    models = resolve_gres_types(typed.dropna().unique(), aliases)["accelerator_model"]
    frame["accelerator_model"] = typed.map(models)
    frame["period_start"] = header.period_start
    frame["period_end"] = header.period_end
    frame["source_line"] = source_line
    return pd.DataFrame({name: frame[name].astype(dtype) for name, dtype in SREPORT_DTYPES.items()})
