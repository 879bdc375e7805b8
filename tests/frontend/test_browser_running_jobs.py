"""A RUNNING job in an export, walked through a real Chromium (issue #29): the Usage page's
daily chart, team × week heatmap, breakdown table and CSV exports, the Costs page and its
export for the as-of day and the week, and utilization alerts over the same hours all give
one figure per day, week and team: allocated ÷ available card-hours over the hours the export
covers, never over 100 %.

The export is `tests.support.running_exports.ordinary_export()` on the 16-card "alpha"
cluster, imported through the import service: job 2002 (team-b, 8 cards) still runs when the
file ends, at its as-of time 2024-03-02 22:00, so it counts 34 hours (not the 72 of its
Elapsed) and the as-of day is available for 22 hours (16 × 22 = 352 card-hours), not 24.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re

import pytest

from tests.support.running_exports import ORDINARY_AS_OF, ORDINARY_DAYS, ordinary_export

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UTC = dt.UTC
CARDS = 16  # alpha: 2 nodes × 8 H100
DAY_1, AS_OF_DAY = dt.date(2024, 3, 1), ORDINARY_AS_OF.date()
# The period shown: a Friday to the next Friday. Its first week bucket (the ISO week from
# Monday 02-26, clipped to the period) ends on Monday 03-04; the second one has no usage.
PERIOD = "start=2024-03-01&end=2024-03-08"
AS_OF_PERIOD = "start=2024-03-02&end=2024-03-03"
WEEK_END = dt.date(2024, 3, 4)
PERIOD_DAYS = 7

# Hours each day is covered: all 24 before the as-of day, up to the as-of instant on it.
COVERED_H = {
    DAY_1: 24.0,
    AS_OF_DAY: (ORDINARY_AS_OF - dt.datetime(2024, 3, 2, tzinfo=UTC)).total_seconds() / 3600,
}
AVAILABLE = {day: CARDS * hours for day, hours in COVERED_H.items()}  # 384, 352
# Card-hours per team and day, from running_exports' job table (cards × hours that day):
# 2001 team-a 8 × 12 on 03-01; 2002 team-b 8 × 12 on 03-01 and 8 × 22 on 03-02 (running up to
# the as-of time); 2003 team-a 4 × 12 on 03-02. The pending 2004 (team-c) holds none.
TEAM_DAYS = {
    "team-a": {DAY_1: 8 * 12.0, AS_OF_DAY: 4 * 12.0},
    "team-b": {DAY_1: 8 * 12.0, AS_OF_DAY: 8 * 22.0},
}
WEEK_AVAILABLE = sum(AVAILABLE.values())  # 736
WEEK_ALLOCATED = sum(ORDINARY_DAYS.values())  # 416
TEAM_WEEK = {team: sum(days.values()) for team, days in TEAM_DAYS.items()}  # 144, 272
DAY_SHARE = {day: ORDINARY_DAYS[day] / AVAILABLE[day] for day in AVAILABLE}
WEEK_SHARE = WEEK_ALLOCATED / WEEK_AVAILABLE
TEAM_SHARE = {team: hours / WEEK_AVAILABLE for team, hours in TEAM_WEEK.items()}

# Every figure of a Plotly div, typed arrays (plotly's binary encoding) as plain lists.
CHART_DATA_JS = """(id) => JSON.parse(JSON.stringify(
  document.getElementById(id).data, (key, value) => ArrayBuffer.isView(value)
    ? Array.from(value) : value))"""
FIRED = re.compile(
    r"^(?P<rule>.+): Utilization \(measured from usage records\) "
    r"(?P<pct>\d+\.\d)% falls below 90\.0% \((?P<days>\d+) days\)$"
)


@pytest.fixture
def running_usage(browser_planner):
    """Alpha with the ordinary export (as of 2024-03-02 22:00), rolled up for the pages."""
    from accounting.rollups import refresh_usage_rollups
    from tests.support.builders import alpha_cluster, import_usage_text

    alpha = alpha_cluster()
    job, _ = import_usage_text(alpha, ordinary_export())
    job.refresh_from_db()
    assert job.as_of == ORDINARY_AS_OF
    refresh_usage_rollups([alpha.pk])
    return alpha


def chart(page, key: str) -> list[dict]:
    dom_id = f"chart-{key}"
    page.wait_for_selector(f"#{dom_id} .main-svg")
    return page.evaluate(CHART_DATA_JS, dom_id)


def csv_rows(page, link) -> list[dict]:
    """The file behind a page's download link, fetched in the logged-in browser context."""
    response = page.request.get(link.get_attribute("href"))
    assert response.ok, response.status
    return list(csv.DictReader(io.StringIO(response.text())))


