"""Generate a realistic ``sacct --parsable2`` file and time the sacct parser on it.

A year (2024) of a 2,000-card cluster: 150 H100 nodes and 100 A100-80GB nodes (10 of them
split into MIG slices), 8 cards per node. Jobs hold 1 to 512 cards, run for log-normal times
scaled so the cluster is about 70 % allocated, end in a realistic mix of states (completed,
failed, OUT_OF_MEMORY, ``CANCELLED by <uid>``, timeout, node_fail, preempted, REQUEUED runs
listed by ``--duplicates``, running, pending), and carry ``.batch``, ``.extern`` and ``.N`` step
lines with ``gres/gpuutil``. Array tasks (``123_4``) and het components (``123+0``) appear too.

Everything is numpy-vectorised and written in chunks of jobs, so 1,000,000 lines take a few
seconds and little memory.

    python benchmarks/gen_sacct.py /tmp/sacct.txt --lines 1000000 --seed 7 --bench
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from accounting.parsing.layouts import DEFAULT_SACCT_COLUMNS  # noqa: E402
from benchmarks.common import peak_rss_mib  # noqa: E402

# The default sacct layout plus per-step GPU utilization.
COLUMNS = (*DEFAULT_SACCT_COLUMNS, "TRESUsageInAve")
YEAR_START = np.datetime64("2024-01-01T00:00:00", "s")
YEAR_END = np.datetime64("2025-01-01T00:00:00", "s")
YEAR_SECONDS = int((YEAR_END - YEAR_START) / np.timedelta64(1, "s"))
CARDS_PER_NODE = 8
H100_NODES, A100_NODES, MIG_NODES = 150, 90, 10
TOTAL_CARDS = (H100_NODES + A100_NODES + MIG_NODES) * CARDS_PER_NODE
TARGET_ALLOCATED_SHARE = 0.70
JOBS_PER_CHUNK = 20_000

SIZES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
SIZE_WEIGHTS = np.array([0.30, 0.10, 0.12, 0.25, 0.08, 0.06, 0.04, 0.025, 0.015, 0.01])
# State word, probability; CANCELLED gets "by <uid>", REQUEUED adds a later final run.
STATES = np.array(
    [
        "COMPLETED",
        "FAILED",
        "OUT_OF_MEMORY",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "REQUEUED",
    ]
)
STATE_WEIGHTS = np.array([0.71, 0.06, 0.01, 0.09, 0.05, 0.02, 0.03, 0.03])
MIG_PROFILES = np.array(["a100_1g.10gb", "a100_2g.20gb", "a100_3g.40gb"])
SRUN_STEP_COUNTS = np.array([0, 1, 2, 3])
SRUN_STEP_WEIGHTS = np.array([0.2, 0.5, 0.2, 0.1])
ACCOUNTS = np.array([f"team-{name}" for name in "abcdefghijklmnop"])
# Variable-width UTF-8 strings: fixed-width "U" arrays would cost 4 bytes x the longest line.
TEXT = np.dtypes.StringDType()
# Allocation + .batch + .extern + srun steps + the final run of requeued jobs; 1 % headroom so
# the year is always covered before the line budget runs out (the rest lands at year end).
MEAN_LINES_PER_JOB = 1.01 * (
    3.0
    + float((SRUN_STEP_COUNTS * SRUN_STEP_WEIGHTS).sum())
    + float(STATE_WEIGHTS[list(STATES).index("REQUEUED")])
)


def _text(values: np.ndarray) -> np.ndarray:
    return np.asarray(values).astype(TEXT)


def _pad2(values: np.ndarray) -> np.ndarray:
    return np.strings.zfill(_text(values.astype(np.int64)), 2)


def _elapsed(seconds: np.ndarray) -> np.ndarray:
    """Seconds -> Slurm ``[D-]HH:MM:SS``."""
    seconds = seconds.astype(np.int64)
    days, rest = np.divmod(seconds, 86_400)
    hours, rest = np.divmod(rest, 3_600)
    minutes, secs = np.divmod(rest, 60)
    clock = _pad2(hours) + ":" + _pad2(minutes) + ":" + _pad2(secs)
    return np.where(days > 0, _text(days) + "-" + clock, clock)


def _times(moments: np.ndarray) -> np.ndarray:
    return _text(np.datetime_as_string(moments.astype("datetime64[s]"), unit="s"))


def generate_jobs(
    rng: np.random.Generator, count: int, first_id: int, slice_start: float, slice_len: float
) -> dict[str, np.ndarray]:
    """Attributes of ``count`` jobs starting in [slice_start, slice_start + slice_len) of 2024."""
    size = rng.choice(SIZES, size=count, p=SIZE_WEIGHTS)
    is_mig = (size == 1) & (rng.random(count) < 0.08)
    big_on_h100 = np.where(size > 8, 0.7, 0.6)
    partition = _text(
        np.where(is_mig, "mig", np.where(rng.random(count) < big_on_h100, "h100", "a100"))
    )
    gres_type = _text(
        np.where(
            is_mig,
            rng.choice(MIG_PROFILES, size=count),
            np.where(partition == "h100", "h100", "a100_80g"),
        )
    )
    nodes = np.maximum(1, -(-size // CARDS_PER_NODE))
    pool_nodes = np.select(
        [partition == "h100", partition == "a100"], [H100_NODES, A100_NODES], MIG_NODES
    )
    first_node = rng.integers(0, np.maximum(1, pool_nodes - nodes + 1))
    # Long-tailed run times, longer for bigger jobs; scaled below to the target allocation.
    median_h = 0.5 + 0.6 * np.log2(size + 1)
    duration_s = rng.lognormal(np.log(median_h * 3600), 1.3, size=count)
    card_seconds_target = TARGET_ALLOCATED_SHARE * TOTAL_CARDS * YEAR_SECONDS * slice_len
    duration_s *= card_seconds_target / float((duration_s * np.where(is_mig, 3 / 7, size)).sum())
    duration_s = np.clip(duration_s, 5, 14 * 86_400).astype(np.int64)
    start_offset = np.sort(slice_start + rng.random(count) * slice_len)
    start = YEAR_START + (start_offset * YEAR_SECONDS).astype("timedelta64[s]")
    submit = start - rng.exponential(1_800, size=count).astype("timedelta64[s]")
    state = _text(rng.choice(STATES, size=count, p=STATE_WEIGHTS))
    end = start + duration_s.astype("timedelta64[s]")
    running = end >= YEAR_END
    state = np.where(running, "RUNNING", state)
    pending = rng.random(count) < 0.004
    state = np.where(pending, "PENDING", state)
    job_id = first_id + np.arange(count)
    return {
        "job_id": job_id,
        "size": size,
        "is_mig": is_mig,
        "partition": partition,
        "gres_type": gres_type,
        "nodes": nodes,
        "first_node": first_node,
        "duration_s": np.where(running, (YEAR_END - start).astype(np.int64), duration_s),
        "start": start,
        "submit": submit,
        "end": end,
        "state": state,
        "pending": pending,
        "running": running,
        "account": _text(rng.choice(ACCOUNTS, size=count)),
        "user_id": rng.integers(1000, 1400, size=count),
        "is_array": (size <= 8) & (rng.random(count) < 0.15),
        "is_het": (size > 8) & (rng.random(count) < 0.02),
        "srun_steps": rng.choice(SRUN_STEP_COUNTS, size=count, p=SRUN_STEP_WEIGHTS),
        "gpu_util": np.clip(rng.beta(5, 2, size=count), 0.01, 1.0),
        "requeued": state == "REQUEUED",
    }


def format_lines(jobs: dict[str, np.ndarray], cluster: str = "fleet") -> np.ndarray:
    """All sacct lines of a batch of jobs (allocation lines followed by their steps)."""
    count = len(jobs["job_id"])
    job_id = jobs["job_id"].astype(TEXT)
    label = np.where(
        jobs["is_array"],
        (jobs["job_id"] // 16 * 16).astype(TEXT) + "_" + (jobs["job_id"] % 16).astype(TEXT),
        np.where(jobs["is_het"], job_id + "+0", job_id),
    )
    cards_text = np.where(jobs["is_mig"], "1", jobs["size"].astype(TEXT))
    cpus = np.where(jobs["is_mig"], 4, jobs["size"] * 14).astype(TEXT)
    gres = "gres/gpu:" + jobs["gres_type"] + "=" + cards_text + ",gres/gpu=" + cards_text
    node_text = jobs["nodes"].astype(TEXT)
    alloc_tres = (
        "billing="
        + cpus
        + ",cpu="
        + cpus
        + ","
        + gres
        + ",mem="
        + (np.where(jobs["is_mig"], 32, jobs["size"] * 120)).astype(TEXT)
        + "G,node="
        + node_text
    )
    first = jobs["first_node"]
    last = first + jobs["nodes"] - 1
    prefix = jobs["partition"] + "-"
    node_list = np.where(
        jobs["nodes"] > 1,
        prefix
        + "["
        + np.strings.zfill(first.astype(TEXT), 3)
        + "-"
        + np.strings.zfill(last.astype(TEXT), 3)
        + "]",
        prefix + np.strings.zfill(first.astype(TEXT), 3),
    )
    state_text = np.where(
        jobs["state"] == "CANCELLED", "CANCELLED by " + jobs["user_id"].astype(TEXT), jobs["state"]
    )
    start_text = np.where(jobs["pending"], "Unknown", _times(jobs["start"]))
    end_text = np.where(jobs["pending"] | jobs["running"], "Unknown", _times(jobs["end"]))
    elapsed = np.where(jobs["pending"], "00:00:00", _elapsed(jobs["duration_s"]))
    alloc_tres = np.where(jobs["pending"], "", alloc_tres)
    node_list = np.where(jobs["pending"], "None assigned", node_list)

    # Rows: allocation, .batch, .extern, .0 ... .k-1; REQUEUED jobs get a final run after.
    steps = 3 + jobs["srun_steps"]
    steps = np.where(jobs["pending"], 1, steps)
    rerun = jobs["requeued"] & ~jobs["pending"]
    per_job = steps + rerun
    row_job = np.repeat(np.arange(count), per_job)
    position = np.arange(per_job.sum()) - np.repeat(np.cumsum(per_job) - per_job, per_job)
    # Position 0 is the allocation; for reruns the last position is the final run's allocation.
    is_rerun_line = rerun[row_job] & (position == per_job[row_job] - 1)
    step_suffix = np.where(
        position == 0,
        "",
        np.where(
            position == 1, ".batch", np.where(position == 2, ".extern", "." + _text(position - 3))
        ),
    )
    step_suffix = np.where(is_rerun_line, "", step_suffix)
    is_allocation = step_suffix == ""

    def pick(values: np.ndarray) -> np.ndarray:
        return values[row_job]

    util_sum = (
        pick(jobs["gpu_util"]) * 100 * np.where(pick(jobs["is_mig"]), 1, pick(jobs["size"]))
    ).astype(np.int64)
    srun_usage = (
        "cpu="
        + _elapsed(pick(jobs["duration_s"]) * 10)
        + ",gres/gpuutil="
        + _text(util_sum)
        + ",mem=180G"
    )
    usage = np.where(
        is_allocation,
        "",
        np.where(
            step_suffix == ".batch",
            "cpu=00:02:11,mem=1.2G",
            np.where(step_suffix == ".extern", "cpu=00:00:00,gres/gpuutil=0,mem=0", srun_usage),
        ),
    )
    # The final run of a requeued job: resubmitted a minute after, started five minutes after.
    rerun_submit = _times(jobs["end"] + np.timedelta64(60, "s"))
    rerun_start = jobs["end"] + np.timedelta64(300, "s")
    rerun_end = rerun_start + jobs["duration_s"].astype("timedelta64[s]")
    rerun_end_text = np.where(rerun_end >= YEAR_END, "Unknown", _times(rerun_end))
    rerun_start_text = _times(rerun_start)
    submit_text = _times(jobs["submit"])
    fields = [
        pick(label) + step_suffix,
        pick(job_id) + step_suffix,
        np.full(len(row_job), cluster, dtype=TEXT),
        np.where(is_allocation, pick(jobs["partition"]), ""),
        pick(jobs["account"]),
        np.where(is_allocation, "u" + pick(jobs["user_id"]).astype(TEXT), ""),
        np.where(is_rerun_line, pick(rerun_submit), pick(submit_text)),
        np.where(is_rerun_line, pick(rerun_start_text), pick(start_text)),
        np.where(is_rerun_line, pick(rerun_end_text), pick(end_text)),
        pick(elapsed),
        np.where(
            is_rerun_line, "COMPLETED", np.where(is_allocation, pick(state_text), "COMPLETED")
        ),
        pick(node_text),
        pick(alloc_tres),
        pick(node_list),
        usage,
    ]
    line = fields[0]
    for column in fields[1:]:
        line = line + "|" + column
    return line


def generate(path: Path, lines: int, seed: int) -> int:
    """Write ``lines`` data lines (plus the header); returns the number of jobs generated."""
    rng = np.random.default_rng(seed)
    expected_jobs = max(1, int(lines / MEAN_LINES_PER_JOB))
    written = 0
    jobs_done = 0
    next_id = 1_000_000
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write("|".join(COLUMNS) + "\n")
        while written < lines:
            count = min(JOBS_PER_CHUNK, max(1, expected_jobs - jobs_done) + 10)
            slice_start = min(jobs_done / expected_jobs, 0.999)
            slice_len = min(count / expected_jobs, 1.0 - slice_start)
            jobs = generate_jobs(rng, count, next_id, slice_start, slice_len)
            block = format_lines(jobs)[: lines - written]
            out.write("\n".join(block.tolist()))
            out.write("\n")
            written += len(block)
            jobs_done += count
            next_id += count
    return jobs_done


def measure(path: Path, mode: str, chunk_lines: int) -> None:
    """One measurement in a fresh process, so peak RSS belongs to it alone."""
    sys.path.insert(0, str(REPO_ROOT))
    import pandas as pd

    from accounting.parsing import SacctStats, iter_sacct_chunks

    baseline = peak_rss_mib()
    began = time.perf_counter()
    if mode == "parser":
        stats = SacctStats()
        rows = 0
        card_hours = 0.0
        for chunk in iter_sacct_chunks(path, chunk_lines=chunk_lines, stats=stats):
            rows += len(chunk)
            card_hours += float(chunk["card_hours"].sum())
        lines = stats.allocation_lines + stats.step_lines
        label = f"sacct parser (chunk_lines={chunk_lines:,})"
        detail = f"{rows:,} records, {card_hours / 1e6:.2f} M card-hours"
    else:
        frame = pd.read_csv(path, sep="|", dtype=str, keep_default_na=False)
        summary = frame.groupby(["Partition", "State"]).size()
        lines = len(frame)
        rows = len(frame)
        label = "pandas.read_csv(sep='|') + groupby (ceiling)"
        detail = f"{len(summary):,} groups"
    seconds = time.perf_counter() - began
    print(
        f"{label}: {lines:,} lines in {seconds:.2f} s = {lines / seconds:,.0f} lines/s, "
        f"{rows / seconds:,.0f} rows/s; peak RSS {peak_rss_mib():,.0f} MiB "
        f"(interpreter + imports {baseline:,.0f} MiB); {detail}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="where to write the sacct file")
    parser.add_argument(
        "--lines", type=int, default=1_000_000, help="data lines (default 1,000,000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bench", action="store_true", help="then time the parser and the ceiling")
    parser.add_argument("--chunk-lines", type=int, default=50_000, help="parser chunk size")
    parser.add_argument("--measure", choices=["parser", "ceiling"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.output, args.measure, args.chunk_lines)
        return
    if args.bench:
        # Linux keeps a process's peak RSS across fork+exec, so this parent stays small and
        # every step runs in its own child: each figure is that step's own peak.
        me = [sys.executable, __file__, str(args.output)]
        subprocess.run([*me, "--lines", str(args.lines), "--seed", str(args.seed)], check=True)
        for mode in ("parser", "ceiling"):
            chunk = ["--chunk-lines", str(args.chunk_lines)]
            subprocess.run([*me, "--measure", mode, *chunk], check=True)
        return
    began = time.perf_counter()
    jobs = generate(args.output, args.lines, args.seed)
    seconds = time.perf_counter() - began
    size_mib = args.output.stat().st_size / 2**20
    print(
        f"generated {args.lines:,} lines ({jobs:,} jobs drawn, {size_mib:,.0f} MiB) in "
        f"{seconds:.2f} s; peak RSS {peak_rss_mib():,.0f} MiB"
    )


if __name__ == "__main__":
    main()
