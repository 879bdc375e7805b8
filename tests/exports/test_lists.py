"""Every list endpoint as JSON, CSV and XLSX: the files read back equal the JSON rows, with
the same filters, ordering and ``?fields=``; XLSX is typed and documented; anonymous and
role-less users are refused."""

from __future__ import annotations

import pytest

from tests.support.tabular import (
    REPORT_QUERY,
    assert_csv_equals_json,
    assert_xlsx_equals_json,
    csv_rows,
    flat_rows,
    xlsx_rows,
)

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MODEL_LISTS = [
    "/api/v1/sites/",
    "/api/v1/accelerator-models/",
    "/api/v1/clusters/",
    "/api/v1/pools/",
    "/api/v1/node-groups/",
    "/api/v1/analyses/",
    "/api/v1/usage-records/",
    "/api/v1/import-jobs/",
    "/api/v1/gres-aliases/",
    "/api/v1/partition-mappings/",
    "/api/v1/sreport-utilization/",
    "/api/v1/serving-loads/",
    "/api/v1/plans/",
]
ROW_LISTS = [
    f"/api/v1/accounting/utilization/rows/?{REPORT_QUERY}&group_by=pool,team",
    f"/api/v1/accounting/costs/rows/?{REPORT_QUERY}&group_by=pool",
    f"/api/v1/accounting/chargeback/rows/?{REPORT_QUERY}",
    "/api/v1/analyses/{analysis}/rows/?scope=pool",
    "/api/v1/analyses/{analysis}/rows/?scope=cluster",
    "/api/v1/analyses/{analysis}/rows/?scope=site",
    "/api/v1/plans/{plan}/options/",
]


def _url(template: str, fleet, **params) -> str:
    url = template.format(analysis=fleet.analysis.pk, plan=fleet.plan_id)
    extra = "&".join(f"{key}={value}" for key, value in params.items())
    if not extra:
        return url
    return f"{url}{'&' if '?' in url else '?'}{extra}"


def _json_rows(client, url: str) -> list[dict]:
    sep = "&" if "?" in url else "?"
    response = client.get(f"{url}{sep}page_size=1000")
    assert response.status_code == 200, response.content[:500]
    return flat_rows(response.json())


@pytest.mark.django_db
@pytest.mark.parametrize("template", MODEL_LISTS + ROW_LISTS)
def test_csv_and_xlsx_read_back_equal_to_the_json(client_for, viewer, fleet, template):
    client = client_for(viewer)
    url = _url(template, fleet)
    expected = _json_rows(client, url)
    assert expected, f"{url} has no rows to compare"

    csv_response = client.get(_url(template, fleet, format="csv"))
    assert csv_response.status_code == 200
    assert csv_response["Content-Type"].startswith("text/csv")
    assert csv_response["Content-Disposition"].startswith("attachment; filename=")
    body = (
        b"".join(csv_response.streaming_content)
        if csv_response.streaming
        else (csv_response.content)
    )
    assert_csv_equals_json(csv_rows(body), expected)

    xlsx_response = client.get(url, HTTP_ACCEPT=XLSX_TYPE)  # the Accept header works too
    assert xlsx_response.status_code == 200
    assert xlsx_response["Content-Type"] == XLSX_TYPE
    rows, book = xlsx_rows(xlsx_response.content)
    assert_xlsx_equals_json(rows, expected)
    sheet = book.worksheets[0]
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref.endswith(str(len(expected) + 1))
    assert all(cell.font.bold for cell in sheet[1])
    about = book["About"]
    described = [row[0] for row in about.iter_rows(min_row=2, values_only=True) if row[0]]
    assert set(rows[0]) <= set(described)
    assert any(str(cell.value).startswith("http") for cell in about["B"])


@pytest.mark.django_db
def test_filters_ordering_and_fields_apply_to_every_format(client_for, viewer, fleet):
    client = client_for(viewer)
    query = "team=team-a&ordering=-card_hours&fields=job_id,card_hours,start,cluster_name"
    url = f"/api/v1/usage-records/?{query}"
    expected = _json_rows(client, url)
    assert [list(row) for row in expected] == [["job_id", "card_hours", "start", "cluster_name"]]
    response = client.get(f"{url}&format=csv")
    assert_csv_equals_json(csv_rows(b"".join(response.streaming_content)), expected)
    rows, _book = xlsx_rows(client.get(f"{url}&format=xlsx").content)
    assert_xlsx_equals_json(rows, expected)
    everything = _json_rows(client, "/api/v1/usage-records/")
    assert len(everything) == 3 and len(expected) == 1


@pytest.mark.django_db
def test_nested_objects_become_dotted_columns_and_fields_picks_them(client_for, viewer, fleet):
    client = client_for(viewer)
    url = f"/api/v1/accounting/costs/rows/?{REPORT_QUERY}&group_by=pool"
    rows = _json_rows(client, url)
    assert {"factors.mfu", "lost_cost_by_factor.energy", "factor_provenance.utilization"} <= set(
        rows[0]
    )
    picked = client.get(f"{url}&fields=pool,factors.mfu,total_cost").json()
    assert list(picked[0]) == ["pool", "factors", "total_cost"]
    assert list(picked[0]["factors"]) == ["mfu"]
    header = csv_rows(client.get(f"{url}&fields=pool,factors.mfu,total_cost&format=csv").content)
    assert list(header[0]) == ["pool", "factors.mfu", "total_cost"]
    whole = csv_rows(client.get(f"{url}&fields=factors&format=csv").content)
    assert list(whole[0]) == [f"factors.{name}" for name in rows_factor_names(rows[0])]


def rows_factor_names(row: dict) -> list[str]:
    return [name.split(".", 1)[1] for name in row if name.startswith("factors.")]


@pytest.mark.django_db
def test_unknown_fields_are_400_naming_them(client_for, viewer, fleet):
    response = client_for(viewer).get("/api/v1/sites/?fields=name,power_mw")
    assert response.status_code == 400
    assert "power_mw" in response.json()["fields"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["json", "csv", "xlsx"])
def test_anonymous_and_roleless_users_are_refused(client_for, no_role_user, fleet, fmt):
    for url in ["/api/v1/usage-records/", "/api/v1/accounting/costs/rows/", "/api/v1/sites/"]:
        anonymous = client_for(None).get(url, {"format": fmt})
        assert anonymous.status_code == 401
        assert client_for(no_role_user).get(url, {"format": fmt}).status_code == 403


@pytest.mark.django_db
def test_units_are_documented_in_the_about_sheet(client_for, viewer, fleet):
    response = client_for(viewer).get("/api/v1/pools/", {"format": "xlsx"})
    _rows, book = xlsx_rows(response.content)
    about = {row[0]: row for row in book["About"].iter_rows(values_only=True) if row[0]}
    assert about["it_power_kw"][1:3] == ("number", "kW")
    assert about["cards"][1] == "integer"
    assert about["node_groups"][1] == "any"
    assert about["query"][1].endswith("/api/v1/pools/?format=xlsx")
