"""Render a report's stored numbers: HTML (e-mail body or print page), XLSX with native charts, CSV.

Every renderer reads only ``numbers`` (see :mod:`reports.content`), never the database.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from openpyxl.chart import BarChart, Reference
from openpyxl.chart.series import SeriesLabel
from openpyxl.comments import Comment
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from core.tabular.cellsafety import SafeWorkbook, safe_csv_writer
from reports.charts import chart_gaps, render_charts
from reports.content import (
    CHARGEBACK_COLUMNS,
    COST_COLUMNS,
    NO_DATA,
    UTILIZATION_COLUMNS,
    UTILIZATION_GROUPS,
)

XLSX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PERCENT_FORMAT = "0.0%"
NUMBER_FORMAT = "#,##0.00"
# Sheet titles: the test of "XLSX equals API" and readers find the data by these names.
UTILIZATION_SHEETS = {group: f"Utilization by {group}" for group in UTILIZATION_GROUPS}
SHARE_COLUMNS = {
    "allocation_share",
    "utilization",
    "effective_time",
    "productive_share",
    "idle_share",
    "share_of_total",
    "effective_utilization",
    "value",
    "previous",
    "delta",
}


def chart_cid(name: str) -> str:
    return f"chart-{name}@fleetwise"


def render_html(
    numbers: dict[str, Any],
    *,
    mode: str,
    charts: dict[str, bytes] | None = None,
    report_url: str = "",
) -> str:
    """The report as one HTML document.

    ``mode`` "email": images are ``cid:`` references to inline attachments; "print": images
    are embedded as data URIs so the file stands alone (print it to PDF from any browser).
    """
    if charts is None:
        charts = render_charts(numbers)
    if mode == "email":
        sources = {name: f"cid:{chart_cid(name)}" for name in charts}
    else:
        sources = {
            name: "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            for name, png in charts.items()
        }
    return render_to_string(
        "reports/report_document.html",
        {
            "numbers": numbers,
            "charts": sources,
            "chart_gaps": chart_gaps(numbers),
            "mode": mode,
            "report_url": report_url,
            "base_url": settings.FLEETWISE_BASE_URL,
        },
    )


def render_text(numbers: dict[str, Any], report_url: str = "") -> str:
    """The plain-text alternative of the e-mail."""
    return render_to_string(
        "reports/report_email.txt", {"numbers": numbers, "report_url": report_url}
    )


# -- XLSX ------------------------------------------------------------------------------------


def _write_table(
    sheet: Worksheet,
    columns: Sequence[str],
    rows: Iterable[dict[str, Any]],
    *,
    start_row: int = 1,
    headers: Sequence[str] | None = None,
) -> int:
    """Write a header and rows from ``start_row``; returns the last row written."""
    for index, title in enumerate(headers or columns, start=1):
        cell = sheet.cell(row=start_row, column=index, value=title)
        cell.font = Font(bold=True)
        width = max(10, min(40, len(str(title)) + 2))
        letter = get_column_letter(index)
        sheet.column_dimensions[letter].width = max(sheet.column_dimensions[letter].width, width)
    row_number = start_row
    for row in rows:
        row_number += 1
        for index, column in enumerate(columns, start=1):
            value = row.get(column)
            if isinstance(value, dict | list):
                value = str(value)
            if value is None:
                _no_data_cell(sheet.cell(row=row_number, column=index), row, column)
                continue
            cell = sheet.cell(row=row_number, column=index, value=value)
            if isinstance(value, float):
                cell.number_format = PERCENT_FORMAT if column in SHARE_COLUMNS else NUMBER_FORMAT
    return row_number


def _no_data_cell(cell, row: dict[str, Any], column: str) -> None:
    """A figure without data reads "—" (never blank, never 0), its reason in a cell note."""
    cell.value = NO_DATA
    cell.comment = Comment(no_data_reason(row, column), "Fleetwise")


def no_data_reason(row: dict[str, Any], column: str) -> str:
    """Why a report figure is missing, in words (the row's own reason when it has one)."""
    if row.get("no_data_reason"):
        return str(row["no_data_reason"])
    if column in ("previous", "delta"):
        return "no figure for the previous period"
    if row.get("utilization_reason") and column in UTILIZATION_COLUMNS:
        return str(row["utilization_reason"])
    if column.startswith("cost_per") or column.endswith("_share"):
        return "undefined: nothing measured to divide by in this period"
    if "cost" in column:
        return "no cost data for this row in this period"
    return "no usage records for this row in this period"


def _bar_chart(
    title: str,
    sheet: Worksheet,
    *,
    label_column: int,
    value_columns: Sequence[int],
    header_row: int,
    last_row: int,
    y_title: str = "",
    percent: bool = False,
    first_row: int | None = None,
) -> BarChart:
    """A bar chart of rows ``first_row`` (default: below the header) to ``last_row``; series
    titled from the header row."""
    chart = BarChart()
    chart.type = "bar"
    chart.title = title
    chart.y_axis.title = y_title
    chart.height, chart.width = 7.5, 16
    if percent:
        chart.y_axis.number_format = "0%"
        chart.y_axis.scaling.min = 0
        chart.y_axis.scaling.max = 1
    first = first_row or header_row + 1
    for column in value_columns:
        data = Reference(sheet, min_col=column, min_row=first, max_row=max(last_row, first))
        title = sheet.cell(row=header_row, column=column).value
        chart.add_data(data, titles_from_data=False)
        chart.series[-1].tx = SeriesLabel(v=str(title))
    labels = Reference(sheet, min_col=label_column, min_row=first, max_row=max(last_row, first))
    chart.set_categories(labels)
    return chart


def _conversion_columns(numbers: dict[str, Any]) -> tuple[str, ...]:
    """("conversion",) when the report's money was converted to its reporting currency."""
    return ("conversion",) if (numbers.get("reporting_currency") or {}).get("converted") else ()


def _chargeback_sheet(
    sheet: Worksheet, teams: list[dict[str, Any]], columns: Sequence[str] = CHARGEBACK_COLUMNS
) -> None:
    """One table (teams currency by currency) and one native chart per currency: charges in
    two currencies never share a money axis."""
    _write_table(sheet, columns, teams)  # grouped by currency (reports.content)
    charged = CHARGEBACK_COLUMNS.index("chargeback_cost") + 1
    first = 2
    for number, currency in enumerate(dict.fromkeys(row["currency"] for row in teams)):
        count = sum(1 for row in teams if row["currency"] == currency)
        chart = _bar_chart(
            f"Chargeback per team ({currency})",
            sheet,
            label_column=1,
            value_columns=[charged],
            header_row=1,
            last_row=first + count - 1,
            first_row=first,
            y_title=currency,
        )
        sheet.add_chart(chart, f"J{2 + 16 * number}")
        first += count


def _waste_sheet(sheet: Worksheet, rows: list[dict[str, Any]]) -> None:
    """Money lost per factor: one table and one native chart per currency (two currencies
    never share a money axis), stacked."""
    if not rows:
        _write_table(sheet, ["label", "currency", "lost_cost"], [])
        sheet.cell(row=2, column=1, value=f"{NO_DATA} no cost data in this period")
        return
    header = 1
    for number, currency in enumerate(dict.fromkeys(row["currency"] for row in rows)):
        mine = [row for row in rows if row["currency"] == currency]
        rate = ["conversion"] if any(row.get("conversion") for row in mine) else []
        last = _write_table(
            sheet,
            ["label", "currency", "lost_cost", *rate],
            mine,
            start_row=header,
            headers=["Factor", "Currency", f"Lost ({currency})", *rate],
        )
        chart = _bar_chart(
            f"Money lost per factor ({currency})",
            sheet,
            label_column=1,
            value_columns=[3],
            header_row=header,
            last_row=last,
        )
        sheet.add_chart(chart, f"E{2 + 16 * number}")
        header = last + 2


def _summary_sheet(summary: Worksheet, numbers: dict[str, Any]) -> None:
    """Title, factors (with their chart), figures, recommendations and notes."""
    summary.title = "Summary"
    currency = numbers["summary"]["currency"]
    figures = [
        {**row, "label": f"{row['label']} ({currency})"}
        if row["unit"] == "money" and currency
        else row
        for row in numbers["summary"]["figures"]
    ]
    summary["A1"] = numbers["schedule"]["name"]
    summary["A1"].font = Font(bold=True, size=14)
    summary["A2"] = (
        f"{numbers['schedule']['template_label']} · {numbers['schedule']['scope_label']} · "
        f"{numbers['period']['label']} ({numbers['timezone']})"
    )
    summary["A3"] = f"Previous period: {numbers['previous_period']['label']}"
    factor_header = 5
    columns = ["label", "value", "previous", "delta", "arrow"]
    last = _write_table(
        summary,
        columns,
        numbers["summary"]["factors"],
        start_row=factor_header,
        headers=["Factor", "This period", "Previous period", "Change", "Trend"],
    )
    chart = _bar_chart(
        "Effective utilization and factors",
        summary,
        label_column=1,
        value_columns=[2, 3],
        header_row=factor_header,
        last_row=last,
        percent=True,
    )
    summary.add_chart(chart, "H2")
    rate = list(_conversion_columns(numbers))
    last = _write_table(
        summary,
        [*columns, *rate],
        figures,
        start_row=last + 2,
        headers=["Figure", "This period", "Previous period", "Change", "Trend", *rate],
    )
    recommendation_row = last + 2
    summary.cell(row=recommendation_row, column=1, value="Recommendations").font = Font(bold=True)
    for offset, item in enumerate(numbers["recommendations"], start=1):
        summary.cell(row=recommendation_row + offset, column=1, value=f"{offset}. {item['text']}")
    for offset, warning in enumerate(
        numbers["warnings"], start=len(numbers["recommendations"]) + 2
    ):
        summary.cell(row=recommendation_row + offset, column=1, value=f"Note: {warning}")
    summary.column_dimensions["A"].width = 34


def _table_sheet(
    workbook: SafeWorkbook,
    title: str,
    columns: Sequence[str],
    rows: list[dict[str, Any]],
    chart: dict[str, Any] | None = None,
) -> None:
    """One data sheet; with ``chart`` (title, label_column, value_column, anchor, percent) a
    native bar chart of its rows, when there are any."""
    sheet = workbook.create_sheet(title)
    last = _write_table(sheet, columns, rows)
    if chart is None or not rows:
        return
    figure = _bar_chart(
        chart["title"],
        sheet,
        label_column=chart["label_column"],
        value_columns=[chart["value_column"]],
        header_row=1,
        last_row=last,
        percent=chart.get("percent", False),
    )
    sheet.add_chart(figure, chart["anchor"])


def _utilization_sheets(workbook: SafeWorkbook, numbers: dict[str, Any]) -> None:
    share = 1 + UTILIZATION_COLUMNS.index("allocation_share") + 1
    for group in UTILIZATION_GROUPS:
        chart = {
            "title": f"Utilization per {group}",
            "label_column": 1,
            "value_column": share,
            "anchor": f"{get_column_letter(len(UTILIZATION_COLUMNS) + 3)}2",
            "percent": True,
        }
        _table_sheet(
            workbook,
            UTILIZATION_SHEETS[group],
            ["name", *UTILIZATION_COLUMNS],
            numbers["utilization"][group],
            chart if group in ("cluster", "pool") else None,
        )


FAILURE_COLUMNS = (
    "cluster",
    "failed_jobs",
    "node_fail_jobs",
    "preempted_jobs",
    "lost_card_hours",
    "down_card_hours",
    "effective_time",
)
IDLE_COLUMNS = ("cluster", "pool", "idle_card_hours", "idle_share", "idle_cost", "currency")
RECOMMENDATION_COLUMNS = (
    "cluster",
    "factor",
    "lost_card_hours",
    "lost_cost",
    "lost_cost_per_month",
    "currency",
)


def render_xlsx(numbers: dict[str, Any]) -> bytes:
    """A workbook: Summary with charts, then one data sheet per table; native Excel charts.

    Names (schedules, clusters, teams) are user text: `SafeWorkbook` keeps them text cells.
    """
    workbook = SafeWorkbook()
    _summary_sheet(workbook.active, numbers)
    sections = set(numbers["sections"])
    if "utilization" in sections:
        _utilization_sheets(workbook, numbers)
    if "idle" in sections:
        idle_chart = {"title": "Idle card-hours per pool", "label_column": 2, "value_column": 3}
        _table_sheet(
            workbook,
            "Top idle pools",
            IDLE_COLUMNS,
            numbers["idle"]["top_pools"],
            {**idle_chart, "anchor": "I2"},
        )
    rate = list(_conversion_columns(numbers))  # each converted row states its rate
    if "costs" in sections:
        columns = ["name", *COST_COLUMNS, *rate]
        _table_sheet(workbook, "Costs by cluster", columns, numbers["costs"]["clusters"])
        _table_sheet(workbook, "Costs by pool", columns, numbers["costs"]["pools"])
    if "chargeback" in sections:
        teams = numbers["chargeback"]["teams"]
        _chargeback_sheet(workbook.create_sheet("Chargeback"), teams, [*CHARGEBACK_COLUMNS, *rate])
    if "waste" in sections:
        _waste_sheet(workbook.create_sheet("Waste by factor"), numbers["waste"])
    if "failures" in sections:
        _table_sheet(workbook, "Failures", FAILURE_COLUMNS, numbers["failures"]["clusters"])
    if numbers["recommendations"]:
        columns = [*RECOMMENDATION_COLUMNS, "text"]
        _table_sheet(workbook, "Recommendations", columns, numbers["recommendations"])
        workbook["Recommendations"].column_dimensions["G"].width = 100  # the text
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


# -- CSV -------------------------------------------------------------------------------------

CSV_COLUMNS = ("section", "group", "name", "metric", "value")


def csv_rows(numbers: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure as one long-format row: section, group, name, metric, value."""
    rows: list[dict[str, Any]] = []

    def add(section: str, group: str, name: Any, metrics: dict[str, Any], keys: Iterable[str]):
        for key in keys:
            value = metrics.get(key)
            if isinstance(value, dict | list):
                continue
            rows.append(
                {"section": section, "group": group, "name": name, "metric": key, "value": value}
            )

    rate = _conversion_columns(numbers)  # the rate note of each converted row
    for row in numbers["summary"]["factors"]:
        add("summary", "factor", row["name"], row, ("value", "previous", "delta"))
    for row in numbers["summary"]["figures"]:
        add("summary", "figure", row["name"], row, ("value", "previous", "delta", *rate))
    for group in UTILIZATION_GROUPS:
        for row in numbers["utilization"][group]:
            add("utilization", group, row["name"], row, UTILIZATION_COLUMNS)
    for row in numbers["idle"]["top_pools"]:
        add(
            "idle",
            "pool",
            f"{row['cluster']} / {row['pool']}",
            row,
            ("idle_card_hours", "idle_share", "idle_cost"),
        )
    for row in numbers["costs"]["clusters"]:
        add("costs", "cluster", row["name"], row, (*COST_COLUMNS, *rate))
    for row in numbers["costs"]["pools"]:
        add("costs", "pool", row["name"], row, (*COST_COLUMNS, *rate))
    for row in numbers["chargeback"]["teams"]:
        add("chargeback", "team", row["team"], row, (*CHARGEBACK_COLUMNS[1:], *rate))
    for row in numbers["waste"]:
        add("waste", f"factor {row['currency']}", row["factor"], row, ("lost_cost",))
    for row in numbers["failures"]["clusters"]:
        add("failures", "cluster", row["cluster"], row, tuple(k for k in row if k != "cluster"))
    for index, row in enumerate(numbers["recommendations"], start=1):
        add(
            "recommendations",
            row["factor"],
            row["cluster"],
            row,
            ("lost_card_hours", "lost_cost", "lost_cost_per_month"),
        )
        rows.append(
            {
                "section": "recommendations",
                "group": row["factor"],
                "name": row["cluster"],
                "metric": f"text_{index}",
                "value": row["text"],
            }
        )
    return rows


def render_csv(numbers: dict[str, Any]) -> bytes:
    """Every cell through the shared rule: floats in full precision, formulas inert."""
    buffer = io.StringIO()
    writer = safe_csv_writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows([row[column] for column in CSV_COLUMNS] for row in csv_rows(numbers))
    return buffer.getvalue().encode("utf-8")
