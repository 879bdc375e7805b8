"""On PostgreSQL a whole-table CSV of plain columns is written by ``COPY``: every cell must be
the text the Python writer produces (formulas defused, numeric text kept, NaN and infinities
empty, booleans, ISO 8601 times with and without microseconds, nulls, quotes, newlines)."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection

from core.tabular import exporting

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="COPY is PostgreSQL's (run with DATABASE_URL)"
    ),
]

HOSTILE_TEXT = [
    '=HYPERLINK("http://x")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tlead tab",
    "\rlead return",
    "-1.5",
    "+3e9",
    ".5",
    "-",
    "",
    'say "hi", then\nleave',
    "back\\slash 'quote'",
    "ünïcödé 中文",
    "-١",  # not ASCII digits: a spreadsheet reads it as text, so it is defused
    "＝1+1",  # full-width forms: defused in SQL too (core.tabular.cellsafety)
    "＋cmd",
    "－A1",
    "＠SUM(A1)",
    "\u202eexe.txt",  # bidi override and zero-width characters are dropped (engine.text)
    "\u200b=1+1",  # … before the formula check: the hidden "=" is defused
]


def read(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8"))))


@pytest.fixture
def hostile_records(fleet):
    from accounting.models import UsageRecord

    first = UsageRecord.objects.order_by("pk").first()
    values = {f.attname: getattr(first, f.attname) for f in first._meta.concrete_fields}
    start = dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
    copies = []
    for number, text in enumerate(HOSTILE_TEXT):
        copies.append(
            UsageRecord(
                **{
                    **values,
                    "id": None,
                    "record_key": f"hostile-{number}",
                    "job_label": text,
                    "user": text,
                    "start": start + dt.timedelta(microseconds=number * 250_001),
                    "mfu": [float("nan"), float("inf"), float("-inf"), 0.5, 5.0, None, -0.0, 1e-05][
                        number % 8
                    ],
                    "pool_id": None if number % 2 else values["pool_id"],
                }
            )
        )
    UsageRecord.objects.bulk_create(copies)
    return len(copies)


def test_copy_writes_every_cell_as_the_python_writer_does(
    client_for, viewer, hostile_records, monkeypatch
):
    client = client_for(viewer)
    url = "/api/v1/usage-records/?format=csv"
    fast = client.get(url)
    fast_body = b"".join(fast.streaming_content)
    monkeypatch.setattr(exporting, "copy_csv_supported", lambda plain: False)
    slow = client.get(url)
    slow_body = b"".join(slow.streaming_content)

    fast_rows, slow_rows = read(fast_body), read(slow_body)
    assert fast_rows[0] == slow_rows[0]
    assert len(fast_rows) == len(slow_rows) == int(fast["X-Export-Rows"]) + 1
    assert len(fast_rows) > hostile_records
    header = fast_rows[0]
    for fast_row, slow_row in zip(fast_rows[1:], slow_rows[1:], strict=True):
        for name, ours, theirs in zip(header, fast_row, slow_row, strict=True):
            assert ours == theirs, (name, ours, theirs)
    labels = {row[header.index("job_label")] for row in fast_rows[1:]}
    assert {'\'=HYPERLINK("http://x")', "'\tlead tab", "-1.5", "+3e9", "'-"} <= labels
    assert {"exe.txt", "'=1+1"} <= labels
    starts = {row[header.index("start")] for row in fast_rows[1:]}
    assert {"2024-03-01T10:00:00Z", "2024-03-01T10:00:00.250001Z"} <= starts


def test_copy_respects_fields_filters_and_ordering(client_for, viewer, hostile_records):
    client = client_for(viewer)
    body = b"".join(
        client.get(
            "/api/v1/usage-records/",
            {"format": "csv", "fields": "record_key,start", "ordering": "start"},
        ).streaming_content
    )
    rows = read(body)
    assert rows[0] == ["record_key", "start"]
    starts = [dt.datetime.fromisoformat(row[1]) for row in rows[1:]]
    assert starts == sorted(starts) and len(set(starts)) > 1
    filtered = read(
        b"".join(
            client.get(
                "/api/v1/usage-records/", {"format": "csv", "search": "HYPERLINK"}
            ).streaming_content
        )
    )
    assert len(filtered) == 2  # header + the one record whose label matches


@pytest.mark.django_db(transaction=True)  # as in production: the stream runs in autocommit
def test_a_client_that_stops_reading_leaves_the_connection_usable(
    client_for, viewer, hostile_records, monkeypatch
):
    from accounting.models import UsageRecord

    monkeypatch.setattr(exporting, "COPY_CHUNK_BYTES", 64)  # many blocks from few rows
    response = client_for(viewer).get("/api/v1/usage-records/?format=csv")
    blocks = iter(response.streaming_content)
    assert next(blocks).startswith(b"id,cluster,")
    assert next(blocks)  # the COPY is running
    # The client went away mid-stream (keep the test's connection, as Django's test client does).
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)
    assert UsageRecord.objects.count() > hostile_records