def export_csv(page) -> list[dict]:
    """The page's report export (on Costs the first toolbar: the cost rows)."""
    toolbar = page.locator(".export-toolbar").first
    return csv_rows(page, toolbar.get_by_role("link", name="Export CSV"))


def chart_csv(page, key: str) -> list[dict]:
    figure = page.locator(f"#chart-{key}-figure")
    return csv_rows(page, figure.get_by_role("link", name="CSV", exact=True))


def number(text: str) -> float | None:
    return float(text) if text else None


def day_of(stamp: str) -> dt.date:
    return dt.date.fromisoformat(stamp[:10])


def usage_page(page, query: str) -> None:
    page.goto(f"/usage/?{PERIOD}&{query}")
    assert page.get_by_role("heading", level=1).inner_text() == "Usage"


def read_usage_by_day(page) -> None:
    """The daily chart, its data file and the export: one point per covered day."""
    usage_page(page, "granularity=day&group_by=cluster")
    (line,) = chart(page, "usage-utilization")
    assert [dt.date.fromisoformat(x) for x in line["x"]] == sorted(AVAILABLE)  # 03-03 on: none
    for day, pct, (allocated, available, _) in zip(
        sorted(AVAILABLE), line["y"], line["customdata"], strict=True
    ):
        assert (allocated, available) == pytest.approx((ORDINARY_DAYS[day], AVAILABLE[day]))
        assert pct == pytest.approx(100 * DAY_SHARE[day])
    downloaded = {day_of(row["bucket_start"]): row for row in chart_csv(page, "usage-utilization")}
    exported = {day_of(row["bucket_start"]): row for row in export_csv(page)}
    assert set(downloaded) == set(exported) == set(AVAILABLE)
    for day, share in DAY_SHARE.items():
        assert number(downloaded[day]["utilization_pct"]) == pytest.approx(100 * share)
        assert number(downloaded[day]["available_card_hours"]) == pytest.approx(AVAILABLE[day])
        row = exported[day]
        assert number(row["available_card_hours"]) == pytest.approx(AVAILABLE[day])
        assert number(row["allocated_card_hours"]) == pytest.approx(ORDINARY_DAYS[day])
        assert number(row["utilization"]) == pytest.approx(share)


def read_usage_by_team_and_week(page) -> None:
    """The heatmap (team × week), the weekly line, the table and the team × day export."""
    usage_page(page, "granularity=week&group_by=cluster")
    (heatmap,) = chart(page, "usage-team-heatmap")
    assert heatmap["x"] == [DAY_1.isoformat()]  # the week from 03-04 has no usage: no column
    cells = dict(zip(heatmap["y"], (row[0] for row in heatmap["z"]), strict=True))
    assert cells == pytest.approx({team: 100 * share for team, share in TEAM_SHARE.items()})
    # The teams of a week add up to the cluster's week: the line and the export say so too.
    assert sum(cells.values()) == pytest.approx(100 * WEEK_SHARE)
    (line,) = chart(page, "usage-utilization")
    assert line["x"] == [DAY_1.isoformat()] and line["y"] == pytest.approx([100 * WEEK_SHARE])
    (week,) = export_csv(page)
    assert (day_of(week["bucket_start"]), day_of(week["bucket_end"])) == (DAY_1, WEEK_END)
    assert number(week["available_card_hours"]) == pytest.approx(WEEK_AVAILABLE)
    assert number(week["utilization"]) == pytest.approx(WEEK_SHARE)
    (alpha,) = page.locator("table.dashboard-table tbody tr").all()
    cells = alpha.locator("td").all_inner_texts()
    assert cells[0] == f"{WEEK_ALLOCATED:,.0f}" and cells[4] == f"{WEEK_AVAILABLE:,.0f}"
    assert cells[5] == f"{100 * WEEK_SHARE:.1f} %"

    usage_page(page, "granularity=day&group_by=team")
    for trace in chart(page, "usage-utilization"):
        days = [dt.date.fromisoformat(x) for x in trace["x"]]
        expected = [100 * TEAM_DAYS[trace["name"]][day] / AVAILABLE[day] for day in days]
        assert days == sorted(AVAILABLE) and trace["y"] == pytest.approx(expected)
    by_team = {(row["team"], day_of(row["bucket_start"])): row for row in export_csv(page)}
    assert set(by_team) == {(team, day) for team in TEAM_DAYS for day in AVAILABLE}
    for (team, day), row in by_team.items():
        assert number(row["available_card_hours"]) == pytest.approx(AVAILABLE[day])
        assert number(row["utilization"]) == pytest.approx(TEAM_DAYS[team][day] / AVAILABLE[day])


