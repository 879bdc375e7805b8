"""The stateless calculators: published figures, the bucket effect, and 400s that name fields."""

import math

import pytest

pytestmark = pytest.mark.django_db

EFFECTIVE_TIME = "/api/v1/estimates/effective-time/"
POOL = "/api/v1/estimates/pool/"


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def test_anonymous_cannot_use_calculators(client_for):
    assert client_for(None).post(EFFECTIVE_TIME, {"cards": 8}, format="json").status_code == 401
    assert client_for(None).post(POOL, {"members": []}, format="json").status_code == 401


def test_llama_interruptions_give_a_three_hour_job_mtbf(api):
    # Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4: 419 unexpected interruptions
    # in 54 days on 16,384 GPUs.
    mtbf_card = 54 * 24 * 16384 / 419
    body = api.post(
        EFFECTIVE_TIME,
        {
            "cards": 16384,
            "mtbf_card_hours": mtbf_card,
            "checkpoint_save_minutes": 3,
            "restart_minutes": 15,
        },
        format="json",
    ).json()
    assert body["mtbf_job_hours"] == pytest.approx(3.09, abs=0.01)
    # Young: tau = sqrt(2 delta M); delta = 3 min.
    young_h = math.sqrt(2 * 0.05 * body["mtbf_job_hours"])
    assert body["young_interval_minutes"] == pytest.approx(young_h * 60, rel=1e-6)
    assert body["checkpoint_interval_minutes"] == pytest.approx(body["young_interval_minutes"])
    lost = 0.05 / young_h + (young_h / 2 + 0.25) / body["mtbf_job_hours"]
    assert body["effective_time"] == pytest.approx(1 - lost, rel=1e-6)
    ratio = 0.05 / (2 * body["mtbf_job_hours"])
    daly_h = (
        math.sqrt(2 * 0.05 * body["mtbf_job_hours"]) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - 0.05
    )
    assert body["daly_interval_minutes"] == pytest.approx(daly_h * 60, rel=1e-6)
    assert body["provenance"]["checkpoint_interval_minutes"] == "modeled"
    assert body["provenance"]["mtbf_card_hours"] == "entered"  # typed in, not measured


def test_given_interval_is_used_and_more_cards_lose_more_time(api):
    small = api.post(EFFECTIVE_TIME, {"cards": 64}, format="json").json()
    large = api.post(EFFECTIVE_TIME, {"cards": 8192}, format="json").json()
    assert small["effective_time"] > large["effective_time"]
    fixed = api.post(
        EFFECTIVE_TIME, {"cards": 64, "checkpoint_interval_minutes": 45}, format="json"
    ).json()
    assert fixed["checkpoint_interval_minutes"] == pytest.approx(45)
    assert fixed["interval_rule"] == "given"


def test_liquid_cooling_lengthens_default_mtbf(api):
    air = api.post(EFFECTIVE_TIME, {"cards": 1024, "cooling": "air"}, format="json").json()
    liquid = api.post(
        EFFECTIVE_TIME, {"cards": 1024, "cooling": "direct_liquid"}, format="json"
    ).json()
    assert liquid["mtbf_card_hours"] > air["mtbf_card_hours"] * 2.5
    assert liquid["effective_time"] > air["effective_time"]


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"cards": -4}, "cards"),
        ({"cards": 0}, "cards"),
        ({}, "cards"),
        ({"cards": 8, "mtbf_card_hours": -1}, "mtbf_card_hours"),
        ({"cards": 8, "restart_minutes": -1}, "restart_minutes"),
        ({"cards": 8, "cooling": "freon"}, "cooling"),
        ({"cards": "many"}, "cards"),
    ],
)
def test_effective_time_400_names_the_field(api, payload, field):
    response = api.post(EFFECTIVE_TIME, payload, format="json")
    assert response.status_code == 400
    assert field in response.json()


