"""The inventory bulk import (paste, CSV, XLSX) under bad input, end to end. Each bad file is
refused with a row and column, or as a whole with a clear message; nothing is stored; no
request answers 500. (Usage uploads: tests/accounting/test_import_fuzz.py.)"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory.imports import (
    KINDS,
    ImportFileError,
    ImportRejected,
    commit_import,
    parse_text,
    parse_upload,
)
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from tests.support.hostile import NASTY, xlsx_bytes, zip_bomb

pytestmark = pytest.mark.django_db
DB_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

SITE_COLUMNS = ["name", "pue", "tariff_per_kwh", "currency", "cooling_type", "metered_period_start"]
NODE_GROUP_COLUMNS = ["site", "cluster", "pool", "name", "accelerator", "node_count", "mfu"]
value = st.sampled_from(NASTY) | st.text(max_size=10)


def counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Site, Cluster, Pool, NodeGroup, AcceleratorModel))


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


def import_outcome(kind: str, table):
    """Commit inside a savepoint (rolled back after), so examples do not see each other."""
    before = counts()
    savepoint = transaction.savepoint()
    try:
        try:
            result = commit_import(kind, table)
        except ImportRejected as rejected:
            assert rejected.preview is not None or rejected.message
            if rejected.preview is not None:
                for error in rejected.preview.errors:
                    # A new row's unstated money column (a site's tariff) is named though absent.
                    named = {*table.frame.columns, *KINDS[kind].stated}
                    assert error.row >= 2 and error.column in named
                    assert str(error).startswith(f"row {error.row}, column {error.column}: ")
            assert counts() == before, "a rejected import stored something"
            return rejected
        except ImportFileError as refused:
            assert str(refused) and counts() == before
            return refused
        return result
    finally:
        transaction.savepoint_rollback(savepoint)


@DB_FUZZ
@given(st.lists(st.lists(value, min_size=6, max_size=6), min_size=1, max_size=4))
def test_site_rows_with_bad_values(demo_fleet, rows):
    text = "\n".join(["\t".join(SITE_COLUMNS), *("\t".join(r) for r in rows)])
    try:
        table = parse_text(text)
    except ImportFileError:
        return
    import_outcome("sites", table)


@DB_FUZZ
@given(st.lists(st.tuples(st.integers(0, 6), value), max_size=4))
def test_node_group_rows_with_bad_values(demo_fleet, changes):
    row = ["Ulanqab DC2 (liquid)", "train-ascend", "ascend-910b", "new", "Ascend 910B", "8", ""]
    for position, text in changes:
        row[position] = text.replace(",", " ").replace("\n", " ")
    text = ",".join(NODE_GROUP_COLUMNS) + "\n" + ",".join(row) + "\n"
    try:
        table = parse_upload(upload("groups.csv", text.encode()))
    except ImportFileError:
        return
    result = import_outcome("node-groups", table)
    if not isinstance(result, ImportRejected | ImportFileError):
        assert result.created == 1


@DB_FUZZ
@given(st.binary(max_size=3000), st.sampled_from(["rows.csv", "rows.xlsx", "rows.txt"]))
def test_random_bytes_as_an_inventory_file(demo_fleet, content, name):
    try:
        table = parse_upload(upload(name, content))
    except ImportFileError as refused:
        assert str(refused)
        return
    import_outcome("sites", table)


def test_nul_characters_and_impossible_dates_are_row_errors(db):
    """Found by fuzzing on PostgreSQL: NUL cannot be stored there, year -1 in no Python date."""
    header = "name\tlocation\tmetered_period_start\ttariff_per_kwh\tcurrency\n"
    table = parse_text(header + "A\x00B\tx\t-1\t0.1\tEUR\nC\tD\x00\t0000-01-01\t0.1\tEUR")
    rejected = import_outcome("sites", table)
    assert [str(e) for e in rejected.preview.errors] == [
        "row 2, column name: contains a NUL character, which cannot be stored.",
        "row 2, column metered_period_start: '-1' is not a date (use YYYY-MM-DD).",
        "row 3, column location: contains a NUL character, which cannot be stored.",
        "row 3, column metered_period_start: '0000-01-01' is not a date (use YYYY-MM-DD).",
    ]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "cp1252", "latin-1"])
def test_encodings_and_bom_of_an_inventory_csv(db, encoding):
    text = "name,location,tariff_per_kwh,currency\nZürich DC,Zürich,0.2,CHF\n"
    table = parse_upload(upload("sites.csv", text.encode(encoding)))
    assert list(table.frame.columns) == ["name", "location", "tariff_per_kwh", "currency"]
    commit_import("sites", table)
    assert Site.objects.get(location="Zürich").name == "Zürich DC"


def test_an_inventory_file_over_the_limit_or_a_zip_bomb_is_refused(db):
    with pytest.raises(ImportFileError, match="larger than 5 MB"):
        parse_upload(upload("sites.csv", b"name\n" + b"x" * (6 * 2**20)))
    with pytest.raises(ImportFileError, match="would inflate to 300 MB, more than the 100 MB"):
        parse_upload(upload("sites.xlsx", zip_bomb(300)))
    with pytest.raises(ImportFileError, match="zip bomb"):
        parse_upload(upload("sites.xlsx", zip_bomb(60)))
    with pytest.raises(ImportFileError, match="not a readable zip"):
        parse_upload(upload("sites.xlsx", b"name\nOslo\n"))


def test_inventory_formulas_are_never_evaluated(db):
    """A formula cell reads as the value Excel cached for it, or as empty when none was saved
    (a generated file): then a required column says so by row and column."""
    header = ["vendor", "name", "dense_bf16_tflops", "memory_gb", "memory_bandwidth_tbs", "tdp_w"]
    row = ['=HYPERLINK("http://x")', "XPU", "=400*2", "96", "3.2", "700"]
    rejected = import_outcome(
        "accelerators", parse_upload(upload("c.xlsx", xlsx_bytes([header, row])))
    )
    assert [str(e) for e in rejected.preview.errors] == [
        "row 2, column vendor: a value is required.",
        "row 2, column dense_bf16_tflops: a value is required.",
    ]


def test_import_pages_answer_bad_files_with_a_message(client, planner, demo_fleet):
    client.force_login(planner)
    for name, content in [
        ("sites.xlsx", zip_bomb(300)),
        ("sites.xlsx", b"\x00" * 100),
        ("sites.csv", b"\xff\xfe\x00garbage\r\r\n,,,"),
    ]:
        response = client.post("/inventory/import/sites/", {"file": upload(name, content)})
        assert response.status_code == 200, (name, response.status_code)
        assert 'class="errorlist' in response.content.decode()
    # Over the page's 5 MB by more than the multipart framing: refused before it is read.
    big = upload("sites.csv", b"name\n" + b"x" * (6 * 2**20))
    assert client.post("/inventory/import/sites/", {"file": big}).status_code == 413
    response = client.post("/inventory/import/sites/", {"pasted_rows": "name\tpue\n" + "x" * 10**7})
    assert response.status_code == 413
