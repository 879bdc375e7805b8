"""What an import left out, per reason with the first job ids: nothing is skipped silently."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from accounting.parsing.sacct import SKIP_NO_GPU, SKIP_NOT_STARTED, SacctStats


def skipped_lines(stats: SacctStats, gpu_partitions: Iterable[str]) -> list[dict[str, Any]]:
    """``[{"reason", "count", "examples"}]``; jobs without GPUs on a GPU partition apart.

    A partition is a GPU partition when the file had GPU jobs in it or it maps to a pool.
    """
    gpu = {name.lower() for name in gpu_partitions if name}
    rows: list[dict[str, Any]] = []
    cpu_count, cpu_examples = 0, []
    for reason, count in sorted(stats.skip_counts.items()):
        examples = stats.skip_examples.get(reason, [])
        if reason == SKIP_NOT_STARTED:
            rows.append(
                {"reason": "pending or never started", "count": count, "examples": examples}
            )
        elif reason.startswith(SKIP_NO_GPU):
            partition = reason.removeprefix(SKIP_NO_GPU)
            if partition.lower() in gpu:
                rows.append(
                    {
                        "reason": f"GPU partition {partition} but no gres/gpu in AllocTRES",
                        "count": count,
                        "examples": examples,
                    }
                )
            else:
                cpu_count += count
                cpu_examples.extend(examples[: 5 - len(cpu_examples)])
    if cpu_count:
        rows.append({"reason": "no GPU (CPU jobs)", "count": cpu_count, "examples": cpu_examples})
    return rows


def skip_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """Skips that may be lost GPU work deserve a warning, not only a count."""
    return [
        f"{row['count']:,} job(s) skipped: {row['reason']} (e.g. {', '.join(row['examples'])})"
        for row in rows
        if row["reason"].startswith("GPU partition")
    ]


def gpu_source_warnings(stats: SacctStats) -> list[str]:
    """GPUs read from what a job asked for, not what it held, are a lower bound."""
    if stats.gpu_column != "reqgres":
        return []
    return [
        "GPU counts come from ReqGRES (the file has neither AllocTRES nor AllocGRES): jobs "
        "given whole nodes may have held more GPUs than they asked for."
    ]
