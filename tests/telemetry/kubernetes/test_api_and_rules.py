"""Kubernetes sources over the API (administrators only, hostile input a 400 naming the field),
and the pure parts: the fetch window, resource names and MIG shares, running segments."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from telemetry.kubernetes.queries import allocation_query, card_fraction, mig_profile
from telemetry.kubernetes.segments import Day, Samples, day_segments
from telemetry.kubernetes.services import DAY_S, MAX_DAYS_PER_FETCH, day_chunks, fetch_window

UTC = dt.UTC
NOW = dt.datetime(2026, 3, 2, 12, 7, 30, tzinfo=UTC)
MIDNIGHT_S = int(dt.datetime(2026, 3, 2, tzinfo=UTC).timestamp())
URL = "/api/v1/kubernetes-sources/"


def test_the_window_starts_at_a_utc_midnight_and_ends_on_the_last_whole_step():
    # First fetch: the day before, from its midnight; the end is 12:05 (300 s steps).
    assert fetch_window(None, NOW, 3600, 300) == (MIDNIGHT_S - DAY_S, MIDNIGHT_S + 12 * 3600 + 300)
    # Later: the midnight before cursor − overlap (00:30 − 1 h is the day before).
    cursor = dt.datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
    assert fetch_window(cursor, NOW, 3600, 300)[0] == MIDNIGHT_S - DAY_S
    assert fetch_window(cursor, NOW, 600, 300)[0] == MIDNIGHT_S
    # A cursor on a midnight re-reads the day before (a record open at that midnight).
    assert fetch_window(cursor.replace(minute=0), NOW, 0, 300)[0] == MIDNIGHT_S - DAY_S
    # A long gap is read in parts of at most 31 days.
    old = dt.datetime(2025, 1, 1, tzinfo=UTC)
    start_s, end_s = fetch_window(old, NOW, 0, 300)
    assert end_s - start_s == MAX_DAYS_PER_FETCH * DAY_S
    assert day_chunks(0, DAY_S + 600) == [(0, DAY_S), (DAY_S, DAY_S + 600)]


def test_gpu_resources_and_mig_slices_count_as_their_share_of_a_card():
    assert card_fraction("nvidia_com_gpu") == card_fraction("amd_com_gpu") == 1.0
    assert card_fraction("habana_ai_gaudi") == 1.0
    assert card_fraction("nvidia_com_mig_1g_10gb") == pytest.approx(1 / 7)
    assert card_fraction("nvidia_com_mig_3g_40gb") == pytest.approx(3 / 7)
    assert card_fraction("nvidia_com_mig_7g_80gb") == 1.0
    assert card_fraction("cpu") is None and card_fraction("nvidia_com_mig_9g_1gb") is None
    assert mig_profile("nvidia_com_mig_2g_20gb") == "2g.20gb" and mig_profile("amd_com_gpu") == ""
    query = allocation_query('cluster="k1"', 30)
    assert 'kube_pod_status_phase{phase="Running", cluster="k1"}[30s]' in query
    assert "group_left(node)" in query


def test_a_pod_running_at_the_window_end_is_an_open_record_and_a_gap_splits_it():
    step = 300
    ks = [1, 2, 3, 5, 6]  # step 4 missing
    allocation = Samples(
        pd.DataFrame([{"namespace": "ns", "pod": "p", "uid": "u1", "node": "n1",
                       "resource": "nvidia_com_gpu"}]),
        np.zeros(len(ks), dtype=np.int64),
        np.asarray([MIDNIGHT_S + step * k for k in ks], dtype=np.int64),
        np.full(len(ks), 2.0),
    )  # fmt: skip
    day = Day(MIDNIGHT_S, MIDNIGHT_S + 6 * step, step)
    found = day_segments(
        allocation, day, day.end_s, lambda n, v: (1, 10, 100), lambda ns, v: ("t", True)
    )
    rows = found.rows.sort_values("start").reset_index(drop=True)
    assert list(rows["card_hours"]) == pytest.approx([2 * 3 * step / 3600, 2 * 2 * step / 3600])
    assert list(rows["state"]) == ["completed", "running"]
    assert pd.isna(rows.loc[1, "end"])  # open, like a running Slurm job
    assert rows.loc[0, "start"] == pd.Timestamp(MIDNIGHT_S, unit="s", tz="UTC")
    assert rows.loc[0, "end"] == pd.Timestamp(MIDNIGHT_S + 3 * step, unit="s", tz="UTC")
    assert list(rows["pool_id"]) == [10, 10] and list(rows["accelerator_id"]) == [100, 100]
    assert found.unmapped_nodes == set() and found.unmapped_namespaces == set()


@pytest.fixture
def loopback(settings):
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True


def test_sources_are_for_admins_and_the_token_is_never_shown(
    alpha, loopback, client_for, viewer, planner, fleet_admin
):
    from telemetry.kubernetes.models import KubernetesSource

    assert client_for(viewer).get(URL).status_code == 403
    assert client_for(planner).get(URL).status_code == 403
    assert client_for(planner).post(URL, {"cluster": alpha.pk}, format="json").status_code == 403
    admin = client_for(fleet_admin)
    body = {"cluster": alpha.pk, "url": "http://127.0.0.1:9090", "token": "s3cr3t-token",
            "node_label": "label_nodepool", "default_team": "platform"}  # fmt: skip
    created = admin.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    shown = created.json()
    assert shown["has_token"] is True and "s3cr3t-token" not in created.content.decode()
    assert (shown["step_s"], shown["status"], shown["unmapped_nodes"]) == (300, "queued", [])
    assert KubernetesSource.objects.get(pk=shown["id"]).token() == "s3cr3t-token"
    listed = admin.get(URL).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["id"] for row in rows] == [shown["id"]]
    assert client_for(viewer).get(f"{URL}{shown['id']}/").status_code == 403


def test_hostile_settings_and_rules_are_a_400_naming_the_field(alpha, client_for, fleet_admin):
    from inventory.models import NodeGroup
    from telemetry.kubernetes.models import KubernetesSource

    admin = client_for(fleet_admin)
    base = {"cluster": alpha.pk, "url": "http://127.0.0.1:9090"}
    cases = {
        "url": {"url": "file:///etc/passwd"},
        "token": {"token": "abc\r\nX-Other: 1"},
        "label_selector": {"label_selector": 'x="1"} or vector(1) #'},
        "node_label": {"node_label": "nodepool) or up"},
        "team_label": {"team_label": "label_team,namespace"},
        "default_team": {"default_team": "a\nb"},
        "step_s": {"step_s": 1},
        "scrape_interval_s": {"scrape_interval_s": 0},
    }
    for field, change in cases.items():
        answer = admin.post(URL, {**base, **change}, format="json")
        assert answer.status_code == 400 and list(answer.json()) == [field], (field, answer.content)
    credentials = admin.post(URL, {**base, "url": "http://root:pw@127.0.0.1:9090"}, format="json")
    assert credentials.status_code == 400 and "url" in credentials.json()
    source = KubernetesSource.objects.create(cluster=alpha, url=base["url"])
    group = NodeGroup.objects.filter(pool__cluster=alpha).first()
    rules = "/api/v1/kubernetes-node-rules/"
    bad = admin.post(rules, {"source": source.pk, "pattern": "gpu-[a*", "node_group": group.pk})
    assert bad.status_code == 400 and "pattern" in bad.json()
    bad = admin.post(rules, {"source": source.pk, "pattern": 'a"}', "node_group": group.pk})
    assert bad.status_code == 400 and "pattern" in bad.json()
    good = admin.post(rules, {"source": source.pk, "pattern": "gpu-*", "node_group": group.pk})
    assert good.status_code == 201, good.content
    teams = "/api/v1/kubernetes-team-rules/"
    bad = admin.post(teams, {"source": source.pk, "pattern": "ml-*", "team": "x\ty"})
    assert bad.status_code == 400 and "team" in bad.json()


def test_a_cluster_with_slurm_usage_refuses_a_kubernetes_source(
    team_usage, alpha, client_for, fleet_admin
):
    cluster = alpha
    answer = client_for(fleet_admin).post(
        URL, {"cluster": cluster.pk, "url": "http://127.0.0.1:9090"}, format="json"
    )
    assert answer.status_code == 400, answer.content
    assert "one source kind" in answer.json()["cluster"][0]


def test_the_page_shows_the_last_success_what_was_mapped_and_what_was_not(
    alpha, client_for, viewer, planner, fleet_admin
):
    from telemetry.kubernetes.models import KubernetesSource

    source = KubernetesSource.objects.create(cluster=alpha, url="http://127.0.0.1:9090")
    KubernetesSource.objects.filter(pk=source.pk).update(
        status="failed", last_success_at=NOW, consecutive_failures=2,
        last_failure_at=NOW + dt.timedelta(minutes=15),
        last_error="Prometheus at http://127.0.0.1:9999 is unreachable (could not connect).",
        card_hours=41.5, records_written=6, window_start=NOW, window_end=NOW,
        mapped=[{"pool": "h100", "team": "research", "card_model": "H100 SXM5 80GB",
                 "card_hours": 39.5}],
        unmapped_nodes=["gpu-x01"], unmapped_namespaces=["other", "serving"],
    )  # fmt: skip
    page = "/usage/kubernetes-sources/"
    assert client_for(viewer).get(page).status_code == 403
    assert client_for(planner).get(page).status_code == 403
    answer = client_for(fleet_admin).get(page)
    assert answer.status_code == 200
    text = answer.content.decode()
    assert "2026-03-02 12:07:30" in text and "2 in a row" in text and "could not connect" in text
    assert "41.5 in 6 records" in text and "39.50" in text and "research" in text
    assert "gpu-x01" in text and "other, serving" in text
