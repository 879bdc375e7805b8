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
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from config.cellsafety import SafeWorkbook, safe_csv_writer
from reports.charts import render_charts
from reports.content import (
    CHARGEBACK_COLUMNS,
    COST_COLUMNS,
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
            cell = sheet.cell(row=row_number, column=index, value=value)
            if isinstance(value, float):
                cell.number_format = PERCENT_FORMAT if column in SHARE_COLUMNS else NUMBER_FORMAT
    return row_number


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
) -> BarChart:
    chart = BarChart()
    chart.type = "bar"
    chart.title = title
    chart.y_axis.title = y_title
    chart.height, chart.width = 7.5, 16
    if percent:
        chart.y_axis.number_format = "0%"
        chart.y_axis.scaling.min = 0
        chart.y_axis.scaling.max = 1
    for column in value_columns:
        data = Reference(
            sheet, min_col=column, min_row=header_row, max_row=max(last_row, header_row)
        )
        chart.add_data(data, titles_from_data=True)
    labels = Reference(
        sheet, min_col=label_column, min_row=header_row + 1, max_row=max(last_row, header_row + 1)
    )
    chart.set_categories(labels)
    return chart


def render_xlsx(numbers: dict[str, Any]) -> bytes:
    """A workbook: Summary with charts, then one data sheet per table; native Excel charts.

    Names (schedules, clusters, teams) are user text: `SafeWorkbook` keeps them text cells.
    """
    workbook = SafeWorkbook()
    summary = workbook.active
    summary.title = "Summary"
    sections = set(numbers["sections"])
    currency = numbers["summary"]["currency"]
    summary["A1"] = numbers["schedule"]["name"]
    summary["A1"].font = Font(bold=True, size=14)
    summary["A2"] = (
        f"{numbers['schedule']['template_label']} · {numbers['schedule']['scope_label']} · "
        f"{numbers['period']['label']} ({numbers['timezone']})"
    )
    summary["A3"] = f"Previous period: {numbers['previous_period']['label']}"
    factor_header = 5
    last = _write_table(
        summary,
        ["label", "value", "previous", "delta", "arrow"],
        numbers["summary"]["factors"],
        start_row=factor_header,
        headers=["Factor", "This period", "Previous period", "Change", "Trend"],
    )
    summary.add_chart(
        _bar_chart(
            "Effective utilization and factors",
            summary,
            label_column=1,
            value_columns=[2, 3],
            header_row=factor_header,
            last_row=last,
            percent=True,
        ),
        "H2",
    )
    figures_header = last + 2
    last = _write_table(
        summary,
        ["label", "value", "previous", "delta", "arrow"],
        numbers["summary"]["figures"],
        start_row=figures_header,
        headers=["Figure", "This period", "Previous period", "Change", f"Trend ({currency})"],
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

    if "utilization" in sections:
        for group in UTILIZATION_GROUPS:
            sheet = workbook.create_sheet(UTILIZATION_SHEETS[group])
            rows = numbers["utilization"][group]
            last = _write_table(sheet, ["name", *UTILIZATION_COLUMNS], rows)
            if group in ("cluster", "pool") and rows:
                sheet.add_chart(
                    _bar_chart(
                        f"Utilization per {group}",
                        sheet,
                        label_column=1,
                        value_columns=[1 + UTILIZATION_COLUMNS.index("allocation_share") + 1],
                        header_row=1,
                        last_row=last,
                        percent=True,
                    ),
                    f"{get_column_letter(len(UTILIZATION_COLUMNS) + 3)}2",
                )
    if "idle" in sections:
        sheet = workbook.create_sheet("Top idle pools")
        columns = ["cluster", "pool", "idle_card_hours", "idle_share", "idle_cost", "currency"]
        last = _write_table(sheet, columns, numbers["idle"]["top_pools"])
        if numbers["idle"]["top_pools"]:
            sheet.add_chart(
                _bar_chart(
                    "Idle card-hours per pool",
                    sheet,
                    label_column=2,
                    value_columns=[3],
                    header_row=1,
                    last_row=last,
                ),
                "I2",
            )
    if "costs" in sections:
        sheet = workbook.create_sheet("Costs by cluster")
        _write_table(sheet, ["name", *COST_COLUMNS], numbers["costs"]["clusters"])
        sheet = workbook.create_sheet("Costs by pool")
        _write_table(sheet, ["name", *COST_COLUMNS], numbers["costs"]["pools"])
    if "chargeback" in sections:
        sheet = workbook.create_sheet("Chargeback")
        teams = numbers["chargeback"]["teams"]
        last = _write_table(sheet, CHARGEBACK_COLUMNS, teams)
        if teams:
            sheet.add_chart(
                _bar_chart(
                    "Chargeback per team",
                    sheet,
                    label_column=1,
                    value_columns=[CHARGEBACK_COLUMNS.index("chargeback_cost") + 1],
                    header_row=1,
                    last_row=last,
                ),
                "J2",
            )
    if "waste" in sections:
        sheet = workbook.create_sheet("Waste by factor")
        last = _write_table(sheet, ["label", "lost_cost"], numbers["waste"])
        if numbers["waste"]:
            sheet.add_chart(
                _bar_chart(
                    "Money lost per factor",
                    sheet,
                    label_column=1,
                    value_columns=[2],
                    header_row=1,
                    last_row=last,
                ),
                "D2",
            )
    if "failures" in sections:
        sheet = workbook.create_sheet("Failures")
        columns = [
            "cluster",
            "failed_jobs",
            "node_fail_jobs",
            "preempted_jobs",
            "lost_card_hours",
            "down_card_hours",
            "effective_time",
        ]
        _write_table(sheet, columns, numbers["failures"]["clusters"])
    if numbers["recommendations"]:
        sheet = workbook.create_sheet("Recommendations")
        columns = ["cluster", "factor", "lost_cost", "lost_cost_per_month", "currency", "text"]
        _write_table(sheet, columns, numbers["recommendations"])
        sheet.column_dimensions["F"].width = 100
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

    for row in numbers["summary"]["factors"]:
        add("summary", "factor", row["name"], row, ("value", "previous", "delta"))
    for row in numbers["summary"]["figures"]:
        add("summary", "figure", row["name"], row, ("value", "previous", "delta"))
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
        add("costs", "cluster", row["name"], row, COST_COLUMNS)
    for row in numbers["costs"]["pools"]:
        add("costs", "pool", row["name"], row, COST_COLUMNS)
    for row in numbers["chargeback"]["teams"]:
        add("chargeback", "team", row["team"], row, CHARGEBACK_COLUMNS[1:])
    for row in numbers["waste"]:
        add("waste", "factor", row["factor"], row, ("lost_cost",))
    for row in numbers["failures"]["clusters"]:
        add("failures", "cluster", row["cluster"], row, tuple(k for k in row if k != "cluster"))
    for index, row in enumerate(numbers["recommendations"], start=1):
        add("recommendations", row["factor"], row["cluster"], row, ("lost_cost_per_month",))
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
