"""Generic usage records from CSV or XLSX with a documented header.

Header (first row; names case-insensitive, any order; unknown names are rejected so a typo
cannot silently drop a column):

==================  ========  ===========================================================
column              required  meaning
==================  ========  ===========================================================
cluster             yes       cluster name
job_id              yes       unique per cluster; the upsert key (``record_key``)
cards               yes       cards held, > 0; fractional for MIG slices (3g = 3/7)
start               yes       ISO 8601; without an offset it is read in ``timezone``
end                 yes       ISO 8601; may be empty only when state is running
state               yes       completed, failed, cancelled, timeout, node_fail, preempted,
                              running (Slurm words such as NODE_FAIL also accepted)
accelerator_model   yes       catalog model or an alias (``h100``); empty -> partition default
account             no        account / team (``team`` is accepted as the header name)
user, partition     no        free text
nodes               no        whole number >= 0
submit              no        ISO 8601
duration_h          no        wall hours held (default end - start)
gpu_utilization     no        mean GPU utilization: fraction 0-1 or percent ``85%``
tokens_per_s        no        measured training throughput, >= 0
model_params        no        model parameter count N (e.g. 7e9), >= 0
mfu                 no        entered model-FLOPs utilization: fraction 0-1 or ``45%``
==================  ========  ===========================================================

One row per job; a job on two card kinds is two rows with distinct ids (``123/h100``).
CSV is RFC 4180 (quotes allowed, UTF-8, optional BOM). XLSX is read with openpyxl in
read-only streaming mode from the first sheet (or ``sheet_name``); errors name the sheet row.
Yields the usage chunks documented in :mod:`accounting.parsing.schema`.
"""

from __future__ import annotations

import csv
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

import numpy as np
import pandas as pd

from accounting.parsing.aliases import normalize_aliases, normalize_gres_type
from accounting.parsing.as_of import AsOf, hold_running
from accounting.parsing.blocks import (
    ParseProgress,
    UsageSource,
    iter_record_blocks,
    open_source,
    read_block_frame,
)
from accounting.parsing.errors import IssueCollector, TooManyIssues
from accounting.parsing.fields import (
    blank_to_na,
    drop_implausible_times,
    localize_to_utc,
    map_distinct,
    parse_numbers,
)
from accounting.parsing.options import ParseOptions
from accounting.parsing.schema import (
    MAX_JOB_CARDS,
    MAX_JOB_NODES,
    SCHEDULER_STATES,
    conform_usage_frame,
)
from core.uploads.archive import UnsafeArchive, check_xlsx_archive

REQUIRED_TABLE_COLUMNS: tuple[str, ...] = (
    "cluster",
    "job_id",
    "cards",
    "start",
    "end",
    "state",
    "accelerator_model",
)
OPTIONAL_TABLE_COLUMNS: tuple[str, ...] = (
    "account",
    "user",
    "partition",
    "nodes",
    "submit",
    "duration_h",
    "gpu_utilization",
    "tokens_per_s",
    "model_params",
    "mfu",
)
HEADER_SYNONYMS: dict[str, str] = {"team": "account"}
DEFAULT_TABLE_CHUNK_ROWS = 100_000
DEFAULT_MAX_XLSX_INFLATED_BYTES = 4 * 2**30
# The documented header has 17 columns; a wider declared sheet is refused unread.
MAX_XLSX_COLUMNS = 256
_OFFSET_RE = r"(?:Z|[+-]\d\d:?\d\d)$"


@dataclass
class TableStats:
    rows: int = 0
    blank_rows: int = 0
    skipped_pending: int = 0
    records_with_unknown_model: int = 0
    # The export's as-of time: the latest time in the file (running jobs count up to it).
    as_of: AsOf = field(default_factory=AsOf)


@dataclass(kw_only=True)
class CsvOptions(ParseOptions):
    """:class:`ParseOptions` for CSV: its ``delimiter`` and ``stats`` (filled with counts)."""

    chunk_lines: int = DEFAULT_TABLE_CHUNK_ROWS
    delimiter: str = ","
    stats: TableStats | None = None


@dataclass(kw_only=True)
class XlsxOptions(ParseOptions):
    """:class:`ParseOptions` for XLSX: the sheet, ``stats``, and the archive's inflated-size cap."""

    chunk_lines: int = DEFAULT_TABLE_CHUNK_ROWS
    sheet_name: str | None = None
    stats: TableStats | None = None
    max_inflated_bytes: int = DEFAULT_MAX_XLSX_INFLATED_BYTES


