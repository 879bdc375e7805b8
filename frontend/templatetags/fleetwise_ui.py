"""Template helpers for the browser app: object links and role checks."""

from __future__ import annotations

from django import template
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html

from access.roles import has_role as user_has_role
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

register = template.Library()

# The models have no get_absolute_url; the browser app owns its URLs.
DETAIL_URL_NAMES = {
    Site: "frontend:site-detail",
    Cluster: "frontend:cluster-detail",
    Pool: "frontend:pool-detail",
    NodeGroup: "frontend:nodegroup-detail",
    AcceleratorModel: "frontend:accelerator-detail",
}


def detail_url_of(obj) -> str:
    return reverse(DETAIL_URL_NAMES[type(obj)], args=[obj.pk])


@register.filter
def detail_url(obj) -> str:
    return detail_url_of(obj)


@register.filter
def has_role(user, role: str) -> bool:
    return user_has_role(user, role)


@register.filter
def percent(value, digits: int = 0) -> str:
    """0.7 → "70 %"; empty stays empty."""
    if value is None or value == "":
        return ""
    return f"{float(value) * 100:.{int(digits)}f} %"


@register.simple_tag(takes_context=True)
def nav_link(context, href: str, label: str) -> str:
    """A main-navigation link, marked as the current section when the page is inside it."""
    from django.utils.html import format_html

    path = context["request"].path
    current = path == href if href == "/" else path.startswith(href)
    if current:
        return format_html('<a href="{}" aria-current="page">{}</a>', href, label)
    return format_html('<a href="{}">{}</a>', href, label)


@register.filter
def as_json(value) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register.filter
def cell(cells: dict, column: str) -> str:
    """A cell of an import row by column name."""
    return cells.get(column, "")


@register.simple_tag
def plotly_js() -> str:
    """plotly.js from the installed plotly package, served by the app (never a CDN)."""
    return format_html('<script src="{}"></script>', static("plotly/plotly.min.js"))
