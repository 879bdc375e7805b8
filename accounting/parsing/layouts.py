"""How a usage file is laid out: its columns, its delimiter and (sreport) its time unit.

Every entry point (``manage.py import_usage``, the API, the upload page) takes the same
options and checks them with :func:`layout_options` before the file is read:

* ``columns``: the ``--format`` list the file was exported with, for output printed without
  a header (``sacct --noheader``, ``sreport -n``); widths such as ``Account%20`` are ignored.
* ``columns_preset``: a named list instead (:data:`SACCT_PRESETS`), e.g. ``xdmod``.
* ``delimiter``: what ``sacct --delimiter`` was given (default ``|``); any string.
* ``time_unit``: ``sreport -t`` (hours, minutes, seconds) for output without its banner.
* ``gpuutil``: ``summed`` (Slurm 24.05.1 and later) or ``one-gpu`` (earlier): what
  ``gres/gpuutil`` means (:mod:`accounting.parsing.gpuutil`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

DEFAULT_SACCT_COLUMNS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "Cluster",
    "Partition",
    "Account",
    "User",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "State",
    "NNodes",
    "AllocTRES",
    "NodeList",
)
# The 26 fields Open XDMoD's Slurm shredder reads (xdmod-slurm-helper runs
# sacct --allusers --parsable2 --noheader --allocations --duplicates --format <these>).
XDMOD_SACCT_COLUMNS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "Cluster",
    "Partition",
    "QOS",
    "Account",
    "Group",
    "GID",
    "User",
    "UID",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ExitCode",
    "State",
    "NNodes",
    "NCPUS",
    "ReqCPUS",
    "ReqMem",
    "ReqTRES",
    "AllocTRES",
    "Timelimit",
    "NodeList",
    "JobName",
)
SACCT_PRESETS: dict[str, tuple[str, ...]] = {
    "default": DEFAULT_SACCT_COLUMNS,
    "xdmod": XDMOD_SACCT_COLUMNS,
}
SREPORT_UTILIZATION_COLUMNS: tuple[str, ...] = (
    "Cluster",
    "TRES Name",
    "Allocated",
    "Down",
    "PLND Down",
    "Idle",
    "Planned",
    "Reported",
)
SREPORT_PRESETS: dict[str, tuple[str, ...]] = {
    "default": SREPORT_UTILIZATION_COLUMNS,
    "account-by-user": ("Cluster", "Account", "Login", "Proper Name", "TRES Name", "Used"),
}
TIME_UNITS: tuple[str, ...] = ("hours", "minutes", "seconds")
# gres/gpuutil: summed over a step's GPUs (Slurm >= 24.05.1) or one GPU's figure (before).
GPUUTIL_MODES: tuple[str, ...] = ("summed", "one-gpu")
MAX_COLUMNS = 200
MAX_DELIMITER_CHARS = 8
_WIDTH_RE = re.compile(r"%-?\d+$")


class LayoutError(ValueError):
    """Bad layout options; ``errors`` maps each option to why (a 400 in the API)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{key}: {value}" for key, value in errors.items()))
        self.errors = errors


def parse_columns(columns: str | Sequence[str]) -> tuple[str, ...]:
    """``"JobID,Account%20, State"`` (or a list) -> ``("JobID", "Account", "State")``."""
    names = columns.split(",") if isinstance(columns, str) else list(columns)
    return tuple(_WIDTH_RE.sub("", str(name).strip()) for name in names)


def layout_options(
    kind: str,
    *,
    columns: str | Sequence[str] | None = None,
    columns_preset: str | None = None,
    delimiter: str | None = None,
    time_unit: str | None = None,
    gpuutil: str | None = None,
) -> dict[str, Any]:
    """Checked options as stored on the import job: ``columns`` (list), ``preset``,
    ``delimiter``, ``time_unit``; only the ones given. Raises :class:`LayoutError`."""
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    presets = SREPORT_PRESETS if kind == "sreport" else SACCT_PRESETS
    if columns and columns_preset:
        errors["columns_preset"] = "Give the columns or a preset, not both."
    elif columns_preset:
        if columns_preset not in presets:
            errors["columns_preset"] = f"Unknown preset; one of {', '.join(presets)}."
        else:
            out["columns"], out["preset"] = list(presets[columns_preset]), columns_preset
    elif columns:
        names = parse_columns(columns)
        if not all(names) or len(names) > MAX_COLUMNS:
            errors["columns"] = f"A comma-separated list of 1 to {MAX_COLUMNS} column names."
        elif len({name.lower() for name in names}) < len(names):
            errors["columns"] = "A column is named twice."
        else:
            out["columns"] = list(names)
    if delimiter:
        if kind != "sacct":
            errors["delimiter"] = "Only sacct output takes a delimiter (sreport -P uses |)."
        elif len(delimiter) > MAX_DELIMITER_CHARS or "\n" in delimiter or "\r" in delimiter:
            errors["delimiter"] = f"1 to {MAX_DELIMITER_CHARS} characters, no line break."
        else:
            out["delimiter"] = delimiter
    if time_unit:
        if kind != "sreport":
            errors["time_unit"] = "Only sreport output has a time unit."
        elif time_unit.lower() not in TIME_UNITS:
            errors["time_unit"] = f"One of {', '.join(TIME_UNITS)} (sreport -t)."
        else:
            out["time_unit"] = time_unit.lower()
    if gpuutil:
        if kind != "sacct" or gpuutil not in GPUUTIL_MODES:
            modes = " or ".join(GPUUTIL_MODES)
            errors["gpuutil"] = f"sacct only: {modes} (Slurm 24.05.1 and later: summed)."
        else:
            out["gpuutil"] = gpuutil
    if (out.get("columns") or columns) and kind in ("csv", "xlsx"):
        errors["columns"] = "CSV and XLSX files name their columns in their header row."
    if errors:
        raise LayoutError(errors)
    return out


def preset_with_field_count(count: int, presets: dict[str, tuple[str, ...]]) -> str | None:
    """The name of a preset with ``count`` columns (a header-less file's likely layout)."""
    return next((name for name, names in presets.items() if len(names) == count), None)
