"""Builders of test data: users, the 16-card "alpha" cluster and its pools, usage imports,
the reports' two-cluster fleet, report schedules, plan payloads and exchange rates.

Each builder writes through the models or the services, as the app does; Django is imported
inside the functions (importing this module needs no Django setup).
"""

from __future__ import annotations

import datetime as dt
import io

from reports.periods import Period  # pure Python, as the engine

# -- users -------------------------------------------------------------------------------------


def make_user(username: str, role: str | None = None, *, all_teams: bool = True, **extra):
    """A user of the role; ``all_teams``: the explicit grant to see every team (a team
    membership added later replaces it, as in the admin). The password is "pw-<username>"."""
    from django.contrib.auth.models import Group, User

    from access.models import FleetWideAccess

    user = User.objects.create_user(username=username, password="pw-" + username, **extra)
    if role:
        user.groups.add(Group.objects.get(name=role))
    if all_teams:
        FleetWideAccess.objects.create(user=user)
    return user


def mailbox(address: str, *teams: str):
    """The account of a mailing-list address (a viewer of ``teams``, or of every team): a
    report or alert goes only to an address an account with that visibility holds."""
    from django.contrib.auth.models import User

    existing = User.objects.filter(email__iexact=address).first()
    if existing is not None:
        return existing
    name = "mailbox-" + address.split("@")[0]
    return (
        team_viewer(name, *teams, email=address)
        if teams
        else make_user(name, "viewer", email=address)
    )


def team_viewer(username: str, *teams: str, role: str = "viewer", **extra):
    """A user of the role who sees only the given teams."""
    from access.models import TeamMembership

    user = make_user(username, role, **extra)
    for team in teams:
        TeamMembership.objects.create(user=user, team=team)
    return user


# -- inventory ---------------------------------------------------------------------------------


def alpha_cluster():
    """The 16-card cluster of tests/support/alpha_usage.py: site "Test DC" (air, PUE 1.25,
    0.20 USD/kWh, 400 gCO₂/kWh), cluster "alpha" (commissioned 2024-01-01, 30,000 USD per card
    over 5 years), one pool "h100" of 2 nodes × 8 H100 SXM5 80GB (700 W TDP) = 16 cards."""
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(
        name="Test DC",
        cooling_type="air",
        pue=1.25,
        tariff_per_kwh=0.20,
        grid_carbon_g_per_kwh=400.0,
        currency="USD",
    )
    cluster = Cluster.objects.create(
        site=site,
        name="alpha",
        commissioned_on=dt.date(2024, 1, 1),
        capital_cost_per_card=30_000.0,
        amortization_years=5.0,
    )
    add_h100_pool(cluster, "h100", nodes=2, planned_utilization=0.7)
    return cluster


def add_h100_pool(cluster, name: str, nodes: int = 1, **pool_fields):
    """A pool of ``nodes`` 8-card H100 SXM5 80GB nodes in ``cluster`` (catalog loaded)."""
    from inventory.models import AcceleratorModel, NodeGroup, Pool

    pool = Pool.objects.create(cluster=cluster, name=name, **pool_fields)
    NodeGroup.objects.create(
        pool=pool,
        name=f"{name}-nodes",
        accelerator=AcceleratorModel.objects.get(name="H100 SXM5 80GB"),
        node_count=nodes,
        cards_per_node=8,
    )
    return pool


def hand_card():
    """A 400 W card of our own (the catalog's figures may change; the hand sums may not)."""
    from inventory.models import AcceleratorModel

    return AcceleratorModel.objects.create(
        vendor="Hand",
        name="Hand 400W",
        dense_bf16_tflops=300.0,
        memory_gb=80.0,
        memory_bandwidth_tbs=2.0,
        tdp_w=400.0,
    )


USD_TO_EUR = 0.92  # an administrator's dated rate, entered by the test (no market quote)


def usd_to_eur_rate():
    """The dated rate that prices the catalog's USD cards at the Frankfurt (EUR) demo site."""
    from inventory.currency import ExchangeRate

    return ExchangeRate.objects.create(
        from_currency="USD", to_currency="EUR", rate=USD_TO_EUR, valid_on=dt.date(2020, 1, 1)
    )


