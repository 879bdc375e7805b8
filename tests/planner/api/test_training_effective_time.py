"""The training estimate's effective-time inputs (issue 27): asynchronous saves by default,
`checkpoint_async` scaling only an entered synchronous save."""

from __future__ import annotations

import pytest

from engine.defaults import DEFAULTS

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def _effective_time(api, **extra) -> float:
    payload = {
        "model_params": 70e9,
        "tokens": 2e12,
        "accelerator": "H100 SXM5 80GB",
        "cards": 16_384,
        "seq_len": 4096,
        "global_batch_tokens": 16 * 2**20,
        "effective_time": "modeled",
        "utilization": 1,
        **extra,
    }
    response = api.post(URL, payload, format="json")
    assert response.status_code == 200, response.content
    return response.json()["factors"]["effective_time"]


def test_async_without_an_entered_save_changes_nothing(api):
    assert _effective_time(api, checkpoint_async=True) == _effective_time(api)


def test_async_blocks_only_the_stall_share_of_an_entered_synchronous_save(api):
    share = DEFAULTS["checkpoint_async_stall_share"].value
    synchronous = _effective_time(api, checkpoint_save_minutes=3)
    asynchronous = _effective_time(api, checkpoint_save_minutes=3, checkpoint_async=True)
    blocking = _effective_time(api, checkpoint_save_minutes=3 * share)
    assert synchronous < asynchronous == pytest.approx(blocking, abs=1e-12)


def test_the_research_preset_is_a_choice_of_the_estimate(api):
    assert _effective_time(api, site_kind="research") < _effective_time(api, site_kind="production")
