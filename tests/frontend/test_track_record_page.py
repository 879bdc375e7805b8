""" "How accurate is the planner?": the committed track record on a page, linked from the
planner and from every plan; login and the viewer role needed."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from engine.track_record import TRACK_RECORD_PATH

pytestmark = pytest.mark.django_db

URL = "/planner/track-record/"


@pytest.fixture
def record():
    return json.loads(TRACK_RECORD_PATH.read_text(encoding="utf-8"))


def _page(client, user) -> str:
    client.force_login(user)
    response = client.get(URL)
    assert response.status_code == 200
    return response.content.decode()


def test_the_url_is_named_under_the_planner():
    assert reverse("frontend:planner-track-record") == URL


def test_anonymous_visitors_go_to_the_login_page(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_a_user_without_a_role_is_refused(client, no_role_user):
    client.force_login(no_role_user)
    assert client.get(URL).status_code == 403


def test_the_page_is_read_only(client, viewer, planner):
    client.force_login(viewer)
    assert client.post(URL).status_code == 403
    client.force_login(planner)
    assert client.post(URL).status_code == 405


def test_the_page_shows_every_run_with_its_source_and_role(client, viewer, record):
    html = _page(client, viewer)
    assert "How accurate is the planner?" in html
    for row in record["rows"]:
        assert escape(row["name"]) in html, row["id"]
        assert escape(row["source"]) in html, row["id"]
        assert escape(row["stack"]) in html, row["id"]
    assert "Held out" in html and "Calibration" in html


def test_the_page_shows_the_summary_numbers_of_the_file(client, viewer, record):
    html = _page(client, viewer)
    for group, stats in record["summary"].items():
        assert f"{stats['median_abs_error_percent']:.1f} %" in html, group
        assert f"{stats['worst_error_percent']:+.1f} %" in html, group
        assert f"{stats['mean_signed_error_percent']:+.1f} %" in html, group
        assert f"{stats['band_coverage_percent']:.1f} %" in html, group
        assert f"{stats['inside_band']} of {stats['modeled']}" in html, group


def test_each_modeled_row_shows_its_error_and_unmodeled_rows_say_why(client, viewer, record):
    html = _page(client, viewer)
    for row in record["rows"]:
        start = html.index(f'id="run-{row["id"]}"')
        cells = html[start : html.index("</tr>", start)]
        if row["modeled"] is None:
            assert "—" in cells and escape(row["reason"]) in cells, row["id"]
        else:
            assert f"{row['error_percent']:+.1f} %" in cells, row["id"]
            assert ("yes" if row["inside_band"] else "no") in cells, row["id"]


def test_the_planner_page_links_to_it(client, viewer):
    client.force_login(viewer)
    html = client.get("/planner/").content.decode()
    assert f'href="{URL}"' in html and "How accurate is the planner?" in html


def test_every_plan_page_links_to_it(client, viewer, planner):
    from planner.models import Plan

    plan = Plan.objects.create(
        name="Track record link",
        owner=planner,
        workload={"model_params": 7e9, "tokens": 1e12},
        options_spec={"accelerators": [], "cards": [8]},
    )
    client.force_login(viewer)
    response = client.get(f"/planner/{plan.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="{URL}"' in html and "How accurate is the planner?" in html


def test_the_summary_shows_the_median_band_half_width(client, viewer, record):
    html = _page(client, viewer)
    for group, stats in record["summary"].items():
        assert f"{stats['median_band_half_width_percent']:.1f} %" in html, group


def test_the_serving_figures_join_the_page_with_their_errors_and_sources(client, viewer, record):
    html = _page(client, viewer)
    serving = record["serving"]
    section = html[html.index('id="serving-heading"') :]
    for group, stats in serving["summary"].items():
        assert f"{stats['inside_band']} of {stats['modeled']}" in section, group
        assert f"{stats['median_abs_error_percent']:.1f} %" in section, group
    for row in serving["rows"]:
        start = section.index(f'id="serving-{row["id"]}"')
        cells = section[start : section.index("</tr>", start)]
        assert escape(row["source"]) in cells, row["id"]
        if row["modeled"] is None:
            assert "—" in cells and escape(row["reason"]) in cells, row["id"]
        else:
            assert f"{row['error_percent']:+.1f} %" in cells, row["id"]
