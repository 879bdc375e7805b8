"""Slurm's JSON job records (``sacct --json``, slurmrestd's /slurmdb/vX/jobs) as usage records.

Fixtures (see fixtures/sacct_json_NOTES.md for the commands):

* ``sacct_json_v0038_*``: REAL output of this repository's Slurm 22.05.8 test cluster
  (openapi/dbv0.0.38) for jobs submitted with known gres: ``sacct --json`` with and without
  ``-X``, the same jobs as ``sacct -P -X`` text, and slurmrestd's answers (jobs, errors).
* ``sacct_json_v0042_handwritten.json``: HAND-WRITTEN from Slurm's data_parser v0.0.42 field
  list and published 24.05/24.11 outputs (numbers as ``{"set", "infinite", "number"}``,
  ``state.current`` a list), since no newer Slurm runs here.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from accounting.parsing import (
    SacctStats,
    UsageValidationError,
    iter_slurm_json_chunks,
    read_sacct,
    read_slurm_json,
)
from accounting.parsing.bounded import ReaderLimits, configure, current_limits
from accounting.parsing.slurm_json import is_slurm_json, looks_like_json
from accounting.parsing.upload_check import HEAD_BYTES, head_problems

FIXTURES = Path(__file__).parent / "fixtures"
JOBS_JSON = FIXTURES / "sacct_json_v0038_jobs.json"
JOBS_TEXT = FIXTURES / "sacct_json_v0038_jobs.txt"
NEWER = FIXTURES / "sacct_json_v0042_handwritten.json"
HOUR_S = 3600.0

# What each job of the real capture asked for (sbatch --gres), in cards: a 1g.10gb MIG slice
# is 1/7 of an A100. 23 asked for no GPU.
SUBMITTED_CARDS: dict[str, dict[str, float]] = {
    "18": {"h100": 2.0},
    "19_0": {"a100": 1.0},
    "19_1": {"a100": 1.0},
    "20+0": {"h100": 1.0},
    "20+1": {"a100": 2.0},
    "22": {"a100": 1.0, "1g.10gb": 1 / 7},
    "24": {"1g.10gb": 2 / 7},
    "25": {"1g.10gb": 1 / 7},
}


def document_jobs(path: Path) -> dict[int, dict[str, Any]]:
    """The fixture's job records by job_id, read with the standard library only."""
    return {job["job_id"]: job for job in json.loads(path.read_text())["jobs"]}


def latest_time_s(path: Path) -> int:
    """The document's latest submission, start or end (Unix seconds)."""
    return max(
        job["time"][key] or 0
        for job in json.loads(path.read_text())["jobs"]
        for key in ("submission", "start", "end")
    )


