"""The bulk import service: reading, per-row errors, all-or-nothing commit, re-import."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from inventory import imports
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db

SITES_CSV = """name,location,cooling_type,pue,pue_confirmed,tariff_per_kwh,currency,assumptions
Oslo DC3,Oslo,Direct liquid (cold plate),1.15,,0.07,EUR,"{""mtbf_card_hours"": 30000}"
Bergen DC1,Bergen,air,3.2,yes,0.06,EUR,
"""


def table(text: str) -> imports.ParsedTable:
    return imports.parse_text(text)


def error_texts(preview: imports.ImportPreview) -> list[str]:
    return [str(error) for error in preview.errors]


def xlsx_upload(frame: pd.DataFrame, name: str = "rows.xlsx") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    frame.to_excel(buffer, index=False)
    return SimpleUploadedFile(name, buffer.getvalue())


# --- Reading ------------------------------------------------------------------------------------


def test_csv_rows_are_numbered_like_a_spreadsheet_and_headers_normalised():
    parsed = table("Name , Cooling Type\n A ,air\n\nB,air\n")
    assert list(parsed.frame.columns) == ["name", "cooling_type"]
    assert list(parsed.frame.index) == [2, 4]  # the blank line 3 is skipped, numbers kept
    assert parsed.frame.loc[2, "name"] == "A"


@pytest.mark.parametrize("separator", ["\t", ";", ","])
def test_pasted_rows_may_be_tab_semicolon_or_comma_separated(separator):
    parsed = table(separator.join(["name", "location"]) + "\n" + separator.join(["A", "Oslo"]))
    assert parsed.frame.loc[2].to_dict() == {"name": "A", "location": "Oslo"}


def test_tab_separated_cells_may_contain_commas():
    parsed = table("name\tlocation\nA\tOslo, NO\n")
    assert parsed.frame.loc[2, "location"] == "Oslo, NO"


def test_xlsx_upload_is_read_from_its_first_sheet():
    frame = pd.DataFrame(
        {
            "name": ["Oslo"],
            "pue": [1.2],
            "metered_period_start": ["2026-01-01"],
            "tariff_per_kwh": [0.07],
            "currency": ["EUR"],
        }
    )
    parsed = imports.parse_upload(xlsx_upload(frame))
    assert parsed.frame.loc[2, "pue"] == "1.2"
    assert imports.preview_import("sites", parsed).is_valid


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.pdf", b"%PDF", "Upload a .csv or .xlsx file."),
        ("a.xlsx", b"not a zip", "Could not read the XLSX file"),
        ("a.csv", b"name\n", "header but no rows"),
        ("a.csv", b"name,,\nA,,x\n", "Column 3 has values but no header."),
        ("a.csv", b'name\n"unterminated\n', "Could not read the rows"),
    ],
)
def test_unreadable_files_are_refused_as_a_whole(name, content, message):
    with pytest.raises(imports.ImportFileError, match=message):
        imports.parse_upload(SimpleUploadedFile(name, content))


def test_unknown_and_missing_columns_are_file_errors():
    with pytest.raises(imports.ImportFileError, match="Unknown column.*colour"):
        imports.preview_import("sites", table("name,colour\nA,red\n"))
    with pytest.raises(imports.ImportFileError, match="Missing required column.*accelerator"):
        imports.preview_import("node-groups", table("site,cluster,pool,name\na,b,c,d\n"))


def test_too_many_rows_are_refused(monkeypatch):
    monkeypatch.setattr(imports.reading, "MAX_ROWS", 3)  # the module that applies it
    with pytest.raises(imports.ImportFileError, match="At most 3 rows"):
        table("name\n" + "\n".join(f"s{i}" for i in range(4)))


def test_payload_round_trip_keeps_cells_and_row_numbers():
    parsed = table(SITES_CSV)
    again = imports.ParsedTable.from_payload(parsed.to_payload())
    assert again.frame.equals(parsed.frame)


# --- Validation ---------------------------------------------------------------------------------


def test_preview_reports_row_and_column_for_every_problem_and_saves_nothing():
    preview = imports.preview_import(
        "sites",
        table(
            "name,cooling_type,pue,pue_confirmed,tariff_per_kwh,currency,metered_period_start\n"
            "Good,air,1.2,,0.1,EUR,2026-01-01\n"
            "Bad types,sauna,abc,maybe,-1,EUR,31/01/2026\n"
            "Hot,air,3.5,,0.1,EUR,\n"
            "Good,air,1.3,,0.1,EUR,\n"
            ",air,1.3,,0.1,EUR,\n"
        ),
    )
    assert error_texts(preview) == [
        "row 3, column cooling_type: 'sauna' is not one of: air, rear_door, direct_liquid, "
        "immersion.",
        "row 3, column pue: 'abc' is not a number.",
        "row 3, column pue_confirmed: 'maybe' is not yes/no (use true or false).",
        "row 3, column metered_period_start: '31/01/2026' is not a date (use YYYY-MM-DD).",
        "row 3, column tariff_per_kwh: Ensure this value is greater than or equal to 0.",
        "row 4, column pue: A PUE of 3.5 is unusually high (≥ 3.0); tick 'PUE confirmed' to "
        "keep it.",
        "row 5, column name: the same name is already in row 2.",
        "row 6, column name: a value is required.",
    ]
    assert not preview.is_valid
    assert Site.objects.count() == 0


def test_choices_booleans_json_and_dates_are_converted():
    preview = imports.preview_import("sites", table(SITES_CSV))
    assert error_texts(preview) == []
    oslo, bergen = (row.instance for row in preview.rows)
    assert oslo.cooling_type == "direct_liquid" and oslo.assumptions == {"mtbf_card_hours": 30000}
    assert bergen.pue_confirmed is True and bergen.assumptions == {}


def test_bad_assumption_overrides_are_reported_on_their_column():
    preview = imports.preview_import(
        "sites",
        table(
            "name,tariff_per_kwh,currency,assumptions\n"
            'A,0.1,EUR,{oops\nB,0.1,EUR,"{""no_such_key"": 1}"\n'
        ),
    )
    columns = [(error.row, error.column) for error in preview.errors]
    assert columns == [(2, "assumptions"), (3, "assumptions")]
    assert "not valid JSON" in preview.errors[0].message


def test_parents_must_exist_and_errors_name_the_missing_level(demo_fleet):
    preview = imports.preview_import(
        "node-groups",
        table(
            "site,cluster,pool,name,accelerator,node_count\n"
            "Nowhere,c,p,g,L4,1\n"
            "Ulanqab DC2 (liquid),nope,p,g,L4,1\n"
            "Ulanqab DC2 (liquid),train-ascend,nope,g,L4,1\n"
            "Ulanqab DC2 (liquid),train-ascend,ascend-910b,g,Z100,2.5\n"
        ),
    )
    assert error_texts(preview) == [
        "row 2, column site: no site named 'Nowhere'; add it first.",
        "row 3, column cluster: no cluster named 'nope' in Ulanqab DC2 (liquid); add it first.",
        "row 4, column pool: no pool named 'nope' in Ulanqab DC2 (liquid) / train-ascend; "
        "add it first.",
        "row 5, column accelerator: no accelerator named 'Z100' in the card catalog.",
        "row 5, column node_count: '2.5' is not a whole number.",
    ]


def test_model_clean_rules_apply_to_imported_rows(demo_fleet):
    preview = imports.preview_import(
        "clusters",
        table(
            "site,name,capital_cost_per_card,amortization_years\nFrankfurt DC1 (air),new,1000,\n"
        ),
    )
    assert error_texts(preview) == [
        "row 2, column amortization_years: Give the amortization period for the capital cost."
    ]


def test_preview_query_count_does_not_grow_with_rows(demo_fleet):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries_for(row_count: int) -> int:
        header = "site,cluster,pool,name,accelerator,node_count\n"
        path = "Ulanqab DC2 (liquid),train-hetero,mixed-a100-h100"
        rows = "".join(f"{path},g{i},H100 SXM5 80GB,{i}\n" for i in range(row_count))
        with CaptureQueriesContext(connection) as queries:
            assert imports.preview_import("node-groups", table(header + rows)).is_valid
        return len(queries)

    assert queries_for(3) == queries_for(300)


# --- Commit -------------------------------------------------------------------------------------


def test_commit_is_all_or_nothing():
    bad = table("name,pue,tariff_per_kwh,currency\nA,1.2,0.1,EUR\nB,0.5,0.1,EUR\nC,1.1,0.1,EUR\n")
    with pytest.raises(imports.ImportRejected) as rejected:
        imports.commit_import("sites", bad)
    assert [str(e) for e in rejected.value.preview.errors] == [
        "row 3, column pue: Ensure this value is greater than or equal to 1.0."
    ]
    assert Site.objects.count() == 0


def test_a_database_refusal_mid_commit_rolls_everything_back(monkeypatch):
    from django.db import IntegrityError

    original_save = Site.save

    def save_then_fail_on_b(self, *args, **kwargs):
        if self.name == "B":
            raise IntegrityError("simulated clash")
        return original_save(self, *args, **kwargs)

    monkeypatch.setattr(Site, "save", save_then_fail_on_b)
    with pytest.raises(imports.ImportRejected, match="simulated clash"):
        imports.commit_import(
            "sites", table("name,tariff_per_kwh,currency\nA,0.1,EUR\nB,0.1,EUR\n")
        )
    assert Site.objects.count() == 0


def test_reimporting_the_same_file_updates_instead_of_duplicating():
    first = imports.commit_import("sites", table(SITES_CSV))
    assert (first.created, first.updated, first.unchanged) == (2, 0, 0)
    again = imports.commit_import("sites", table(SITES_CSV))
    assert (again.created, again.updated, again.unchanged) == (0, 0, 2)
    changed = imports.commit_import("sites", table(SITES_CSV.replace("1.15", "1.2")))
    assert (changed.created, changed.updated, changed.unchanged) == (0, 1, 1)
    assert Site.objects.count() == 2
    assert Site.objects.get(name="Oslo DC3").pue == 1.2


def test_left_out_columns_keep_stored_values_and_empty_cells_clear_them():
    imports.commit_import(
        "sites", table("name,location,pue,tariff_per_kwh,currency\nA,Oslo,1.2,0.1,EUR\n")
    )
    imports.commit_import("sites", table("name,pue\nA,1.3\n"))
    site = Site.objects.get(name="A")
    assert (site.location, site.pue) == ("Oslo", 1.3)
    imports.commit_import("sites", table("name,location,pue\nA,,\n"))
    site.refresh_from_db()
    assert (site.location, site.pue) == ("", None)


def test_whole_hierarchy_imports_by_natural_keys_and_reimports_idempotently():
    files = [
        ("sites", "name,cooling_type,tariff_per_kwh,currency\nOslo,immersion,unknown,NOK\n"),
        ("clusters", "site,name,fabric\nOslo,train,roce\n"),
        ("pools", "site,cluster,name,planned_utilization\nOslo,train,mixed,0.7\n"),
        (
            "node-groups",
            "site,cluster,pool,name,accelerator,node_count,cards_per_node,mfu\n"
            "Oslo,train,mixed,a100,a100 sxm4 80gb,4,8,\n"
            "Oslo,train,mixed,h100,H100 SXM5 80GB,2,8,0.45\n",
        ),
    ]
    for kind, text in files:
        imports.commit_import(kind, table(text))
    for kind, text in files:
        result = imports.commit_import(kind, table(text))
        assert (result.created, result.updated) == (0, 0), kind
    pool = Pool.objects.get(name="mixed")
    assert pool.cluster.site.name == "Oslo" and pool.planned_utilization == 0.7
    assert NodeGroup.objects.filter(pool=pool).count() == 2
    assert NodeGroup.objects.get(name="h100").mfu == 0.45
    assert Cluster.objects.count() == 1


def test_same_names_under_different_parents_are_different_objects(demo_fleet):
    imports.commit_import(
        "pools",
        table(
            "site,cluster,name\n"
            "Ulanqab DC2 (liquid),train-hetero,shared\n"
            "Ulanqab DC2 (liquid),train-ascend,shared\n"
        ),
    )
    assert Pool.objects.filter(name="shared").count() == 2


def test_accelerator_catalog_import_updates_by_name():
    before = AcceleratorModel.objects.count()
    text = (
        "vendor,name,dense_bf16_tflops,memory_gb,memory_bandwidth_tbs,tdp_w,confidence\n"
        "Example,XPU-1,800,96,3.2,700,user\n"
        "NVIDIA,L4,121,24,0.3,70,vendor\n"
    )
    result = imports.commit_import("accelerators", table(text))
    assert (result.created, result.updated) == (1, 1)
    assert AcceleratorModel.objects.count() == before + 1
    assert AcceleratorModel.objects.get(name="L4").tdp_w == 70


def test_accelerator_rows_need_their_datasheet_figures():
    with pytest.raises(imports.ImportFileError, match="dense_bf16_tflops"):
        imports.preview_import("accelerators", table("vendor,name\nX,Y\n"))
    text = "vendor,name,dense_bf16_tflops,memory_gb,memory_bandwidth_tbs,tdp_w\nX,Y,,1,1,1\n"
    preview = imports.preview_import("accelerators", table(text))
    assert error_texts(preview) == ["row 2, column dense_bf16_tflops: a value is required."]


# --- Templates ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(imports.KINDS))
def test_templates_read_back_with_the_import_columns(kind):
    columns = list(imports.KINDS[kind].columns)
    csv_frame = pd.read_csv(io.BytesIO(imports.template_csv(kind)))
    assert list(csv_frame.columns) == columns and csv_frame.empty
    workbook = pd.read_excel(io.BytesIO(imports.template_xlsx(kind)), sheet_name=None)
    assert list(workbook) == [kind, "columns"]
    assert list(workbook[kind].columns) == columns
    assert list(workbook["columns"]["column"]) == columns


def test_a_filled_in_template_imports():
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(imports.template_xlsx("sites")))
    sheet = workbook["sites"]
    columns = list(imports.KINDS["sites"].columns)
    row = dict.fromkeys(columns) | {"name": "Oslo", "location": "Oslo, NO", "cooling_type": "air"}
    sheet.append(list((row | {"pue": 1.2, "tariff_per_kwh": 0.07, "currency": "NOK"}).values()))
    buffer = io.BytesIO()
    workbook.save(buffer)
    parsed = imports.parse_upload(SimpleUploadedFile("sites.xlsx", buffer.getvalue()))
    assert imports.commit_import("sites", parsed).created == 1
    assert Site.objects.get(name="Oslo").pue == 1.2


def test_column_help_marks_required_columns():
    help_by_name = {entry.name: entry for entry in imports.column_help("node-groups")}
    assert help_by_name["accelerator"].required and help_by_name["pool"].required
    assert not help_by_name["mfu"].required
    assert "identifies the row" in help_by_name["name"].meaning