def read_costs(page, query: str, first_day: dt.date, bucket_h: float) -> dict:
    """The Costs page of a period from ``first_day``: its export's first bucket (``bucket_h``
    long, covered up to the as-of time) and its charts, which agree with it."""
    from inventory.models import AcceleratorModel

    page.goto(f"/costs/?{query}&granularity=week&group_by=cluster")
    assert page.get_by_role("heading", level=1).inner_text() == "Costs"
    (point,) = chart(page, "costs-pflop-day")
    rows = export_csv(page)
    first = rows[0]
    assert day_of(first["bucket_start"]) == first_day
    covered_h = sum(hours for day, hours in COVERED_H.items() if day >= first_day)
    allocated = sum(hours for day, hours in ORDINARY_DAYS.items() if day >= first_day)
    # Paid for: every in-service card-hour; measured: only the covered ones.
    assert number(first["card_hours"]) == pytest.approx(CARDS * bucket_h)
    assert number(first["uncovered_card_hours"]) == pytest.approx(CARDS * (bucket_h - covered_h))
    assert number(first["allocated_card_hours"]) == pytest.approx(allocated)
    utilization = number(first["factors.utilization"])
    tflops = AcceleratorModel.objects.get(name="H100 SXM5 80GB").dense_bf16_tflops
    covered_peak = CARDS * covered_h * tflops / 1000 / 24
    assert number(first["covered_peak_pflop_days"]) == pytest.approx(covered_peak)
    # Effective PFLOP-days: the covered peak × the five factors, utilization one of them; the
    # PFLOP-day chart divides the covered hours' money by them.
    factors = ("energy", "mfu", "scaling", "effective_time", "utilization")
    product = 1.0
    for name in factors:
        product *= number(first[f"factors.{name}"])
    effective = number(first["effective_pflop_days"])
    assert effective == pytest.approx(covered_peak * product)
    assert point["customdata"][0][1] == pytest.approx(effective)
    covered_cost = number(first["total_cost"]) - number(first["uncovered_cost"])
    assert point["y"][0] == pytest.approx(covered_cost / effective)
    for later in rows[1:]:  # after the as-of time: no data, not 0 %
        assert later["factors.utilization"] == "" and later["allocated_card_hours"] == ""
    # The chargeback: each team's used card-hours, its used cost in the same proportion, and
    # every bucket's money (the hours without usage records apart) in the bars.
    bars = chart(page, "costs-chargeback")
    used = dict(zip(bars[0]["y"], bars[0]["x"], strict=True))
    table = {
        row.locator("th").inner_text(): row.locator("td").all_inner_texts()
        for row in page.locator("#chargeback table tbody tr").all()
    }
    charged = sum(sum(trace["x"]) for trace in bars)
    assert charged == pytest.approx(sum(number(row["total_cost"]) for row in rows))
    return {"utilization": utilization, "used_cost": used, "table": table}


def check_chargeback(costs: dict, team_hours: dict[str, float]) -> None:
    for team, hours in team_hours.items():
        assert costs["table"][team][0] == f"{hours:,.0f}"
    a, b = (costs["used_cost"][team] for team in ("team-a", "team-b"))
    assert a / b == pytest.approx(team_hours["team-a"] / team_hours["team-b"])


