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
which :mod:`engine.usage` subtracts from available hours. Seconds and minutes (sreport's
default unit) are converted to hours, and the ``-t hourper`` kind's "(95.00%)" is dropped;
percentages (``-t percent``) are refused naming ``-t hours`` (they carry no card-hours). A
MIG slice, one ``gres/gpu`` to Slurm, counts as its share of a card
(:mod:`accounting.parsing.sreport_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from accounting.parsing.aliases import DEFAULT_GRES_ALIASES
from accounting.parsing.blocks import (
    ParseProgress,
    ProgressCallback,
    RecordBlock,
    UsageSource,
    iter_record_blocks,
    open_source,
)
from accounting.parsing.errors import DEFAULT_MAX_ERRORS, IssueCollector, TooManyIssues
from accounting.parsing.fields import blank_to_na, localize_to_utc
from accounting.parsing.sreport_accounts import account_rows
from accounting.parsing.sreport_header import (
    ACCOUNT_UTILIZATION,
    GPU_REPORT_HINT,
    MAX_BANNER_LINES,
    SreportHeader,
    find_sreport_header,
    open_sreport_stream,
)
from accounting.parsing.sreport_rows import (
    card_fractions,
    card_hours,
    entity_labels,
    gpu_rows,
    raw_rows,
    slices_as_cards,
    typed_models,
)

if TYPE_CHECKING:  # pandas-stubs' name for the dtypes astype accepts
    from pandas._typing import AstypeArg

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
SREPORT_DTYPES: dict[str, AstypeArg] = {
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
# Sum of the five parts may differ from Reported by rounding of each printed figure.
SUM_TOLERANCE_CARD_HOURS = 5.0
SUM_TOLERANCE_SHARE = 0.001


@dataclass
class SreportStats:
    rows: int = 0
    time_unit: str | None = None
    report: str | None = None
    # Rows of other TRES (cpu, mem, billing, gres/gpumem ...) left out, per TRES name.
    other_tres_rows: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def iter_sreport_chunks(
    source: UsageSource,
    *,
    columns: Sequence[str] | None = None,
    time_unit: str | None = None,
    period_start: datetime | None = None,
    period_end: datetime | None = None,
    aliases: Mapping[str, str] | None = None,
    timezone: str = "UTC",
    chunk_lines: int = 10_000,
    max_errors: int = DEFAULT_MAX_ERRORS,
    progress: ProgressCallback | None = None,
    stats: SreportStats | None = None,
) -> Iterator[pd.DataFrame]:
    """Yield validated GPU rows of an sreport file.

    ``cluster utilization`` gives :data:`SREPORT_DTYPES` rows; ``cluster
    AccountUtilizationByUser`` gives :data:`~accounting.parsing.sreport_accounts.ACCOUNT_DTYPES`
    rows (``stats.report`` says which, set before the first chunk). Only ``gres/gpu`` and
    ``gres/gpu:TYPE`` rows are card-hours; other TRES rows are counted and left out, and a
    file without any GPU row is refused. ``columns`` is for header-less output (``-n``);
    ``time_unit`` ("hours", "minutes", "seconds") and the period override the banner, and are
    required when the banner is absent.
    Raises :class:`~accounting.parsing.errors.UsageValidationError` like the sacct parser.
    """
    stats = stats if stats is not None else SreportStats()
    issues = IssueCollector(max_errors=max_errors)
    alias_table = aliases if aliases is not None else DEFAULT_GRES_ALIASES
    header: SreportHeader | None = None
    held: pd.DataFrame | None = None  # the last entity's rows: its TRES rows may go on
    emitted = 0
    try:
        with open_source(source) as (raw_stream, total_bytes):
            stream = open_sreport_stream(raw_stream, issues)
            blocks = iter_record_blocks(
                stream, delimiter="|", quotechar=None, records_per_block=chunk_lines
            )
            for block in blocks:
                skip_until = -1
                if header is None:
                    header, skip_until = find_sreport_header(
                        _first_records(block), columns, time_unit, issues
                    )
                    if header is None:
                        continue
                    _apply_period(header, period_start, period_end, timezone, issues)
                    stats.time_unit, stats.report = header.time_unit, header.report
                rows = _read_block(block, header, skip_until, alias_table, issues, stats)
                rows, held = _hold_last_entity(_joined(held, rows), _entity_keys(header))
                chunk = _as_cards(rows, header, alias_table)
                deliver = not issues and len(chunk) > 0
                emitted += len(chunk) if deliver else 0
                if progress is not None:
                    progress(
                        ParseProgress(block.bytes_read, block.lines_read, emitted, total_bytes)
                    )
                if deliver:
                    stats.rows += len(chunk)
                    yield chunk
            if header is not None and held is not None and len(held) and not issues:
                chunk = _as_cards(held, header, alias_table)
                stats.rows += len(chunk)
                yield chunk
            _check_found_gpu_rows(header, stats, issues)
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()


def check_sreport_head(
    source: UsageSource,
    *,
    columns: Sequence[str] | None = None,
    time_unit: str | None = None,
    period_given: bool = False,
    max_errors: int = DEFAULT_MAX_ERRORS,
) -> None:
    """The checks an upload answers at once, on the file's first lines: the layout (fixed
    width included), the banner and header, the unit, and a report period to store under.
    Raises :class:`~accounting.parsing.errors.UsageValidationError`."""
    issues = IssueCollector(max_errors=max_errors)
    try:
        with open_source(source) as (raw_stream, _):
            stream = open_sreport_stream(raw_stream, issues)
            blocks = iter_record_blocks(
                stream, delimiter="|", quotechar=None, records_per_block=MAX_BANNER_LINES
            )
            block = next(blocks, None)
            records = _first_records(block) if block is not None else []
            header, _ = find_sreport_header(records, columns, time_unit, issues)
            if header is None:
                _check_found_gpu_rows(None, SreportStats(), issues)
            elif not period_given:
                _apply_period(header, None, None, "UTC", issues)
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()


def _first_records(block: RecordBlock) -> list[tuple[int, str, int]]:
    count = min(len(block), MAX_BANNER_LINES)
    return [
        (int(block.record_lines[i]), block.record_text(i), int(block.field_counts[i]))
        for i in range(count)
    ]


def _check_found_gpu_rows(
    header: SreportHeader | None, stats: SreportStats, issues: IssueCollector
) -> None:
    if header is None:
        issues.add(
            1,
            "Cluster",
            "no sreport header line (Cluster|TRES Name|...) found: export with "
            f"'{GPU_REPORT_HINT}', or pass the columns for output printed with -n",
        )
    elif stats.rows == 0 and stats.other_tres_rows and not issues:
        found = ", ".join(sorted(stats.other_tres_rows))
        issues.add(
            header.line,
            "TRES Name",
            f"no gres/gpu rows (this report has {found}): {GPU_REPORT_HINT}",
        )
    if stats.other_tres_rows:
        counts = ", ".join(f"{n} {name}" for name, n in sorted(stats.other_tres_rows.items()))
        stats.warnings.append(f"rows of other TRES left out (not GPU card-hours): {counts}")


def read_sreport(source: UsageSource, **options: Any) -> pd.DataFrame:
    """Whole-file convenience: all rows in one frame."""
    chunks = list(iter_sreport_chunks(source, **options))
    if chunks:
        return pd.concat(chunks, ignore_index=True)
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in SREPORT_DTYPES.items()})


def _apply_period(
    header: SreportHeader,
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


def _read_block(
    block: RecordBlock,
    header: SreportHeader,
    skip_until: int,
    aliases: Mapping[str, str],
    issues: IssueCollector,
    stats: SreportStats,
) -> pd.DataFrame:
    raw, lines = raw_rows(block, header, skip_until, issues)
    raw, lines = gpu_rows(raw, lines, stats.other_tres_rows)
    issues.add_where(raw["cluster"].str.strip() == "", lines, "Cluster", "empty cluster")
    if header.report == ACCOUNT_UTILIZATION:
        return account_rows(raw, lines, header, aliases, issues)
    return _utilization_rows(raw, lines, header, aliases, issues, stats)


def _entity_keys(header: SreportHeader) -> list[str]:
    """The columns that make one entity's rows (one per TRES), printed one after another."""
    return ["cluster", "account", "user"] if header.report == ACCOUNT_UTILIZATION else ["cluster"]


def _joined(held: pd.DataFrame | None, rows: pd.DataFrame) -> pd.DataFrame:
    if held is None or held.empty:
        return rows
    return pd.concat([held, rows], ignore_index=True)


def _hold_last_entity(
    rows: pd.DataFrame, keys: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``rows`` less its last entity's, and those (the next block may hold more of them)."""
    if rows.empty:
        return rows, None
    entity = entity_labels(rows, keys).to_numpy()
    differs = np.flatnonzero(entity != entity[-1])
    cut = int(differs[-1]) + 1 if len(differs) else 0
    return rows.iloc[:cut].reset_index(drop=True), rows.iloc[cut:].reset_index(drop=True)


def _as_cards(
    rows: pd.DataFrame, header: SreportHeader, aliases: Mapping[str, str]
) -> pd.DataFrame:
    """MIG slices counted as their share of a card (:func:`slices_as_cards`)."""
    if rows.empty:
        return rows
    figures = [name for name in rows.columns if name.endswith("_card_hours")]
    fraction = card_fractions(rows["tres_name"], aliases)
    return slices_as_cards(rows, figures, _entity_keys(header), fraction)


def _utilization_rows(
    raw: pd.DataFrame,
    source_line: np.ndarray,
    header: SreportHeader,
    aliases: Mapping[str, str],
    issues: IssueCollector,
    stats: SreportStats,
) -> pd.DataFrame:
    out: dict[str, object] = {
        "cluster": blank_to_na(raw["cluster"]),
        "tres_name": raw["tres name"].astype("str"),
    }
    for word, column in SREPORT_COLUMNS.items():
        if word in raw:
            label = header.labels[header.names.index(word)]
            out[column] = card_hours(raw[word], source_line, label, header, issues)
    frame = pd.DataFrame(out)
    if not issues and len(frame):
        _warn_sum_mismatch(frame, source_line, stats)
    frame["accelerator_model"] = typed_models(frame["tres_name"], aliases)
    frame["period_start"] = header.period_start
    frame["period_end"] = header.period_end
    frame["source_line"] = source_line
    return pd.DataFrame({name: frame[name].astype(dtype) for name, dtype in SREPORT_DTYPES.items()})


def _warn_sum_mismatch(frame: pd.DataFrame, source_line: np.ndarray, stats: SreportStats) -> None:
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
