"""POST /api/v1/estimates/training/: published references, deadline round trip, 400s by field."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"
A100_80GB = "A100 SXM4 80GB"


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)  # the lowest role may use a calculator


def megatron(**extra) -> dict:
    """Megatron-LM (Narayanan et al., SC 2021), as Baidu 2023 quotes it: GPT-3 175B, 300B
    tokens, k = 8, 1,024 A100 at 140 TFLOP/s."""
    return {
        "model_params": 175e9,
        "tokens": 300e9,
        "flops_per_param_token": 8,
        "accelerator": A100_80GB,
        "cards": 1024,
        "achieved_tflops_per_card": 140,
        "scaling": 1,
        "effective_time": 1,
        "utilization": 1,
        **extra,
    }


def test_seed_002_gpt3_on_1024_a100_takes_about_34_days(api):
    response = api.post(URL, megatron(), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["feasible"] is True and body["reason"] == ""
    assert body["total_flops"] == pytest.approx(8 * 175e9 * 300e9)
    assert body["days"] == pytest.approx(34, rel=0.05)
    assert body["cards"] == 1024
    assert body["card_hours"] == pytest.approx(1024 * 24 * body["days"])
    assert body["factors"]["mfu"] == pytest.approx(140 / 312)
    assert body["factors"]["provenance"]["mfu"] == "entered"  # a throughput typed by the user
    assert body["accelerator"]["name"] == A100_80GB


def test_seed_001_175b_state_is_2800_gb_and_needs_35_a100_80gb(api):
    body = api.post(URL, megatron(), format="json").json()
    assert body["memory"]["state_bytes"] == pytest.approx(2.8e12, rel=0.01)
    assert body["memory"]["min_cards"] >= 35
    assert body["memory"]["per_card_bytes"] <= body["memory"]["usable_per_card_bytes"]


def test_catalog_id_works_like_the_name_and_brings_the_catalog_figures(api):
    from inventory.models import AcceleratorModel

    card = AcceleratorModel.objects.get(name=A100_80GB)
    by_name = api.post(URL, megatron(), format="json").json()
    by_id = api.post(URL, megatron(accelerator=card.pk), format="json").json()
    assert by_id["days"] == by_name["days"]
    # No price given: the catalog's rental price per card-hour.
    assert by_name["cost"]["price_source"] == "catalog"
    assert by_name["cost"]["basis"] == "rental"
    assert by_name["cost"]["compute"] == pytest.approx(
        card.rental_price_per_card_hour * by_name["card_hours"]
    )


def test_a_card_without_a_price_has_no_money_not_zero(api):
    """No price entered and none in the catalog: the money is null with the reason, the
    energy (priced by the tariff) is still there."""
    from inventory.models import AcceleratorModel

    AcceleratorModel.objects.filter(name=A100_80GB).update(rental_price_per_card_hour=None)
    body = api.post(URL, megatron(tariff_per_kwh=0.1), format="json").json()
    cost = body["cost"]
    assert cost["price_source"] is None and body["days"] > 0
    assert [cost[k] for k in ("compute", "idle", "total", "per_effective_pflop_day")] == [None] * 4
    assert (
        cost["unpriced_reason"] == f"no price for {A100_80GB}: none entered and none in the catalog"
    )
    assert cost["energy"] > 0
    priced = api.post(URL, megatron(price_per_card_hour=2.0), format="json").json()["cost"]
    assert priced["unpriced_reason"] is None and priced["total"] > 0


def test_energy_and_cost_follow_pue_tariff_and_entered_price(api):
    body = api.post(
        URL, megatron(pue=1.2, tariff_per_kwh=0.1, price_per_card_hour=2.0), format="json"
    ).json()
    assert body["energy_mwh"]["facility"] == pytest.approx(1.2 * body["energy_mwh"]["it"])
    assert body["cost"]["price_source"] == "entered"
    assert body["cost"]["compute"] == pytest.approx(2.0 * body["card_hours"])
    assert body["cost"]["energy"] == pytest.approx(body["energy_mwh"]["facility"] * 1000 * 0.1)
    assert body["factors"]["pue"] == pytest.approx(1.2)


def test_deadline_mode_round_trip(api):
    timed = api.post(URL, megatron(), format="json").json()
    deadline = api.post(
        URL, megatron(cards=None, deadline_days=timed["days"]), format="json"
    ).json()
    assert deadline["feasible"] is True
    assert deadline["days"] <= timed["days"] * (1 + 1e-9)
    assert deadline["cards"] == pytest.approx(1024, rel=0.01)
    # And back: the cards found meet the deadline in time mode.
    again = api.post(URL, megatron(cards=deadline["cards"]), format="json").json()
    assert again["days"] <= timed["days"] * (1 + 1e-9)


def test_option_that_does_not_fit_answers_200_with_the_reason(api):
    body = api.post(
        URL, megatron(accelerator="A100 SXM4 40GB", cards=8, zero_stage=0), format="json"
    )
    assert body.status_code == 200
    result = body.json()
    assert result["feasible"] is False
    assert "does not fit in memory" in result["reason"]
    assert result["memory"]["min_cards"] >= 78


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_params": -5}, "model_params"),
        ({"model_params": None}, "model_params"),
        ({"tokens": None}, "tokens"),
        ({"accelerator": "Z9000 Imaginary"}, "accelerator"),
        ({"accelerator": 999_999}, "accelerator"),
        ({"deadline_days": 30}, "cards"),
        ({"cards": None}, "cards"),
        ({"cards": 0}, "cards"),
        ({"zero_stage": 5}, "zero_stage"),
        ({"flops_per_param_token": 7}, "flops_per_param_token"),
        ({"mfu": 0.5}, "mfu"),
        ({"utilization": 1.5}, "utilization"),
        ({"pue": 0.9}, "pue"),
        ({"tariff_per_kwh": -1}, "tariff_per_kwh"),
        ({"dp_degree": 3}, "dp_degree"),
        ({"capital_cost_per_card": 10_000}, "amortization_years"),
        ({"precision": "fp8"}, "precision"),
    ],
)
def test_bad_input_is_400_naming_the_field(api, change, field):
    response = api.post(URL, megatron(**change), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def test_anonymous_gets_401(client_for):
    assert client_for(None).post(URL, megatron(), format="json").status_code == 401


def llama3_405b(**extra) -> dict:
    """Llama 3 405B (Dubey et al. 2024, Table 4): 16,384 H100, 8k sequences, 16M-token batch."""
    return {
        "model_params": 405e9,
        "tokens": 15.6e12,
        "accelerator": "H100 SXM5 80GB",
        "cards": 16_384,
        "seq_len": 8192,
        "global_batch_tokens": 16 * 2**20,
        "scaling": "modeled",
        "effective_time": "modeled",
        "utilization": 1,
        "fabric": "roce",
        "inter_node_bandwidth_gbps_per_card": 400,
        **extra,
    }


def test_modeled_factors_return_the_split_provenance_and_a_range(api):
    # Llama 3 §3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs.
    response = api.post(
        URL,
        llama3_405b(
            mtbf_card_hours=54 * 24 * 16_384 / 419,
            site_kind="production",
            checkpoint_async=True,
            checkpoint_save_minutes=3,
        ),
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["feasible"], body["reason"]
    split = body["parallelism"]
    assert split["tp"] * split["pp"] * split["cp"] * split["dp"] == 16_384
    assert split["virtual_stages"] >= 1 and split["micro_batch"] >= 1
    assert split["global_batch_sequences"] * 8192 == pytest.approx(16 * 2**20, rel=0.01)
    assert "largest loss" in split["why"]
    provenance = body["factors"]["provenance"]
    assert provenance["scaling"] == provenance["effective_time"] == "modeled"
    assert provenance["utilization"] == "entered"
    assert body["factors"]["effective_time"] >= 0.85
    assert body["days_range"]["low"] <= body["days"] <= body["days_range"]["high"]
    assert {u["uncertainty"] for u in body["days_range"]["uncertainties"]} <= {
        "mfu",
        "fabric",
        "mtbf",
        "restart",
    }
    goodput = body["goodput"]
    assert goodput["runtime"] == goodput["ettr"] == body["factors"]["effective_time"]
    assert goodput["program"] == pytest.approx(body["factors"]["mfu"] * body["factors"]["scaling"])


def test_entered_effective_time_inputs_move_the_modeled_factor(api):
    fragile = api.post(URL, llama3_405b(mtbf_card_hours=5_000), format="json").json()
    sturdy = api.post(URL, llama3_405b(mtbf_card_hours=100_000), format="json").json()
    assert fragile["factors"]["effective_time"] < sturdy["factors"]["effective_time"]
    assert fragile["days"] > sturdy["days"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scaling": "guessed"}, "scaling"),
        ({"effective_time": 0}, "effective_time"),
        ({"global_batch_tokens": 1e13}, "global_batch_tokens"),
        ({"global_batch_sequences": 1024}, "global_batch_tokens"),
        ({"mtbf_card_hours": 0}, "mtbf_card_hours"),
        ({"restart_minutes": -1}, "restart_minutes"),
        ({"checkpoint_interval_minutes": 0}, "checkpoint_interval_minutes"),
        ({"site_kind": "garage"}, "site_kind"),
        ({"fabric": "carrier_pigeon"}, "fabric"),
    ],
)
def test_bad_modeled_factor_input_is_400_naming_the_field(api, change, field):
    response = api.post(URL, llama3_405b(**change), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
