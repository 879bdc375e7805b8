"""Number formatting for report templates (the e-mail, the print page and the app pages)."""

from __future__ import annotations

from django import template

from reports.content import NO_DATA
from reports.content import money as format_money

register = template.Library()


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.384 → "38.4 %"; missing → "—" (no data, never 0)."""
    if value is None or value == "":
        return NO_DATA
    return f"{float(value) * 100:.{int(digits)}f} %"


@register.filter
def points(value) -> str:
    """A change of a share in percentage points: 0.021 → "+2.1 pts"."""
    if value is None or value == "":
        return ""
    return f"{float(value) * 100:+.1f} pts"


@register.filter
def num(value, digits: int = 0) -> str:
    if value is None or value == "":
        return NO_DATA
    return f"{float(value):,.{int(digits)}f}"


@register.filter
def money(value, currency: str | None = None) -> str:
    return format_money(None if value is None else float(value), currency)


@register.filter
def signed_pct(value) -> str:
    """A relative change: 0.05 → "+5 %"."""
    if value is None or value == "":
        return ""
    return f"{float(value) * 100:+.0f} %"


@register.filter
def figure(row: dict, currency: str | None = None) -> str:
    """A summary figure in its unit."""
    if row.get("unit") == "money":
        return format_money(row.get("value"), currency)
    return num(row.get("value"))


@register.filter
def figure_previous(row: dict, currency: str | None = None) -> str:
    if row.get("unit") == "money":
        return format_money(row.get("previous"), currency)
    return num(row.get("previous"))


@register.filter
def trend_class(row: dict) -> str:
    better = row.get("better")
    return "flat" if better is None else ("better" if better else "worse")


@register.filter
def format_label(value: str) -> str:
    """xlsx → "XLSX", print_html → "Print page"."""
    return {
        "xlsx": "XLSX",
        "csv": "CSV",
        "print_html": "Print page",
        "html_email": "HTML e-mail",
    }.get(value, value)
