"""Files that are not a usage export, named for what they are from their first lines.

People upload what they have at hand: a site wrapper's job summary (``seff``, Princeton's
``jobstats``, a ``jobcharge`` charging report) or GPU telemetry (a dcgm-exporter ``/metrics``
scrape, ``nvidia-smi --query-gpu`` CSV). None of them is a list of jobs with their cards and
times, so none can be imported as usage; each is refused at upload with the export to make
instead (:func:`identify`). Only consulted when a file is not recognised as the format it
was uploaded as, so a real export is never mistaken for one of these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEAD_LINES = 60
# The sacct export docs/usage-import.md recommends (one line per job, every layout reads it).
SACCT_COMMAND = (
    "sacct --allusers --allocations --duplicates --parsable2 --starttime YYYY-MM-DD "
    "--endtime YYYY-MM-DD --format JobID,JobIDRaw,Cluster,Partition,Account,User,Submit,"
    "Start,End,Elapsed,State,NNodes,AllocTRES,NodeList"
)
TELEMETRY_EXPORT = (
    "upload GPU telemetry on the telemetry page as a time series: Prometheus's query_range over "
    "the period, or `promtool tsdb dump-openmetrics` of the DCGM_FI_* series (samples with "
    "timestamps)"
)


@dataclass(frozen=True)
class Signature:
    """A tool's output: ``needed`` of ``patterns`` match lines of the file's head."""

    name: str
    what: str
    patterns: tuple[re.Pattern[str], ...]
    needed: int


def _patterns(*texts: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(text, re.IGNORECASE | re.MULTILINE) for text in texts)


WRAPPERS: tuple[Signature, ...] = (
    Signature(
        "seff",
        "a one-job efficiency summary",
        _patterns(
            r"^Job ID: *\d",
            r"^User/Group: ",
            r"^(CPU|Memory) Efficiency: ",
            r"^Job Wall-clock time: ",
            r"^Cores( per node)?: \d",
        ),
        2,
    ),
    Signature(
        "jobstats",
        "a one-job statistics report",
        _patterns(
            r"Slurm Job Statistics",
            r"^\s*NetID/Account: ",
            r"^\s*QOS/Partition: ",
            r"Overall Utilization",
            r"^\s*(GPU|CPU) utilization\s+\[",
        ),
        2,
    ),
    Signature(
        "jobcharge",
        "a charging report (money or service units per job, not cards and times)",
        _patterns(
            r"\bjobcharge\b",
            r"^\s*(Total )?Charge(d)?\b.*[:=]",
            r"^\s*Job ?ID\b.*\b(Charge|SUs?|Service Units)\b",
            r"\b(Charge|SUs?|Service Units)\b.*\bJob ?ID\b",
        ),
        2,
    ),
)
# A dcgm-exporter sample: ``DCGM_FI_DEV_GPU_UTIL{gpu="0",...} 87`` (no timestamp) or with one.
_DCGM_SAMPLE = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)(\{.*\})?\s+(\S+)(\s+(\S+))?\s*$")
_NVIDIA_SMI_HEADER = re.compile(
    r"^timestamp, *(name|index|pci\.bus_id|uuid|driver_version|utilization\.gpu|"
    r"power\.draw|temperature\.gpu|memory\.\w+)",
    re.IGNORECASE,
)


def _head_text(head: bytes) -> list[str]:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return text.splitlines()[:HEAD_LINES]


def identify_wrapper(head: bytes) -> Signature | None:
    """The site wrapper whose output ``head`` is, if it looks like one."""
    text = "\n".join(_head_text(head))
    for wrapper in WRAPPERS:
        if sum(bool(pattern.search(text)) for pattern in wrapper.patterns) >= wrapper.needed:
            return wrapper
    return None


def telemetry_kind(head: bytes) -> str | None:
    """``"nvidia-smi"`` (``--query-gpu=timestamp,...`` CSV), ``"dcgm-scrape"`` (a /metrics
    scrape: DCGM samples without timestamps), ``"dcgm-series"`` (with them), else None."""
    lines = [line for line in _head_text(head) if line.strip()]
    if lines and _NVIDIA_SMI_HEADER.match(lines[0]):
        return "nvidia-smi"
    samples = [match for line in lines if (match := _DCGM_SAMPLE.match(line.strip()))]
    if not samples:
        return None
    with_time = sum(match.group(5) is not None for match in samples)
    return "dcgm-series" if with_time * 2 > len(samples) else "dcgm-scrape"


def not_usage_message(head: bytes) -> str | None:
    """Why a usage upload is not a usage export and what to export instead; None if unknown."""
    wrapper = identify_wrapper(head)
    if wrapper is not None:
        return (
            f"this is {wrapper.name} output ({wrapper.what}), not an accounting export; "
            f"export with sacct instead: {SACCT_COMMAND}"
        )
    kind = telemetry_kind(head)
    if kind is not None:
        what = {
            "nvidia-smi": "nvidia-smi --query-gpu CSV",
            "dcgm-scrape": "a dcgm-exporter /metrics scrape",
            "dcgm-series": "a DCGM telemetry export",
        }[kind]
        return (
            f"this is {what} (GPU telemetry), not job usage: {TELEMETRY_EXPORT}; for usage "
            f"export with sacct: {SACCT_COMMAND}"
        )
    return None
