"""What an upload's first lines tell, answered at upload time (a 400), not later by a worker.

The kind, layout, delimiter and header of a usage file are known from its head: a seff
summary, a telemetry scrape, a header of another tool, a fixed-width column too narrow, a
header-less file without ``--columns`` or an sreport without its period are refused before
the file is stored, with the same messages the import would give; a sacct upload that is JSON
must be a Slurm jobs document (``sacct --json``, slurmrestd's ``/slurmdb/vX/jobs``). Bad data
lines further on are still the import's to report (all of them, by line and column).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from accounting.parsing.blocks import iter_record_blocks
from accounting.parsing.errors import IssueCollector, TooManyIssues, UsageValidationError
from accounting.parsing.sacct_layout import detect_layout, open_sacct_stream
from accounting.parsing.slurm_json import check_slurm_json_head, looks_like_json
from accounting.parsing.sreport import check_sreport_head
from accounting.parsing.tabular import check_csv_head
from accounting.parsing.wrappers import not_usage_message

HEAD_BYTES = 256 * 1024
MAX_ISSUES = 10
HEAD_RECORDS = 10_000


def whole_lines(head: bytes) -> bytes:
    """``head`` up to its last newline (a head cut inside a line is not judged on it)."""
    end = head.rfind(b"\n")
    return head[: end + 1] if end >= 0 else head


def head_problems(
    head: bytes, kind: str, layout: Mapping[str, Any], *, period_given: bool = False
) -> list[str]:
    """Why a file of ``kind`` with these layout options would be refused, from its head."""
    if kind == "sacct" and looks_like_json(head):
        return _slurm_json_problems(head)
    text = whole_lines(head)
    try:
        if kind == "sacct":
            _check_sacct(text, layout.get("columns"), layout.get("delimiter"))
        elif kind == "sreport":
            check_sreport_head(
                io.BytesIO(text),
                columns=layout.get("columns"),
                time_unit=layout.get("time_unit"),
                period_given=period_given,
                max_errors=MAX_ISSUES,
            )
        elif kind == "csv":
            check_csv_head(text)
    except UsageValidationError as exc:
        other = not_usage_message(text)
        return [other] if other is not None else [str(issue) for issue in exc.issues]
    return []


def _slurm_json_problems(head: bytes) -> list[str]:
    """A JSON sacct upload must be a Slurm jobs document (``sacct --json``, slurmrestd)."""
    try:
        # A head shorter than the peek is the whole file: its errors list is judged too.
        check_slurm_json_head(head, complete=len(head) < HEAD_BYTES)
    except UsageValidationError as exc:
        return [str(issue) for issue in exc.issues]
    return []


def _check_sacct(text: bytes, columns: Sequence[str] | None, delimiter: str | None) -> None:
    issues = IssueCollector(max_errors=MAX_ISSUES)
    try:
        stream, in_stream = open_sacct_stream(io.BytesIO(text), delimiter, issues)
        blocks = iter_record_blocks(
            stream, delimiter=in_stream, quotechar=None, records_per_block=HEAD_RECORDS
        )
        block = next(blocks, None)
        if block is not None:
            detect_layout(block, columns, in_stream, issues)
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()
