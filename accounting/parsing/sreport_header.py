"""What an sreport file is, read from its banner and header line, before any figure.

``sreport`` prints (unless ``-n``) a banner naming the report, its period and its unit::

    Cluster Utilization 2024-03-01T00:00:00 - 2024-03-31T23:59:59
    Usage reported in TRES Hours

The unit's owner matters: Slurm says ``CPU`` when only CPUs were reported (the default
without ``-T``) and ``TRES`` otherwise, and a report without a ``TRES Name`` column is a CPU
report too. The fixed-width table (without ``-P``) is read by its dashed line's widths
(:mod:`accounting.parsing.fixed_width`); a header without that line is refused with ``-P``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from accounting.parsing.bounded import Readable
from accounting.parsing.delimiters import ReplayStream, read_head
from accounting.parsing.errors import IssueCollector
from accounting.parsing.fixed_width import TablePolicy, fixed_width_stream

HOURS_PER_UNIT = {"hours": 1.0, "minutes": 1 / 60, "seconds": 1 / 3600}
MAX_BANNER_LINES = 40
CLUSTER_UTILIZATION = "cluster utilization"
ACCOUNT_UTILIZATION = "cluster AccountUtilizationByUser"
GPU_REPORT_HINT = "run sreport -P -t hours -T gres/gpu cluster utilization"
PERCENT_FIX = "percent output carries no card-hours; use -t hours"
# sreport 22.05 matches format=Planned to PlannedDown first (a prefix): two PLND Down columns.
PLANNED_TWICE = (
    "PLND Down is printed twice: sreport reads format=Planned as PlannedDown; ask for the "
    "Planned column as Reserved (format=...,PlannedDown,Idle,Reserved,Reported)"
)
NO_HEADER_FIXED_WIDTH = (
    "a fixed-width table without its header (sreport -n without -P): nothing says where its "
    "columns are; re-run with -P (and -n, passing the columns, if you like)"
)
_BANNER_PERIOD_RE = re.compile(
    r"(?P<title>[\w/ ]*?)\s*(?P<start>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\s+-\s+"
    r"(?P<end>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
)
_BANNER_UNIT_RE = re.compile(
    r"Usage reported in\s+(?:(?P<owner>[\w/]+)\s+)?(?P<unit>Hours|Minutes|Seconds|Percentage)",
    re.IGNORECASE,
)


@dataclass
class SreportHeader:
    """The layout of one sreport file (``names`` lower case, in file order)."""

    report: str
    names: list[str]
    labels: list[str]
    field_count: int
    line: int
    time_unit: str | None
    banner_period: tuple[str, str] | None = None
    period_start: pd.Timestamp | None = None
    period_end: pd.Timestamp | None = None


@dataclass
class _Banner:
    title: str | None = None
    period: tuple[str, str] | None = None
    owner: str | None = None
    unit: str | None = None

    def read(self, text: str) -> None:
        if period := _BANNER_PERIOD_RE.search(text):
            self.period = (period["start"], period["end"])
            self.title = period["title"].strip() or None
        if unit := _BANNER_UNIT_RE.search(text):
            self.owner = unit["owner"]
            self.unit = unit["unit"].lower()


# A header name -> the name sreport's format= takes for it (sreport 22.05 answers "Unknown
# field 'tres name'" and leaves the column out; format=Planned prints PLND Down: Reserved).
SREPORT_FORMAT_NAMES = {
    "cluster": "Cluster", "tres name": "TresName", "allocated": "Allocated", "down": "Down",
    "plnd down": "PlannedDown", "idle": "Idle", "planned": "Reserved", "reserved": "Reserved",
    "reported": "Reported", "account": "Accounts", "login": "Login", "proper name": "Proper",
    "used": "Used",
}  # fmt: skip
# Columns whose values are read: a value a fixed-width column cut (``gres/gpu:a1+``) is refused.
SREPORT_READ_COLUMNS = frozenset(
    {
        "cluster", "tres name", "allocated", "down", "plnd down", "idle", "planned", "reserved",
        "reported", "account", "login", "used",
    }
)  # fmt: skip
SREPORT_TABLE = TablePolicy(
    read=SREPORT_READ_COLUMNS,
    times=frozenset(),
    known=SREPORT_READ_COLUMNS | {"proper name", "user", "over commit", "reported"},
    is_header=lambda cells: bool(cells) and cells[0] == "cluster",
    fix="re-run sreport with -P (parsable), which never cuts a value, or widen the column "
    "(format=...,{name}%{width})",
    widths={"tres name": 30, "cluster": 24, "account": 32, "login": 24, "proper name": 32},
    tolerated={},
    blank_before_header=False,
    format_names=SREPORT_FORMAT_NAMES,
)


def open_sreport_stream(stream: Readable, issues: IssueCollector) -> Readable:
    """sreport's fixed-width table rewritten with ``|`` (a dashed line under the header),
    else the file as it is; the banner passes through either way."""
    head = read_head(stream)
    fixed = fixed_width_stream(stream, head, SREPORT_TABLE, "|", issues)
    return fixed if fixed is not None else ReplayStream(head, stream, "|")


def _report_kind(names: Sequence[str]) -> str | None:
    """Which sreport report a header line belongs to (None: not an sreport header)."""
    if not names or names[0] != "cluster":
        return None
    if "allocated" in names and "reported" in names:
        return CLUSTER_UTILIZATION
    if "account" in names and "used" in names:
        # AccountUtilizationByUser, or UserUtilizationByAccount (Login before Account): the
        # same user × account lines, read by their names.
        return ACCOUNT_UTILIZATION
    return "unknown"


def _fixed_width_header(text: str) -> bool:
    words = text.lower().split()
    columns = {"allocated", "reported", "used", "login"}
    return "|" not in text and bool(words) and words[0] == "cluster" and bool(columns & set(words))


def _fixed_width_data(text: str, field_count: int) -> bool:
    """A table line without ``|`` (not the banner): fixed-width output printed with -n."""
    words = text.split()
    if field_count != 1 or len(words) < 2 or set(text.strip()) <= {"-"}:
        return False
    return not (_BANNER_PERIOD_RE.search(text) or _BANNER_UNIT_RE.search(text))


def find_sreport_header(
    lines: Sequence[tuple[int, str, int]],
    columns: Sequence[str] | None,
    time_unit: str | None,
    issues: IssueCollector,
) -> tuple[SreportHeader | None, int]:
    """Banner and header from the first records ``(line, text, field_count)``.

    Returns the header and the index of the header record (for header-less input with
    ``columns``, the index before the first data record). Refusals raise at once.
    """
    banner = _Banner()
    for index, (line, text, field_count) in enumerate(lines[:MAX_BANNER_LINES]):
        banner.read(text)
        if _fixed_width_header(text):
            issues.add(line, "Cluster", "fixed-width output: re-run with -P (parsable)")
            raise issues.error()
        labels = [name.strip() for name in text.split("|")]
        kind = _report_kind([label.lower() for label in labels])
        if kind is None and columns is not None and _fixed_width_data(text, field_count):
            issues.add(line, "Cluster", NO_HEADER_FIXED_WIDTH)
            raise issues.error()
        is_data = kind is None and columns is not None and field_count >= len(columns) > 1
        if is_data:
            labels = [name.strip() for name in columns or ()]
            kind = _report_kind([label.lower() for label in labels]) or "unknown"
        elif kind is None:
            continue
        header = _build_header(kind, labels, line, banner, time_unit, issues)
        return header, index if not is_data else index - 1
    return None, -1


def _build_header(
    kind: str,
    labels: list[str],
    line: int,
    banner: _Banner,
    time_unit: str | None,
    issues: IssueCollector,
) -> SreportHeader:
    names = [label.lower() for label in labels]
    trailing = names[-1] == ""
    if trailing:
        names, labels = names[:-1], labels[:-1]
    if kind not in (CLUSTER_UTILIZATION, ACCOUNT_UTILIZATION):
        title = f" ({banner.title})" if banner.title else ""
        issues.add(
            line,
            "Cluster",
            f"this is the sreport report {kind}{title}: import `{CLUSTER_UTILIZATION}` or "
            f"`{ACCOUNT_UTILIZATION}` output (with -P)",
        )
        raise issues.error()
    _check_gpu_report(names, line, banner, issues)
    unit = (time_unit or banner.unit or "").lower()
    if unit == "percentage":
        issues.add(line, names_label(labels, 2), PERCENT_FIX)
    elif unit not in HOURS_PER_UNIT:
        issues.add(
            line,
            names_label(labels, 2),
            "unknown time unit: pass the time unit (sreport -t hours)",
        )
    required = (
        ("cluster", "allocated", "down", "plnd down", "idle", "reported")
        if kind == CLUSTER_UTILIZATION
        else ("cluster", "account", "login", "used")
    )
    for name in required:
        if name not in names:
            issues.add(line, name, "required column is missing")
    if kind == CLUSTER_UTILIZATION and "planned" not in names and "reserved" not in names:
        issues.add(line, "Planned", "required column is missing (Planned or Reserved)")
        if names.count("plnd down") > 1:
            issues.add(line, "PLND Down", PLANNED_TWICE)
    if issues:
        raise issues.error()
    return SreportHeader(
        report=kind,
        names=names,
        labels=labels,
        field_count=len(names) + (1 if trailing else 0),
        line=line,
        time_unit=unit,
        banner_period=banner.period,
    )


def names_label(labels: Sequence[str], position: int) -> str:
    return labels[min(position, len(labels) - 1)] if labels else "Cluster"


def _check_gpu_report(
    names: Sequence[str], line: int, banner: _Banner, issues: IssueCollector
) -> None:
    """CPU (no TRES Name column, or a banner in CPU hours) and other owners are refused."""
    owner = (banner.owner or "").lower()
    if "tres name" not in names or owner == "cpu":
        issues.add(line, "TRES Name", f"this is a CPU report: {GPU_REPORT_HINT}")
        raise issues.error()
    if owner and owner != "tres":
        issues.add(
            line,
            "TRES Name",
            f"this report counts {banner.owner} hours, not GPU card-hours: {GPU_REPORT_HINT}",
        )
        raise issues.error()
