"""Bulk import pages: upload or paste → preview (nothing saved) → commit, with the session carry."""

from __future__ import annotations

import io

import openpyxl
import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from inventory import imports
from inventory.models import Site

pytestmark = pytest.mark.django_db

GOOD_CSV = "name,cooling_type,pue,tariff_per_kwh,currency\nOslo,immersion,1.1,0.05,NOK\n"
GOOD_CSV += "Bergen,air,1.4,unknown,NOK\n"
BAD_CSV = GOOD_CSV.replace(",1.4,", ",0.4,")


@pytest.fixture
def planner_client(client, planner):
    client.force_login(planner)
    return client


def upload(client, kind: str, content: str, name: str = "sites.csv"):
    return client.post(
        f"/inventory/import/{kind}/", {"file": SimpleUploadedFile(name, content.encode())}
    )


def test_upload_previews_without_saving_then_commit_saves(planner_client):
    response = upload(planner_client, "sites", GOOD_CSV)
    assert response.status_code == 302
    assert response["Location"] == "/inventory/import/sites/preview/"
    assert Site.objects.count() == 0
    html = planner_client.get(response["Location"]).content.decode()
    assert "2 rows · 2 new · 0 to update · 0 unchanged" in html
    assert "Save 2 rows" in html
    token = planner_client.session["inventory_import"]["token"]

    committed = planner_client.post("/inventory/import/sites/preview/", {"token": token})
    assert committed.status_code == 302 and committed["Location"] == "/inventory/sites/"
    assert sorted(Site.objects.values_list("name", flat=True)) == ["Bergen", "Oslo"]
    listing = planner_client.get("/inventory/sites/").content.decode()
    assert "Imported sites from sites.csv: 2 added, 0 updated, 0 unchanged." in listing
    assert "inventory_import" not in planner_client.session


def test_a_bad_row_is_shown_with_row_and_column_and_nothing_can_be_saved(planner_client):
    upload(planner_client, "sites", BAD_CSV)
    response = planner_client.get("/inventory/import/sites/preview/")
    html = response.content.decode()
    assert "Nothing has been saved" in html
    assert "row 3, column pue: Ensure this value is greater than or equal to 1.0." in html
    assert '<td class="cell-error">0.4</td>' in html
    assert "Save 2 rows" not in html
    # Even a hand-made commit request saves nothing: the rows are validated again.
    token = planner_client.session["inventory_import"]["token"]
    again = planner_client.post("/inventory/import/sites/preview/", {"token": token})
    assert again.status_code == 200
    assert "1 problem(s) found; nothing was saved." in again.content.decode()
    assert Site.objects.count() == 0


def test_pasted_tab_separated_rows_import(planner_client):
    pasted = "name\tlocation\ttariff_per_kwh\tcurrency\nOslo\tOslo, NO\t0.05\tNOK\n"
    response = planner_client.post("/inventory/import/sites/", {"pasted_rows": pasted})
    assert response.status_code == 302
    preview = planner_client.get(response["Location"]).content.decode()
    assert "From pasted rows" in preview and "Oslo, NO" in preview
    token = planner_client.session["inventory_import"]["token"]
    planner_client.post("/inventory/import/sites/preview/", {"token": token})
    assert Site.objects.get(name="Oslo").location == "Oslo, NO"


def test_xlsx_upload_imports(planner_client):
    buffer = io.BytesIO()
    rows = {"name": ["Oslo"], "pue": [1.2], "tariff_per_kwh": [0.05], "currency": ["NOK"]}
    pd.DataFrame(rows).to_excel(buffer, index=False)
    response = planner_client.post(
        "/inventory/import/sites/", {"file": SimpleUploadedFile("s.xlsx", buffer.getvalue())}
    )
    assert response.status_code == 302
    token = planner_client.session["inventory_import"]["token"]
    planner_client.post("/inventory/import/sites/preview/", {"token": token})
    assert Site.objects.get(name="Oslo").pue == 1.2