def by_key(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("record_key").reset_index(drop=True)


# -- the real Slurm 22.05 output ------------------------------------------------------------


def test_real_json_gives_the_records_of_the_text_export_of_the_same_jobs():
    json_stats, text_stats = SacctStats(), SacctStats()
    from_json = read_slurm_json(JOBS_JSON, stats=json_stats)
    from_text = read_sacct(JOBS_TEXT, stats=text_stats)
    # Same keys (JobIDRaw@Submit as printed), same figures; only the line numbers differ.
    pd.testing.assert_frame_equal(
        by_key(from_json).drop(columns="source_line"), by_key(from_text).drop(columns="source_line")
    )
    assert sorted(from_json["record_key"]) == [
        "18@2026-11-27T00:20:05",
        "19@2026-11-27T00:20:05",
        "20@2026-11-27T00:20:05",
        "21@2026-11-27T00:20:05",
        "22@2026-11-27T00:20:05/1g.10gb",
        "22@2026-11-27T00:20:05/a100",
        "24@2026-11-27T00:20:05",
        "25@2026-11-27T00:20:05",
        "26@2026-11-27T00:20:05",
    ]
    assert json_stats.as_of.value == text_stats.as_of.value
    assert (json_stats.skipped_without_gpu, json_stats.skip_examples) == (
        1,
        {"no GPU in partition gpu": ["23"]},
    )


def test_real_json_card_hours_are_the_submitted_cards_times_the_elapsed_seconds():
    frame = read_slurm_json(JOBS_JSON)
    records = {(row.job_label, row.gres_type): row for row in frame.itertuples()}
    jobs = {str(job_id): job for job_id, job in document_jobs(JOBS_JSON).items()}
    label_to_id = dict(zip(frame["job_label"], frame["job_id"], strict=False))
    as_of_s = latest_time_s(JOBS_JSON)
    assert as_of_s == 1795738812  # 00:20:12, the end of job 22 (the latest time printed)
    assert set(label_to_id) == set(SUBMITTED_CARDS)
    for label, cards_by_type in SUBMITTED_CARDS.items():
        job = jobs[label_to_id[label]]
        if job["state"]["current"] == "RUNNING":
            held_s = as_of_s - job["time"]["start"]  # counted up to the document's as-of time
        else:
            held_s = job["time"]["elapsed"]
        for gres_type, cards in cards_by_type.items():
            record = records[(label, gres_type)]
            assert record.cards == pytest.approx(cards)
            assert record.card_hours == pytest.approx(cards * held_s / HOUR_S), label
    # By hand: job 18 held 2 H100 for the 4 s the document says.
    assert records[("18", "h100")].card_hours == pytest.approx(2 * 4 / HOUR_S)


def test_real_array_tasks_and_het_components_are_labelled_as_sacct_prints_them():
    frame = read_slurm_json(JOBS_JSON).set_index("job_label")
    # Array 19: task 0 got its own id 26, the last task keeps 19; het 20: component 1 is 21.
    assert frame.loc["19_0", ["job_id", "parent_job_id"]].tolist() == ["26", "19"]
    assert frame.loc["19_1", ["job_id", "parent_job_id"]].tolist() == ["19", "19"]
    assert frame.loc["20+0", ["job_id", "parent_job_id", "gres_type"]].tolist() == [
        "20",
        "20",
        "h100",
    ]
    assert frame.loc["20+1", ["job_id", "parent_job_id", "gres_type"]].tolist() == [
        "21",
        "20",
        "a100",
    ]


def test_real_running_job_counts_up_to_the_latest_time_of_the_document():
    stats = SacctStats()
    frame = read_slurm_json(JOBS_JSON, stats=stats)
    running = frame.loc[frame["state"] == "running"].iloc[0]
    start_s = document_jobs(JOBS_JSON)[25]["time"]["start"]
    # Its elapsed (7,2xx s, counted by slurmdbd's own clock) is cut at the document's time.
    assert document_jobs(JOBS_JSON)[25]["time"]["elapsed"] > 7000
    assert stats.as_of.source == "file"
    assert stats.as_of.value == pd.Timestamp(latest_time_s(JOBS_JSON), unit="s", tz="UTC")
    assert running["duration_h"] == pytest.approx((latest_time_s(JOBS_JSON) - start_s) / HOUR_S)
    assert running["duration_h"] == pytest.approx(5 / HOUR_S)
    assert pd.isna(running["end"]) and running["job_label"] == "25"


def test_real_mig_slices_and_a_job_holding_two_gpu_types():
    frame = read_slurm_json(JOBS_JSON)
    two = frame.loc[frame["job_id"] == "22"].set_index("gres_type")
    assert set(two.index) == {"a100", "1g.10gb"}
    assert two.loc["a100", "accelerator_model"] == "A100 SXM4 40GB"
    assert two.loc["1g.10gb", "mig_profile"] == "1g.10gb"
    assert two.loc["1g.10gb", "cards"] == pytest.approx(1 / 7)
    failed = frame.loc[frame["job_id"] == "24"].iloc[0]
    assert (failed["state"], failed["cards"]) == ("failed", pytest.approx(2 / 7))


def test_real_steps_are_counted_and_ignored():
    stats = SacctStats()
    frame = read_slurm_json(FIXTURES / "sacct_json_v0038_steps.json", stats=stats)
    steps = len(document_jobs(FIXTURES / "sacct_json_v0038_steps.json")[18]["steps"])
    assert steps == 1 and stats.step_lines == steps  # the batch step
    assert frame["record_key"].tolist() == ["18@2026-11-27T00:20:05"]
    assert frame["card_hours"].tolist() == pytest.approx([2 * 4 / HOUR_S])


def test_real_slurmrestd_answer_reads_like_sacct_json():
    rest = read_slurm_json(FIXTURES / "sacct_json_v0038_slurmrestd_jobs.json").set_index(
        "record_key"
    )
    cli = read_slurm_json(JOBS_JSON).set_index("record_key")
    assert set(rest.index) == {"18@2026-11-27T00:20:05", "25@2026-11-27T00:20:05"}
    finished = "18@2026-11-27T00:20:05"
    assert rest.loc[finished, "card_hours"] == cli.loc[finished, "card_hours"]
    assert rest.loc["25@2026-11-27T00:20:05", "state"] == "running"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("sacct_json_v0038_slurmrestd_auth_error.json", ["no jobs", "Protocol authentication"]),
        ("sacct_json_v0038_slurmrestd_bad_query.json", ["Unable to parse time", "start_time"]),
    ],
)
def test_real_slurmrestd_errors_are_said_in_slurms_words(name, words):
    with pytest.raises(UsageValidationError) as raised:
        read_slurm_json(FIXTURES / name)
    message = str(raised.value.issues[0])
    assert message.startswith("line 1, column errors: the document holds")
    assert all(word in message for word in words), message
    head = (FIXTURES / name).read_bytes()
    assert head_problems(head, "sacct", {}) == [message]


