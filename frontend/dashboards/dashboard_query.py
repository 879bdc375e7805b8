"""One view of the Usage or Costs dashboards and its memo: what the selectors read.

A :class:`DashboardQuery` holds a view's query parameters, the teams its viewer may see (None:
every team) and what the view already computed. A page builds it from its request (one per
request, so a page and its charts share one report run); the worker builds it from plain
parameters when it precomputes the default views. Results are also kept in the shared
``dashboards`` cache (a database table by default, shared by web and worker processes), keyed
by the data version, so a cached result is never served for changed data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import BadRequest
from django.db import connection
from django.http import HttpRequest, QueryDict

from access.scoping import request_teams
from accounting.models import SreportUtilization, UsageDailyRollup
from frontend.dashboards.period_forms import PeriodForm
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

CACHE_ALIAS = "dashboards"
# Keys carry the data version, so entries only age out (or are culled) when superseded.
CACHE_SECONDS = 24 * 3600
# (model, column): a row count and the column's maximum, the latest change. sreport rows keep
# their id when a re-import changes them, but take the new import job; the card catalog has
# no timestamp, its history table records every save.
VERSIONED = (
    (UsageDailyRollup, "refreshed_at"),
    (SreportUtilization, "id"),
    (SreportUtilization, "import_job_id"),
    (Site, "updated"),
    (Cluster, "updated"),
    (Pool, "updated"),
    (NodeGroup, "updated"),
    (AcceleratorModel.history.model, "history_id"),
)


@dataclass
class DashboardQuery:
    """A dashboard view: its parameters (the API's), its viewer's teams and its memo."""

    params: QueryDict
    teams: frozenset[str] | None = None
    memo: dict = field(default_factory=dict)
    # Whether intermediate results (see `memo`) go to the shared cache too.
    shares_intermediates: bool = False

    @classmethod
    def of_params(cls, params: Mapping[str, str]) -> DashboardQuery:
        """A fleet-wide view (every team) of plain parameters: what the worker precomputes
        (its intermediate results are stored for the views that follow)."""
        query_dict = QueryDict(mutable=True)
        query_dict.update(params)
        return cls(query_dict, shares_intermediates=True)


View = HttpRequest | DashboardQuery


def view_of(source: View) -> DashboardQuery:
    """The view of a request (one per request) or the view itself."""
    if isinstance(source, DashboardQuery):
        return source
    view = getattr(source, "_dashboard_query", None)
    if view is None:
        view = DashboardQuery(source.GET, request_teams(source))
        source._dashboard_query = view
    return view


def bound_form(form_class: type[PeriodForm], view: View) -> PeriodForm:
    """The page's filter form, one per view: validated once (its defaults read the rollups)."""
    cache = view_memo(view)
    key = ("form", form_class.__name__)
    if key not in cache:
        params = view_of(view).params.copy()
        # The form shows the values in effect: a missing choice is its default, selected.
        for name, default in form_class.defaults.items():
            if not params.get(name):
                params[name] = default
        form = form_class(params)
        if form.is_valid():
            # ... and the period's default days, written into the date fields.
            for name in ("start", "end"):
                params[name] = form.cleaned_data[name].isoformat()
        cache[key] = form
    return cache[key]


def query(form_class: type[PeriodForm], view: View) -> dict[str, Any]:
    """The validated query of a page (defaults filled in); BadRequest naming the field."""
    cache = view_memo(view)
    key = ("query", form_class.__name__)
    if key not in cache:
        form = bound_form(form_class, view)
        if not form.is_valid():
            raise BadRequest(
                "; ".join(
                    f"{form.fields[name].label if name in form.fields else name}: {' '.join(errs)}"
                    for name, errs in form.errors.items()
                )
            )
        data = dict(form.cleaned_data)
        for name, default in form_class.defaults.items():
            data[name] = data.get(name) or default
        cache[key] = data
    return cache[key]


def view_memo(view: View) -> dict:
    """What this view already computed (forms, queries, reports)."""
    return view_of(view).memo


def view_teams(view: View) -> frozenset[str] | None:
    """The teams the view's viewer may see; None: every team."""
    return view_of(view).teams


def data_version(view: View) -> str:
    """What the dashboards' numbers depend on, in one query: rollups, sreport, inventory.

    Imports and refreshes bump a count or ``refreshed_at``, inventory edits ``updated`` (or
    the card catalog's history), so a cached result is never served for changed data.
    """
    cache = view_memo(view)
    if "version" not in cache:
        quote = connection.ops.quote_name
        parts = []
        for model, column in VERSIONED:
            table = quote(model._meta.db_table)
            # Quoted identifiers of our own model tables; no value from a request.
            parts.append(f"(SELECT COUNT(*) FROM {table})")  # noqa: S608  # nosec B608
            parts.append(f"(SELECT MAX({quote(column)}) FROM {table})")  # noqa: S608  # nosec B608
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(parts))
            row = cursor.fetchone()
        cache["version"] = hashlib.sha256(repr(row).encode()).hexdigest()[:20]
    return cache["version"]


def shared_cache():
    return caches[CACHE_ALIAS]


# Counts computations per key kind (tests check that a precomputed view computes nothing).
computations: dict[str, int] = {}


def memo(view: View, key: tuple, compute: Callable[[], Any], *, intermediate: bool = False) -> Any:
    """Per view, then across views and processes (the ``dashboards`` cache) until the data
    version changes.

    An ``intermediate`` result (what reports are built from, not itself shown) is read from
    the shared cache but stored there only by views that share intermediates (the worker's):
    on a page it would cost a cache write (a transaction with the database cache, ~3-8 ms on
    PostgreSQL) for a result the page's cached reports already hold.
    """
    cache = view_memo(view)
    if key not in cache:
        shared_key = (
            f"usage-dashboards:{key[0]}:"
            + hashlib.sha256(
                repr((key, data_version(view), settings.TIME_ZONE)).encode()
            ).hexdigest()
        )
        value = shared_cache().get(shared_key)
        if value is None:
            computations[key[0]] = computations.get(key[0], 0) + 1
            value = compute()
            if not intermediate or view_of(view).shares_intermediates:
                shared_cache().set(shared_key, value, CACHE_SECONDS)
        cache[key] = value
    return cache[key]
