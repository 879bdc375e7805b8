"""A manager's first day (issue 31), in a real Chromium on a fresh demo as `make run` loads it
(load_demo_fleet, load_demo_usage, load_demo_results): the first page shows a computed fleet
analysis; they add a EUR site, a cluster there and a mixed pool, import a Slurm export into
it, run the pool's analysis from the page that says it is missing, plan training at the EUR
site and a serving fleet, export the costs and share them, and schedule a report and an alert.

The whole walk fails on any response of 400 or more (a page, a chart's data, a poll), on a
"—" without its reason beside it (tests/support/page_checks.py), and on a money table that
does not add up per currency, read from the page's own figures: the Costs chargeback (rows
and totals, the charged row) and each factor table against its money tiles. The work a
worker would do (the import, the pool analysis, the plan) runs in this process, as
tests/support/inline.py does, while the page waits for it.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import time
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command

from tests.support.browser import log_in
from tests.support.builders import make_user
from tests.support.inline import run_analysis_inline, run_plan_inline
from tests.support.page_checks import CLIPPED_VALUES_JS, REASONLESS_DASHES_JS, number

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SITE = "Lyon DC4"
CLUSTER = "lyon-train"
POOL = "lyon-mixed"
SLOW_PAGE_MS = 30_000  # a first (uncached) dashboard on a loaded two-core machine
WALK_BUDGET_S = 90

MONEY = re.compile(r"(-?[\d,]+(?:\.\d+)?)\s+([A-Z]{3})\b")
# Every cell of the chargeback table, by section: header labels, body rows, total rows.
CHARGEBACK_JS = """() => {
  const table = document.querySelector('#chargeback table');
  const cells = tr => [...tr.cells].map(c => c.innerText.trim());
  return {
    header: [...table.tHead.rows[0].cells].map(c => c.innerText.replace(/[▲▼]/g, '').trim()),
    rows: [...table.tBodies[0].rows].map(cells),
    totals: [...table.tFoot.querySelectorAll('tr.chargeback-total')].map(cells),
    charged: [...table.tFoot.querySelectorAll('tr.chargeback-charged')].map(cells),
  };
}"""
# The "Money lost this period" tile's lines and the factor table's money cells, as printed.
FACTOR_MONEY_JS = """() => {
  const term = [...document.querySelectorAll('.stats dt')]
    .find(dt => dt.textContent.trim() === 'Money lost this period');
  const table = document.querySelector('table.factor-table');
  return {
    tile: term ? [...term.nextElementSibling.querySelectorAll('.money-line')]
      .map(line => line.innerText) : [],
    steps: table ? [...table.tBodies[0].rows].filter(tr => !tr.classList.contains('factor-total'))
      .map(tr => tr.cells[tr.cells.length - 1].innerText) : [],
  };
}"""


def sacct_export(day: dt.date) -> str:
    """One day of the new cluster in `sacct --parsable2` (three GPU jobs on both card types,
    a job step and a CPU job that the import skips)."""
    a100 = "billing=64,cpu=64,gres/gpu:a100=8,gres/gpu=8,mem=900G,node=1"
    h100 = "billing=64,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=900G,node=1"
    d = day.isoformat()
    lines = [
        "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
        "AllocTRES|NodeList|TRESUsageInAve",
        f"501|501|{CLUSTER}|train|research|ann|{d}T07:50:00|{d}T08:00:00|{d}T20:00:00|"
        f"12:00:00|COMPLETED|1|{a100}|lyon001|",
        f"501.0|501.0|{CLUSTER}||research||{d}T08:00:05|{d}T08:00:05|{d}T20:00:00|"
        f"11:59:55|COMPLETED|1|{a100}|lyon001|cpu=10:00:00,gres/gpuutil=600,mem=200G",
        f"502|502|{CLUSTER}|train|vision|vic|{d}T00:00:00|{d}T00:00:00|{d}T06:00:00|"
        f"06:00:00|COMPLETED|1|{h100}|lyon005|",
        f"503|503|{CLUSTER}|train|vision|vic|{d}T09:00:00|{d}T10:00:00|{d}T14:00:00|"
        f"04:00:00|NODE_FAIL|1|{h100}|lyon006|",
        f"504|504|{CLUSTER}|cpu|vision|vic|{d}T09:00:00|{d}T10:00:00|{d}T11:00:00|"
        "01:00:00|COMPLETED|1|billing=4,cpu=4,mem=16G,node=1|cpu001|",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def fresh_demo(transactional_db):
    """What `make run` loads (its own commands, timed), and the manager who logs in. One walk
    per module: the database of a transactional test is emptied after it."""
    from access.roles import ADMIN

    took_s = {}
    for command in ("load_demo_fleet", "load_demo_usage", "load_demo_results"):
        began = time.monotonic()
        call_command(command, stdout=io.StringIO())
        took_s[command] = time.monotonic() - began
    assert sum(took_s.values()) < 60, took_s
    return make_user("manager", ADMIN, email="manager@example.com")


class Walk:
    """The manager's page, with every response's status and every page's reasonless dashes
    collected as it goes."""

    def __init__(self, page) -> None:
        self.page = page
        self.failed: list[str] = []
        self.problems: list[str] = []
        page.context.on("response", self._record)

    def _record(self, response) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.request.method} {response.url}")

    def look(self, name: str) -> str:
        """The page as it stands: loaded, scanned for dashes; returns its main text."""
        self.page.wait_for_load_state("networkidle")
        for dash in self.page.evaluate(REASONLESS_DASHES_JS):
            self.problems.append(f"{name} ({self.page.url}): a “—” with no reason: {dash}")
        return self.page.inner_text("main")

    def open(self, path: str, name: str) -> str:
        response = self.page.goto(path)
        assert response is not None and response.status < 400, (name, path, response)
        return self.look(name)

    def save(self, button: str, url: str, name: str) -> str:
        """Submit the form with `button`, land on `url` (a regex), look at the page."""
        self.page.get_by_role("button", name=button, exact=True).click()
        self.page.wait_for_url(re.compile(url))
        return self.look(name)


def money_by_currency(texts: list[str]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for text in texts:
        for value, currency in MONEY.findall(text):
            sums[currency] += float(value.replace(",", ""))
    return dict(sums)


def factor_money_problems(name: str, page) -> list[str]:
    """The factors' money lost, summed per currency from the table, is the tile's figure
    (each printed to the unit: a sum of five may differ by the rounding of each)."""
    shown = page.evaluate(FACTOR_MONEY_JS)
    if not shown["tile"] or not shown["steps"]:
        return [f"{name}: no money tile or factor table to compare"]
    tile, steps = money_by_currency(shown["tile"]), money_by_currency(shown["steps"])
    rounding = 0.5 * (len(shown["steps"]) + 1)
    if tile.keys() != steps.keys() or any(abs(tile[c] - steps[c]) > rounding for c in tile):
        return [f"{name}: the factors' money lost {steps} is not the tile's {tile}"]
    return []


PARTS = ("Used cost", "Idle cost share", "No usage records (not charged)")


def parts_problem(label: str, figures: dict[str, float]) -> list[str]:
    """Used cost + idle share + no usage records = the row's total (each printed to the
    unit, so the three may miss it by 1.5)."""
    parts = sum(figures[column] for column in PARTS)
    if abs(parts - figures["Total"]) > 1.5:
        return [f"chargeback {label}: {' + '.join(PARTS)} = {parts:,.0f}, not the Total"]
    return []


def chargeback_problems(table: dict) -> list[str]:
    """Per currency: each row's and each Total row's parts sum to its total; the rows sum to
    the Total row column by column; the charged row is the total less the "not charged"."""
    header = table["header"]
    columns = [c for c in header[1:] if c != "Currency"]
    read = [dict(zip(header, cells, strict=True)) for cells in table["rows"]]
    totals = {cells[-1]: dict(zip(header, cells, strict=True)) for cells in table["totals"]}
    problems = []
    by_currency: dict[str, list[dict[str, float]]] = defaultdict(list)
    not_charged: dict[str, float] = defaultdict(float)
    for row in read:
        figures = {c: number(row[c]) for c in columns}
        by_currency[row["Currency"]].append(figures)
        problems += parts_problem(f"row {row['Team']} ({row['Currency']})", figures)
        if "not charged" in row["Team"]:
            not_charged[row["Currency"]] += figures["Total"]
    if totals.keys() != by_currency.keys():
        problems.append(f"total rows for {sorted(totals)}, rows in {sorted(by_currency)}")
    for currency, total in totals.items():
        figures = {c: number(total[c]) for c in columns}
        problems += parts_problem(f"Total ({currency})", figures)
        rows = by_currency.get(currency, [])
        for column in columns:
            summed = sum(r[column] for r in rows)
            step = 0.05 if column.startswith("Share") else 0.5
            if abs(summed - figures[column]) > step * (len(rows) + 1):
                problems.append(
                    f"chargeback {currency} “{column}”: rows sum to {summed:,.1f}, "
                    f"the Total row says {total[column]}"
                )
    for cells in table["charged"]:
        currency, charged = cells[-1], number(cells[-3])
        expected = number(totals[currency]["Total"]) - not_charged[currency]
        if abs(charged - expected) > 1.0:
            problems.append(f"charged to teams in {currency}: {charged:,.0f}, not {expected:,.0f}")
    return problems


@pytest.mark.timeout(300)
def test_a_managers_first_day_on_a_fresh_demo(
    page_factory, chromium, live_server, fresh_demo, jobs_run_here
):
    from accounting import services as usage
    from accounting.models import ImportJob, UsageRecord
    from accounting.rollups import refresh_usage_rollups
    from alerts.models import AlertRule
    from inventory.models import Cluster, Pool, Site
    from planner.models import Analysis, InferencePlan, Plan
    from reports.models import ReportSchedule

    began = time.monotonic()
    page = page_factory({"width": 1440, "height": 900})
    page.set_default_timeout(SLOW_PAGE_MS)
    walk = Walk(page)
    log_in(page, fresh_demo.username, "pw-" + fresh_demo.username)
    problems = walk.problems

    # 1. The first page: a computed fleet analysis with its five factors, waterfall and money.
    text = walk.look("Fleet")
    assert urlsplit(page.url).path == "/"
    assert "No fleet analysis yet" not in text and "From the fleet analysis of" in text
    for step in ("Utilization", "Scaling", "MFU / MBU", "Energy (1/PUE)"):
        assert page.locator("table.factor-table tbody th", has_text=step).count() == 1, step
    page.locator("#chart-analyses-waterfall .main-svg").first.wait_for()
    problems += factor_money_problems("Fleet", page)

    # 2. A EUR site, a cluster there and a mixed pool of A100 and H100 nodes.
    walk.open("/inventory/sites/new/", "New site")
    page.get_by_label("Name (required)").fill(SITE)
    page.get_by_label("Location").fill("Lyon, France")
    page.get_by_label("Cooling type (required)").select_option("air")
    page.get_by_label("Measured PUE").fill("1.3")
    page.get_by_label("Electricity tariff per kWh").fill("0.14")
    page.get_by_label("Currency (required)").fill("EUR")
    page.get_by_label("Grid carbon intensity (gCO₂/kWh)").fill("52")
    text = walk.save("Save", r"/inventory/sites/\d+/$", "Site")
    assert "0.14 EUR per kWh" in text
    site = Site.objects.get(name=SITE)

    walk.open("/inventory/clusters/new/", "New cluster")
    page.get_by_label("Site (required)").select_option(str(site.pk))
    page.get_by_label("Name (required)").fill(CLUSTER)
    page.get_by_label("Fabric (required)").select_option(label="InfiniBand")
    page.get_by_label("Inter-node bandwidth per card (Gbit/s) (required)").fill("400")
    commissioned = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=120)
    page.get_by_label("Commissioned on").fill(commissioned.isoformat())
    page.get_by_label("Capital cost per card").fill("24000")
    page.get_by_label("Amortization period (years)").fill("5")
    page.get_by_label("Yearly operating cost (whole cluster)").fill("150000")
    walk.save("Save", r"/inventory/clusters/\d+/$", "Cluster")
    cluster = Cluster.objects.get(name=CLUSTER)
    assert cluster.site == site

    walk.open("/inventory/pools/new/", "New pool")
    page.get_by_label("Cluster (required)").select_option(str(cluster.pk))
    page.get_by_label("Name (required)").fill(POOL)
    page.get_by_label("Purpose (required)").select_option("training")
    page.get_by_label("Planned utilization (0 to 1)").fill("0.6")
    walk.save("Save", r"/inventory/pools/\d+/$", "Pool")
    pool = Pool.objects.get(name=POOL)
    for name, card in (("a100-nodes", "A100 SXM4 80GB"), ("h100-nodes", "H100 SXM5 80GB")):
        page.get_by_label("Name (required)").fill(name)
        page.get_by_label("Accelerator (required)").select_option(label=card)
        page.get_by_label("Node count (required)").fill("4")
        page.get_by_label("Cards per node (required)").fill("8")
        text = walk.save("Add node group", rf"/inventory/pools/{pool.pk}/$", "Pool")
    assert "heterogeneous" in text and pool.node_groups.count() == 2

    # 3. Import a Slurm export into it: preview first, then import the same file.
    walk.open("/usage/import/", "Usage import")
    page.get_by_label("Target cluster (required)").select_option(str(cluster.pk))
    page.get_by_label("File kind (required)").select_option("sacct")
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    page.get_by_label(re.compile(r"^Usage file")).set_input_files(
        files=[
            {
                "name": "lyon-sacct.txt",
                "mimeType": "text/plain",
                "buffer": sacct_export(yesterday).encode(),
            }
        ]
    )
    walk.save("Preview first", r"/usage/import/$", "Usage import preview")
    assert POOL in page.inner_text("main")  # the partition lands in the only pool
    walk.save("Import", r"/usage/import/\d+/$", "Usage import job")
    job = ImportJob.objects.get(cluster=cluster)
    usage.run_import_job(job.pk, str(job.run_id))  # what the worker does
    refresh_usage_rollups()
    page.locator('[data-result="records-written"]').wait_for()
    walk.look("Usage import job")
    assert page.locator('[data-result="records-written"]').inner_text() == "3"
    assert UsageRecord.objects.filter(cluster=cluster).count() == 3

    # The pool's mixed-card strategies: not in the demo's analysis yet, so the page says why
    # and runs one; its analysis then shows the pool.
    page.goto(f"/inventory/pools/{pool.pk}/")
    walk.look("Pool")
    page.get_by_role("link", name=re.compile("How to run these mixed cards")).click()
    text = walk.look("Pool not in the analysis yet")
    assert "not in this analysis yet" in text
    walk.save(f"Run an analysis of {POOL} now", r"/analyses/\d+/", "Pool analysis queued")
    analysis = Analysis.objects.filter(scope="pool", object_id=pool.pk).get()
    run_analysis_inline(analysis)
    page.locator(".job-progress").wait_for(state="detached")  # it polls, then reloads
    walk.look("Pool analysis done")
    problems += factor_money_problems("Pool analysis", page)
    text = walk.open(f"/analyses/{analysis.pk}/pools/{pool.pk}/", "Pool mixed cards")
    assert "A100 SXM4 80GB" in text and "H100 SXM5 80GB" in text

    # 4. Training at the EUR site, priced with the shipped rate; then a serving fleet.
    walk.open("/planner/", "Planner")
    page.get_by_label("Name (required)").fill("Lyon 13B pretraining")
    page.get_by_label("Parameters (billions)").fill("13")
    page.get_by_label("Training tokens (billions) (required)").fill("260")
    page.get_by_label("A100 SXM4 80GB", exact=True).check()
    page.get_by_label("H100 SXM5 80GB", exact=True).check()
    page.get_by_label("Card counts").fill("64, 128")
    page.get_by_label("Utilization (% of calendar time)").fill("90")
    page.get_by_label(SITE, exact=True).check()
    walk.save("Create plan", r"/planner/\d+/$", "Plan queued")
    plan = Plan.objects.get(name="Lyon 13B pretraining")
    run_plan_inline(plan.pk)
    page.locator("#chart-planner-days-vs-cost .main-svg").first.wait_for()  # it polls, then reloads
    walk.look("Plan")
    plan.refresh_from_db()
    options = plan.results["options"]
    assert plan.status == "succeeded" and len(options) == 4
    assert all(o["currency"] == "EUR" and o["total_cost"] for o in options), options
    assert "ECB euro reference rate" in page.locator("dl.plan-facts").inner_text()
    costs = page.locator('table.options-table td[data-col="total_cost"]').all_inner_texts()
    assert len(costs) == 4 and all(MONEY.search(c)[2] == "EUR" for c in costs), costs

    # Serving: the tab's own example (its form's defaults), estimated and saved as a plan.
    walk.open("/planner/inference/", "Inference planner")
    page.get_by_role("button", name="Estimate").click()
    page.wait_for_url(re.compile(r"/planner/inference/\?"))
    walk.look("Inference estimate")
    page.get_by_label("Plan name").fill("Serving the example")
    walk.save("Save plan", r"/planner/inference/plans/\d+/$", "Inference plan")
    assert InferencePlan.objects.filter(name="Serving the example").exists()

    # 5. Costs (the money adds up), exported and shared as a spreadsheet link.
    walk.open("/costs/", "Costs")
    chargeback = page.evaluate(CHARGEBACK_JS)
    assert sorted(row[-1] for row in chargeback["totals"]) == ["EUR", "USD"]
    problems += chargeback_problems(chargeback)
    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").first.click()
    assert download.value.suggested_filename.endswith(".csv")
    page.get_by_role("link", name="Spreadsheet link").first.click()
    page.wait_for_url(re.compile(r"/spreadsheet-links/"))
    walk.look("Spreadsheet links")
    page.get_by_label("Name (required)").fill("Lyon costs")
    page.get_by_role("button", name="Create link").click()
    link = page.get_by_label("The new link").input_value()
    walk.look("Spreadsheet link made")
    anonymous = chromium.new_context(base_url=live_server.url)
    try:
        fetched = anonymous.request.get(link)
        assert fetched.status == 200 and b"cluster" in fetched.body()
    finally:
        anonymous.close()

    # 6. A monthly cost report for the EUR site, and an alert on the new cluster by name.
    walk.open("/reports/schedules/new/", "New report schedule")
    page.get_by_label("Name (required)").fill("Lyon monthly costs")
    page.get_by_label("Content (required)").select_option(label="Cost and chargeback")
    page.get_by_label("Scope (required)").select_option(label="Site")
    page.get_by_label("Site", exact=True).select_option(str(site.pk))
    page.get_by_label("Frequency (required)").select_option(label="Monthly (on the 1st)")
    page.get_by_label("Send time (required)").fill("07:00")
    page.get_by_label("Timezone (required)").select_option("Europe/Paris")
    page.get_by_label("Recipients (users)").select_option(label="manager")
    walk.save("Save", r"/reports/schedules/\d+/$", "Report schedule")
    assert ReportSchedule.objects.get(name="Lyon monthly costs").site == site

    walk.open("/alerts/", "Alerts")
    page.get_by_label("Name (required)").fill("Lyon cards idle")
    page.get_by_label("Metric (required)").select_option("utilization")
    page.get_by_label("Scope (required)").select_option("cluster")
    page.get_by_label("Site, cluster or pool").select_option(label=f"{SITE} / {CLUSTER}")
    page.get_by_label("Direction (required)").select_option("below")
    page.get_by_label("Threshold (required)").fill("0.5")
    page.get_by_role("button", name="Save and evaluate").click()
    page.wait_for_selector("text=Lyon cards idle")
    walk.look("Alerts")
    assert AlertRule.objects.get(name="Lyon cards idle").object_id == cluster.pk

    # The first page again, after a day's changes.
    walk.open("/", "Fleet again")
    problems += factor_money_problems("Fleet again", page)

    took_s = time.monotonic() - began
    assert walk.failed == [], "responses of 400 or more:\n" + "\n".join(walk.failed)
    assert not problems, "\n".join(problems)
    assert took_s < WALK_BUDGET_S, f"the walk took {took_s:.0f} s"


# The checks themselves, shown to fail: the rule's cases of a "—" (with and without its
# reason, and a dash inside a sentence), values cut by their box, a table that scrolls.
CASES_HTML = """() => { document.querySelector('main').innerHTML = `
<dl class="details">
  <div><dt>Owner</dt><dd>—</dd></div>
  <div><dt>MFU</dt><dd>— <span class="hint">catalog default</span></dd></div>
  <div><dt>Cost</dt><dd><span class="money-line">— <span class="unit">EUR</span></span></dd></div>
  <div><dt>Money lost</dt><dd><span class="money-line">— <span class="unit">GBP, no prices</span>
    </span></dd></div>
</dl>
<p>Fix the file — then import it again.</p>
<table><caption>Card-hours (Down unknown, “—”)</caption><tbody><tr><th>a</th><td>—</td></tr>
</tbody></table>
<table><thead><tr><th>Team</th><th>Rate</th></tr></thead><tbody><tr><th>b</th>
<td title="no rate entered">—</td></tr><tr><th>c</th><td>—</td></tr></tbody></table>
<dl class="stats"><div style="width: 90px"><dt>Cost</dt>
  <dd style="white-space: nowrap">1,234,567,890 EUR</dd></div></dl>
<div style="width: 60px; overflow: hidden"><span style="white-space: nowrap">98,765,432 USD
  </span></div>
<div class="table-scroll" style="width: 60px"><table><tr><td style="white-space: nowrap">
  12,345,678 USD</td></tr></table></div>`; }"""


def test_the_page_checks_find_a_bare_dash_and_a_cut_value(browser_page):
    page = browser_page
    page.goto("/inventory/")
    page.evaluate(CASES_HTML)
    assert page.evaluate(REASONLESS_DASHES_JS) == ["Owner: “—”", "Cost: “— EUR”", "c: “—”"]
    clipped = page.evaluate(CLIPPED_VALUES_JS)
    assert [c.split(" (")[0] for c in clipped] == [
        "dd “1,234,567,890 EUR”",
        "span “98,765,432 USD”",
    ], clipped


# The issue's Costs table, in EUR: 94.5 % of it "(no usage records, not charged)" under a
# used-plus-idle Total, with no column for the hours without records.
HEADER = [
    "Team",
    "Used card-hours",
    "Used cost",
    "Idle cost share",
    "No usage records (not charged)",
    "Total",
    "Share of total cost (%)",
    "Currency",
]
ISSUE_ROWS = [
    ["(no usage records, not charged)", "0", "0", "0", "0", "1,173,444", "94.5", "EUR"],
    ["research", "13,398", "15,251", "21,200", "0", "36,452", "2.9", "EUR"],
    ["serving", "11,549", "13,147", "18,274", "0", "31,421", "2.5", "EUR"],
]
ISSUE_TOTAL = ["Total", "24,946", "28,398", "39,475", "0", "1,241,317", "100.0", "EUR"]


def test_the_chargeback_check_refuses_the_issues_table_and_takes_it_mended():
    table = {"header": HEADER, "rows": ISSUE_ROWS, "totals": [ISSUE_TOTAL], "charged": []}
    assert chargeback_problems(table) == [
        "chargeback row (no usage records, not charged) (EUR): Used cost + Idle cost share + "
        "No usage records (not charged) = 0, not the Total",
        "chargeback Total (EUR): Used cost + Idle cost share + No usage records (not charged) "
        "= 67,873, not the Total",
    ]
    # The same figures with the no-records money in its own column add up, row and total.
    mended = [[*ISSUE_ROWS[0][:4], "1,173,444", *ISSUE_ROWS[0][5:]], *ISSUE_ROWS[1:]]
    total = [*ISSUE_TOTAL[:4], "1,173,444", *ISSUE_TOTAL[5:]]
    charged = ["Charged to teams", "the total less the rows marked “not charged”", "67,873"]
    table = {"header": HEADER, "rows": mended, "totals": [total]}
    table["charged"] = [[*charged, "5.5", "EUR"]]
    assert chargeback_problems(table) == []
    table["charged"] = [[*charged[:2], "1,241,317", "100.0", "EUR"]]
    assert chargeback_problems(table) == ["charged to teams in EUR: 1,241,317, not 67,873"]
