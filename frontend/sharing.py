"""Export and share from the pages: the export toolbar's URLs and the spreadsheet-links page.

Every list and dashboard shows "Export CSV", "Export XLSX" and "Spreadsheet link" for the API
list behind it, with the page's filters: the files are the API's own exports (same renderers,
same dated names). The spreadsheet-links page creates, lists, copies and revokes export tokens
with the same rules as ``/api/v1/export-tokens/`` (its serializer validates the form).
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.db.models import Model
from django.http import HttpRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods

from access.pages import role_required
from access.roles import VIEWER
from exports import services
from exports.api.serializers import ExportTokenCreateSerializer
from exports.models import ExportFormat

# Page parameters that never reach the API: paging, the page's own sort, a format.
PAGE_ONLY_PARAMS = ("page", "page_size", "sort", "format")
LINKS_URL_NAME = "frontend:spreadsheet-links"


def api_params(params: QueryDict | dict, rename: dict[str, str] | None = None) -> list[tuple]:
    """The page's filters as the API's query: empty values and page-only keys dropped."""
    rename = rename or {}
    if isinstance(params, QueryDict):
        items = [(key, value) for key in params for value in params.getlist(key)]
    else:
        items = list(params.items())
    pairs = []
    for key, value in items:
        if key in PAGE_ONLY_PARAMS or value is None or value == "":
            continue
        pairs.append((rename.get(key, key), _param_text(value)))
    return pairs


def _param_text(value) -> str:
    if isinstance(value, Model):
        return str(value.pk)
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def export_urls(api_path: str, pairs: list[tuple], title: str) -> dict[str, str]:
    """CSV and XLSX downloads of the API list, and the spreadsheet-link page for it."""
    query = urlencode(pairs)
    url = f"{api_path}?{query}" if query else api_path
    joiner = "&" if query else "?"
    share = reverse(LINKS_URL_NAME) + "?" + urlencode({"url": url, "name": title})
    return {
        "csv": f"{url}{joiner}format=csv",
        "xlsx": f"{url}{joiner}format=xlsx",
        "link": share,
        "api": url,
    }


def _form_errors(errors: dict) -> dict[str, list[str]]:
    return {name: [str(message) for message in problems] for name, problems in errors.items()}


def _page(request: HttpRequest, form: dict, errors: dict, created: dict | None, status: int):
    tokens = services.tokens_for(request.user).order_by("-created")
    context = {
        "form": form,
        "errors": errors,
        "created": created,
        "tokens": tokens,
        "formats": ExportFormat.choices,
        "max_days": settings.EXPORT_TOKEN_MAX_DAYS,
    }
    return render(request, "frontend/sharing/links.html", context, status=status)


def _create(request: HttpRequest):
    payload = ExportTokenCreateSerializer(data=request.POST)
    form = {key: request.POST.get(key, "") for key in ("name", "url", "format", "expires_in_days")}
    if not payload.is_valid():
        return _page(request, form, _form_errors(payload.errors), None, 400)
    data = dict(payload.validated_data)  # name, url, format, expires_in_days
    try:
        token, clear = services.create_token(owner=request.user, fmt=data.pop("format"), **data)
    except services.ExportInputError as exc:
        return _page(request, form, exc.errors, None, 400)
    link = request.build_absolute_uri(reverse("export-fetch", args=[clear]))
    created = {"token": token, "link": link}
    return _page(request, {"format": "csv", "expires_in_days": 30}, {}, created, 201)


@role_required(write_role=VIEWER)  # every role may share what it can read, as in the API
@require_http_methods(["GET", "HEAD", "POST"])
def spreadsheet_links(request: HttpRequest):
    """Your spreadsheet links; a new one from ?url=&name= (what an export toolbar sends)."""
    if request.method == "POST":
        return _create(request)
    form = {
        "name": request.GET.get("name", "")[:100],
        "url": request.GET.get("url", ""),
        "format": request.GET.get("format", "csv"),
        "expires_in_days": 30,
    }
    return _page(request, form, {}, None, 200)


@role_required(write_role=VIEWER)
@require_http_methods(["GET", "HEAD", "POST"])
def revoke_link(request: HttpRequest, pk: int):
    """GET: what revoking does, and the button that confirms it; POST: revoke at once, the
    spreadsheets using the link get 410 Gone from now on."""
    token = get_object_or_404(services.tokens_for(request.user), pk=pk)
    if request.method != "POST":
        return render(request, "frontend/sharing/revoke_confirm.html", {"token": token})
    services.revoke(token)
    messages.success(request, f"Revoked “{token.name}”: the link no longer answers.")
    return redirect(LINKS_URL_NAME)


urlpatterns = [
    path("spreadsheet-links/", spreadsheet_links, name="spreadsheet-links"),
    path("spreadsheet-links/<int:pk>/revoke/", revoke_link, name="spreadsheet-link-revoke"),
]