# -- usage -------------------------------------------------------------------------------------


def import_usage_text(cluster, text, kind: str = "sacct", **options):
    """Import text (or a binary file) into a cluster through the service, synchronously;
    returns (job, counts)."""
    from accounting import services

    job = services.create_import_job(
        kind=kind, cluster=cluster, source_name=f"test.{kind}", queue=False, **options
    )
    source = io.BytesIO(text.encode()) if isinstance(text, str) else text
    counts = services.import_file(job, source)
    return job, counts


def serving_load(pool):
    """A month of measured serving load (July 2024) on an inference pool."""
    from accounting.models import ServingLoad

    return ServingLoad.objects.create(
        pool=pool,
        period_start=dt.datetime(2024, 7, 1, tzinfo=dt.UTC),
        period_end=dt.datetime(2024, 8, 1, tzinfo=dt.UTC),
        served_tokens_per_s=2000.0,
        model_params=8e9,
        weight_precision="bf16",
        kv_precision="bf16",
        input_tokens=1000,
        output_tokens=300,
    )


# -- the reports' fleet ------------------------------------------------------------------------

FEB = dt.datetime(2024, 2, 1, tzinfo=dt.UTC)
MAR = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
APR = dt.datetime(2024, 4, 1, tzinfo=dt.UTC)


def usage_rows(cluster, pool, accelerator, team, cards, hours, start_day, days, prefix, state):
    """Unsaved UsageRecords: one job a day for ``days`` days from ``start_day`` 01:00."""
    from accounting.models import UsageRecord

    rows = []
    for offset in range(days):
        start = start_day + dt.timedelta(days=offset, hours=1)
        end = start + dt.timedelta(hours=hours)
        rows.append(
            UsageRecord(
                cluster=cluster,
                pool=pool,
                record_key=f"{prefix}-{offset}",
                job_id=f"{prefix}-{offset}",
                account=team,
                accelerator=accelerator,
                cards=cards,
                start=start,
                end=end,
                duration_h=hours,
                card_hours=cards * hours,
                state=state,
            )
        )
    return rows


def report_fleet() -> dict:
    """A small fleet with two months of usage (February and March 2024).

    Site "Report DC" (air, PUE 1.3, 0.10 USD/kWh); cluster "alpha": one pool "h100" of 2 × 8
    H100 (16 cards); cluster "beta": one pool "a100" of 1 × 8 A100 (8 cards). Both commissioned
    2024-01-01. Usage, every day of February and March:

        alpha  team-a  12 cards × 20 h (March: 8 cards × 16 h); team-c one node_fail job, 2 × 2 h
        beta   team-b  6 cards × 20 h (both months)

    so alpha is busier in February than in March, and beta is steady. Returns
    {"site": Site, "alpha": Cluster, "beta": Cluster, "pools": {"alpha": Pool, "beta": Pool}}.
    """
    from accounting.models import UsageRecord
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    site = Site.objects.create(
        name="Report DC", cooling_type="air", pue=1.3, tariff_per_kwh=0.10, currency="USD"
    )
    clusters = {}
    pools = {}
    for name, pool_name, accel, nodes in [("alpha", "h100", h100, 2), ("beta", "a100", a100, 1)]:
        cluster = Cluster.objects.create(
            site=site,
            name=name,
            commissioned_on=dt.date(2024, 1, 1),
            capital_cost_per_card=30_000.0,
            amortization_years=5.0,
        )
        pool = Pool.objects.create(cluster=cluster, name=pool_name, planned_utilization=0.7)
        NodeGroup.objects.create(
            pool=pool,
            name=f"{pool_name}-nodes",
            accelerator=accel,
            node_count=nodes,
            cards_per_node=8,
        )
        clusters[name], pools[name] = cluster, pool
    rows = []
    alpha, beta = clusters["alpha"], clusters["beta"]
    rows += usage_rows(alpha, pools["alpha"], h100, "team-a", 12, 20, FEB, 29, "a-feb", "completed")
    rows += usage_rows(alpha, pools["alpha"], h100, "team-a", 8, 16, MAR, 31, "a-mar", "completed")
    rows += usage_rows(alpha, pools["alpha"], h100, "team-c", 2, 2, FEB, 60, "a-fail", "node_fail")
    rows += usage_rows(beta, pools["beta"], a100, "team-b", 6, 20, FEB, 60, "b", "completed")
    UsageRecord.objects.bulk_create(rows)
    return {"site": site, **clusters, "pools": pools}