def test_reimporting_the_same_file_updates_instead_of_duplicating(planner_client):
    for expected in ["2 new · 0 to update · 0 unchanged", "0 new · 0 to update · 2 unchanged"]:
        upload(planner_client, "sites", GOOD_CSV)
        assert expected in planner_client.get("/inventory/import/sites/preview/").content.decode()
        token = planner_client.session["inventory_import"]["token"]
        planner_client.post("/inventory/import/sites/preview/", {"token": token})
    assert Site.objects.count() == 2


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({}, "file", "Choose a file or paste rows."),
        ({"pasted_rows": "name,colour\nA,red\n"}, "pasted_rows", "Unknown column(s): colour"),
        ({"file": SimpleUploadedFile("a.pdf", b"%PDF")}, "file", "Upload a .csv or .xlsx file."),
        (
            {"file": SimpleUploadedFile("a.csv", b"name\nA\n"), "pasted_rows": "name\nB\n"},
            "file",
            "not both",
        ),
    ],
)
def test_file_problems_show_next_to_the_field(planner_client, data, field, message):
    response = planner_client.post("/inventory/import/sites/", data)
    assert response.status_code == 200
    html = response.content.decode()
    error_list = html.split(f'id="id_{field}_error"', 1)[1].split("</ul>", 1)[0]
    assert message in error_list
    assert "inventory_import" not in planner_client.session


def test_commit_needs_the_token_of_the_current_preview(planner_client):
    upload(planner_client, "sites", GOOD_CSV)
    response = planner_client.post("/inventory/import/sites/preview/", {"token": "forged"})
    assert (
        response.status_code == 302 and response["Location"] == "/inventory/import/sites/preview/"
    )
    assert Site.objects.count() == 0


def test_commit_revalidates_against_the_current_database(planner_client, demo_fleet):
    upload(planner_client, "clusters", "site,name\nFrankfurt DC1 (air),new-cluster\n", "c.csv")
    token = planner_client.session["inventory_import"]["token"]
    # The site disappears between preview and commit (someone else deleted it).
    Site.objects.create(name="Empty")
    Site.objects.filter(name="Frankfurt DC1 (air)").update(name="Renamed")
    response = planner_client.post("/inventory/import/clusters/preview/", {"token": token})
    assert response.status_code == 200
    assert "row 2, column site: no site named" in response.content.decode()


def test_preview_without_a_pending_import_sends_back_to_upload(planner_client):
    response = planner_client.get("/inventory/import/pools/preview/")
    assert response["Location"] == "/inventory/import/pools/"
    upload(planner_client, "sites", GOOD_CSV)
    # A pending sites import is not a pools import.
    assert planner_client.get("/inventory/import/pools/preview/").status_code == 302


def test_unknown_import_kind_is_404(planner_client):
    assert planner_client.get("/inventory/import/widgets/").status_code == 404
    assert planner_client.get("/inventory/import/sites/template.pdf").status_code == 404


def test_upload_page_documents_columns_and_links_templates(planner_client):
    html = planner_client.get("/inventory/import/node-groups/").content.decode()
    assert "/inventory/import/node-groups/template.csv" in html
    assert "/inventory/import/node-groups/template.xlsx" in html
    assert "<code>accelerator</code>" in html
    assert '<label for="id_file">' in html and '<label for="id_pasted_rows">' in html


@pytest.mark.parametrize("kind", list(imports.KINDS))
def test_templates_download_as_csv_and_xlsx(client, viewer, kind):
    client.force_login(viewer)
    columns = list(imports.KINDS[kind].columns)
    csv_response = client.get(f"/inventory/import/{kind}/template.csv")
    assert csv_response["Content-Type"].startswith("text/csv")
    assert f"fleetwise-{kind}-template.csv" in csv_response["Content-Disposition"]
    assert list(pd.read_csv(io.BytesIO(csv_response.content)).columns) == columns
    xlsx_response = client.get(f"/inventory/import/{kind}/template.xlsx")
    assert "spreadsheetml" in xlsx_response["Content-Type"]
    workbook = openpyxl.load_workbook(io.BytesIO(xlsx_response.content))
    assert [cell.value for cell in workbook.worksheets[0][1]] == columns
    assert workbook.sheetnames == [kind, "columns"]
