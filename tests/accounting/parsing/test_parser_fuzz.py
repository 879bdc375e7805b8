"""Usage parsers under bad input (hypothesis): random bytes, wrong encodings, BOMs, 10 MB
lines, huge, negative and NaN numbers, spreadsheet formulas, zip bombs. Each file is either
accepted with sane records or rejected with line/column errors; nothing else escapes.

Pure Python: the parsers are checked here without Django (the storage side is in
tests/accounting/test_import_fuzz.py and tests/inventory/test_import_fuzz.py).
"""

from __future__ import annotations

import datetime as dt
import io
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl.utils.exceptions import IllegalCharacterError

from accounting.parsing import (
    UsageValidationError,
    iter_csv_chunks,
    iter_sacct_chunks,
    iter_sreport_chunks,
    iter_xlsx_chunks,
)
from accounting.parsing.schema import MAX_JOB_CARDS
from tests.support.hostile import NASTY, xlsx_bytes, zip_bomb
from tests.support.sacct_pitfalls import SACCT_HEADER, SACCT_LINES

# 100 examples a test: its four parsers see ~400 hostile files a run, in seconds each.
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
value = st.sampled_from(NASTY) | st.text(max_size=12)
edits = st.lists(st.tuples(st.integers(0, 40), value), max_size=4)
framing = st.tuples(st.sampled_from(["", "\ufeff"]), st.sampled_from(["\n", "\r\n"]))
encoding = st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16"])

CSV_HEADER = (
    "cluster,job_id,cards,start,end,state,accelerator_model,team,user,partition,nodes,submit,"
    "duration_h,gpu_utilization,tokens_per_s,model_params,mfu"
)
CSV_LINE = (
    "alpha,j-1,8,2024-03-01T10:00:00Z,2024-03-01T16:00:00Z,completed,h100,team-a,ann,h100,1,"
    "2024-03-01T09:00:00,6,85%,1200,7e9,0.45"
)
SREPORT_HEADER = "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported"
SREPORT_LINE = "alpha|gres/gpu|112|24|48|200|0|384"
SREPORT_BANNER = (
    "-" * 80 + "\nCluster Utilization 2024-03-01T00:00:00 - 2024-03-01T23:59:59\n"
    "Usage reported in TRES Hours\n" + "-" * 80 + "\n"
)
DAY = {"period_start": dt.datetime(2024, 3, 1), "period_end": dt.datetime(2024, 3, 2)}

PARSERS = {
    "sacct": iter_sacct_chunks,
    "csv": iter_csv_chunks,
    "sreport": lambda source, **kw: iter_sreport_chunks(source, **DAY, **kw),
    "xlsx": iter_xlsx_chunks,
}


def outcome(parser, data: bytes):
    """The records, or the validation error; any other exception fails the test."""
    try:
        chunks = list(parser(io.BytesIO(data)))
    except UsageValidationError as error:
        assert error.issues, "a rejection names at least one problem"
        for issue in error.issues:
            assert issue.line >= 1 and issue.column and issue.reason
            assert str(issue).startswith(f"line {issue.line}, column {issue.column}: ")
        return error
    return chunks


def assert_sane_usage(chunks) -> None:
    for chunk in chunks:
        for column in ("cards", "duration_h", "card_hours"):
            values = chunk[column].to_numpy(dtype="float64")
            assert np.isfinite(values).all() and (values >= 0).all(), column
        assert (chunk["cards"] <= MAX_JOB_CARDS).all()
        for column in ("gpu_utilization", "mfu"):
            values = chunk[column].to_numpy(dtype="float64")
            assert ((values >= 0) & (values <= 1) | np.isnan(values)).all(), column
        for column in ("tokens_per_s", "model_params"):
            values = chunk[column].to_numpy(dtype="float64")
            assert (np.isfinite(values) | np.isnan(values)).all(), column
        starts = chunk["start"].dropna()
        assert ((starts.dt.year >= 1970) & (starts.dt.year < 2200)).all()


def edited(line: str, separator: str, changes) -> str:
    fields = line.split(separator)
    for position, text in changes:
        fields[position % len(fields)] = text.replace(separator, "").replace("\n", "")
    return separator.join(fields)


def encode(text: str, codec: str) -> bytes:
    try:
        return text.encode(codec)
    except UnicodeEncodeError:
        return text.encode("utf-8")


@FUZZ
@given(st.binary(max_size=2000))
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_random_bytes_are_accepted_or_rejected_by_line(kind, data):
    result = outcome(PARSERS[kind], data)
    if not isinstance(result, UsageValidationError) and kind != "sreport":
        assert_sane_usage(result)