# -- the newer document (hand-written from the docs) -------------------------------------------


def test_newer_shape_numbers_as_objects_and_state_lists():
    stats = SacctStats()
    frame = read_slurm_json(NEWER, stats=stats)
    hours = {
        (row.job_label, row.gres_type if isinstance(row.gres_type, str) else None): row.card_hours
        for row in frame.itertuples()
    }
    # Cards x hours of each job as written (see sacct_json_NOTES.md): the same rules as text.
    assert hours == pytest.approx(
        {
            ("1001", "h100"): 4 * 2.0,
            ("1002_3", "a100"): 1 * 1.0,
            ("1010+0", "h100"): 2 * 0.5,
            ("1010+1", "a100_3g.20gb"): 2 * 3 / 7 * 1.0,
            ("1020", "h100"): 8 * 0.5,
            # Running since 01:00; the document's latest time is 02:01 (job 1001's end).
            ("1030", "a100"): 2 * 61 / 60,
            ("1040", "l40s"): 1 * 0.5,
            ("1040", None): 1 * 0.5,  # gres/gpu=2 above the one typed L40S
        }
    )
    states = dict(zip(frame["job_label"], frame["scheduler_state"], strict=False))
    assert states["1020"] == "REQUEUED"  # ["PENDING", "REQUEUED"]: the flag, as sacct prints
    assert frame.set_index("job_label").loc["1020", "state"] == "preempted"
    assert stats.skip_examples["pending or never started"] == ["1002_[4-9]"]
    assert stats.step_lines == 1
    assert frame.set_index("job_label").loc["1010+1", "parent_job_id"] == "1010"


T0 = 1740787200  # 2025-03-01T00:00:00Z