def iter_csv_chunks(
    source: UsageSource, options: CsvOptions | None = None, **keywords: Any
) -> Iterator[pd.DataFrame]:
    """Yield validated usage chunks from a CSV with the documented header.

    Raises :class:`~accounting.parsing.errors.UsageValidationError` (``line N, column X``)
    after the last chunk if any line was bad; no chunk is yielded after the first bad line.
    """
    options = CsvOptions.build(options, keywords)
    stats = options.stats if options.stats is not None else TableStats()
    chunks = _csv_chunks(source, options, stats)
    yield from hold_running(chunks, stats.as_of, options.as_of, options.timezone)


def _csv_chunks(
    source: UsageSource, options: CsvOptions, stats: TableStats
) -> Iterator[pd.DataFrame]:
    issues = IssueCollector(max_errors=options.max_errors)
    delimiter, progress = options.delimiter, options.progress
    names: list[str] | None = None
    emitted = 0
    try:
        with open_source(source) as (stream, total_bytes):
            blocks = iter_record_blocks(
                stream, delimiter=delimiter, quotechar='"', records_per_block=options.chunk_lines
            )
            for block in blocks:
                keep = ~block.blank
                stats.blank_rows += int(block.blank.sum())
                if block.unterminated_quote:
                    issues.add(int(block.record_lines[-1]), "*", "quoted field never closed")
                    keep[-1] = False
                if names is None:
                    non_blank = np.flatnonzero(keep)
                    if len(non_blank) == 0:
                        continue
                    header_at = int(non_blank[0])
                    header_text = block.record_text(header_at).lstrip("\ufeff")
                    header_line = int(block.record_lines[header_at])
                    try:
                        header_fields = next(csv.reader([header_text], delimiter=delimiter))
                    except csv.Error as exc:  # e.g. a stray carriage return in the header
                        issues.add(header_line, "*", f"the header row cannot be read ({exc})")
                        raise issues.error() from None
                    names = _check_header(header_fields, header_line, issues)
                    keep[header_at] = False
                wrong = keep & (block.field_counts != len(names))
                for position in np.flatnonzero(wrong)[: issues.max_errors]:
                    found = int(block.field_counts[position])
                    column = names[found] if found < len(names) else str(found)
                    issues.add(
                        int(block.record_lines[position]),
                        column,
                        f"line has {found} fields, the header {len(names)}",
                    )
                good = keep & ~wrong
                raw = read_block_frame(
                    block.select_bytes(good),
                    names,
                    delimiter=delimiter,
                    quoting=csv.QUOTE_MINIMAL,
                )
                chunk = _table_to_records(raw, block.record_lines[good], options, issues, stats)
                deliver = not issues and len(chunk) > 0
                emitted += len(chunk) if deliver else 0
                if progress is not None:
                    progress(
                        ParseProgress(block.bytes_read, block.lines_read, emitted, total_bytes)
                    )
                if deliver:
                    yield chunk
            if names is None:
                issues.add(1, "cluster", "empty file: no header row")
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()


def iter_xlsx_chunks(
    source: str | os.PathLike[str] | IO[bytes],
    options: XlsxOptions | None = None,
    **keywords: Any,
) -> Iterator[pd.DataFrame]:
    """Yield validated usage chunks from an XLSX sheet (openpyxl read-only, streaming).

    The archive is checked first (:mod:`core.uploads.archive`): a file that would
    inflate beyond ``max_inflated_bytes`` or looks like a zip bomb is refused unopened.

    Progress reports sheet rows read in ``lines_read`` (``bytes_read`` stays 0: the zip is
    inflated by openpyxl). Errors name the sheet row as the line.
    """
    options = XlsxOptions.build(options, keywords)
    stats = options.stats if options.stats is not None else TableStats()
    chunks = _xlsx_chunks(source, options, stats)
    yield from hold_running(chunks, stats.as_of, options.as_of, options.timezone)