MARCH = Period(MAR, APR)  # the reports' period: March 2024


def fleet_monthly_schedule(**extra):
    """A saved monthly efficiency review of the fleet, e-mailed with every format."""
    return _schedule(
        {
            "name": "Fleet monthly",
            "frequency": "monthly",
            "timezone": "UTC",
            "template": "efficiency_review",
            "recipient_addresses": ["finance@example.com"],
            "formats": ["html_email", "xlsx", "csv", "print_html"],
        },
        extra,
    )


def finance_monthly_schedule(**extra):
    """A saved monthly cost chargeback, e-mailed with every format."""
    return _schedule(
        {
            "name": "Finance monthly",
            "frequency": "monthly",
            "timezone": "UTC",
            "template": "cost_chargeback",
            "recipient_addresses": ["finance@example.com"],
            "formats": ["html_email", "xlsx", "csv", "print_html"],
        },
        extra,
    )


def _schedule(values: dict, extra: dict):
    from reports import services
    from reports.models import ReportSchedule

    fields = {**values, **extra}
    for address in fields.get("recipient_addresses", []):
        mailbox(address)  # the list's account sees every team: it may get every report
    return services.save_schedule(ReportSchedule(**fields))


# The report-schedule API: its URL and a valid body.
SCHEDULES = "/api/v1/report-schedules/"
VALID_SCHEDULE = {
    "name": "Cluster alpha weekly",
    "scope": "fleet",
    "template": "utilization",
    "frequency": "weekly",
    "send_time": "08:00",
    "timezone": "America/New_York",
    # An address no account holds would be refused (access.recipients): none here.
    "recipient_addresses": [],
    "formats": ["html_email", "xlsx"],
}


# -- plans and analyses ------------------------------------------------------------------------

PLANS = "/api/v1/plans/"


def plan_payload(**options_spec) -> dict:
    """GPT-3 175B (Baidu 2023) on new A100/H100 at two sites, plus the demo's mixed pool
    (needs the demo fleet)."""
    from inventory.models import Pool, Site

    site = Site.objects.get(name="Frankfurt DC1 (air)")
    pool = Pool.objects.get(name="mixed-a100-h100")
    spec = {
        "accelerators": ["A100 SXM4 80GB", "H100 SXM5 80GB"],
        "cards": [512, 1024, 2048],
        "sites": [
            site.pk,
            {"name": "Cloud EU", "pue": 1.3, "tariff_per_kwh": 0.2, "grid_carbon_g_per_kwh": 300},
        ],
        "pools": [pool.pk],
    }
    spec.update(options_spec)
    return {
        "name": "GPT-3 175B",
        "workload": {"model_params": 175e9, "tokens": 300e9, "flops_per_param_token": 8},
        "options_spec": {k: v for k, v in spec.items() if v is not None},
        "levers": [
            {"name": "liquid_cooling", "one_off_cost": 2_000_000},
            {"name": "colocation", "one_off_cost": 500_000},
        ],
    }


ALERTS_NOW = dt.datetime(2025, 3, 3, tzinfo=dt.UTC)  # "now" of the alerts' tests


def stored_fleet_analysis(mfu: float, now: dt.datetime = ALERTS_NOW):
    """A succeeded fleet analysis of the 30 days before ``now`` whose summary has this MFU
    (written directly, not computed: for what reads the stored figure, such as alerts)."""
    from django.utils import timezone

    from planner.models import Analysis

    return Analysis.objects.create(
        scope="fleet",
        period_start=now - dt.timedelta(days=30),
        period_end=now,
        status="succeeded",
        results={"summary": {"mfu": mfu, "aggregate_of_products": mfu / 3}},
        succeeded_at=timezone.now(),
    )
