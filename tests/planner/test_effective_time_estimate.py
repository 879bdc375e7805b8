"""/estimates/effective-time/ with the presets (issue 27): production practice by default, the
research cluster on demand, the card generation's MTBF, and ETTR and goodput by name."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

EFFECTIVE_TIME = "/api/v1/estimates/effective-time/"


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def _post(api, **payload) -> dict:
    response = api.post(EFFECTIVE_TIME, payload, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_llama3_rate_with_the_production_defaults_keeps_its_published_90_percent(api):
    # Dubey et al. 2024 §3.3.4: 419 unexpected interruptions in 54 days on 16,384 H100,
    # "higher than 90 %" effective training time; nothing else entered.
    body = _post(api, cards=16_384, mtbf_card_hours=54 * 24 * 16_384 / 419)
    assert body["effective_time"] >= 0.90
    assert body["ettr"] == body["runtime_goodput"] == body["effective_time"]
    assert body["checkpoint_save_minutes"] == pytest.approx(10 / 60)  # asynchronous save
    assert body["restart_minutes"] == pytest.approx(2.5 + 4 * 11 / 60)  # grown to 16,384
    assert body["site_kind"] == "unknown"
    assert body["provenance"]["restart_minutes"] == "default"


def test_the_card_generation_and_the_research_preset_pick_the_mtbf(api):
    hopper = _post(api, cards=10_000, accelerator="H100 SXM5 80GB")
    assert hopper["mtbf_card_hours"] == 50_000
    assert hopper["mtbf_basis"] == "default for Hopper cards (mtbf_card_hours_hopper)"
    assert hopper["effective_time"] >= 0.90  # issue 27: a 10,000-card Hopper job
    research = _post(api, cards=10_000, accelerator="H100 SXM5 80GB", site_kind="research")
    assert research["mtbf_card_hours"] == 29_500
    assert research["restart_minutes"] > hopper["restart_minutes"]
    assert research["effective_time"] < hopper["effective_time"]


def test_entered_figures_are_used_as_given(api):
    body = _post(api, cards=16_384, restart_minutes=15, checkpoint_save_minutes=3)
    assert body["restart_minutes"] == 15  # no growth on an entered restart
    assert body["checkpoint_save_minutes"] == 3


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"cards": 8, "site_kind": "garage"}, "site_kind"),
        ({"cards": 8, "accelerator": "No Such GPU"}, "accelerator"),
    ],
)
def test_an_unknown_preset_or_card_is_a_400_naming_it(api, payload, field):
    response = api.post(EFFECTIVE_TIME, payload, format="json")
    assert response.status_code == 400
    assert field in response.json()