def job(job_id: int = 7, **fields: Any) -> dict[str, Any]:
    """A minimal job record of the newer shape; ``fields`` replace top-level members."""
    record: dict[str, Any] = {
        "job_id": job_id,
        "cluster": "nebula",
        "partition": "gpu",
        "account": "physics",
        "user": "ada",
        "allocation_nodes": 1,
        "nodes": "gpu-a01",
        "array": {"job_id": 0, "task_id": {"set": False, "infinite": False, "number": 0}},
        "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}},
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "time": {"submission": T0, "start": T0, "end": T0 + 3600, "elapsed": 3600},
        "tres": {"allocated": [{"type": "gres", "name": "gpu:h100", "id": 1002, "count": 2}]},
    }
    record.update(fields)
    return record


def document(*jobs: Any, **members: Any) -> bytes:
    return json.dumps({"jobs": list(jobs), "errors": [], **members}).encode()


@pytest.mark.parametrize(
    ("current", "word", "state"),
    [
        (["PENDING", "REQUEUED"], "REQUEUED", "preempted"),
        (["RUNNING", "COMPLETING"], "COMPLETING", "running"),
        (["RUNNING", "CONFIGURING"], "RUNNING", "running"),
        (["FAILED", "SPECIAL_EXIT"], "SPECIAL_EXIT", "failed"),
        ("OUT_OF_MEMORY", "OUT_OF_MEMORY", "failed"),
        (["NODE_FAIL"], "NODE_FAIL", "node_fail"),
    ],
)
def test_state_lists_read_as_the_word_sacct_would_print(current, word, state):
    record = job(state={"current": current})
    if state == "running":
        record["time"]["end"] = 0
    frame = read_slurm_json(document(record))
    assert (frame["scheduler_state"].iloc[0], frame["state"].iloc[0]) == (word, state)


def test_unset_numbers_and_infinite_times_are_no_value():
    unset = {"set": False, "infinite": False, "number": 0}
    record = job(
        time={
            "submission": {"set": True, "infinite": False, "number": T0},
            "start": T0,
            "end": unset,
            "elapsed": 1800,
        }
    )
    frame = read_slurm_json(document(record))
    # No end: End = Start + elapsed, as for sacct's text.
    assert frame["end"].iloc[0] == pd.Timestamp(T0 + 1800, unit="s", tz="UTC")
    assert frame["card_hours"].iloc[0] == pytest.approx(2 * 0.5)


def test_the_record_key_carries_submit_in_the_zone_sacct_printed_it():
    frame = read_slurm_json(document(job()), timezone="Europe/Paris")
    assert frame["record_key"].iloc[0] == "7@2025-03-01T01:00:00"
    assert frame["start"].iloc[0] == pd.Timestamp(T0, unit="s", tz="UTC")


def test_sources_path_bytes_and_file_objects_read_alike():
    data = JOBS_JSON.read_bytes()
    expected = read_slurm_json(JOBS_JSON)
    for source in (data, io.BytesIO(data), str(JOBS_JSON)):
        pd.testing.assert_frame_equal(read_slurm_json(source), expected)


def test_chunks_follow_chunk_lines_and_progress_reaches_the_end():
    seen = []
    chunks = list(iter_slurm_json_chunks(JOBS_JSON, chunk_lines=2, progress=seen.append))
    assert len(chunks) >= 4
    assert sum(len(chunk) for chunk in chunks) == 9
    assert chunks[-1]["state"].tolist() == ["running"]  # held back to the end, then clipped
    assert seen[-1].bytes_read == JOBS_JSON.stat().st_size
    assert seen[-1].records_emitted == 9  # the running one included, though yielded last


def test_one_line_documents_are_read_despite_the_line_limit():
    compact = json.dumps(json.loads(JOBS_JSON.read_bytes())).encode()
    before = current_limits()
    configure(ReaderLimits(max_line_bytes=1024, max_block_bytes=64 * 1024))
    try:
        assert len(read_slurm_json(compact)) == 9
        huge = document(job(comment="x" * 100_000))
        with pytest.raises(UsageValidationError, match="larger than the 64 KiB limit for one"):
            read_slurm_json(huge)
        configure(ReaderLimits(max_bytes=10_000))
        with pytest.raises(UsageValidationError, match="larger than the 9.77 KiB limit"):
            read_slurm_json(JOBS_JSON)
    finally:
        configure(before)


