"""Pure usage-record parsers (no Django): sacct (text and JSON), sreport, generic CSV/XLSX.

Every parser streams: it yields validated pandas chunks and keeps memory constant, reports
progress through a callback, and raises :class:`UsageValidationError` (``line N, column X:
reason`` for up to 50 problems) when any line is bad, so the caller's single transaction
stores nothing from a bad file.
"""

from accounting.parsing.aliases import DEFAULT_GRES_ALIASES, normalize_gres_type, resolve_gres_types
from accounting.parsing.blocks import ParseProgress, ProgressCallback
from accounting.parsing.errors import LineIssue, UsageValidationError
from accounting.parsing.layouts import DEFAULT_SACCT_COLUMNS
from accounting.parsing.sacct import SacctStats, iter_sacct_chunks, read_sacct
from accounting.parsing.schema import (
    JOB_STATES,
    LOST_WORK_STATES,
    USAGE_COLUMNS,
    USAGE_DTYPES,
    empty_usage_frame,
)
from accounting.parsing.slurm_json import iter_slurm_json_chunks, read_slurm_json
from accounting.parsing.sreport import (
    SREPORT_DTYPES,
    SreportStats,
    iter_sreport_chunks,
    read_sreport,
)
from accounting.parsing.tabular import TableStats, iter_csv_chunks, iter_xlsx_chunks

__all__ = [
    "DEFAULT_GRES_ALIASES",
    "DEFAULT_SACCT_COLUMNS",
    "JOB_STATES",
    "LOST_WORK_STATES",
    "SREPORT_DTYPES",
    "USAGE_COLUMNS",
    "USAGE_DTYPES",
    "LineIssue",
    "ParseProgress",
    "ProgressCallback",
    "SacctStats",
    "SreportStats",
    "TableStats",
    "UsageValidationError",
    "empty_usage_frame",
    "iter_csv_chunks",
    "iter_sacct_chunks",
    "iter_slurm_json_chunks",
    "iter_sreport_chunks",
    "iter_xlsx_chunks",
    "normalize_gres_type",
    "read_sacct",
    "read_slurm_json",
    "read_sreport",
    "resolve_gres_types",
]
