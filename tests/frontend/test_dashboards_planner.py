"""Planner pages through the test client: permissions, the new-plan form, results, charts.

Plans are computed in this process (the task body, no broker), so the pages are checked
against the numbers the plan stored; the what-if panel's inputs are checked against the
training estimate endpoint.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re

import numpy as np
import pytest
from django.urls import reverse

from tests.support.builders import make_user, plan_payload

pytestmark = pytest.mark.django_db

PLANNER_URL = "/planner/"


def logged_in(client, user):
    client.force_login(user)
    return client


def _csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))


def _values(array) -> list[float]:
    """A plotly.js array: a list, or a typed array as {"dtype", "bdata" (base64)}."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def _form_data(**changes) -> dict:
    from inventory.models import AcceleratorModel, Site

    data = {
        "name": "Form plan",
        "params_billions": "175",
        "tokens_billions": "300",
        "flops_per_param_token": "8",
        "precision": "bf16",
        "seq_len": "2048",
        "global_batch_sequences": "1536",
        "zero_stage": "1",
        "parallelism": "choose",
        "accelerators": [str(AcceleratorModel.objects.get(name="A100 SXM4 80GB").pk)],
        "size_mode": "cards",
        "cards": "512, 1024",
        "sites": [str(Site.objects.get(name="Frankfurt DC1 (air)").pk)],
        "history_days": "90",
        "cost_basis": "rental",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


# --- permissions --------------------------------------------------------------------------------


def test_anonymous_users_go_to_the_login_page(client, plan):
    for url in (PLANNER_URL, f"{PLANNER_URL}{plan.pk}/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_viewer_reads_plans_but_has_no_form_and_cannot_act(client, viewer, plan):
    logged_in(client, viewer)
    listing = client.get(PLANNER_URL)
    assert listing.status_code == 200
    assert plan.name in listing.content.decode() and listing.context["form"] is None
    detail = client.get(f"{PLANNER_URL}{plan.pk}/")
    assert detail.status_code == 200
    html = detail.content.decode()
    assert "Recompute</button>" not in html and "Clone</button>" not in html
    assert client.post(PLANNER_URL, _form_data()).status_code == 403
    assert client.post(f"{PLANNER_URL}{plan.pk}/recompute/").status_code == 403
    assert client.post(f"{PLANNER_URL}{plan.pk}/clone/").status_code == 403


def test_another_planner_clones_but_only_the_owner_or_an_admin_recomputes(
    client, plan, owner, fleet_admin, django_capture_on_commit_callbacks
):
    from planner.models import Plan

    other = make_user("other-planner", "planner")
    logged_in(client, other)
    html = client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    assert "Clone</button>" in html and "Recompute</button>" not in html
    assert client.post(f"{PLANNER_URL}{plan.pk}/recompute/").status_code == 403
    with django_capture_on_commit_callbacks(execute=False):
        cloned = client.post(f"{PLANNER_URL}{plan.pk}/clone/")
    clone = Plan.objects.exclude(pk=plan.pk).get()
    assert cloned["Location"] == f"{PLANNER_URL}{clone.pk}/"
    assert clone.owner == other and clone.cloned_from_id == plan.pk

    for user in (owner, fleet_admin):
        logged_in(client, user)
        with django_capture_on_commit_callbacks(execute=False):
            response = client.post(f"{PLANNER_URL}{plan.pk}/recompute/")
        assert response.status_code == 302
        assert Plan.objects.get(pk=plan.pk).status == "queued"


# --- the new-plan form --------------------------------------------------------------------------


def test_the_form_creates_a_plan_with_the_inputs_it_shows(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    from inventory.models import AcceleratorModel, Pool, Site
    from planner.models import Plan

    logged_in(client, planner)
    pool = Pool.objects.get(name="ascend-910b")
    data = _form_data(
        pools=[str(pool.pk)],
        parallelism="fixed",
        tp_degree="8",
        history_days="30",
        colocation_cost="500000",
    )
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(PLANNER_URL, data)
    plan = Plan.objects.get()
    assert response.status_code == 302 and response["Location"] == f"{PLANNER_URL}{plan.pk}/"
    assert len(queued) == 1  # the computation is queued after commit
    assert plan.owner == planner and plan.name == "Form plan"
    assert plan.workload["model_params"] == 175e9 and plan.workload["tokens"] == 300e9
    assert plan.workload["flops_per_param_token"] == 8 and plan.workload["tp_degree"] == 8
    assert "pp_degree" not in plan.workload
    assert plan.options_spec == {
        "accelerators": [AcceleratorModel.objects.get(name="A100 SXM4 80GB").pk],
        "cards": [512, 1024],
        "sites": [Site.objects.get(name="Frankfurt DC1 (air)").pk],
        "pools": [pool.pk],
        "history_days": 30,
        "cost_basis": "rental",
        "site_kind": "production",
    }
    assert plan.levers == [{"name": "colocation", "one_off_cost": 500000.0}]


def test_the_form_takes_the_batch_in_tokens_and_its_growth_cap(client, planner, demo_fleet):
    from planner.models import Plan

    logged_in(client, planner)
    data = _form_data(global_batch_million_tokens="4", max_batch_million_tokens="16")
    assert client.post(PLANNER_URL, data).status_code == 302
    workload = Plan.objects.get().workload
    assert (workload["global_batch_tokens"], workload["max_batch_tokens"]) == (4e6, 16e6)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"tokens_billions": "-3"}, "tokens_billions", "from 1e-09 to 1e+07 billion tokens"),
        ({"params_billions": None}, "params_billions", "required"),
        ({"cards": "512, lots"}, "cards", "“lots” is not a number"),
        ({"cards": ""}, "cards", "at least one value"),
        ({"size_mode": "deadline", "deadline_days": ""}, "deadline_days", "at least one value"),
        ({"accelerators": [], "pools": []}, "accelerators", "card models or existing pools"),
        ({"parallelism": "fixed"}, "tp_degree", "at least one degree"),
        ({"history_days": "-1"}, "history_days", "from 0 to 3650 days"),
        (
            {"global_batch_million_tokens": "8", "max_batch_million_tokens": "4"},
            "max_batch_million_tokens",
            "at least the global batch",
        ),
        ({"global_batch_million_tokens": "1e9"}, "global_batch_million_tokens", "million tokens"),
    ],
)
def test_form_errors_name_the_field(client, planner, demo_fleet, changes, field, message):
    from planner.models import Plan

    logged_in(client, planner)
    response = client.post(PLANNER_URL, _form_data(**changes))
    assert response.status_code == 200 and not Plan.objects.exists()
    html = response.content.decode()
    errors = re.search(rf'id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    assert errors and message in errors.group(1), html[:2000]
    assert f'href="#id_{field}"' in html  # the summary links to the field


def test_errors_from_the_plan_service_land_next_to_their_field(client, planner, demo_fleet):
    """An empty pool passes the form but not create_plan (PlanInputError on options_spec.pools)."""
    from inventory.models import Cluster, Pool
    from planner.models import Plan

    empty = Pool.objects.create(cluster=Cluster.objects.get(name="train-ascend"), name="empty")
    logged_in(client, planner)
    response = client.post(PLANNER_URL, _form_data(pools=[str(empty.pk)]))
    assert not Plan.objects.exists()
    errors = re.search(r'id="id_pools_error"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    assert errors and "no cards: empty" in errors.group(1)


# --- results ------------------------------------------------------------------------------------


def _first_cheapest(plan) -> int:
    """The option the plan page opens on: the cheapest of the first currency."""
    groups = plan.summary["by_currency"]
    assert [g["currency"] for g in groups] == sorted(g["currency"] for g in groups)
    return groups[0]["cheapest"]["option_id"]


def _table_option_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-option-id="(\d+)"', html)]


def test_the_options_table_shows_the_stored_numbers_sorted(client, viewer, plan):
    logged_in(client, viewer)
    rows = plan.results["options"]
    response = client.get(f"{PLANNER_URL}{plan.pk}/")
    html = response.content.decode()
    # Default: by cost rank (within each currency), infeasible options (no rank) last, ties
    # by option id.
    by_cost = sorted(rows, key=lambda r: (r["rank_by_cost"] is None, r["rank_by_cost"] or 0))
    assert _table_option_ids(html) == [r["option_id"] for r in by_cost]
    # EUR and USD options: one cheapest per currency, none overall.
    assert plan.summary["cheapest"] is None
    firsts = [r for r in rows if r["rank_by_cost"] == 1]
    assert sorted(r["currency"] for r in firsts) == ["EUR", "USD"]
    cheapest = next(r for r in firsts if r["option_id"] == _first_cheapest(plan))
    assert cheapest["currency"] == "EUR"
    assert _table_option_ids(html)[: len(firsts)] == [r["option_id"] for r in firsts]
    row_html = re.search(rf'<tr data-option-id="{cheapest["option_id"]}".*?</tr>', html, re.S)
    cells = row_html.group(0)
    assert f"{cheapest['days']:.1f}" in re.search(r'data-col="days">([^<]*)<', cells).group(1)
    cost_cell = re.search(r'data-col="total_cost">([^<]*)<', cells).group(1)
    assert int(cost_cell.replace(",", "").strip()) == round(cheapest["total_cost"])
    for infeasible in (r for r in rows if not r["feasible"]):
        assert infeasible["reason"] in html  # "does not fit: why"

    by_days = client.get(f"{PLANNER_URL}{plan.pk}/", {"sort": "days", "dir": "desc"})
    expected = sorted(rows, key=lambda r: (r["days"] is None, -(r["days"] or 0), r["option_id"]))
    assert _table_option_ids(by_days.content.decode()) == [r["option_id"] for r in expected]


def test_the_scatter_data_is_the_stored_feasible_options_and_the_front_is_pareto(
    client, viewer, plan
):
    logged_in(client, viewer)
    response = client.get(f"{PLANNER_URL}{plan.pk}/")
    chart = response.context["scatter_chart"]
    feasible = [r for r in plan.results["options"] if r["feasible"]]
    assert chart["rows"] == len(feasible) == plan.summary["feasible"]
    assert chart["downloads"]["csv"] == f"/charts/planner-days-vs-cost.csv?plan={plan.pk}"
    data = _csv_rows(client.get(chart["downloads"]["csv"]))
    stored = {r["option_id"]: r for r in feasible}
    assert {int(r["option_id"]) for r in data} == set(stored)
    for row in data:
        expected = stored[int(row["option_id"])]
        assert float(row["days"]) == pytest.approx(expected["days"])
        assert float(row["total_cost"]) == pytest.approx(expected["total_cost"])
    # The front, recomputed here within each currency (EUR and USD costs are never compared):
    # no other feasible option of that currency is at least as fast and as cheap and strictly
    # better in one.
    points = [
        (float(r["days"]), float(r["total_cost"]), int(r["option_id"]), r["currency"]) for r in data
    ]
    front = {
        i
        for d, c, i, m in points
        if not any(
            m2 == m and d2 <= d and c2 <= c and (d2 < d or c2 < c) for d2, c2, _, m2 in points
        )
    }
    assert {int(r["option_id"]) for r in data if r["on_pareto_front"] == "true"} == front
    assert front == set(plan.results["pareto_front"])
    # One panel per currency (sorted), each drawing its front as a line through exactly those
    # points, by days.
    figure = json.loads(
        re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{", chart["html"], re.S).group(
            1
        )
    )
    lines = [trace for trace in figure if trace["name"] == "Pareto front"]
    currencies = sorted({m for *_, m in points})
    assert currencies == ["EUR", "USD"] and len(lines) == len(currencies)
    for line, currency in zip(lines, currencies, strict=True):
        front_days = sorted(d for d, _, i, m in points if i in front and m == currency)
        assert line["mode"] == "lines+markers" and _values(line["x"]) == pytest.approx(front_days)


def test_the_tornado_is_the_stored_sensitivity_of_the_chosen_option(client, viewer, plan):
    logged_in(client, viewer)
    cheapest = _first_cheapest(plan)
    response = client.get(f"{PLANNER_URL}{plan.pk}/")
    chart = response.context["tornado_chart"]
    assert chart["downloads"]["csv"] == (
        f"/charts/planner-sensitivity.csv?plan={plan.pk}&option={cheapest}"
    )
    data = _csv_rows(client.get(chart["downloads"]["csv"]))
    stored = [r for r in plan.results["sensitivity"] if r["option_id"] == cheapest]
    assert [r["factor"] for r in data] == [r["factor"] for r in stored]
    assert [r["factor"] for r in data][-1] == "combined"
    for row, expected in zip(data, stored, strict=True):
        assert float(row["days_saved"]) == pytest.approx(expected["days_saved"])
        assert float(row["cost_saved"]) == pytest.approx(expected["cost_saved"])
    energy = next(r for r in data if r["factor"] == "energy")
    assert float(energy["days_saved"]) == 0  # PUE changes money, never days (§8)
    # Levers of the demo payload are listed for the chosen option.
    levers = {r["lever"] for r in response.context["lever_rows"]}
    assert levers == {"liquid_cooling", "colocation"}
    # Another option through ?option=, and an unknown one is a 404.
    other = plan.results["sensitivity_option_ids"][-1]
    picked = client.get(f"{PLANNER_URL}{plan.pk}/", {"option": other})
    assert picked.context["chosen"]["option_id"] == other
    assert client.get(f"{PLANNER_URL}{plan.pk}/", {"option": 99999}).status_code == 404


def test_the_what_if_starts_at_the_option_and_the_estimate_reproduces_it(client, viewer, plan):
    """The panel's inputs at the stored factors give the stored days and cost back."""
    logged_in(client, viewer)
    response = client.get(f"{PLANNER_URL}{plan.pk}/")
    chosen = response.context["chosen"]
    whatif = response.context["whatif"]
    html = response.content.decode()
    assert 'id="whatif-data"' in html and 'aria-live="polite"' in html
    sliders = {s["name"]: s for s in whatif["sliders"]}
    assert set(sliders) == {"pue", "mfu", "scaling", "effective_time", "utilization"}
    for name in ("mfu", "scaling", "effective_time", "utilization"):
        assert sliders[name]["value"] == pytest.approx(chosen[name], abs=0.005)
    body = {
        **whatif["base"],
        "cards": whatif["cards"],
        **{name: chosen[name] for name in sliders},  # unrounded: the exact stored factors
    }
    estimate = client.post(
        reverse("estimate-training"), data=json.dumps(body), content_type="application/json"
    )
    assert estimate.status_code == 200, estimate.content
    result = estimate.json()
    assert result["days"] == pytest.approx(chosen["days"], rel=1e-9)
    assert result["card_hours"] == pytest.approx(chosen["card_hours"], rel=1e-9)
    assert result["cost"]["compute"] == pytest.approx(chosen["compute_cost"], rel=1e-9)
    assert result["cost"]["total"] == pytest.approx(chosen["total_cost"], rel=0.02)


def test_a_plan_in_flight_shows_the_progress_bar_polling_the_api(
    client, owner, demo_fleet, django_capture_on_commit_callbacks
):
    from planner import plans

    with django_capture_on_commit_callbacks(execute=False):
        queued = plans.create_plan(owner=owner, **plan_payload())
    logged_in(client, owner)
    html = client.get(f"{PLANNER_URL}{queued.pk}/").content.decode()
    assert f'data-poll-url="/api/v1/plans/{queued.pk}/"' in html
    assert "frontend/progress.js" in html and "plotly.min.js" not in html


def test_stale_plans_are_flagged_and_filtered(client, viewer, plan):
    from planner.models import Plan

    logged_in(client, viewer)
    assert "stale</span>" not in client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    Plan.objects.filter(pk=plan.pk).update(stale=True)
    assert "stale</span>" in client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    assert plan.name in client.get(PLANNER_URL, {"stale": "1"}).content.decode()
    Plan.objects.filter(pk=plan.pk).update(stale=False)
    assert plan.name not in client.get(PLANNER_URL, {"stale": "1"}).content.decode()


# --- query counts -------------------------------------------------------------------------------


def test_pages_run_a_constant_number_of_queries(
    client, planner, plan, django_assert_max_num_queries, django_capture_on_commit_callbacks
):
    from planner import plans

    with django_capture_on_commit_callbacks(execute=False):
        for _ in range(5):
            plans.clone_plan(plan, owner=planner)
    logged_in(client, planner)
    # session, user, role groups; plans page + count; the form's catalog, sites and pools.
    with django_assert_max_num_queries(10):
        assert client.get(PLANNER_URL).status_code == 200
    with django_assert_max_num_queries(6):
        assert client.get(f"{PLANNER_URL}{plan.pk}/").status_code == 200
    with django_assert_max_num_queries(5):
        assert client.get(f"/charts/planner-days-vs-cost.csv?plan={plan.pk}").status_code == 200
