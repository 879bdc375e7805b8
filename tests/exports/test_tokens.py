"""Spreadsheet links: a token reads its one query without a login, as its owner; it is
stored hashed, fails after revocation or expiry, is rate limited, and every use is logged."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.cache import cache
from django.utils import timezone

from tests.support.tabular import csv_rows, flat_rows

TOKENS = "/api/v1/export-tokens/"


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    cache.clear()
    yield
    cache.clear()


def _create(client, url: str, **extra) -> dict:
    response = client.post(TOKENS, {"name": "team-a usage", "url": url, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _fetch(client, link_or_token: str, **headers):
    path = link_or_token if "/" in link_or_token else f"/api/v1/export/{link_or_token}/"
    path = path.split("testserver", 1)[-1]
    response = client.get(path, **headers)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


@pytest.mark.django_db
def test_a_token_link_reads_its_query_without_login_and_is_logged(client_for, viewer, fleet):
    from exports.models import ExportToken, ExportTokenUse

    owner = client_for(viewer)
    created = _create(owner, "/api/v1/usage-records/?team=team-a&ordering=-start&format=xlsx")
    assert created["path"] == "/api/v1/usage-records/"
    assert created["query"] == "ordering=-start&team=team-a"  # sorted, format dropped
    assert created["link"].endswith(f"/api/v1/export/{created['token']}/")

    anonymous = client_for(None)
    response, body = _fetch(anonymous, created["link"], HTTP_USER_AGENT="Google-Sheets")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    expected = flat_rows(owner.get("/api/v1/usage-records/?team=team-a&ordering=-start").json())
    assert [row["job_id"] for row in csv_rows(body)] == [row["job_id"] for row in expected]

    use = ExportTokenUse.objects.get()
    assert (use.status_code, use.rows, use.user_agent) == (200, 1, "Google-Sheets")
    stored = ExportToken.objects.get()
    assert stored.use_count == 1 and stored.last_used_at is not None
    # Only a hash is stored: the clear token appears nowhere in the row.
    assert created["token"] not in str(ExportToken.objects.values().get())
    assert stored.token_hash != created["token"] and len(stored.token_hash) == 64
    assert "token" not in owner.get(f"{TOKENS}{stored.pk}/").json()


@pytest.mark.django_db
def test_a_token_cannot_read_outside_its_scope(client_for, viewer, fleet):
    owner = client_for(viewer)
    created = _create(owner, "/api/v1/usage-records/?team=team-a")
    anonymous = client_for(None)
    link = f"/api/v1/export/{created['token']}/"
    # Query parameters on the link are ignored: the stored scope wins.
    response, body = _fetch(anonymous, f"{link}?team=team-b&fields=user")
    assert response.status_code == 200
    rows = csv_rows(body)
    assert [row["team"] for row in rows] == ["team-a"] and "job_id" in rows[0]
    # The token is no login for the rest of the API.
    for path in ("/api/v1/sites/", "/api/v1/usage-records/", TOKENS):
        assert (
            anonymous.get(path, HTTP_AUTHORIZATION=f"Token {created['token']}").status_code == 401
        )
        assert anonymous.get(f"{path}?token={created['token']}").status_code == 401
    assert _fetch(anonymous, f"/api/v1/export/{created['token']}x/")[0].status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/v1/export-tokens/", "/api/v1/schema/", "/admin/", "/x/"])
def test_tokens_only_point_at_api_lists(client_for, viewer, url):
    response = client_for(viewer).post(TOKENS, {"name": "n", "url": url}, format="json")
    assert response.status_code == 400 and "url" in response.json()


@pytest.mark.django_db
def test_revoked_and_expired_tokens_fail(client_for, viewer, fleet):
    from exports.models import ExportToken, ExportTokenUse

    owner = client_for(viewer)
    anonymous = client_for(None)
    revoked = _create(owner, "/api/v1/sites/")
    assert _fetch(anonymous, revoked["token"])[0].status_code == 200
    assert owner.delete(f"{TOKENS}{revoked['id']}/").status_code == 204
    response, body = _fetch(anonymous, revoked["token"])
    assert response.status_code == 410 and b"revoked" in body
    assert owner.get(f"{TOKENS}{revoked['id']}/").json()["state"] == "revoked"

    expired = _create(owner, "/api/v1/sites/", expires_in_days=1)
    ExportToken.objects.filter(pk=expired["id"]).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    response, body = _fetch(anonymous, expired["token"])
    assert response.status_code == 410 and b"expired" in body
    refused = ExportTokenUse.objects.filter(status_code=410).count()
    assert refused == 2  # refused uses are logged too


@pytest.mark.django_db
def test_the_token_runs_with_the_owners_current_role(client_for, viewer, fleet):
    from django.contrib.auth.models import Group

    created = _create(client_for(viewer), "/api/v1/sites/")
    viewer.groups.remove(Group.objects.get(name="viewer"))
    response, _body = _fetch(client_for(None), created["token"])
    assert response.status_code == 403
    viewer.is_active = False
    viewer.save()
    assert _fetch(client_for(None), created["token"])[0].status_code == 403


@pytest.mark.django_db
def test_owners_see_their_tokens_and_admins_see_all(client_for, viewer, planner, fleet_admin):
    mine = _create(client_for(viewer), "/api/v1/sites/")
    theirs = _create(client_for(planner), "/api/v1/clusters/")
    listed = client_for(viewer).get(TOKENS).json()["results"]
    assert [token["id"] for token in listed] == [mine["id"]]
    assert client_for(viewer).delete(f"{TOKENS}{theirs['id']}/").status_code == 404
    every = {token["id"] for token in client_for(fleet_admin).get(TOKENS).json()["results"]}
    assert every == {mine["id"], theirs["id"]}
    revoked = client_for(fleet_admin).post(f"{TOKENS}{theirs['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    assert client_for(None).get(TOKENS).status_code == 401


@pytest.mark.django_db
def test_token_fetches_are_rate_limited_per_token(client_for, viewer, fleet, settings):
    settings.EXPORT_TOKEN_RATE = "2/min"
    owner = client_for(viewer)
    first, second = _create(owner, "/api/v1/sites/"), _create(owner, "/api/v1/clusters/")
    anonymous = client_for(None)
    assert [_fetch(anonymous, first["token"])[0].status_code for _ in range(3)] == [200, 200, 429]
    assert _fetch(anonymous, second["token"])[0].status_code == 200


@pytest.mark.django_db
def test_token_links_answer_304_when_nothing_changed(client_for, viewer, fleet):
    anonymous = client_for(None)
    for url in ("/api/v1/usage-records/", "/api/v1/sites/"):
        created = _create(client_for(viewer), url)
        response, _body = _fetch(anonymous, created["token"])
        again, body = _fetch(anonymous, created["token"], HTTP_IF_NONE_MATCH=response["ETag"])
        assert again.status_code == 304 and body == b"", url


@pytest.mark.django_db
def test_an_xlsx_token_link_gives_a_typed_workbook(client_for, viewer, fleet):
    from tests.support.tabular import xlsx_rows

    created = _create(client_for(viewer), "/api/v1/pools/?fields=name,it_power_kw", format="xlsx")
    response, body = _fetch(client_for(None), created["token"])
    rows, _book = xlsx_rows(body)
    assert rows and list(rows[0]) == ["name", "it_power_kw"]
    assert all(isinstance(row["it_power_kw"], float | int) for row in rows)
