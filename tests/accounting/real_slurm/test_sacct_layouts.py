"""Every sacct layout a person or a wrapper prints, from a real Slurm, read back to the jobs'
own figures: the cards each job was submitted with times how long it ran by the submitting
process's clock (tests/support/slurm.py), its state and its account.

The workload: completed (with a step), failed, cancelled, timed out, node failure, requeued,
a 3-task array, a heterogeneous job (H100 + 2 A100), a MIG slice and a job still running.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest

from accounting.parsing import DEFAULT_SACCT_COLUMNS, SacctStats, read_sacct, read_slurm_json
from accounting.parsing.errors import UsageValidationError
from accounting.parsing.layouts import XDMOD_SACCT_COLUMNS
from tests.support.slurm import Workload, card_seconds_range, sacct_export, slurm

DEFAULT = ",".join(DEFAULT_SACCT_COLUMNS)
# Wide enough that no value is cut (a cut value ends in "+" and is refused).
FIXED_WIDTHS = (
    "JobID%15,JobIDRaw%10,Cluster%16,Partition%10,Account%24,User%8,Submit%20,Start%20,"
    "End%20,Elapsed%12,State%20,NNodes%8,AllocTRES%80,NodeList%15"
)
RAW_SECONDS = DEFAULT.replace("Elapsed", "ElapsedRaw,TimelimitRaw")


def parse(text: str, **options) -> tuple[pd.DataFrame, SacctStats]:
    stats = SacctStats()
    frame = read_sacct(io.BytesIO(text.encode()), stats=stats, **options)
    return frame, stats


def assert_the_jobs_own_figures(frame: pd.DataFrame, workload: Workload) -> None:
    rows = frame.set_index("job_label")
    assert rows.index.is_unique, rows.index[rows.index.duplicated()].tolist()
    assert set(rows.index) == set(workload.by_label()), "one record per job, task and component"
    for label, job in workload.by_label().items():
        row = rows.loc[label]
        assert row["state"] == job.state, label
        assert row["account"] == job.account, label
        if job.state == "running":
            continue  # held up to the as-of time: test_a_running_job_counts_up_to_the_as_of
        low, high = card_seconds_range(job)
        assert low - 1e-6 <= row["card_hours"] * 3600 <= high + 1e-6, (label, row["card_hours"])


LAYOUTS = {
    "parsable2 with header": (["-P", "-o", DEFAULT], {}),
    "parsable (trailing delimiter)": (["-p", "-o", DEFAULT], {}),
    "parsable2 noheader with columns": (
        ["--parsable2", "--noheader", "-o", DEFAULT],
        {"columns": DEFAULT_SACCT_COLUMNS},
    ),
    "custom delimiter": (["-P", "--delimiter=;", "-o", DEFAULT], {"delimiter": ";"}),
    "fixed-width table": (["-o", FIXED_WIDTHS], {}),
    "ElapsedRaw and TimelimitRaw": (["-P", "-o", RAW_SECONDS], {}),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_gives_the_jobs_own_figures(slurm_workload, layout):
    args, options = LAYOUTS[layout]
    frame, _ = parse(sacct_export(slurm_workload, *args), **options)
    assert_the_jobs_own_figures(frame, slurm_workload)


def test_xdmods_layout_with_duplicates_keeps_the_requeued_run_as_lost_work(slurm_workload):
    """What Open XDMoD's shredder runs: --parsable2 --noheader --duplicates, 26 columns."""
    text = sacct_export(
        slurm_workload,
        "--parsable2",
        "--noheader",
        "-o",
        ",".join(XDMOD_SACCT_COLUMNS),
        duplicates=True,
    )
    frame, _ = parse(text, columns=XDMOD_SACCT_COLUMNS)
    requeued = frame[frame["job_label"] == slurm_workload.requeued_job_id]
    assert sorted(requeued["scheduler_state"]) == ["COMPLETED", "REQUEUED"]
    first = requeued[requeued["scheduler_state"] == "REQUEUED"].iloc[0]
    assert first["state"] == "preempted"  # its card-hours are lost work
    low_s, high_s = slurm_workload.requeued_first_run_s  # by the submitting clock
    assert max(low_s - 1, 0) <= first["duration_h"] * 3600 <= high_s + 1
    assert requeued["record_key"].is_unique
    assert_the_jobs_own_figures(frame.drop(index=first.name), slurm_workload)


def test_steps_are_not_counted_again(slurm_workload):
    """Without --allocations the batch and srun steps follow each job's line."""
    everything = slurm(
        "sacct",
        "-a",
        "-P",
        "-o",
        DEFAULT,
        "-S",
        slurm_workload.started_at[:19],
        "-E",
        "now",
        "-j",
        ",".join(slurm_workload.job_ids),
    )
    assert any(".batch" in line for line in everything.splitlines())
    assert any(
        line.startswith(f"{_completed(slurm_workload)}.0|") for line in everything.splitlines()
    )
    frame, stats = parse(everything)
    assert stats.step_lines > 0
    assert_the_jobs_own_figures(frame, slurm_workload)


def _completed(workload: Workload) -> str:
    """The job whose script ran an srun step."""
    return next(job.label for job in workload.jobs if job.gpus == {"h100": 2})


def test_a_running_job_counts_up_to_the_as_of(slurm_workload):
    text = sacct_export(slurm_workload, "-P", "-o", DEFAULT)
    frame, stats = parse(text)
    running = frame.set_index("job_label").loc[slurm_workload.running_job_id]
    assert pd.isna(running["end"])
    assert stats.as_of.source == "file"
    held_s = (stats.as_of.value - running["start"]).total_seconds()
    assert held_s > 0
    assert running["card_hours"] * 3600 == pytest.approx(held_s)  # one H100
    latest_end = frame["end"].max()
    assert stats.as_of.value >= latest_end  # nothing counted past the export's own time


def test_a_fixed_width_table_with_a_cut_value_is_refused_naming_the_width(slurm_workload):
    """sacct's default widths cut AllocTRES (10 characters): the value ends in '+'."""
    text = sacct_export(slurm_workload, "-o", "JobID,State,Elapsed,AllocTRES,Start,End")
    assert "+" in text
    with pytest.raises(UsageValidationError) as refused:
        parse(text)
    message = str(refused.value)
    assert "AllocTRES" in message and "%" in message


def test_sacct_json_gives_the_jobs_own_figures_and_the_texts_record_keys(slurm_workload):
    """``sacct --json`` (Slurm 22.05: data_parser v0.0.38) reads to the same jobs as the text."""
    document = sacct_export(slurm_workload, "--json")
    frame = read_slurm_json(io.BytesIO(document.encode()))
    # The JSON holds every run of a requeued job, as the text does with --duplicates.
    requeued_run = frame["scheduler_state"] == "REQUEUED"
    assert frame.loc[requeued_run, "job_label"].tolist() == [slurm_workload.requeued_job_id]
    assert_the_jobs_own_figures(frame[~requeued_run], slurm_workload)
    text, _ = parse(sacct_export(slurm_workload, "-P", "-o", DEFAULT, duplicates=True))
    assert set(frame["record_key"]) == set(text["record_key"])
