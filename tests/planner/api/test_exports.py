"""Options export: CSV and XLSX read back equal the JSON rows; the renderers on their own."""

from __future__ import annotations

import datetime as dt
import io

import openpyxl
import pandas as pd
import pytest

from core.tabular.renderers import CSVRenderer, XLSXRenderer
from tests.support.builders import PLANS
from tests.support.inline import run_plan_inline


@pytest.fixture
def computed(client_for, planner, payload):
    created = client_for(planner).post(PLANS, payload, format="json").json()
    run_plan_inline(created["id"])
    return created["id"]


def _json_frame(rows: list[dict]) -> pd.DataFrame:
    # CSV and XLSX cannot tell an empty string from a missing value.
    return pd.DataFrame(rows).replace({"": None}).fillna(value=float("nan"))


def _same(read_back: pd.DataFrame, rows: list[dict]) -> None:
    expected = _json_frame(rows)
    assert list(read_back.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(
        read_back.astype(object).where(read_back.notna(), None),
        expected.astype(object).where(expected.notna(), None),
        check_dtype=False,
        check_exact=False,
        rtol=1e-12,
    )


@pytest.mark.django_db
def test_options_json_has_one_flat_row_per_option_with_units(client_for, viewer, computed):
    from planner.plans import OPTION_COLUMN_NAMES

    rows = client_for(viewer).get(f"{PLANS}{computed}/options/").json()
    assert len(rows) == 14
    assert all(list(row) == list(OPTION_COLUMN_NAMES) for row in rows)  # also on jsonb
    for unit_column in ("days", "card_hours", "memory_per_card_gb", "facility_energy_mwh"):
        assert unit_column in rows[0]
    assert all(not isinstance(v, (dict, list)) for row in rows for v in row.values())
    pareto = client_for(viewer).get(f"{PLANS}{computed}/options/", {"pareto": "true"}).json()
    assert pareto and all(row["on_pareto_front"] for row in pareto)


@pytest.mark.django_db
def test_csv_export_reads_back_equal_to_the_json_rows(client_for, viewer, computed):
    client = client_for(viewer)
    rows = client.get(f"{PLANS}{computed}/options/").json()
    response = client.get(f"{PLANS}{computed}/options/", {"format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert f'filename="plan-{computed}-options.csv"' in response["Content-Disposition"]
    _same(pd.read_csv(io.BytesIO(response.content)), rows)


@pytest.mark.django_db
def test_xlsx_export_reads_back_equal_with_typed_cells_and_a_usable_sheet(
    client_for, viewer, computed
):
    client = client_for(viewer)
    rows = client.get(f"{PLANS}{computed}/options/").json()
    response = client.get(f"{PLANS}{computed}/options/", {"format": "xlsx"})
    assert response.status_code == 200
    assert response["Content-Type"] == XLSXRenderer.media_type
    assert f'filename="plan-{computed}-options.xlsx"' in response["Content-Disposition"]
    _same(pd.read_excel(io.BytesIO(response.content)), rows)

    sheet = openpyxl.load_workbook(io.BytesIO(response.content)).active
    header = [cell.value for cell in sheet[1]]
    assert header == list(rows[0])
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref == f"A1:{openpyxl.utils.get_column_letter(len(header))}15"
    assert all(cell.font.bold for cell in sheet[1])
    first = dict(zip(header, sheet[2], strict=True))
    assert first["days"].data_type == "n" and isinstance(first["days"].value, float)
    assert first["cards"].data_type == "n" and first["cards"].value == rows[0]["cards"]
    assert isinstance(first["feasible"].value, bool)
    assert first["label"].data_type == "s"
    label_width = sheet.column_dimensions[openpyxl.utils.get_column_letter(2)].width
    assert label_width >= len(rows[0]["label"])


@pytest.mark.django_db
def test_export_of_an_uncomputed_plan_is_409(client_for, planner, payload):
    created = client_for(planner).post(PLANS, payload, format="json").json()
    response = client_for(planner).get(f"{PLANS}{created['id']}/options/", {"format": "csv"})
    assert response.status_code == 409
    assert b"no results yet" in response.content


class _View:
    export_columns = ("b", "a")
    export_filename = "things"


def test_renderers_take_paginated_bodies_keep_column_order_and_defuse_formulas():
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    body = {
        "count": 2,
        "results": [
            {"a": 1.5, "b": "=HYPERLINK(1)", "c": {"k": [1, 2]}, "d": when},
            {"a": None, "b": "plain", "c": None, "d": None, "e": True},
        ],
    }
    context = {"view": _View(), "response": {}}
    text = CSVRenderer().render(body, renderer_context=context).decode()
    lines = text.splitlines()
    assert lines[0] == "b,a,c.k,d,e"  # nested objects flatten to dotted columns
    assert lines[1].startswith("'=HYPERLINK(1),1.5,")
    assert '"[1, 2]"' in lines[1]
    assert lines[2] == "plain,,,,true"
    assert context["response"]["Content-Disposition"] == 'attachment; filename="things.csv"'

    sheet = openpyxl.load_workbook(
        io.BytesIO(XLSXRenderer().render(body, renderer_context=context))
    ).active
    assert [c.value for c in sheet[1]] == ["b", "a", "c.k", "d", "e"]
    formula_like = sheet["A2"]
    assert formula_like.value == "=HYPERLINK(1)" and formula_like.data_type == "s"
    assert sheet["D2"].value == dt.datetime(2026, 1, 2, 1, 4, 5)  # UTC wall time
    assert sheet["E3"].value is True


def test_renderers_write_a_header_for_an_empty_list_and_an_error_as_one_row():
    context = {"view": _View()}
    assert CSVRenderer().render([], renderer_context=context).decode() == "b,a\r\n"
    error = CSVRenderer().render({"detail": "Not found."}).decode()
    assert error.splitlines() == ["detail", "Not found."]