# -- documents that are not usage ----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"[1, 2]", "found JSON that is not an object"),
        (b'{"nodes": []}', "this holds node records (`sinfo --json`"),
        (b'{"meta": {}, "errors": []}', 'it has no "jobs" list'),
        (b'{"jobs": {"1": {}}}', '"jobs" is not a list'),
        (document({"job_id": 1, "job_state": ["RUNNING"]}), "`squeue --json`"),
        (document({"id": 1}), 'a job record without "job_id" and "time"'),
    ],
)
def test_other_json_is_refused_naming_sacct_json(data, words):
    with pytest.raises(UsageValidationError) as raised:
        read_slurm_json(data)
    message = str(raised.value)
    assert words in message
    if "squeue" not in words:
        assert "`sacct --json` prints" in message
    assert head_problems(data, "sacct", {}) == [str(raised.value.issues[0])]


def test_broken_json_names_the_line():
    data = JOBS_JSON.read_bytes()
    cut = data[: data.index(b'"job_id": 22')]
    with pytest.raises(UsageValidationError) as raised:
        read_slurm_json(cut)
    issue = raised.value.issues[0]
    assert issue.line == cut.count(b"\n") + 1  # where the document breaks off (line 794)
    assert issue.reason == (
        "not valid JSON in a job record: Expecting property name enclosed in double quotes"
    )
    trailing = document(job()) + b" {}"
    with pytest.raises(UsageValidationError, match="text after the end of the JSON document"):
        read_slurm_json(trailing)


def test_bad_fields_are_reported_by_line_and_field_and_nothing_is_yielded():
    lines = json.dumps(
        {
            "jobs": [
                job(1),
                job(2, time={"submission": T0, "start": "soon", "end": T0, "elapsed": 1}),
                job(3, state={"current": 5}),
                job(4, tres={"allocated": [{"type": "gres", "name": "gpu:a100", "count": -1}]}),
                job(5, time={"submission": T0, "start": T0 + 10, "end": T0, "elapsed": 0}),
            ]
        },
        indent=1,
    )
    with pytest.raises(UsageValidationError) as raised:
        read_slurm_json(lines.encode())
    where = {(issue.column, issue.line) for issue in raised.value.issues}
    text_lines = lines.splitlines()

    def line_of(job_id: int) -> int:
        # The record's "{" is the line above its job_id: 0-based at - 1, so 1-based at.
        return text_lines.index(f'   "job_id": {job_id},')

    assert where == {
        ("time.start", line_of(2)),
        ("state.current", line_of(3)),
        ("tres.allocated", line_of(4)),
        ("time.end", line_of(5)),
    }
    reasons = {issue.column: issue.reason for issue in raised.value.issues}
    assert reasons["time.start"] == "'soon' is not a whole number (>= 0)"
    assert reasons["tres.allocated"] == "gres/gpu count '-1' is not a non-negative whole number"
    assert reasons["time.end"] == "End is before Start"


def test_a_head_cut_inside_the_document_is_judged_on_what_it_holds():
    big = document(*[job(i) for i in range(1, 3000)])
    assert len(big) > HEAD_BYTES
    assert head_problems(big[:HEAD_BYTES], "sacct", {}) == []
    assert head_problems(b'{"jobs": [{"job_id": 1, "time"', "sacct", {}) != []  # whole file


def test_json_is_told_from_sacct_text():
    assert looks_like_json(b'\xef\xbb\xbf \n{"jobs": []}')
    assert not looks_like_json(b"JobID|JobIDRaw|State\n")
    assert is_slurm_json(JOBS_JSON) and not is_slurm_json(JOBS_TEXT)
    stream = io.BytesIO(JOBS_JSON.read_bytes())
    stream.seek(3)
    assert not is_slurm_json(stream) and stream.tell() == 3
