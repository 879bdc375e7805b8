"""The FP4 (NVFP4) training runs on "How accurate is the planner?": their own part (one
calibration run, the rest held back), each run's error or why it has none, the summary of the
committed file."""

from __future__ import annotations

import copy

import pytest
from django.utils.html import escape

from engine.track_record import load_track_record
from planner import track_record as page_data
from planner.track_record import FP4_GROUP_LABELS, track_record_page

URL = "/planner/track-record/"


@pytest.fixture
def record():
    return load_track_record()


def _fp4_section(html: str) -> str:
    return html[
        html.index('id="fp4-heading"') : html.index("</section>", html.index("fp4-heading"))
    ]


def test_the_page_data_carries_the_fp4_runs_apart_from_the_dense_and_moe_runs(record):
    page = track_record_page()
    fp4 = page["fp4"]
    assert [row["id"] for row in fp4["rows"]] == [row["id"] for row in record["fp4"]["rows"]]
    assert [s["label"] for s in fp4["summary"]] == [
        FP4_GROUP_LABELS[g] for g in record["fp4"]["summary"]
    ]
    assert {row["role_label"] for row in fp4["rows"]} == {"Calibration", "Held back"}
    fp4_ids = {row["id"] for row in fp4["rows"]}
    assert not fp4_ids & {row["id"] for row in page["rows"]}
    assert not fp4_ids & {row["id"] for row in page["moe"]["rows"]}


@pytest.mark.django_db
def test_the_page_shows_each_fp4_run_with_its_error_and_source(client, viewer, record):
    client.force_login(viewer)
    section = _fp4_section(client.get(URL).content.decode())
    assert "FP4 (NVFP4) training" in section
    for row in record["fp4"]["rows"]:
        start = section.index(f'id="fp4-{row["id"]}"')
        cells = section[start : section.index("</tr>", start)]
        assert escape(row["name"]) in cells and escape(row["source"]) in cells, row["id"]
        assert "(fp4)" in cells, row["id"]
        assert f"{row['error_percent']:+.1f} %" in cells, row["id"]
        assert ("yes" if row["inside_band"] else "no") in cells, row["id"]


@pytest.mark.django_db
def test_the_page_shows_the_fp4_summary_of_the_file(client, viewer, record):
    client.force_login(viewer)
    section = _fp4_section(client.get(URL).content.decode())
    for group, stats in record["fp4"]["summary"].items():
        start = section.index(escape(FP4_GROUP_LABELS[group]))
        cells = section[start : section.index("</tr>", start)]
        assert f'<td class="num">{stats["runs"]}</td>' in cells, group
        assert f"{stats['median_abs_error_percent']:.1f} %" in cells, group
        assert f"{stats['worst_error_percent']:+.1f} %" in cells, group
        assert f"{stats['mean_signed_error_percent']:+.1f} %" in cells, group
        assert f"{stats['inside_band']} of {stats['modeled']}" in cells, group


@pytest.mark.django_db
def test_a_run_the_model_cannot_evaluate_shows_why_instead_of_a_number(
    client, viewer, record, monkeypatch
):
    unmodeled = copy.deepcopy(record)
    row = unmodeled["fp4"]["rows"][-1]
    reason = "fp4 requested but GB300 (NVL72) has no dense FP4 peak"
    row.update(
        modeled=None, modeled_low=None, modeled_high=None, error_percent=None,
        inside_band=None, split="", reason=reason,
    )  # fmt: skip
    monkeypatch.setattr(page_data, "load_track_record", lambda: unmodeled)
    client.force_login(viewer)
    html = client.get(URL).content.decode()
    start = html.index(f'id="fp4-{row["id"]}"')
    cells = html[start : html.index("</tr>", start)]
    assert escape(reason) in cells
    assert '<td class="num">—</td>' in cells  # the error cell: a dash, no figure


@pytest.mark.django_db
def test_a_record_without_fp4_runs_shows_no_fp4_section(client, viewer, record, monkeypatch):
    bare = {key: value for key, value in record.items() if key != "fp4"}
    monkeypatch.setattr(page_data, "load_track_record", lambda: bare)
    assert track_record_page()["fp4"] is None
    client.force_login(viewer)
    html = client.get(URL).content.decode()
    assert 'id="fp4-heading"' not in html and 'id="moe-heading"' in html
