"""Text that a spreadsheet would run as a formula (=, +, -, @, tab, CR) is inert in every
export path; numbers, negative ones too, stay numbers."""

from __future__ import annotations

import openpyxl
import pytest

from core.tabular.renderers import CSVRenderer, XLSXRenderer
from tests.support.tabular import csv_rows, xlsx_rows

HOSTILE = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "=cmd|' /C calc'!A0"]


@pytest.mark.django_db
def test_streamed_rendered_and_token_exports_defuse_formulas(client_for, planner, fleet):
    from accounting.models import UsageRecord
    from inventory.models import Site

    for number, text in enumerate(HOSTILE):
        Site.objects.create(name=f"site {number}", location=text)
    UsageRecord.objects.filter(job_id="1001").update(job_label=HOSTILE[0], user="-5")
    client = client_for(planner)

    sites = csv_rows(client.get("/api/v1/sites/?format=csv&ordering=name"))
    locations = [row["location"] for row in sites if row["name"].startswith("site ")]
    assert locations == ["'" + text for text in HOSTILE]

    streamed = client.get("/api/v1/usage-records/?format=csv&job_id=1001")
    (record,) = csv_rows(b"".join(streamed.streaming_content))
    assert record["job_label"] == "'" + HOSTILE[0]
    assert record["user"] == "-5"  # a number written as text is data, not a formula

    rows, book = xlsx_rows(client.get("/api/v1/sites/?format=xlsx&ordering=name").content)
    sheet = book.worksheets[0]
    column = list(rows[0]).index("location") + 1
    for row_number, row in enumerate(rows, start=2):
        if row["name"].startswith("site "):
            cell = sheet.cell(row=row_number, column=column)
            assert cell.data_type == "s" and cell.value in HOSTILE  # text, never a formula
            assert cell.quotePrefix  # stays text when edited in Excel

    token = client.post(
        "/api/v1/export-tokens/", {"name": "t", "url": "/api/v1/sites/"}, format="json"
    ).json()["token"]
    linked = client_for(None).get(f"/api/v1/export/{token}/")
    assert {row["location"] for row in csv_rows(linked)} >= {"'" + t for t in HOSTILE}


def test_numbers_stay_numbers_and_numeric_text_is_not_prefixed():
    body = [{"delta_usd": -12.5, "count": -3, "label": "-3", "formula": "-A1", "ok": True}]
    text = CSVRenderer().render(body).decode().splitlines()
    assert text[1] == "-12.5,-3,-3,'-A1,true"
    import io

    sheet = openpyxl.load_workbook(io.BytesIO(XLSXRenderer().render(body))).worksheets[0]
    values = [cell.value for cell in sheet[2]]
    assert values == [-12.5, -3, "-3", "-A1", True]
    assert sheet["A2"].data_type == "n" and sheet["D2"].data_type == "s"
