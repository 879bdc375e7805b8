"""The walk of every page on the demo data (issue 14), in a real Chromium: Fleet, Analyses, a
mixed pool, Usage, Costs, Planner, a plan, Reports, a report and its print page.

A page fails on "None", "nan" or "inf" in its text, on a utilization outside [0, 1] in a chart,
on a money figure over several currencies (one axis or one figure for two currencies), or on a
filter whose shown value differs from the one applied. The no-usage walk (the same pages on
the demo fleet without any usage) also fails on a page without its "no data" state, or on an
idle cost, a measured utilization or advice invented from no data.
"""

from __future__ import annotations

import re

import pytest

from tests.support.demo_site import demo_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BAD_WORDS = re.compile(r"\b(None|nan|NaN|inf|Infinity|-inf)\b")
MIXED_MONEY = re.compile(r"mixed currencies|\((?:[A-Z]{3}, )+[A-Z]{3}\)")
# Each chart's traces with the titles of the axes they are drawn on.
CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(div => {
  const layout = div.layout || {};
  const title = a => ((layout[a] || {}).title || {}).text || '';
  return {id: div.id, title: (layout.title || {}).text || '', traces: div.data.map(t => ({
    name: t.name || '', type: t.type,
    y: Array.isArray(t.y) ? t.y : [], x: Array.isArray(t.x) ? t.x : [],
    ytitle: title('yaxis' + (t.yaxis || 'y').slice(1)),
    xtitle: title('xaxis' + (t.xaxis || 'x').slice(1))}))};
})"""
SHOWN = """() => Object.fromEntries([...document.querySelectorAll('form.filters select')]
  .map(e => [e.name, e.value]))"""


@pytest.fixture
def demo(browser_planner, django_capture_on_commit_callbacks, jobs_run_here):
    return demo_pages(browser_planner, django_capture_on_commit_callbacks, usage=True)


@pytest.fixture
def no_usage(browser_planner, django_capture_on_commit_callbacks, jobs_run_here):
    return demo_pages(browser_planner, django_capture_on_commit_callbacks, usage=False)


def _problems(name: str, page) -> list[str]:
    problems = []
    text = page.inner_text("body")
    for match in BAD_WORDS.finditer(text):
        around = text[max(0, match.start() - 40) : match.end() + 40].replace("\n", " ")
        problems.append(f"{name}: {match.group(0)!r} in “…{around}…”")
    if MIXED_MONEY.search(text):
        problems.append(f"{name}: money over several currencies: {MIXED_MONEY.search(text)[0]}")
    for chart in page.evaluate(CHARTS):
        for trace in chart["traces"]:
            for axis, values in (("ytitle", trace["y"]), ("xtitle", trace["x"])):
                title = trace[axis]
                if MIXED_MONEY.search(title):
                    problems.append(f"{name} {chart['id']}: one money axis “{title}”")
                if "tilization" not in title:
                    continue
                top = 100.0 if "%" in title else 1.0
                numbers = [v for v in values if isinstance(v, int | float)]
                if any(v < 0 or v > top * (1 + 1e-9) for v in numbers):
                    problems.append(f"{name} {chart['id']}: utilization outside [0, 1] {title}")
    return problems


def _filter_truth(name: str, page) -> list[str]:
    """Each filter's shown value is the one the page says it applied."""
    shown = page.evaluate(SHOWN)
    subtitle = page.inner_text(".subtitle") if page.locator(".subtitle").count() else ""
    problems = []
    for field in ("granularity", "group_by", "idle_rule"):
        if field in shown and shown[field] and shown[field] not in subtitle:
            problems.append(f"{name}: {field} shows {shown[field]!r}, the page applied: {subtitle}")
    return problems


def _walk(page, pages: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(problems, each page's text) after visiting every page."""
    problems: list[str] = []
    texts = {}
    for name, path in pages.items():
        response = page.goto(path)
        assert response.status == 200, (name, path, response.status)
        page.wait_for_load_state("networkidle")
        problems += _problems(name, page)
        problems += _filter_truth(name, page)
        texts[name] = page.inner_text("body")
    return problems, texts


def test_every_page_of_the_demo_tells_the_truth(browser_page, demo):
    problems, _ = _walk(browser_page, demo)
    assert not problems, "\n".join(problems)


# What a page without any usage must say (its "no data" state), and what it must not invent.
# Fleet and an analysis: no cluster measured, utilization the planned value labelled modeled,
# money lost said to rest on modeled figures.
NO_MEASURED_USAGE = (
    re.compile(r"Usage coverage: usage covers 0% of the period's card-days, 0 of 3 clusters\."),
    re.compile(r"utilization is measured in 0 of 3 clusters \(.*?\) and planned elsewhere"),
    re.compile(r"\nUtilization\t\d+\.\d %\tmodeled\t"),
    re.compile(r"Money lost this period\n.*?Modeled: no usage measured in this scope and", re.S),
)
NO_USAGE_SAYS = {
    "Usage": (re.compile(r"No data for this selection yet\."),),
    # The cards are priced (they cost money), but nothing delivered or charged is known.
    "Costs": (
        re.compile(r"No data for this selection yet\."),
        re.compile(r"no usage records, not charged"),
    ),
    "Report": (re.compile(r"no measured losses", re.I),),
    "Print page": (re.compile(r"no measured losses", re.I),),
    "Fleet": NO_MEASURED_USAGE,
    "Analysis": NO_MEASURED_USAGE,
}
INVENTED = re.compile(
    r"release rented capacity|\b100\s?% idle|per effective PFLOP-day\s+[\d,]+"
    # a utilization of 0 % (no data read as idle) or any figure labelled measured
    r"|\nUtilization\t0(\.0)? %|· measured|\tmeasured\t"
)


def test_an_inventory_without_usage_shows_no_data_and_invents_nothing(
    jobs_run_here, browser_page, no_usage
):
    """The demo fleet, no usage ever imported: every page says "no data" where it would show a
    measured figure, and no page shows a measured utilization, an idle cost or advice."""
    from accounting.models import UsageRecord
    from planner.models import Analysis

    assert not UsageRecord.objects.exists()
    pages = {**no_usage, "Analysis": f"/analyses/{Analysis.objects.get(scope='fleet').pk}/"}
    problems, texts = _walk(browser_page, pages)
    for name, patterns in NO_USAGE_SAYS.items():
        for says in patterns:
            if not says.search(texts[name]):
                problems.append(f"{name}: no “no data” state ({says.pattern})")
    for name, text in texts.items():
        if found := INVENTED.search(text):
            problems.append(f"{name}: invented from no data: “{found[0]}”")
    assert not problems, "\n".join(problems)