def add_rule(page, name: str, window_days: int, team: str = "") -> None:
    """A utilization rule made on the alerts page ("falls below 90 %"): saved and evaluated
    now, long after the export, whose window holds no usage: no data, not 0 %."""
    page.goto("/alerts/")
    page.get_by_label("Name (required)").fill(name)
    page.get_by_label("Metric (required)").select_option("utilization")
    if team:
        page.get_by_label("Scope (required)").select_option("team")
        page.get_by_label("Team", exact=True).fill(team)
    else:
        page.get_by_label("Scope (required)").select_option("cluster")
        page.get_by_label("Site, cluster or pool").select_option(label="Test DC / alpha")
    page.get_by_label("Direction (required)").select_option("below")
    page.get_by_label("Threshold (required)").fill("0.9")
    page.get_by_label("Window days (required)").fill(str(window_days))
    page.get_by_role("button", name="Save and evaluate").click()
    page.wait_for_selector(f"text=Rule “{name}” saved and evaluated: no data (No usage records")


def read_alerts(page) -> dict[str, float]:
    """Each rule evaluated as the hourly task would right after its window (the as-of day's
    midnight or the week's); the page's fired alerts show each stored figure: rule → share."""
    from alerts import services
    from alerts.models import AlertRule

    windows = {
        "alpha, the as-of day": (1, "", dt.datetime(2024, 3, 3, tzinfo=UTC)),
        "alpha, the week": (3, "", dt.datetime(2024, 3, 4, tzinfo=UTC)),
        "team-b, the week": (3, "team-b", dt.datetime(2024, 3, 4, tzinfo=UTC)),
    }
    for name, (days, team, _) in windows.items():
        add_rule(page, name, days, team)
    for name, (_, _, now) in windows.items():
        services.evaluate(AlertRule.objects.get(name=name), now)
    page.reload()
    fired = {}
    for text in page.locator("table").first.locator("tbody th").all_inner_texts():
        match = FIRED.match(text)
        assert match, text
        assert int(match["days"]) == windows[match["rule"]][0]
        fired[match["rule"]] = match["pct"]
    stored = {rule.name: rule.last_value for rule in AlertRule.objects.all()}
    assert set(fired) == set(stored) == set(windows)
    for name, value in stored.items():
        assert fired[name] == f"{100 * value:.1f}", name  # the page shows the stored figure
    return stored


def test_a_running_job_gives_one_figure_on_every_page(browser_page, running_usage):
    # The hand tables agree with running_exports' own count per day.
    for day, allocated in ORDINARY_DAYS.items():
        assert sum(days[day] for days in TEAM_DAYS.values()) == allocated
    page = browser_page
    read_usage_by_day(page)
    read_usage_by_team_and_week(page)

    week = read_costs(page, PERIOD, DAY_1, (WEEK_END - DAY_1).days * 24.0)
    covered_days = sum(COVERED_H.values()) / 24
    warning = page.locator(".message-warning").inner_text()
    assert f"usage covers {covered_days:.1f} of {PERIOD_DAYS} days" in warning
    check_chargeback(week, TEAM_WEEK)
    day = read_costs(page, AS_OF_PERIOD, AS_OF_DAY, 24.0)
    check_chargeback(day, {team: days[AS_OF_DAY] for team, days in TEAM_DAYS.items()})

    alerts = read_alerts(page)
    figures = {
        "the as-of day": (DAY_SHARE[AS_OF_DAY], day["utilization"], alerts["alpha, the as-of day"]),
        "the week": (WEEK_SHARE, week["utilization"], alerts["alpha, the week"]),
        "team-b's week": (TEAM_SHARE["team-b"], alerts["team-b, the week"]),
    }
    for what, (hand, *read) in figures.items():
        assert read == pytest.approx([hand] * len(read)), what
        assert max(read) <= 1.0, what
    # 224 of the 352 card-hours up to 22:00, not of 384: 63.6 %, not 58.3 %.
    assert AVAILABLE[AS_OF_DAY] == 352 and DAY_SHARE[AS_OF_DAY] == pytest.approx(224 / 352)