def pool_estimate(api, members, **extra):
    response = api.post(POOL, {"members": members, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("newer", ["H100 SXM5 80GB", "Ascend 910B"])
def test_bucket_effect_old_plus_new_is_slower_than_twice_old(api, newer):
    # Zheng 2024 (the bucket effect): 1,000 old + 1,000 new GPUs in one synchronous job
    # < 2,000 old GPUs.
    mixed = pool_estimate(
        api,
        [{"accelerator": "A100 SXM4 80GB", "cards": 1000}, {"accelerator": newer, "cards": 1000}],
    )
    old_only = pool_estimate(api, [{"accelerator": "A100 SXM4 80GB", "cards": 2000}])
    sync = mixed["strategies"]["synchronous_uniform"]
    assert (
        sync["throughput_pflops"]
        < old_only["strategies"]["synchronous_uniform"]["throughput_pflops"]
    )
    assert sync["heterogeneity_factor"] < 1
    static = mixed["strategies"]["static_proportional"]
    assert static["throughput_pflops"] >= sync["throughput_pflops"]
    assert mixed["recommended"] != "synchronous_uniform"
    assert "slowest" in mixed["why"].lower() or "barrier" in mixed["why"].lower()
    assert mixed["slowest_card"] == "A100 SXM4 80GB" or newer == "Ascend 910B"


def test_cross_vendor_mix_pays_a_larger_penalty(api):
    same = pool_estimate(
        api,
        [
            {"accelerator": "A100 SXM4 80GB", "cards": 800},
            {"accelerator": "H100 SXM5 80GB", "cards": 800},
        ],
    )
    cross = pool_estimate(
        api,
        [
            {"accelerator": "A100 SXM4 80GB", "cards": 800},
            {"accelerator": "Ascend 910B", "cards": 800},
        ],
    )
    assert cross["mixing_penalty"] < same["mixing_penalty"] < 1


def test_homogeneous_pool_has_no_bucket_loss_and_ids_work(api):
    from inventory.models import AcceleratorModel

    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    body = pool_estimate(api, [{"accelerator": h100.pk, "cards": 512, "mfu": 0.5}])
    sync = body["strategies"]["synchronous_uniform"]
    assert sync["heterogeneity_factor"] == pytest.approx(1.0)
    assert sync["throughput_pflops"] == pytest.approx(512 * 989 * 0.5 / 1000)


def test_mixing_penalty_override_is_applied(api):
    members = [
        {"accelerator": "A100 SXM4 80GB", "cards": 100},
        {"accelerator": "H100 SXM5 80GB", "cards": 100},
    ]
    body = pool_estimate(api, members, mixing_penalty=0.5)
    assert body["mixing_penalty"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "payload, path",
    [
        ({"members": [{"accelerator": "A100 SXM4 80GB", "cards": -5}]}, ("members", "0", "cards")),
        (
            {"members": [{"accelerator": "A100 SXM4 80GB", "cards": 8, "mfu": 1.2}]},
            ("members", "0", "mfu"),
        ),
        ({"members": [{"accelerator": "Z9000", "cards": 8}]}, ("members", "0", "accelerator")),
        ({"members": []}, ("members",)),
        (
            {"members": [{"accelerator": "L4", "cards": 8}], "mixing_penalty": 1.5},
            ("mixing_penalty",),
        ),
    ],
)
def test_pool_estimate_400_names_the_field(api, payload, path):
    response = api.post(POOL, payload, format="json")
    assert response.status_code == 400
    body = response.json()
    node = body
    for key in path:
        node = node[key]
    assert node
    if path[-1] == "accelerator":
        assert "Z9000" in str(node)


UTILIZATION = "/api/v1/estimates/utilization/"


def test_best_practice_product_is_about_half(api):
    # Baidu 2024 best practice: PUE 1.1, MFU 0.70, scaling 0.90, effective time 0.99, use 0.90.
    body = api.post(
        UTILIZATION,
        {"pue": 1.1, "mfu": 0.70, "scaling": 0.90, "effective_time": 0.99, "utilization": 0.90},
        format="json",
    ).json()
    expected = (1 / 1.1) * 0.70 * 0.90 * 0.99 * 0.90
    assert body["effective_utilization"] == pytest.approx(expected, rel=1e-9)
    assert body["effective_utilization"] == pytest.approx(0.51, abs=0.005)
    assert sum(body["waste_share"].values()) == pytest.approx(body["lost_share"], rel=1e-9)
    # -ln attribution: MFU (0.70) loses most, effective time (0.99) least.
    shares = body["waste_share"]
    assert max(shares, key=shares.get) == "mfu"
    assert min(shares, key=shares.get) == "effective_time"
    assert all(f["provenance"] == "entered" for f in body["factors"].values())


def test_missing_factors_are_modeled_from_accelerator_and_cards(api):
    body = api.post(
        UTILIZATION,
        {
            "utilization": 0.7,
            "accelerator": "H100 SXM5 80GB",
            "cards": 1024,
            "cooling": "direct_liquid",
        },
        format="json",
    ).json()
    factors = body["factors"]
    assert factors["utilization"]["provenance"] == "entered"
    assert factors["energy"]["provenance"] == "default"
    assert factors["scaling"]["provenance"] == "modeled"
    assert all(0 < f["value"] <= 1 for f in factors.values())
    product = math.prod(f["value"] for f in factors.values())
    assert body["effective_utilization"] == pytest.approx(product, rel=1e-9)


@pytest.mark.parametrize(
    "payload, field",
    [
        (
            {"pue": 0.9, "mfu": 0.5, "scaling": 0.9, "effective_time": 0.9, "utilization": 0.5},
            "pue",
        ),
        (
            {"pue": 1.2, "mfu": 1.5, "scaling": 0.9, "effective_time": 0.9, "utilization": 0.5},
            "mfu",
        ),
        ({"pue": 1.2, "mfu": 0.5, "effective_time": 0.9, "utilization": 0.5}, "scaling"),
        (
            {
                "mfu": 0.5,
                "scaling": 0.9,
                "effective_time": 0.9,
                "utilization": 0.5,
                "accelerator": "Q1",
                "cards": 8,
            },
            "accelerator",
        ),
        (
            {
                "pue": 1.2,
                "energy": 0.8,
                "mfu": 0.5,
                "scaling": 0.9,
                "effective_time": 0.9,
                "utilization": 0.5,
            },
            "energy",
        ),
    ],
)
def test_utilization_400_names_the_field(api, payload, field):
    response = api.post(UTILIZATION, payload, format="json")
    assert response.status_code == 400
    assert field in response.json()