def _xlsx_chunks(
    source: str | os.PathLike[str] | IO[bytes], options: XlsxOptions, stats: TableStats
) -> Iterator[pd.DataFrame]:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    issues = IssueCollector(max_errors=options.max_errors)
    progress, sheet_name, chunk_lines = options.progress, options.sheet_name, options.chunk_lines
    try:
        check_xlsx_archive(source, max_uncompressed_bytes=options.max_inflated_bytes)
    except UnsafeArchive as exc:
        issues.add(1, "*", f"refused: {exc}")
        raise issues.error() from None
    try:
        workbook = load_workbook(source, read_only=True, data_only=True)
    except (zipfile.BadZipFile, InvalidFileException, KeyError, ValueError, OSError) as exc:
        # Not a workbook at all (another format renamed, truncated, random bytes).
        issues.add(1, "*", f"not a readable XLSX workbook ({type(exc).__name__}: {exc})")
        raise issues.error() from None
    try:
        sheet = workbook[sheet_name] if sheet_name else workbook.worksheets[0]
        if (sheet.max_column or 0) > MAX_XLSX_COLUMNS:
            # Streaming pads every row to the declared width: refuse before the first row.
            issues.add(
                1,
                "*",
                f"the sheet declares {sheet.max_column:,} columns; a usage sheet has at most "
                f"{MAX_XLSX_COLUMNS}",
            )
            raise issues.error()
        names: list[str] | None = None
        buffer: list[tuple[Any, ...]] = []
        buffer_rows: list[int] = []
        emitted = 0
        rows_read = 0

        def flush() -> Iterator[pd.DataFrame]:
            nonlocal emitted
            assert names is not None
            raw = pd.DataFrame(buffer, columns=names, dtype=object)
            text = raw.map(_cell_text) if len(raw) else raw.astype("str")
            chunk = _table_to_records(
                text.astype("str"), np.asarray(buffer_rows, dtype=np.int64), options, issues, stats
            )
            buffer.clear()
            buffer_rows.clear()
            deliver = not issues and len(chunk) > 0
            emitted += len(chunk) if deliver else 0
            if progress is not None:
                progress(ParseProgress(0, rows_read, emitted, None))
            if deliver:
                yield chunk

        try:
            for row_number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
                rows_read = row_number
                if all(
                    cell is None or (isinstance(cell, str) and not cell.strip()) for cell in row
                ):
                    stats.blank_rows += 1
                    continue
                if names is None:
                    header = [str(cell) if cell is not None else "" for cell in row]
                    while header and not header[-1].strip():
                        header.pop()
                    names = _check_header(header, row_number, issues)
                    continue
                cells = tuple(row[: len(names)]) + (None,) * max(0, len(names) - len(row))
                extra = [cell for cell in row[len(names) :] if cell not in (None, "")]
                if extra:
                    issues.add(
                        row_number, str(len(names) + 1), "value beyond the last header column"
                    )
                    continue
                buffer.append(cells)
                buffer_rows.append(row_number)
                if len(buffer) >= chunk_lines:
                    yield from flush()
            if names is None:
                issues.add(1, "cluster", "empty sheet: no header row")
            elif buffer:
                yield from flush()
        except TooManyIssues:
            raise issues.error(truncated=True) from None
    finally:
        workbook.close()
    if issues:
        raise issues.error()


def _cell_text(cell: Any) -> str:
    if cell is None:
        return ""
    if isinstance(cell, datetime):
        return cell.isoformat()
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


# Column names only Slurm's sacct writes: a file with them was exported for the sacct format.
SACCT_ONLY_NAMES = frozenset({"jobid", "alloctres", "elapsed", "nnodes", "reqtres", "jobname"})


def _refuse_foreign_header(
    fields: list[str], names: list[str], line: int, issues: IssueCollector
) -> None:
    """One message naming the expected and the found columns, not one issue per column."""
    found = [field.strip()[:40] for field in fields if field.strip()]
    shown = ", ".join(found[:20]) + (f", … ({len(found)} in all)" if len(found) > 20 else "")
    # A pipe-delimited sacct header read as CSV is one field: look inside it too.
    words = {word.strip().lower() for name in names for word in name.split("|")}
    hint = (
        " This looks like Slurm sacct output: import it with the sacct format."
        if SACCT_ONLY_NAMES & words
        else ""
    )
    issues.add(
        line,
        "header",
        f"wrong header: expected the usage columns {', '.join(REQUIRED_TABLE_COLUMNS)}; "
        f"found {shown or 'an empty line'}.{hint}",
    )
    raise issues.error()


def check_csv_head(head: bytes, delimiter: str = ",") -> None:
    """The header check an upload answers at once (first non-blank line of ``head``).
    Raises :class:`~accounting.parsing.errors.UsageValidationError`."""
    issues = IssueCollector()
    lines = head.decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()
    for number, text in enumerate(lines, start=1):
        if text.strip():
            try:
                fields = next(csv.reader([text], delimiter=delimiter))
            except csv.Error as exc:
                issues.add(number, "*", f"the header row cannot be read ({exc})")
                raise issues.error() from None
            _check_header(fields, number, issues)
            return
    issues.add(1, "cluster", "empty file: no header row")
    raise issues.error()


