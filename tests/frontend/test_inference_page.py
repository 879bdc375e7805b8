"""The planner's Inference tab: options table, the latency–throughput chart and its data."""

import csv
import io

import pytest
from django.urls import reverse

from engine.inference.defaults import INFERENCE_DEFAULTS
from tests.support.inference_inputs import TAB_QUERY as QUERY

DEFAULT_BANDWIDTH_EFFICIENCY = INFERENCE_DEFAULTS["bandwidth_efficiency"].value

pytestmark = pytest.mark.django_db

URL = reverse("frontend:planner-inference")


@pytest.fixture
def page(client_for, viewer):
    return client_for(viewer)


def test_anonymous_goes_to_the_login_page(client_for):
    assert client_for(None).get(URL).status_code == 302


def test_the_example_opens_with_every_catalog_card(page):
    response = page.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Latency against throughput per card model" in html
    assert "H100 SXM5 80GB" in html and "cheapest" in html
    assert f"bandwidth_efficiency: {DEFAULT_BANDWIDTH_EFFICIENCY:g} (default)" in html


def test_chosen_cards_show_the_recommendation_and_the_reason_of_the_misfit(page):
    # 400 GB of FP8 weights: 8 L4 (192 GB) cannot hold them, 8 H100 (640 GB) can.
    html = page.get(URL, {**QUERY, "model_params": "400e9", "tpot_ms": "200"}).content.decode()
    assert "Recommended: <strong>H100 SXM5 80GB</strong>" in html
    assert "the weights alone exceed the usable memory" in html


def test_bad_input_is_a_400_naming_the_field(page):
    response = page.get(URL, {**QUERY, "tpot_ms": "-3"})
    assert response.status_code == 400
    assert "tpot_ms" in response.content.decode()


def test_chart_data_are_the_curve_of_each_card_model(page):
    key_url = reverse(
        "frontend:chart-data", kwargs={"key": "planner-inference-roofline", "fmt": "csv"}
    )
    response = page.get(key_url, QUERY)
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    h100 = [row for row in rows if row["accelerator"] == "H100 SXM5 80GB"]
    assert len({row["tp"] for row in h100}) == 1  # the best degree of each card model
    assert h100 and {row["accelerator"] for row in rows} == {"H100 SXM5 80GB", "L4"}
    for card in ("H100 SXM5 80GB", "L4"):
        tpot = [float(row["tpot_ms"]) for row in rows if row["accelerator"] == card]
        assert tpot == sorted(tpot)  # a bigger batch never shortens the time per token
    bad = page.get(key_url, {**QUERY, "input_tokens": "NaN"})
    assert bad.status_code == 400 and "input_tokens" in bad.content.decode()
