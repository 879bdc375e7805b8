"""Reading exported files back (CSV, XLSX) and comparing them with the JSON rows."""

from __future__ import annotations

import datetime as dt
import io
import json
import math

import openpyxl
import pandas as pd

# The accounting reports' query for alpha's day (tests/support/alpha_usage.py).
REPORT_QUERY = "start=2024-03-01&end=2024-03-02&granularity=day"


def flat_rows(body) -> list[dict]:
    from core.tabular.columns import flatten, table_rows

    rows = [flatten(row) for row in table_rows(body)]
    # A table has the union of the rows' columns (first seen first); a missing key is null.
    names = list(dict.fromkeys(name for row in rows for name in row))
    return [{name: row.get(name) for name in names} for row in rows]


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def csv_rows(content) -> list[dict]:
    if not isinstance(content, bytes):
        content = body_of(content)
    frame = pd.read_csv(io.BytesIO(content), dtype=str, keep_default_na=False)
    return frame.to_dict("records")


def xlsx_rows(content: bytes) -> tuple[list[dict], openpyxl.Workbook]:
    book = openpyxl.load_workbook(io.BytesIO(content))
    sheet = book.worksheets[0]
    values = list(sheet.iter_rows(values_only=True))
    header = list(values[0])
    return [dict(zip(header, row, strict=True)) for row in values[1:]], book


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_utc_naive(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def assert_csv_equals_json(read_back: list[dict], expected: list[dict]) -> None:
    """CSV text equals the JSON value: numbers as numbers, null as empty, lists as JSON."""
    assert len(read_back) == len(expected)
    for got, want in zip(read_back, expected, strict=True):
        assert list(got) == list(want)
        for name, value in want.items():
            text = got[name]
            if value is None:
                assert text == "", name
            elif isinstance(value, bool):
                assert text == ("true" if value else "false"), name
            elif _is_number(value):
                assert math.isclose(float(text), value, rel_tol=1e-12), (name, text, value)
            elif isinstance(value, list | dict):
                assert json.loads(text) == value, name
            else:
                assert text == value, (name, text, value)


def assert_xlsx_equals_json(read_back: list[dict], expected: list[dict]) -> None:
    """XLSX cells are typed: numbers are numbers, booleans booleans, times Excel dates."""
    assert len(read_back) == len(expected)
    for got, want in zip(read_back, expected, strict=True):
        assert list(got) == list(want)
        for name, value in want.items():
            cell = got[name]
            if value is None or value == "":
                assert cell in (None, ""), name
            elif isinstance(value, bool):
                assert cell is value, name
            elif _is_number(value):
                assert _is_number(cell) and math.isclose(cell, value, rel_tol=1e-12), name
            elif isinstance(cell, dt.datetime):
                # Excel keeps times to the millisecond.
                assert abs(cell - _as_utc_naive(value)) < dt.timedelta(milliseconds=1), name
            elif isinstance(value, list | dict):
                assert json.loads(cell) == value, name
            else:
                assert cell == value, (name, cell, value)
