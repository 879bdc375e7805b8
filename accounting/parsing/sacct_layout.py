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
from accounting.parsing.errors import IssueCollector
from accounting.parsing.layouts import (
    DEFAULT_SACCT_COLUMNS,
    SACCT_PRESETS,
    preset_with_field_count,
)

REQUIRED_SACCT_COLUMNS: tuple[str, ...] = ("JobID", "Start", "State")
# GPUs come from the first of these present (AllocGRES / ReqGRES: Slurm before TRES, <= 17).
GPU_COLUMNS: tuple[str, ...] = ("alloctres", "allocgres", "reqgres")


@dataclass(frozen=True)
class Layout:
    names: tuple[str, ...]  # lower-case column names in file order (plus "" for a trailing |)
    labels: tuple[str, ...]  # the same names as the file (or caller) spells them, for errors
    field_count: int
    header_present: bool


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
    if "end" not in seen and "elapsed" not in seen:
        issues.add(line, "End", "need End or Elapsed to know how long the job ran")
    if issues:
        raise issues.error()
    padded = tuple(names_in_file) + (("",) if trailing else ())
    padded_labels = tuple(labels[: len(names_in_file)]) + (("",) if trailing else ())
    return Layout(padded, padded_labels, field_count, header_present), header_index


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
