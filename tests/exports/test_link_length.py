"""Export links longer than their stored columns (issue #28): a 400 naming the length on the
API (tokens and background jobs) and on the spreadsheet-links page, never the database's
500 (PostgreSQL refused a query over 2,000 characters). The check runs on the normalized
query, which percent-encoding can make several times longer than the URL sent."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TOKENS = "/api/v1/export-tokens/"
JOBS = "/api/v1/export-jobs/"
USAGE = "/api/v1/usage-records/"


def long_urls() -> dict[str, str]:
    return {
        "plain": USAGE + "?team=" + "a" * 2100,  # under the field's 2,300, over the column
        "encoded": USAGE + "?team=" + "é" * 700,  # 707 characters sent, 4,205 stored
        "repeated": USAGE + "?" + "&".join(f"team=t{n}" for n in range(220)),
    }


@pytest.mark.parametrize("kind", ["plain", "encoded", "repeated"])
def test_a_token_for_a_too_long_query_is_a_400_naming_the_length(client_for, viewer, kind):
    from exports.models import ExportToken

    response = client_for(viewer).post(
        TOKENS, {"name": "long", "url": long_urls()[kind]}, format="json"
    )
    assert response.status_code == 400, response.content
    (message,) = response.json()["url"]
    assert message.startswith("The link's query is ") and message.endswith("; at most 2000.")
    assert not ExportToken.objects.exists()


def test_a_background_export_of_a_too_long_query_is_a_400(client_for, viewer):
    from exports.models import ExportJob

    response = client_for(viewer).post(JOBS, {"url": long_urls()["encoded"]}, format="json")
    assert response.status_code == 400, response.content
    assert "at most 2000" in response.json()["url"][0]
    assert not ExportJob.objects.exists()


def test_the_links_page_answers_a_too_long_url_with_its_message(client, viewer):
    client.force_login(viewer)
    url = long_urls()["plain"]
    shown = client.get("/spreadsheet-links/", {"url": url, "name": "long"})
    assert shown.status_code == 200
    refused = client.post("/spreadsheet-links/", {"name": "long", "url": url, "format": "csv"})
    assert refused.status_code == 400
    assert "at most 2000" in refused.content.decode()


def test_a_query_at_the_limit_is_still_a_link(client_for, viewer):
    url = USAGE + "?team=" + "a" * (2000 - len("team="))
    response = client_for(viewer).post(TOKENS, {"name": "at limit", "url": url}, format="json")
    assert response.status_code == 201, response.content
    assert len(response.json()["scope"].split("?", 1)[1]) == 2000