@FUZZ
@given(st.sampled_from(SACCT_LINES), edits, framing, encoding)
def test_sacct_lines_with_bad_fields(line, changes, frame, codec):
    bom, newline = frame
    text = bom + SACCT_HEADER + newline + edited(line, "|", changes) + newline
    result = outcome(iter_sacct_chunks, encode(text, codec))
    if not isinstance(result, UsageValidationError):
        assert_sane_usage(result)


@FUZZ
@given(edits, framing, encoding)
def test_csv_rows_with_bad_fields(changes, frame, codec):
    bom, newline = frame
    text = bom + CSV_HEADER + newline + edited(CSV_LINE, ",", changes) + newline
    result = outcome(iter_csv_chunks, encode(text, codec))
    if not isinstance(result, UsageValidationError):
        assert_sane_usage(result)


@FUZZ
@given(edits, framing, st.booleans())
def test_sreport_rows_with_bad_fields(changes, frame, banner):
    bom, newline = frame
    text = (SREPORT_BANNER if banner else "") + SREPORT_HEADER + "\n"
    text = bom + (text + edited(SREPORT_LINE, "|", changes) + "\n").replace("\n", newline)
    result = outcome(PARSERS["sreport"], text.encode())
    if not isinstance(result, UsageValidationError):
        for chunk in result:
            numbers = chunk.select_dtypes("float64").to_numpy()
            assert np.isfinite(numbers).all() and (numbers >= 0).all()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, 16), value | st.floats() | st.integers()), max_size=4))
def test_xlsx_cells_with_bad_values_and_formulas(changes):
    row: list = CSV_LINE.split(",")
    for position, cell in changes:
        row[position] = cell.replace("\x00", "") if isinstance(cell, str) else cell
    try:
        data = xlsx_bytes([CSV_HEADER.split(","), row])
    except (ValueError, IllegalCharacterError):
        return  # openpyxl refuses to write some values at all: no such file can exist
    result = outcome(iter_xlsx_chunks, data)
    if not isinstance(result, UsageValidationError):
        assert_sane_usage(result)


def test_a_formula_is_not_evaluated_and_its_cell_is_reported():
    row = CSV_LINE.split(",")
    row[2] = "=4+4"  # openpyxl stores it as a formula with no cached value
    error = outcome(iter_xlsx_chunks, xlsx_bytes([CSV_HEADER.split(","), row]))
    assert [str(issue) for issue in error.issues] == [
        "line 2, column cards: '' is not a number > 0"
    ]


@pytest.mark.parametrize("kind", ["sacct", "csv", "sreport"])
def test_a_10_mb_line_is_handled_in_bounded_time(kind):
    huge = "x" * (10 * 2**20)
    text = {
        "sacct": SACCT_HEADER + "\n" + edited(SACCT_LINES[0], "|", [(4, huge)]) + "\n",
        "csv": CSV_HEADER + "\n" + edited(CSV_LINE, ",", [(2, huge)]) + "\n",
        "sreport": SREPORT_BANNER
        + SREPORT_HEADER
        + "\n"
        + edited(SREPORT_LINE, "|", [(2, huge)])
        + "\n",
    }[kind]
    started = time.monotonic()
    result = outcome(PARSERS[kind], text.encode())
    assert time.monotonic() - started < 30
    if kind == "sacct":
        assert not isinstance(result, UsageValidationError)  # a long account name is valid
        assert len(result[0]["account"].iloc[0]) == 10 * 2**20
    else:
        assert isinstance(result, UsageValidationError)
        first = result.issues[0]
        assert (first.line, first.column) in {(2, "cards"), (6, "Allocated")}


def test_utf16_and_bom_files():
    text = CSV_HEADER + "\n" + CSV_LINE + "\n"
    plain = outcome(iter_csv_chunks, text.encode())
    with_bom = outcome(iter_csv_chunks, text.encode("utf-8-sig"))
    assert plain[0].equals(with_bom[0])
    utf16 = outcome(iter_csv_chunks, text.encode("utf-16"))
    assert isinstance(utf16, UsageValidationError) and utf16.issues[0].line == 1


def test_a_zip_bomb_is_refused_before_it_is_opened():
    bomb = zip_bomb(300)
    assert len(bomb) < 2 * 2**20
    started = time.monotonic()
    error = outcome(iter_xlsx_chunks, bomb)
    assert time.monotonic() - started < 2
    (issue,) = error.issues
    assert (issue.line, issue.column) == (1, "*")
    assert "zip bomb" in issue.reason
    small = xlsx_bytes([CSV_HEADER.split(","), CSV_LINE.split(",")])
    assert len(outcome(lambda s: iter_xlsx_chunks(s, max_inflated_bytes=2**20), small)) == 1
    refused = outcome(lambda s: iter_xlsx_chunks(s, max_inflated_bytes=100), small)
    assert "more than the" in refused.issues[0].reason
