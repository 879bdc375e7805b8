"""What an uploaded telemetry file is, answered at upload (a 400), not by the worker later.

The upload takes a time series of DCGM samples with timestamps: OpenMetrics or the Prometheus
text format, or Prometheus ``/api/v1/query_range`` JSON answers. A JSON file is read whole at
upload without its values (telemetry.export_json): an error answer, an instant query's vector,
a scalar or a string is refused naming the query to run instead. Two text files people have
at hand are not a time series either: a single dcgm-exporter ``/metrics`` scrape (one instant,
no timestamps: no period's energy or MFU can come from it) and ``nvidia-smi
--query-gpu=timestamp,...`` CSV (no DCGM profiling fields, no host labels to join jobs with).
Both are refused naming the export to make instead, as is Slurm usage uploaded here by
mistake. The recognising of those is accounting.parsing.wrappers' (one place).
"""

from __future__ import annotations

from accounting.parsing.delimiters import detect_delimiter, first_line
from accounting.parsing.wrappers import identify_wrapper, telemetry_kind
from core.uploads.sniff import peek_head
from telemetry.export_json import answers_problem, is_json

HEAD_BYTES = 64 * 1024
TIME_SERIES = (
    "export the period as a time series instead: connect the cluster's Prometheus as a "
    "telemetry source (Fleetwise reads it with query_range), or upload its /api/v1/query_range "
    "JSON over the period (step = the scrape interval), or `promtool tsdb "
    "dump-openmetrics --match='{__name__=~\"DCGM_FI_.*\"}' --min-time <ms> --max-time <ms> "
    "<data dir>` (every sample with its timestamp)"
)


def upload_kind_problem(upload) -> str | None:
    """Why this upload is not a DCGM time series, with what to export instead; None if it may be."""
    head = peek_head(upload, HEAD_BYTES)
    if is_json(head):
        return answers_problem(upload)
    kind = telemetry_kind(head)
    if kind == "dcgm-scrape":
        return (
            "This is a single dcgm-exporter /metrics scrape: one instant without timestamps, "
            f"which cannot give a period's energy or MFU; {TIME_SERIES}."
        )
    if kind == "nvidia-smi":
        return (
            "This is nvidia-smi --query-gpu CSV: it has no DCGM profiling fields (tensor "
            f"activity) and no host labels to join Slurm jobs with; {TIME_SERIES}."
        )
    if identify_wrapper(head) is not None or detect_delimiter(first_line(head)) is not None:
        return (
            "This is Slurm job accounting, not GPU telemetry: import it on the usage import page."
        )
    return None
