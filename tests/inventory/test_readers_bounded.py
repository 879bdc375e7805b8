"""Bounded inventory-import readers: a workbook with one cell at XFD1048576, a UTF-16 or binary
CSV, a header of two million columns. Each is refused with one message before a grid is
built, under an address-space cap so a blow-up fails the test. (The usage readers:
tests/accounting/test_readers_bounded.py.)"""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from openpyxl import Workbook

from inventory.imports import ImportFileError, parse_upload
from inventory.models import Site
from tests.support.hostile import one_far_cell_xlsx
from tests.support.memcap import address_space_cap


@pytest.mark.django_db
@pytest.mark.parametrize("declared", [True, False])
def test_an_xlsx_cell_at_xfd1048576_is_refused_before_any_grid_exists(declared):
    content = one_far_cell_xlsx(declared)
    assert len(content) < 8 * 2**10
    what = "declares 1,048,576 rows × 16,384 columns" if declared else "reaches"
    with address_space_cap(), pytest.raises(ImportFileError, match=what):
        parse_upload(SimpleUploadedFile("sites.xlsx", content))


def test_the_sites_import_page_answers_a_far_cell_with_a_message(client, planner, demo_fleet):
    before = Site.objects.count()
    content = one_far_cell_xlsx(declared=True)
    client.force_login(planner)
    with address_space_cap():
        response = client.post(
            "/inventory/import/sites/", {"file": SimpleUploadedFile("sites.xlsx", content)}
        )
    assert response.status_code == 200
    assert "an inventory import reads at most 20,000 rows" in response.content.decode()
    assert Site.objects.count() == before


@pytest.mark.django_db
def test_a_normal_inventory_xlsx_still_reads_as_before():
    workbook = Workbook()
    workbook.active.append(["name", "pue", "tariff_per_kwh", None])
    workbook.active.append(["Oslo", 1.2, 0.1, None])
    workbook.active.append([None, None, None, None])
    workbook.active.append(["Bergen", 1, 0.25, None])
    buffer = io.BytesIO()
    workbook.save(buffer)
    table = parse_upload(SimpleUploadedFile("sites.xlsx", buffer.getvalue()))
    assert list(table.frame.columns) == ["name", "pue", "tariff_per_kwh"]
    assert table.frame.loc[2].tolist() == ["Oslo", "1.2", "0.1"]
    assert table.frame.loc[4].tolist() == ["Bergen", "1", "0.25"]


@pytest.mark.django_db
def test_a_utf16_or_binary_inventory_csv_is_one_message():
    utf16 = "name,pue\nOslo,1.2\n".encode("utf-16")
    with pytest.raises(ImportFileError, match=r"^The file is not UTF-8 text \(looks like UTF-16\)"):
        parse_upload(SimpleUploadedFile("sites.csv", utf16))
    with pytest.raises(ImportFileError, match=r"looks like binary"):
        parse_upload(SimpleUploadedFile("sites.csv", b"\x00\x01\x02" * 300))


@pytest.mark.django_db
def test_a_csv_with_a_huge_header_is_refused_before_pandas():
    with address_space_cap(), pytest.raises(ImportFileError, match="columns"):
        parse_upload(SimpleUploadedFile("sites.csv", b"name" + b",x" * 2_000_000 + b"\n"))
