"""Generic CSV / XLSX usage import with the documented header."""

from __future__ import annotations

from datetime import datetime

import openpyxl
import pandas as pd
import pytest

from accounting.parsing import (
    USAGE_COLUMNS,
    UsageValidationError,
    iter_csv_chunks,
    iter_xlsx_chunks,
)
from tests.support.sacct_pitfalls import as_source

CSV = (
    "\ufeffcluster,job_id,Team,user,partition,accelerator_model,cards,start,end,state,"
    "gpu_utilization,tokens_per_s,model_params\n"
    'alpha,j1,"team, a",ann,gpu,h100,8,2024-03-01T10:00:00,2024-03-01T12:00:00,completed,85%,'
    "3000,7e9\n"
    'alpha,j2,team-b,"bob\nsmith",gpu,A100 SXM4 80GB,0.4285714,2024-03-01T10:00:00+01:00,,'
    "running,0.5,,\n"
    "alpha,j3,team-b,bob,gpu,,2,2024-03-01T10:00:00,2024-03-01T11:00:00,NODE_FAIL,,,\n"
)


def test_csv_with_quotes_offsets_percent_and_defaults():
    frame = pd.concat(
        iter_csv_chunks(
            as_source(CSV), as_of=datetime(2024, 3, 1, 12), partition_models={"gpu": "L40S"}
        ),
        ignore_index=True,
    ).set_index("job_id")
    assert set(frame.reset_index().columns) == set(USAGE_COLUMNS)
    assert frame.loc["j1", "account"] == "team, a"  # "team" header is the account column
    assert frame.loc["j1", "accelerator_model"] == "H100 SXM5 80GB"  # alias
    assert frame.loc["j1", "gpu_utilization"] == pytest.approx(0.85)
    assert frame.loc["j1", "model_params"] == 7e9
    assert frame.loc["j2", "user"] == "bob\nsmith"  # newline inside quotes
    assert frame.loc["j2", "start"] == pd.Timestamp("2024-03-01T09:00:00", tz="UTC")
    assert frame.loc["j2", "duration_h"] == pytest.approx(3.0)  # running, up to as_of
    assert frame.loc["j3", "accelerator_model"] == "L40S"  # empty -> partition default
    assert frame.loc["j3", "state"] == "node_fail"
    assert frame.loc["j3", "source_line"] == 5  # line 3-4 is one quoted record


def test_csv_bad_lines_and_unknown_columns():
    text = (
        "cluster,job_id,accelerator_model,cards,start,end,state\n"
        "a,1,h100,8,2024-03-01T10:00:00,2024-03-01T11:00:00,completed\n"
        "a,2,h100,-8,2024-03-01T10:00:00,2024-03-01T11:00:00,completed\n"
        "a,3,h100,8,yesterday,2024-03-01T11:00:00,completed\n"
        "a,4,h100,8,2024-03-01T10:00:00,2024-03-01T11:00:00,exploded\n"
        "a,5,h100,8,2024-03-01T10:00:00,2024-03-01T11:00:00\n"
        "a,6,h100,8,2024-03-01T10:00:00,,completed\n"
    )
    with pytest.raises(UsageValidationError) as raised:
        list(iter_csv_chunks(as_source(text)))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 3, column cards: '-8' is not a number > 0",
        "line 4, column start: 'yesterday' is not an ISO 8601 date-time",
        "line 5, column state: unknown state 'exploded'",
        "line 6, column state: line has 6 fields, the header 7",
        "line 7, column end: empty, but the job is not running",
    ]
    with pytest.raises(UsageValidationError, match="line 1, column gpus: unknown column name"):
        list(iter_csv_chunks(as_source("cluster,job_id,gpus\n")))


def _workbook(path, rows):
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    for row in rows:
        sheet.append(row)
    workbook.save(path)


def test_xlsx_streams_typed_cells(tmp_path):
    path = tmp_path / "usage.xlsx"
    header = ["cluster", "job_id", "account", "accelerator_model", "cards", "start", "end", "state"]
    _workbook(
        path,
        [
            header,
            [
                "alpha",
                1,
                "t",
                "h100",
                8,
                datetime(2024, 3, 1, 10),
                datetime(2024, 3, 1, 11, 30),
                "COMPLETED",
            ],
            [None] * 8,
            [
                "alpha",
                "x2",
                "t",
                "mi300x",
                4.0,
                "2024-03-01 10:00",
                "2024-03-01T12:00:00",
                "timeout",
            ],
        ],
    )
    seen = []
    frame = pd.concat(
        iter_xlsx_chunks(path, chunk_lines=1, progress=seen.append), ignore_index=True
    )
    assert frame["job_id"].tolist() == ["1", "x2"]
    assert frame["card_hours"].tolist() == [12.0, 8.0]
    assert frame["source_line"].tolist() == [2, 4]
    assert frame.loc[1, "accelerator_model"] == "MI300X"
    assert seen and seen[-1].lines_read == 4


def test_xlsx_errors_name_the_sheet_row(tmp_path):
    path = tmp_path / "bad.xlsx"
    header = ["cluster", "job_id", "accelerator_model", "cards", "start", "end", "state"]
    _workbook(
        path,
        [header, ["alpha", "x", "h100", -1, "2024-03-01 10:00", "bad", "weird"]],
    )
    with pytest.raises(UsageValidationError) as raised:
        list(iter_xlsx_chunks(path))
    assert [str(issue) for issue in raised.value.issues] == [
        "line 2, column cards: '-1' is not a number > 0",
        "line 2, column end: 'bad' is not an ISO 8601 date-time",
        "line 2, column state: unknown state 'weird'",
    ]


# A real `sacct --parsable2 --format=...` header (comma-delimited), saved as .csv by a user.
SACCT_HEADER_CSV = "JobID,JobName,Account,User,Partition,AllocTRES,Start,End,Elapsed,State\n"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        (
            SACCT_HEADER_CSV
            + "4211,train,team-a,ann,gpu,gres/gpu=8,2024-03-01T10:00:00,,1:00,RUNNING\n",
            True,
        ),
        ("Date,Amount,Description\n2024-03-01,12.5,coffee\n", False),
    ],
)
def test_a_foreign_csv_header_gets_one_message_naming_expected_and_found(text, hint):
    with pytest.raises(UsageValidationError) as raised:
        list(iter_csv_chunks(as_source(text)))
    issues = [str(issue) for issue in raised.value.issues]
    assert len(issues) == 1, issues  # not one "unknown column name" per column
    assert issues[0].startswith("line 1, column header: wrong header: expected the usage columns")
    assert "cluster, job_id, cards, start, end, state, accelerator_model" in issues[0]
    found = text.splitlines()[0].replace(",", ", ")
    assert f"found {found}." in issues[0]
    assert ("sacct format" in issues[0]) is hint


def test_a_foreign_xlsx_header_gets_the_same_message(tmp_path):
    path = tmp_path / "export.xlsx"
    _workbook(path, [["JobID", "AllocTRES", "Start", "End"], ["4211", "gres/gpu=8", "x", "y"]])
    with pytest.raises(UsageValidationError) as raised:
        list(iter_xlsx_chunks(path))
    (issue,) = [str(issue) for issue in raised.value.issues]
    assert "wrong header" in issue and "found JobID, AllocTRES, Start, End." in issue
    assert "sacct format" in issue