def _check_header(fields: list[str], line: int, issues: IssueCollector) -> list[str]:
    names = [field.strip().lower().replace(" ", "_") for field in fields]
    names = [HEADER_SYNONYMS.get(name, name) for name in names]
    allowed = set(REQUIRED_TABLE_COLUMNS) | set(OPTIONAL_TABLE_COLUMNS)
    missing = [required for required in REQUIRED_TABLE_COLUMNS if required not in names]
    # Another tool's header (no required column, or sacct's own names): one message.
    if SACCT_ONLY_NAMES & set(names) or len(missing) == len(REQUIRED_TABLE_COLUMNS):
        _refuse_foreign_header(fields, names, line, issues)
    for index, name in enumerate(names):
        if name not in allowed:
            issues.add(line, fields[index].strip() or str(index + 1), "unknown column name")
    for index, name in enumerate(names):
        if name in names[:index]:
            issues.add(line, name or str(index + 1), "column named twice")
    for required in missing:
        issues.add(line, required, "required column is missing")
    if issues:
        raise issues.error()
    return names


def _parse_times(text: pd.Series, timezone: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """ISO 8601 with or without offset -> UTC. Returns (values, missing, bad)."""
    stripped = text.str.strip()
    missing = (stripped == "").to_numpy()
    has_offset = stripped.str.contains(_OFFSET_RE, regex=True).to_numpy()
    values = pd.Series(pd.NaT, index=text.index, dtype="datetime64[us, UTC]")
    naive_rows = ~missing & ~has_offset
    if naive_rows.any():
        naive = pd.to_datetime(stripped[naive_rows], format="ISO8601", errors="coerce")
        naive = drop_implausible_times(naive.astype("datetime64[us]"))
        values.loc[naive_rows] = localize_to_utc(naive, timezone)
    if has_offset.any():
        aware = pd.to_datetime(stripped[has_offset], format="ISO8601", errors="coerce", utc=True)
        values.loc[has_offset] = drop_implausible_times(aware.astype("datetime64[us, UTC]"))
    bad = values.isna().to_numpy() & ~missing
    return values, missing, bad


def _parse_fraction(text: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """``0.85`` or ``85%`` -> 0.85. Returns (values, bad mask)."""
    stripped = text.str.strip()
    percent = stripped.str.endswith("%").to_numpy()
    numbers, missing, bad = parse_numbers(stripped.str.rstrip("%"))
    values = numbers.where(~percent, numbers / 100.0)
    bad = bad | ((values < 0) | (values > 1)).to_numpy()
    return values, bad


def _table_to_records(
    raw: pd.DataFrame,
    lines: np.ndarray,
    options: ParseOptions,
    issues: IssueCollector,
    stats: TableStats,
) -> pd.DataFrame:
    """Validate string columns of the documented header and build usage records."""
    if raw.empty:
        return conform_usage_frame(pd.DataFrame())
    raw = raw.reset_index(drop=True)
    out: dict[str, object] = {}
    for name in ("cluster", "job_id"):
        values = blank_to_na(raw[name])
        issues.add_where(values.isna().to_numpy(), lines, name, "empty")
        out[name] = values

    state_word = map_distinct(raw["state"], lambda text: str(text).strip().upper())
    known = np.array([word in SCHEDULER_STATES for word in state_word], dtype=bool)
    issues.add_where(~known, lines, "state", "unknown state '{value}'", raw["state"].str.strip())
    state = pd.Series([SCHEDULER_STATES.get(word) for word in state_word], dtype="object")
    pending = known & state.isna().to_numpy()
    stats.skipped_pending += int(pending.sum())
    running = (state == "running").to_numpy()

    cards, _, cards_bad = parse_numbers(raw["cards"])
    cards_bad |= (cards.isna() | (cards <= 0)).to_numpy()
    issues.add_where(
        cards_bad & ~pending, lines, "cards", "'{value}' is not a number > 0", raw["cards"]
    )
    issues.add_where(
        (cards > MAX_JOB_CARDS).to_numpy() & ~pending,
        lines,
        "cards",
        f"'{{value}}' is more cards than a job can hold (at most {MAX_JOB_CARDS})",
        raw["cards"],
    )

    start, start_missing, start_bad = _parse_times(raw["start"], options.timezone)
    issues.add_where(
        (start_missing | start_bad) & ~pending,
        lines,
        "start",
        "'{value}' is not an ISO 8601 date-time",
        raw["start"],
    )
    end, end_missing, end_bad = _parse_times(raw["end"], options.timezone)
    issues.add_where(end_bad, lines, "end", "'{value}' is not an ISO 8601 date-time", raw["end"])
    issues.add_where(
        end_missing & ~running & ~pending, lines, "end", "empty, but the job is not running"
    )
    span_h = (end - start).dt.total_seconds() / 3600.0
    issues.add_where((span_h < 0).to_numpy(), lines, "end", "end is before start")

    duration_h = span_h
    if "duration_h" in raw:
        given, given_missing, given_bad = parse_numbers(raw["duration_h"])
        given_bad |= (given < 0).to_numpy()
        issues.add_where(
            given_bad, lines, "duration_h", "'{value}' is not hours >= 0", raw["duration_h"]
        )
        duration_h = given.where(~given_missing, span_h)
    # A running job without duration_h is measured up to the as-of time (hold_running).
    stats.as_of.observe(start.where(~pending), end.where(~pending))

    optional_numbers: dict[str, pd.Series] = {}
    if "nodes" in raw:
        nodes, _, nodes_bad = parse_numbers(raw["nodes"])
        nodes_bad |= ((nodes < 0) | (nodes % 1 != 0) | (nodes > MAX_JOB_NODES)).to_numpy()
        issues.add_where(
            nodes_bad,
            lines,
            "nodes",
            f"'{{value}}' is not a whole number from 0 to {MAX_JOB_NODES}",
            raw["nodes"],
        )
        optional_numbers["nodes"] = nodes
    for name in ("tokens_per_s", "model_params"):
        if name in raw:
            values, _, bad = parse_numbers(raw[name])
            bad |= (values < 0).to_numpy()
            issues.add_where(bad, lines, name, "'{value}' is not a number >= 0", raw[name])
            optional_numbers[name] = values
    for name in ("gpu_utilization", "mfu"):
        if name in raw:
            values, bad = _parse_fraction(raw[name])
            issues.add_where(
                bad, lines, name, "'{value}' is not a fraction 0-1 or a percent like 85%", raw[name]
            )
            optional_numbers[name] = values
    if "submit" in raw:
        submit, _, submit_bad = _parse_times(raw["submit"], options.timezone)
        issues.add_where(submit_bad, lines, "submit", "'{value}' is not a date-time", raw["submit"])
        out["submit"] = submit
        stats.as_of.observe(submit)

    partition = blank_to_na(raw["partition"]) if "partition" in raw else None
    model_given = blank_to_na(raw["accelerator_model"])
    alias_table = normalize_aliases(options.aliases)
    model = pd.Series(
        map_distinct(
            model_given,
            lambda text: (
                alias_table.get(normalize_gres_type(text), text) if isinstance(text, str) else None
            ),
        ),
        dtype="str",
    )
    if partition is not None:
        # Cast: a partition column read as numbers maps to a float array, not strings.
        models = dict(options.partition_models or {})  # never None after __post_init__
        model = model.fillna(partition.map(models).astype("str"))
    if options.default_model is not None:
        model = model.fillna(options.default_model)
    unknown = model.isna().to_numpy()
    if options.unknown_model == "error":
        issues.add_where(
            unknown & ~pending, lines, "accelerator_model", "empty and no partition/default model"
        )
    if issues:
        return conform_usage_frame(pd.DataFrame())

    out.update(
        {
            "job_label": out["job_id"],
            "parent_job_id": out["job_id"],
            "record_key": out["job_id"],
            "account": blank_to_na(raw["account"]) if "account" in raw else None,
            "user": blank_to_na(raw["user"]) if "user" in raw else None,
            "partition": partition,
            "accelerator_model": model,
            "cards": cards,
            "start": start,
            "end": end.where(~pd.Series(running)),
            "duration_h": duration_h,
            "card_hours": cards * duration_h,
            "state": state,
            "scheduler_state": pd.Series(state_word, dtype="str"),
            "source_line": lines,
            **optional_numbers,
        }
    )
    records = pd.DataFrame(out).loc[~pending]
    stats.records_with_unknown_model += int(records["accelerator_model"].isna().sum())
    stats.rows += len(records)
    return conform_usage_frame(records)
