"""The columns of a sacct file: from its header line, or from the caller for ``--noheader``.

Columns are read by name (case-insensitive, any order, extra columns ignored). A file
without a header and without the caller's columns is refused, naming the preset
(:data:`~accounting.parsing.layouts.SACCT_PRESETS`) whose field count fits line 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accounting.parsing.blocks import RecordBlock
from accounting.parsing.bounded import Readable
from accounting.parsing.delimiters import (
    SACCT_FIELD_NAMES,
    UNIT_SEPARATOR,
    prepare_stream,
    read_head,
)
from accounting.parsing.errors import IssueCollector
from accounting.parsing.fixed_width import TablePolicy, fixed_width_stream
from accounting.parsing.layouts import (
    DEFAULT_SACCT_COLUMNS,
    SACCT_PRESETS,
    preset_with_field_count,
)
from accounting.parsing.schema import SCHEDULER_STATES
from accounting.parsing.wrappers import HEAD_LINES, not_usage_message

REQUIRED_SACCT_COLUMNS: tuple[str, ...] = ("JobID", "Start", "State")
# Columns whose values the parser uses: a value cut by a fixed-width column is refused.
SACCT_READ_COLUMNS = frozenset(
    {
        "jobid", "jobidraw", "cluster", "partition", "account", "user", "submit", "start",
        "end", "elapsed", "elapsedraw", "timelimitraw", "state", "nnodes", "alloctres",
        "allocgres", "reqgres", "nodelist", "tresusageinave", "tresusageintot",
    }
)  # fmt: skip
# Widths that hold real values, suggested when a fixed-width column cut one.
SACCT_WIDTHS = {
    "jobid": 24, "jobidraw": 24, "account": 32, "user": 24, "partition": 24, "cluster": 24,
    "alloctres": 100, "allocgres": 40, "reqgres": 40, "nodelist": 60, "state": 24,
    "tresusageinave": 160, "tresusageintot": 160,
}  # fmt: skip
SACCT_EXPORT = (
    "sacct --allusers --duplicates --parsable2 --format "
    "JobID,JobIDRaw,Cluster,Partition,Account,User,Submit,Start,End,Elapsed,State,NNodes,"
    "AllocTRES,NodeList,TRESUsageInAve"
)
# GPUs come from the first of these present (AllocGRES / ReqGRES: Slurm before TRES, <= 17).
GPU_COLUMNS: tuple[str, ...] = ("alloctres", "allocgres", "reqgres")


@dataclass(frozen=True)
class Layout:
    names: tuple[str, ...]  # lower-case column names in file order (plus "" for a trailing |)
    labels: tuple[str, ...]  # the same names as the file (or caller) spells them, for errors
    field_count: int
    header_present: bool


def _state_survives(value: str) -> bool:
    """A cut State that keeps its whole first word (``CANCELLED+`` of ``CANCELLED by 1234``)."""
    words = value.removesuffix("+").split()
    return bool(words) and words[0].upper() in SCHEDULER_STATES and len(value) > len(words[0])


SACCT_TABLE = TablePolicy(
    read=SACCT_READ_COLUMNS,
    times=frozenset({"submit", "start", "end", "eligible"}),
    known=SACCT_FIELD_NAMES,
    is_header=lambda cells: "jobid" in cells or "jobidraw" in cells,
    fix="export this column wider, e.g. --format=...,{name}%{width},... (or export with "
    "--parsable2, which never cuts a value)",
    widths=SACCT_WIDTHS,
    tolerated={"state": _state_survives},
    blank_before_header=True,
)


def open_sacct_stream(
    stream: Readable, delimiter: str | None, issues: IssueCollector
) -> tuple[Readable, str]:
    """The stream to read records from and its one-byte delimiter: sacct's fixed-width table
    rewritten (no delimiter given and a dashed line under the header), else the delimited
    text as it is (a multi-byte ``--delimiter`` made one byte)."""
    head = read_head(stream)
    if delimiter is None:
        fixed = fixed_width_stream(stream, head, SACCT_TABLE, UNIT_SEPARATOR, issues)
        if fixed is not None:
            return fixed, UNIT_SEPARATOR
    replay, _, in_stream = prepare_stream(stream, delimiter, head=head)
    return replay, in_stream


def _looks_like_header(fields: list[str]) -> bool:
    names = [field.strip().lower() for field in fields]
    return "jobid" in names or "jobidraw" in names


def detect_layout(
    block: RecordBlock, columns: Sequence[str] | None, delimiter: str, issues: IssueCollector
) -> tuple[Layout | None, int]:
    """Find the header (or use ``columns``) from the first non-blank record."""
    non_blank = np.flatnonzero(~block.blank)
    if len(non_blank) == 0:
        return None, -1
    first = int(non_blank[0])
    fields = block.record_text(first).lstrip("\ufeff").split(delimiter)
    if _looks_like_header(fields):
        header_present = True
        labels = [field.strip() for field in fields]
        names = [label.lower() for label in labels]
        trailing = names[-1] == ""
        header_index = first
    else:
        _refuse_other_tools(block, issues)
        if _is_wrong_header(fields):
            _refuse_wrong_header(fields, int(block.record_lines[first]), issues)
        if columns is None:
            _refuse_missing_header(fields, issues)
        header_present = False
        labels = [name.strip() for name in (columns or DEFAULT_SACCT_COLUMNS)]
        names = [label.lower() for label in labels]
        # sacct --parsable ends every line with the delimiter: one more, empty, field.
        trailing = len(fields) == len(names) + 1 and fields[-1] == ""
        header_index = -1
    if "jobid" not in names and "jobidraw" in names:
        # JobIDRaw alone (a wrapper's export) is the job id: raw ids fold steps the same way.
        names = ["jobid" if name == "jobidraw" else name for name in names]
    field_count = len(names) + (1 if trailing and not header_present else 0)
    names_in_file = names[:-1] if header_present and trailing else names
    line = int(block.record_lines[first]) if header_present else 1
    seen: set[str] = set()
    for name in names_in_file:
        if name in seen:
            issues.add(line, name, "column named twice in the header")
        seen.add(name)
    for required in REQUIRED_SACCT_COLUMNS:
        if required.lower() not in seen:
            issues.add(line, required, "required column is missing")
    if not seen.intersection(GPU_COLUMNS):
        issues.add(
            line,
            "AllocTRES",
            "required column is missing (GPU counts come from AllocTRES, never ReqTRES; "
            "AllocGRES for Slurm before 18)",
        )
    if not seen.intersection(("end", "elapsed", "elapsedraw")):
        issues.add(line, "End", "need End or Elapsed (or ElapsedRaw) to know how long the job ran")
    if issues:
        raise issues.error()
    padded = tuple(names_in_file) + (("",) if trailing else ())
    padded_labels = tuple(labels[: len(names_in_file)]) + (("",) if trailing else ())
    return Layout(padded, padded_labels, field_count, header_present), header_index


def _refuse_other_tools(block: RecordBlock, issues: IssueCollector) -> None:
    """A site wrapper's summary or GPU telemetry, named for what it is (see .wrappers)."""
    head = "\n".join(block.record_text(i) for i in range(min(len(block), HEAD_LINES)))
    message = not_usage_message(head.encode())
    if message is not None:
        issues.add(int(block.record_lines[0]), "file", message)
        raise issues.error()


