"""The alert form picks the watched site, cluster or pool by name (issue 31, "Forms"): no
raw "Object id" to type, and the rules list names the object, not "Cluster #4"."""

from __future__ import annotations

import re

import pytest

from alerts.forms import AlertRuleForm
from alerts.models import AlertRule
from inventory.models import Cluster, Pool, Site

pytestmark = pytest.mark.django_db

RULE = {
    "name": "Cluster utilization",
    "metric": "utilization",
    "direction": "below",
    "threshold": "0.5",
    "window_days": "7",
    "enabled": "on",
    "recipients_text": "",
}


@pytest.fixture
def places(db):
    site = Site.objects.create(name="Lyon DC", tariff_per_kwh=0.2, currency="EUR")
    cluster = Cluster.objects.create(site=site, name="train-7")
    pool = Pool.objects.create(cluster=cluster, name="h200")
    return site, cluster, pool


def options_of(html: str) -> dict[str, str]:
    """The watched-object select's options: value → visible text."""
    select = re.search(r'<select name="object_id".*?</select>', html, re.S).group(0)
    return dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select))


def test_the_choices_name_every_site_cluster_and_pool_by_its_path(client, planner, places):
    site, cluster, pool = places
    client.force_login(planner)
    html = client.get("/alerts/").content.decode()
    assert "Object id" not in html and "Site, cluster or pool" in html
    assert options_of(html) == {
        "": "None (a fleet or team rule)",
        f"site:{site.pk}": "Lyon DC",
        f"cluster:{cluster.pk}": "Lyon DC / train-7",
        f"pool:{pool.pk}": "Lyon DC / train-7 / h200",
    }
    assert re.search(r'<optgroup label="Clusters">\s*<option value="cluster:', html)


def test_a_rule_saved_with_a_picked_cluster_watches_that_cluster_and_lists_its_name(
    client, planner, places
):
    _, cluster, _ = places
    client.force_login(planner)
    form = RULE | {"scope": "cluster", "object_id": f"cluster:{cluster.pk}"}
    response = client.post("/alerts/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    rule = AlertRule.objects.get()
    assert (rule.scope, rule.object_id) == ("cluster", cluster.pk)
    listed = client.get("/alerts/").content.decode()
    row = re.search(r"<th scope=\"row\">Cluster utilization</th><td>(.*?)</td>", listed).group(1)
    assert row.endswith("· Cluster Lyon DC / train-7 · 7 days") and "#" not in row


def test_an_object_of_another_kind_than_the_scope_is_refused_by_name(client, planner, places):
    site, _, _ = places
    client.force_login(planner)
    response = client.post("/alerts/", RULE | {"scope": "cluster", "object_id": f"site:{site.pk}"})
    assert response.status_code == 400
    assert "This is a site; choose a cluster or change the scope." in response.content.decode()
    missing = client.post("/alerts/", RULE | {"scope": "pool", "object_id": ""})
    assert "A pool rule names its pool." in missing.content.decode()
    typed = client.post("/alerts/", RULE | {"scope": "pool", "object_id": "4"})
    assert typed.status_code == 400 and "Select a valid choice" in typed.content.decode()
    assert AlertRule.objects.count() == 0


def test_a_rule_whose_object_was_deleted_says_so(client, planner, places):
    _, cluster, _ = places
    AlertRule.objects.create(
        name="Gone", metric="utilization", scope="cluster", object_id=cluster.pk + 999,
        direction="below", threshold=0.5,
    )  # fmt: skip
    client.force_login(planner)
    html = client.get("/alerts/").content.decode()
    assert f"(a deleted cluster, id {cluster.pk + 999})" in html


def test_editing_a_stored_rule_preselects_its_object(places):
    _, _, pool = places
    rule = AlertRule(name="p", metric="utilization", scope="pool", object_id=pool.pk)
    assert AlertRuleForm(instance=rule)["object_id"].value() == f"pool:{pool.pk}"
