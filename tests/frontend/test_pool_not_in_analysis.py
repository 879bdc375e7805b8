"""A pool added after the latest analysis: its "How to run these mixed cards" link opens a
page that says why there are no figures and offers to run an analysis of it (no dead end)."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def new_pool(fleet_analysis):
    """A mixed A100/H100 pool added to train-hetero after the fleet analysis ran."""
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool

    cluster = Cluster.objects.get(name="train-hetero")
    pool = Pool.objects.create(cluster=cluster, name="mixed-b", planned_utilization=0.6)
    for name, card in (("b-a100", "A100 SXM4 80GB"), ("b-h100", "H100 SXM5 80GB")):
        NodeGroup.objects.create(
            pool=pool, name=name, accelerator=AcceleratorModel.objects.get(name=card), node_count=4
        )
    assert pool.created > (fleet_analysis.started_at or fleet_analysis.created)
    return pool


def _hidden(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))


def test_the_pool_link_explains_and_offers_a_run_to_a_planner(
    client, planner, fleet_analysis, new_pool
):
    client.force_login(planner)
    html = client.get(f"/inventory/pools/{new_pool.pk}/").content.decode()
    assert f'href="/analyses/pools/{new_pool.pk}/"' in html  # the link on the pool page

    for url in (
        f"/analyses/pools/{new_pool.pk}/",
        f"/analyses/{fleet_analysis.pk}/pools/{new_pool.pk}/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert f"Pool mixed-b was added on {new_pool.created:%Y-%m-%d %H:%M} UTC" in page
        assert "after this analysis ran" in page and "Run an analysis of mixed-b now" in page
        today = timezone.now().date()
        assert _hidden(page) == {
            "csrfmiddlewaretoken": _hidden(page)["csrfmiddlewaretoken"],
            "scope": "pool",
            "object_id": f"pool:{new_pool.pk}",
            "period_start": f"{today - dt.timedelta(days=30):%Y-%m-%d}",
            "period_end": f"{today - dt.timedelta(days=1):%Y-%m-%d}",
        }


def test_a_viewer_is_told_to_ask_a_planner(client, viewer, new_pool):
    client.force_login(viewer)
    page = client.get(f"/analyses/pools/{new_pool.pk}/").content.decode()
    assert "Ask a planner to run an analysis of mixed-b" in page
    assert "Run an analysis of mixed-b now" not in page


def test_running_it_from_the_page_gives_the_pool_its_strategies(
    client, planner, new_pool, django_capture_on_commit_callbacks
):
    from planner.models import Analysis

    client.force_login(planner)
    page = client.get(f"/analyses/pools/{new_pool.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post("/analyses/", _hidden(page))
    assert response.status_code == 302
    analysis = Analysis.objects.get(scope="pool", object_id=new_pool.pk)
    assert response["Location"] == f"/analyses/{analysis.pk}/"
    # While it is queued, the page links to it instead of offering a second run.
    waiting = client.get(f"/analyses/pools/{new_pool.pk}/").content.decode()
    assert f'href="/analyses/{analysis.pk}/"' in waiting and "is queued" in waiting
    run_analysis_inline(analysis)

    response = client.get(f"/analyses/pools/{new_pool.pk}/")
    assert response["Location"] == f"/analyses/{analysis.pk}/pools/{new_pool.pk}/"
    strategies = client.get(response["Location"])
    assert strategies.status_code == 200 and "The four strategies" in strategies.content.decode()


def test_a_pool_that_does_not_exist_is_a_404(client, viewer, fleet_analysis):
    client.force_login(viewer)
    response = client.get(f"/analyses/{fleet_analysis.pk}/pools/999999/")
    assert response.status_code == 404
    assert "no pool 999999 in this analysis" in response.content.decode()
