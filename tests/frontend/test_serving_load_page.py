"""The serving-load form on an inference pool's page: listed, added by a planner, refused
out of range with the field named; training pools have no such section."""

from __future__ import annotations

import pytest

from accounting.models import ServingLoad

pytestmark = pytest.mark.django_db

FORM = {
    "period_start": "2024-03-01",
    "period_end": "2024-04-01",
    "served_tokens_per_s": "1500",
    "model_params": "70000000000",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "notes": "",
}


@pytest.fixture
def serving_pool(alpha):
    pool = alpha.pools.get()
    pool.purpose = "inference"
    pool.save()
    return pool


def test_a_planner_adds_a_serving_load_from_the_pool_page(serving_pool, client, planner):
    client.force_login(planner)
    page = client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    assert "Serving loads" in page and "No serving load entered" in page
    assert f"/inventory/pools/{serving_pool.pk}/serving-loads/new/" in page
    answer = client.post(f"/inventory/pools/{serving_pool.pk}/serving-loads/new/", FORM)
    assert answer.status_code == 302
    load = ServingLoad.objects.get()
    assert (load.pool, load.served_tokens_per_s, load.input_tokens) == (serving_pool, 1500, 1000)
    page = client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    assert "fp8 / fp8" in page and "1000 / 500" in page


def test_out_of_range_values_are_form_errors(serving_pool, client, planner):
    client.force_login(planner)
    url = f"/inventory/pools/{serving_pool.pk}/serving-loads/new/"
    answer = client.post(url, {**FORM, "served_tokens_per_s": "0", "period_end": "2024-02-01"})
    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert "served_tokens_per_s" in errors and "period_end" in errors
    assert not ServingLoad.objects.exists()


def test_a_training_pool_has_no_serving_section(alpha, client, viewer):
    client.force_login(viewer)
    page = client.get(f"/inventory/pools/{alpha.pools.get().pk}/").content.decode()
    assert "Serving loads" not in page


def _load(pool, **changes) -> ServingLoad:
    import datetime as dt

    values = {
        "period_start": dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
        "period_end": dt.datetime(2024, 4, 1, tzinfo=dt.UTC),
        "served_tokens_per_s": 1500.0,
        "model_params": 7e10,
        "weight_precision": "fp8",
        "kv_precision": "fp8",
        "input_tokens": 1000,
        "output_tokens": 500,
        **changes,
    }
    return ServingLoad.objects.create(pool=pool, **values)


def test_a_planner_edits_a_serving_load_from_the_pool_page(serving_pool, client, planner):
    load = _load(serving_pool)
    client.force_login(planner)
    url = f"/inventory/pools/{serving_pool.pk}/serving-loads/{load.pk}/edit/"
    assert url in client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    form = client.get(url).context["form"]
    assert form.initial["served_tokens_per_s"] == 1500.0  # opens with the stored values
    answer = client.post(url, {**FORM, "served_tokens_per_s": "2500"})
    assert (
        answer.status_code == 302 and answer["Location"] == f"/inventory/pools/{serving_pool.pk}/"
    )
    load.refresh_from_db()
    assert (load.pool, load.served_tokens_per_s) == (serving_pool, 2500.0)
    assert ServingLoad.objects.count() == 1
    # Out of range: the field is named and nothing changes.
    answer = client.post(url, {**FORM, "served_tokens_per_s": "-1"})
    assert answer.status_code == 200 and "served_tokens_per_s" in answer.context["form"].errors
    load.refresh_from_db()
    assert load.served_tokens_per_s == 2500.0


def test_a_planner_deletes_a_serving_load_after_confirming(serving_pool, client, planner):
    kept, gone = _load(serving_pool), _load(serving_pool, served_tokens_per_s=900.0)
    client.force_login(planner)
    url = f"/inventory/pools/{serving_pool.pk}/serving-loads/{gone.pk}/delete/"
    assert url in client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    confirm = client.get(url)
    html = confirm.content.decode()
    assert confirm.status_code == 200 and "900 tokens/s" in html
    assert f'<a href="/inventory/pools/{serving_pool.pk}/">Cancel</a>' in html
    assert ServingLoad.objects.count() == 2  # a GET deletes nothing
    answer = client.post(url)
    assert (
        answer.status_code == 302 and answer["Location"] == f"/inventory/pools/{serving_pool.pk}/"
    )
    assert list(ServingLoad.objects.all()) == [kept]


def test_viewers_and_other_pools_urls_cannot_change_a_load(serving_pool, client, planner, viewer):
    from tests.support.builders import add_h100_pool

    load = _load(serving_pool)
    other = add_h100_pool(serving_pool.cluster, "other", purpose="inference")
    client.force_login(viewer)
    assert "/edit/" not in client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    base = f"/inventory/pools/{serving_pool.pk}/serving-loads/{load.pk}"
    assert client.post(f"{base}/edit/", {**FORM, "served_tokens_per_s": "1"}).status_code == 403
    assert client.post(f"{base}/delete/").status_code == 403
    client.force_login(planner)
    # The load through another pool's URL is not found (never moved or deleted there).
    wrong = f"/inventory/pools/{other.pk}/serving-loads/{load.pk}"
    assert client.post(f"{wrong}/edit/", FORM).status_code == 404
    assert client.post(f"{wrong}/delete/").status_code == 404
    load.refresh_from_db()
    assert (load.pool, load.served_tokens_per_s) == (serving_pool, 1500.0)


def test_editing_or_deleting_a_load_makes_the_pools_analyses_stale(
    serving_pool, client, planner, django_capture_on_commit_callbacks
):
    import datetime as dt

    from planner import services
    from tests.support.inline import run_analysis_inline

    load = _load(serving_pool)
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(
            scope="fleet",
            period_start=dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
            period_end=dt.datetime(2024, 4, 1, tzinfo=dt.UTC),
        )
    analysis = run_analysis_inline(analysis)
    client.force_login(planner)
    base = f"/inventory/pools/{serving_pool.pk}/serving-loads/{load.pk}"
    for action, step in (
        ("edited", lambda: client.post(f"{base}/edit/", {**FORM, "served_tokens_per_s": "2000"})),
        ("deleted", lambda: client.post(f"{base}/delete/")),
    ):
        type(analysis).objects.filter(pk=analysis.pk).update(stale=False, stale_reason="")
        with django_capture_on_commit_callbacks(execute=True):
            assert step().status_code == 302
        analysis.refresh_from_db()
        assert analysis.stale
        assert analysis.stale_reason == (
            f"A serving load of pool {serving_pool.name} was {action} after this run."
        )