def _is_wrong_header(fields: list[str]) -> bool:
    """A first line without any digit is a header, not data: every sacct record has a JobID."""
    cells = [cell.strip() for cell in fields if cell.strip()]
    return bool(cells) and not any(char.isdigit() for cell in cells for char in cell)


def _refuse_wrong_header(fields: list[str], line: int, issues: IssueCollector) -> None:
    """Name the expected and the found columns instead of reading the header as a record."""
    found = [cell.strip()[:40] for cell in fields if cell.strip()]
    shown = ", ".join(found[:20]) + (f", … ({len(found)} in all)" if len(found) > 20 else "")
    issues.add(
        line,
        "header",
        f"wrong header: expected sacct columns including {', '.join(REQUIRED_SACCT_COLUMNS)}, "
        f"AllocTRES and End or Elapsed (for example {'|'.join(DEFAULT_SACCT_COLUMNS)}); "
        f"found {shown}",
    )
    raise issues.error()


def _refuse_missing_header(fields: list[str], issues: IssueCollector) -> None:
    count = len(fields) - (1 if fields[-1] == "" else 0)
    preset = preset_with_field_count(count, SACCT_PRESETS)
    hint = (
        f" (line 1 has {count} fields, like the preset '{preset}': --columns-preset {preset})"
        if preset
        else f" (line 1 has {count} fields)"
    )
    issues.add(1, "JobID", f"no header: pass --columns or re-export without --noheader{hint}")
    raise issues.error()
