"""Slurm ``sacct --parsable2`` output -> usage-record chunks.

Produce the input with, for example::

    sacct --allusers --parsable2 --duplicates --starttime 2024-01-01 --endtime 2025-01-01 \\
        --format JobID,JobIDRaw,Cluster,Partition,Account,User,Submit,Start,End,Elapsed,\\
                 State,NNodes,AllocTRES,NodeList[,TRESUsageInAve]

Columns are read by NAME from the header line (:mod:`accounting.parsing.sacct_layout`);
without a header (``sacct -n``) the caller passes the column list (or a preset such as
:data:`DEFAULT_SACCT_COLUMNS`). ``--parsable`` (a trailing delimiter) is accepted too.

Rules (each one is tested):

* GPUs come from ``AllocTRES`` only: ``ReqTRES`` under-reports exclusive jobs.
  ``gres/gpu:h100=8`` names the model through the alias table; ``gres/gpu=8`` alone takes the
  model of the partition (``partition_models``), else ``default_model``, else unknown.
  A job holding two typed kinds gives one record per kind (``record_key`` gets ``/<type>``);
  an untyped remainder (``gres/gpu`` above the typed sum) becomes one more record.
* MIG slices count as their fraction of a card: ``gres/gpu:a100_3g.20gb=1`` -> 3/7 card.
* Steps (``123.batch``, ``123.extern``, ``123.0``, ``123_4.0``, ``123+0.0``) are folded into the
  allocation line right above them, which carries ``AllocTRES``. ``gres/gpuutil`` in a step's
  ``TRESUsageInAve`` or ``TRESUsageInTot`` is normalised per card as
  :mod:`accounting.parsing.gpuutil` explains (Slurm version semantics).
* Slurm <= 17 files without ``AllocTRES`` take GPUs from ``AllocGRES`` (else ``ReqGRES``).
* Array tasks (``123_4``) and het components (``123+0``) are separate allocations with their own
  ``JobIDRaw`` and ``AllocTRES``; each is one record with ``parent_job_id`` ``123``.
* ``record_key`` = ``<JobIDRaw>@<Submit as printed>``: Slurm resets Submit on requeue, so the
  runs that ``--duplicates`` lists (REQUEUED, then the final run) stay separate records, and
  a re-import of the same run updates it.
* States: ``CANCELLED by 1234`` -> cancelled; REQUEUED -> preempted; OUT_OF_MEMORY -> failed;
  BOOT_FAIL -> node_fail (see :data:`~accounting.parsing.schema.SCHEDULER_STATES`).
  Unknown state words are errors.
* Not usage, skipped without error (counted in :class:`SacctStats`): pending jobs, jobs that
  never started (Start ``Unknown``/``None``), jobs without GPUs.
* Times are wall-clock times in ``timezone`` (default UTC), converted to UTC. End ``Unknown``
  is only valid for running jobs; ``Elapsed`` (``[D-]HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm``) wins
  over End - Start because it excludes suspended time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from accounting.parsing.aliases import resolve_gres_types
from accounting.parsing.as_of import AsOf, hold_running
from accounting.parsing.blocks import (
    ParseProgress,
    RecordBlock,
    UsageSource,
    iter_record_blocks,
    open_source,
    read_block_frame,
)
from accounting.parsing.errors import (
    IssueCollector,
    TooManyIssues,
)
from accounting.parsing.fields import (
    Durations,
    bad_time_limits,
    blank_to_na,
    job_durations,
    map_distinct,
    parse_numbers,
    parse_slurm_times,
)
from accounting.parsing.gpuutil import step_gpu_utilization
from accounting.parsing.gres import gpu_entry_table, tres_column_from_gres
from accounting.parsing.options import ParseOptions
from accounting.parsing.sacct_layout import Layout, detect_layout, open_sacct_stream
from accounting.parsing.schema import (
    MAX_JOB_NODES,
    SCHEDULER_STATES,
    conform_usage_frame,
    empty_usage_frame,
)

# GPUs come from the first of these present (AllocGRES / ReqGRES: Slurm before TRES, <= 17).
MAX_SKIP_EXAMPLES = 5
SKIP_NOT_STARTED = "pending or never started"
SKIP_NO_GPU = "no GPU in partition "  # + the partition name ("" when absent)
# Elapsed and End - Start are printed to the second; allow a minute of clock rounding.
ELAPSED_TOLERANCE_H = 1 / 60
DEFAULT_CHUNK_LINES = 50_000


@dataclass
class SacctStats:
    """What a parse saw; pass one in to read it after the iteration."""

    allocation_lines: int = 0
    step_lines: int = 0
    blank_lines: int = 0
    records: int = 0
    skipped_never_started: int = 0
    skipped_without_gpu: int = 0
    records_with_unknown_model: int = 0
    # First job ids skipped per reason ("pending", "no GPU in <partition>"), for the summary.
    skip_examples: dict[str, list[str]] = field(default_factory=dict)
    skip_counts: dict[str, int] = field(default_factory=dict)
    gpu_column: str = "alloctres"  # where GPU counts came from (allocgres/reqgres: Slurm <= 17)
    # The export's as-of time: the latest time in the file (running jobs count up to it).
    as_of: AsOf = field(default_factory=AsOf)

    def note_skipped(self, reason: str, labels: Sequence[str], count: int) -> None:
        if not count:
            return
        self.skip_counts[reason] = self.skip_counts.get(reason, 0) + count
        examples = self.skip_examples.setdefault(reason, [])
        examples.extend(str(label) for label in labels[: MAX_SKIP_EXAMPLES - len(examples)])


@dataclass(kw_only=True)
class SacctOptions(ParseOptions):
    """:class:`ParseOptions` plus what only sacct text needs.

    columns: column names when the file has no header (see
        :data:`~accounting.parsing.layouts.SACCT_PRESETS`); ignored when a header line is
        present. A header-less file without them is refused, naming a preset that fits.
    cluster: cluster name for lines whose ``Cluster`` column is absent or empty.
    delimiter: ``sacct --delimiter`` (any string); default: the header line's, else ``|``.
    gpuutil_summed: ``gres/gpuutil`` sums the step's GPUs (Slurm >= 24.05.1); False for
        older files, where it is one GPU's figure (:mod:`accounting.parsing.gpuutil`).
    stats: filled with counts of what was read and skipped.
    """

    columns: Sequence[str] | None = None
    cluster: str | None = None
    chunk_lines: int = DEFAULT_CHUNK_LINES
    delimiter: str | None = None
    gpuutil_summed: bool = True
    stats: SacctStats | None = None


def iter_sacct_chunks(
    source: UsageSource, options: SacctOptions | None = None, **keywords: Any
) -> Iterator[pd.DataFrame]:
    """Yield validated usage chunks (see :mod:`accounting.parsing.schema`) from sacct output.

    ``source``: path, or binary/text file object, of sacct output (``--parsable2``, any
    ``--delimiter``, or the fixed-width table); ``options`` (or the same names as keywords):
    :class:`SacctOptions`. Running jobs come last, held up to the export's as-of time
    (:mod:`accounting.parsing.as_of`; ``stats.as_of`` says which time and why).

    Raises:
        UsageValidationError: after the last chunk (or once ``max_errors`` problems are
            collected) if any line was bad. No chunk is yielded after the first bad line, but the
            caller must still treat the import as one transaction.
    """
    o = SacctOptions.build(options, keywords)
    stats = o.stats if o.stats is not None else SacctStats()
    yield from hold_running(_sacct_chunks(source, o, stats), stats.as_of, o.as_of, o.timezone)


def _sacct_chunks(
    source: UsageSource, o: SacctOptions, stats: SacctStats
) -> Iterator[pd.DataFrame]:
    issues = IssueCollector(max_errors=o.max_errors)
    context = ChunkContext(
        cluster=o.cluster,
        aliases=o.aliases,
        partition_models=dict(o.partition_models or {}),
        default_model=o.default_model,
        unknown_model=o.unknown_model,
        timezone=o.timezone,
        gpuutil_summed=o.gpuutil_summed,
        issues=issues,
        stats=stats,
    )
    progress, columns = o.progress, o.columns
    records_emitted = 0
    try:
        with open_source(source) as (raw_stream, total_bytes):
            stream, delimiter = open_sacct_stream(raw_stream, o.delimiter, issues)
            layout: Layout | None = None
            carry: pd.DataFrame | None = None
            total_read = lines_read = 0
            blocks = iter_record_blocks(
                stream, delimiter=delimiter, quotechar=None, records_per_block=o.chunk_lines
            )
            for block in blocks:
                if layout is None:
                    layout, header_index = detect_layout(block, columns, delimiter, issues)
                    if layout is None:
                        continue
                else:
                    header_index = -1
                frame = _read_block(
                    block, layout, header_index, delimiter, issues, stats, context.rejected_jobs
                )
                if carry is not None:
                    frame = pd.concat([carry, frame], ignore_index=True)
                frame, carry = _split_trailing_job(frame)
                chunk = context.process(frame)
                deliver = not issues and len(chunk) > 0
                records_emitted += len(chunk) if deliver else 0
                total_read, lines_read = block.bytes_read, block.lines_read
                if progress is not None:
                    progress(ParseProgress(total_read, lines_read, records_emitted, total_bytes))
                if deliver:
                    yield chunk
            if carry is not None and len(carry):
                chunk = context.process(carry)
                deliver = not issues and len(chunk) > 0
                records_emitted += len(chunk) if deliver else 0
                if progress is not None and layout is not None:
                    progress(ParseProgress(total_read, lines_read, records_emitted, total_bytes))
                if deliver:
                    yield chunk
    except TooManyIssues:
        raise issues.error(truncated=True) from None
    if issues:
        raise issues.error()


def read_sacct(source: UsageSource, **options: Any) -> pd.DataFrame:
    """Whole-file convenience for small inputs and tests: concatenated chunks."""
    chunks = list(iter_sacct_chunks(source, **options))
    return pd.concat(chunks, ignore_index=True) if chunks else empty_usage_frame()


# -- layout and blocks ---------------------------------------------------------------------


def _read_block(
    block: RecordBlock,
    layout: Layout,
    header_index: int,
    delimiter: str,
    issues: IssueCollector,
    stats: SacctStats,
    rejected_jobs: set[str],
) -> pd.DataFrame:
    """Reject wrong field counts by line, then parse the good records as strings.

    The job ids of rejected lines go to ``rejected_jobs`` so their steps are not reported
    a second time as strays.
    """
    blank = block.blank
    stats.blank_lines += int(blank.sum())
    keep = ~blank
    if header_index >= 0:
        keep[header_index] = False
    wrong = keep & (block.field_counts != layout.field_count)
    if wrong.any():
        expected = layout.field_count
        jobid_at = layout.names.index("jobid")
        for position in np.flatnonzero(wrong)[: issues.max_errors]:
            found = int(block.field_counts[position])
            line = int(block.record_lines[position])
            fields = block.record_text(int(position)).split(delimiter)
            if jobid_at < len(fields):
                rejected_jobs.add(fields[jobid_at].strip())
            if found < expected:
                column = layout.labels[found] or str(found + 1)
                issues.add(line, column, f"missing field: line has {found} of {expected} fields")
            else:
                issues.add(
                    line, str(expected + 1), f"extra field: line has {found} of {expected} fields"
                )
    good = keep & ~wrong
    names = [name or f"_trailing_{i}" for i, name in enumerate(layout.names)]
    frame = read_block_frame(block.select_bytes(good), names, delimiter=delimiter)
    frame["source_line"] = block.record_lines[good]
    return frame


def _split_trailing_job(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Hold back the last allocation line and its steps: more steps may be in the next block."""
    if frame.empty:
        return frame, None
    is_allocation = ~frame["jobid"].str.contains(".", regex=False).to_numpy()
    allocations = np.flatnonzero(is_allocation)
    if len(allocations) == 0:
        return frame.iloc[:0], frame
    last = int(allocations[-1])
    return frame.iloc[:last], frame.iloc[last:].reset_index(drop=True)


# -- per-chunk processing ------------------------------------------------------------------


@dataclass
class ChunkContext:
    """One parse's rules from job rows to records; the JSON reader's too (slurm_json)."""

    cluster: str | None
    aliases: Mapping[str, str]
    partition_models: dict[str, str]
    default_model: str | None
    unknown_model: Literal["keep", "error"]
    timezone: str
    gpuutil_summed: bool
    issues: IssueCollector
    stats: SacctStats
    rejected_jobs: set[str] = field(default_factory=set)

    def process(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Fold steps into jobs, validate, and build the usage records of one chunk."""
        frame = frame.reset_index(drop=True)
        if frame.empty:
            return conform_usage_frame(pd.DataFrame())
        if "alloctres" not in frame:
            gres_column = "allocgres" if "allocgres" in frame else "reqgres"
            self.stats.gpu_column = gres_column
            frame["alloctres"] = tres_column_from_gres(frame[gres_column])
        issues = self.issues
        lines = frame["source_line"].to_numpy()
        # numpy string ufuncs run in C over the whole column.
        base_label, dot, step_name = np.strings.partition(frame["jobid"].to_numpy(dtype="U"), ".")
        is_step = dot == "."
        self.stats.step_lines += int(is_step.sum())
        self.stats.allocation_lines += int((~is_step).sum())

        group = np.cumsum(~is_step)
        issues.add_where(
            is_step & (group == 0), lines, "JobID", "step line without its job's line above it"
        )
        allocation_base = base_label[~is_step]
        owner = allocation_base[np.maximum(group - 1, 0)] if len(allocation_base) else base_label
        stray = is_step & (group > 0) & (base_label != owner)
        if stray.any() and self.rejected_jobs:
            # Steps of a line already rejected for its field count: one error is enough.
            stray &= ~np.isin(base_label, list(self.rejected_jobs))
        issues.add_where(
            stray,
            lines,
            "JobID",
            lambda rows: [
                f"step of {base_label[r]} follows the line of job {owner[r]}" for r in rows
            ],
        )
        elapsed = job_durations(frame)
        gpu_utilization = step_gpu_utilization(
            frame, is_step, step_name, group, elapsed.hours, self.gpuutil_summed
        )

        allocation = ~is_step
        jobs = frame.loc[allocation].copy()
        jobs["_group"] = group[allocation]
        jobs_elapsed = Durations(
            elapsed.hours[allocation],
            elapsed.missing[allocation],
            elapsed.bad[allocation],
            elapsed.column,
            elapsed.hint,
        )
        return self.jobs_to_records(jobs, jobs_elapsed, gpu_utilization)

    def jobs_to_records(
        self,
        jobs: pd.DataFrame,
        elapsed: Durations,
        gpu_utilization: np.ndarray,
    ) -> pd.DataFrame:
        if jobs.empty:
            # Only step lines (already reported); numpy's string partition fails on nothing.
            return conform_usage_frame(pd.DataFrame())
        issues = self.issues
        lines = jobs["source_line"].to_numpy()
        label = jobs["jobid"]
        label_text = label.to_numpy(dtype="U")
        parent, _, array_part = np.strings.partition(label_text, "_")
        parent, _, het_part = np.strings.partition(parent, "+")
        array_part, _, array_het = np.strings.partition(array_part, "+")
        suffix_ok = (
            (array_part == "")
            | np.strings.isdigit(array_part)
            | np.strings.startswith(array_part, "[")
        )
        het_ok = ((het_part == "") | np.strings.isdigit(het_part)) & (
            (array_het == "") | np.strings.isdigit(array_het)
        )
        bad_label = ~(np.strings.isdigit(parent) & suffix_ok & het_ok)
        issues.add_where(bad_label, lines, "JobID", "'{value}' is not a Slurm job id", label)

        # States: a handful of distinct words, so map them once each.
        state_word = map_distinct(jobs["state"], _state_word)
        known = np.array([word in SCHEDULER_STATES for word in state_word], dtype=bool)
        issues.add_where(~known, lines, "State", "unknown state '{value}'", jobs["state"])
        state = pd.Series(
            [SCHEDULER_STATES.get(word) for word in state_word], index=jobs.index, dtype="object"
        )
        running = (state == "running").to_numpy()

        start = parse_slurm_times(jobs["start"], self.timezone)
        issues.add_where(start.bad, lines, "Start", "'{value}' is not a date-time", jobs["start"])
        if "end" in jobs:
            end = parse_slurm_times(jobs["end"], self.timezone)
            issues.add_where(end.bad, lines, "End", "'{value}' is not a date-time", jobs["end"])
            end_values, end_missing = end.values, end.missing
        else:
            end_values = pd.Series(pd.NaT, index=jobs.index, dtype="datetime64[us, UTC]")
            end_missing = np.ones(len(jobs), dtype=bool)
        if "submit" in jobs:
            submit = parse_slurm_times(jobs["submit"], self.timezone)
            issues.add_where(
                submit.bad, lines, "Submit", "'{value}' is not a date-time", jobs["submit"]
            )
            submit_values = submit.values
            key_time = jobs["submit"].where(~submit.missing, jobs["start"])
        else:
            submit_values = pd.Series(pd.NaT, index=jobs.index, dtype="datetime64[us, UTC]")
            key_time = jobs["start"]

        never_started = start.missing & known
        issues.add_where(
            never_started & running, lines, "Start", "running job without a start time"
        )
        pending = known & state.isna().to_numpy()
        skip = pending | (never_started & ~running)
        self.stats.skipped_never_started += int(skip.sum())
        self.stats.note_skipped(
            SKIP_NOT_STARTED, label[skip].head(MAX_SKIP_EXAMPLES).tolist(), int(skip.sum())
        )

        elapsed_h, elapsed_missing, elapsed_bad = elapsed.hours, elapsed.missing, elapsed.bad
        if elapsed.column:
            issues.add_where(
                elapsed_bad & ~skip,
                lines,
                elapsed.column,
                f"'{{value}}' is not a duration ({elapsed.hint})",
                jobs[elapsed.column.lower()],
            )
        if "timelimitraw" in jobs:
            issues.add_where(
                bad_time_limits(jobs["timelimitraw"]) & ~skip,
                lines,
                "TimelimitRaw",
                "'{value}' is not minutes (or UNLIMITED, Partition_Limit)",
                jobs["timelimitraw"],
            )
        span_h = ((end_values - start.values).dt.total_seconds() / 3600.0).to_numpy()
        issues.add_where((span_h < 0) & ~skip, lines, "End", "End is before Start")
        finished_without_end = end_missing & ~running & ~skip & known
        issues.add_where(
            finished_without_end & elapsed_missing,
            lines,
            "End",
            "a finished job needs End or Elapsed (or ElapsedRaw)",
        )
        # Elapsed excludes suspended time, so it may be shorter than End - Start, never longer.
        with np.errstate(invalid="ignore"):
            too_long = (elapsed_h > span_h + ELAPSED_TOLERANCE_H) & (span_h >= 0)
        issues.add_where(
            too_long & ~skip & ~elapsed_bad,
            lines,
            elapsed.column or "Elapsed",
            lambda rows: [
                f"{elapsed.column} '{jobs[elapsed.column.lower()].iloc[r]}' is longer than "
                f"End - Start ({span_h[r]:.2f} h)"
                for r in rows
            ],
        )
        # Running without Elapsed: NaN here, measured up to the as-of time (hold_running).
        duration_h = np.where(elapsed_missing, span_h, elapsed_h)
        self.stats.as_of.observe(
            submit_values, start.values.where(~skip), end_values.where(~pending)
        )
        # A finished job without End: End = Start + Elapsed.
        end_filled = end_values.where(
            ~pd.Series(finished_without_end, index=jobs.index),
            start.values + pd.to_timedelta(duration_h, unit="h"),
        )

        # GPUs from AllocTRES: parse each distinct string once (job shapes repeat a lot).
        tres_codes, gpu_table, tres_problems = gpu_entry_table(jobs["alloctres"])
        problem = tres_problems[tres_codes]
        issues.add_where((problem != "") & ~skip, lines, "AllocTRES", "{value}", problem)

        nodes = None
        if "nnodes" in jobs:
            nodes, _, nodes_bad = parse_numbers(jobs["nnodes"])
            nodes_bad |= (nodes < 0).to_numpy() | ((nodes % 1) != 0).to_numpy()
            issues.add_where(
                nodes_bad & ~skip,
                lines,
                "NNodes",
                "'{value}' is not a non-negative whole number",
                jobs["nnodes"],
            )
            issues.add_where(
                (nodes > MAX_JOB_NODES).to_numpy() & ~skip,
                lines,
                "NNodes",
                f"'{{value}}' is more nodes than a job can hold (at most {MAX_JOB_NODES})",
                jobs["nnodes"],
            )

        cluster = (
            blank_to_na(jobs["cluster"], strip=False)
            if "cluster" in jobs
            else pd.Series(pd.NA, index=jobs.index, dtype="str")
        )
        if self.cluster is not None:
            cluster = cluster.fillna(self.cluster)
        issues.add_where(
            cluster.isna().to_numpy() & ~skip,
            lines,
            "Cluster",
            "no cluster name (add the Cluster column or pass cluster=...)",
        )
        if self.issues:
            return conform_usage_frame(pd.DataFrame())

        # Build one row per job, then expand to one row per GPU kind.
        job_id = blank_to_na(jobs["jobidraw"], strip=False) if "jobidraw" in jobs else label
        job_id = job_id.fillna(label)
        base = pd.DataFrame(
            {
                "cluster": cluster,
                "job_id": job_id,
                "job_label": label,
                "parent_job_id": pd.Series(parent, index=jobs.index, dtype="str"),
                "record_key": job_id + "@" + key_time,
                "account": _optional_text(jobs, "account"),
                "user": _optional_text(jobs, "user"),
                "partition": _optional_text(jobs, "partition"),
                "nodes": nodes,
                "node_list": _optional_text(jobs, "nodelist"),
                "submit": submit_values,
                "start": start.values,
                "end": end_filled.where(~pd.Series(running, index=jobs.index)),
                "duration_h": duration_h,
                "state": state,
                "scheduler_state": pd.Series(state_word, index=jobs.index, dtype="str"),
                "gpu_utilization": gpu_utilization[jobs["_group"].to_numpy()],
                "source_line": jobs["source_line"],
                "_tres_code": tres_codes,
            }
        )
        base = base.loc[~skip]
        records = base.merge(gpu_table, on="_tres_code", how="inner", sort=False)
        self.stats.skipped_without_gpu += len(base) - int(records["_first_kind"].sum())
        without_gpu = base.loc[~base["_tres_code"].isin(gpu_table["_tres_code"])]
        for partition, group in without_gpu.groupby(without_gpu["partition"].fillna("")):
            labels = group["job_label"].head(MAX_SKIP_EXAMPLES).tolist()
            self.stats.note_skipped(f"{SKIP_NO_GPU}{partition}", labels, len(group))
        if records.empty:
            return conform_usage_frame(pd.DataFrame())
        multi_kind = records["_kinds"].to_numpy() > 1
        if multi_kind.any():
            records["record_key"] = records["record_key"].where(
                ~multi_kind, records["record_key"] + "/" + records["gres_type"].fillna("gpu")
            )
        raw_count = records["_raw_count"].to_numpy()
        records = records.drop(columns=["_tres_code", "_kinds", "_raw_count", "_first_kind"])
        return self._resolve_models(records, raw_count)

    def _resolve_models(self, records: pd.DataFrame, raw_count: np.ndarray) -> pd.DataFrame:
        """Alias-map typed gres, default untyped gres by partition, apply MIG fractions."""
        typed = records["gres_type"].notna().to_numpy()
        table = resolve_gres_types(records.loc[typed, "gres_type"].unique(), self.aliases)
        model = records["gres_type"].map(table["accelerator_model"]).astype("str")
        fraction = records["gres_type"].map(table["card_fraction"]).fillna(1.0).to_numpy()
        records["mig_profile"] = records["gres_type"].map(table["mig_profile"])
        # A string dtype from the start: a lookup that matches nothing would otherwise be float.
        untyped_model = records["partition"].map(self.partition_models).astype("str")
        if self.default_model is not None:
            untyped_model = untyped_model.fillna(self.default_model)
        records["accelerator_model"] = model.where(typed, untyped_model.astype("str"))
        records["cards"] = raw_count * fraction
        records["card_hours"] = records["cards"] * records["duration_h"]
        unknown = records["accelerator_model"].isna().to_numpy()
        self.stats.records_with_unknown_model += int(unknown.sum())
        if self.unknown_model == "error" and unknown.any():
            gres_type = records["gres_type"].to_numpy(dtype=object)
            partition = records["partition"].to_numpy(dtype=object)

            def why(rows: np.ndarray) -> list[str]:
                return [
                    f"gres type '{gres_type[r]}' is not in the alias table"
                    if typed[r]
                    else f"untyped gres/gpu and no model for partition '{partition[r]}'"
                    for r in rows
                ]

            self.issues.add_where(unknown, records["source_line"].to_numpy(), "AllocTRES", why)
            return conform_usage_frame(pd.DataFrame())
        self.stats.records += len(records)
        return conform_usage_frame(records)


def _optional_text(jobs: pd.DataFrame, column: str) -> pd.Series:
    if column in jobs:
        return blank_to_na(jobs[column], strip=False)
    return pd.Series(pd.NA, index=jobs.index, dtype="str")


def _state_word(text: str) -> str:
    """``CANCELLED by 1234`` -> ``CANCELLED``; ``CANCELLED+`` (truncated) -> ``CANCELLED``."""
    words = str(text).strip().split()
    return words[0].upper().rstrip("+") if words else ""
