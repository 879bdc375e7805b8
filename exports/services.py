"""Spreadsheet links (export tokens) and background XLSX exports.

A token's scope is one API path plus its normalized query. Using a token runs that list view
as the token's owner — the owner's current role decides, as for any request — and logs the
use. Tokens are random 256-bit strings shown once; only their SHA-256 is stored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import secrets
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponseBase, QueryDict
from django.urls import Resolver404, resolve
from django.utils import timezone
from rest_framework.exceptions import APIException

from access.scoping import team_allowed, visible_teams
from core.jobs import lifecycle as jobs
from core.jobs.limits import check_open_jobs
from core.jobs.status import JobStatus
from core.tabular.columns import ROWS_HEADER, write_xlsx
from core.tabular.exporting import TabularListMixin
from exports.models import ExportJob, ExportToken, ExportTokenUse

logger = logging.getLogger(__name__)

API_PREFIX = "/api/v1/"
# Paths a token or job may not point at: the export machinery itself and the docs.
EXCLUDED_PREFIXES = tuple(
    API_PREFIX + name
    for name in (
        "export/",
        "export-tokens/",
        "export-jobs/",
        "schema/",
        "docs/",
        "redoc/",
        "tasks/",
    )
)
DEFAULT_TOKEN_DAYS = 30


class ExportInputError(Exception):
    def __init__(self, errors: dict[str, list[str]]):
        super().__init__(errors)
        self.errors = errors


class ExportForbidden(ExportInputError):
    """The user may not read what the export would hold: a 403 in the API, an error on the
    ``url`` field of a form."""

    def __init__(self, detail: str):
        super().__init__({"url": [detail]})
        self.detail = detail


class TokenRefused(Exception):
    """Unknown (404), revoked or expired (410) token."""

    def __init__(self, status_code: int, detail: str, token: ExportToken | None = None):
        super().__init__(detail)
        self.status_code, self.detail, self.token = status_code, detail, token


def hash_token(clear: str) -> str:
    return hashlib.sha256(clear.encode()).hexdigest()


def normalize_scope(url: str) -> tuple[str, str]:
    """(path, query) of an API URL: keys sorted, ``format`` dropped; 400 if not a list API."""
    parts = urlsplit(url.strip())
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    if not path.startswith(API_PREFIX) or path.startswith(EXCLUDED_PREFIXES):
        raise ExportInputError({"url": [f"Must be an API list under {API_PREFIX}."]})
    try:
        match = resolve(path)
    except Resolver404 as exc:
        raise ExportInputError({"url": [f"No API endpoint at {path}."]}) from exc
    actions = getattr(match.func, "actions", None)
    view_class = getattr(match.func, "cls", None)
    can_get = "get" in actions if actions is not None else hasattr(view_class, "get")
    if view_class is None or not can_get:
        raise ExportInputError({"url": [f"{path} cannot be read with GET."]})
    params = QueryDict(parts.query)
    pairs = [
        (key, value) for key in sorted(params) if key != "format" for value in params.getlist(key)
    ]
    return path, _within_stored_length(path, urlencode(pairs))


def _within_stored_length(path: str, query: str) -> str:
    """A 400 for a scope longer than its columns hold (PostgreSQL refused it with a 500)."""
    for part, text in (("path", path), ("query", query)):
        most = ExportToken._meta.get_field(part).max_length
        if len(text) > most:
            message = f"The link's {part} is {len(text)} characters long; at most {most}."
            raise ExportInputError({"url": [message]})
    return query


# -- running a scoped query as a user ---------------------------------------------------------


def scoped_request(user, path: str, query: str, fmt: str, base: HttpRequest | None = None):
    """A GET for ``path?query`` authenticated as ``user`` (no cookie, no header)."""
    text = "&".join(part for part in (query, urlencode({"format": fmt})) if part)
    inner = HttpRequest()
    inner.method = "GET"
    inner.path = inner.path_info = path
    meta = {"REQUEST_METHOD": "GET", "QUERY_STRING": text, "HTTP_ACCEPT": "*/*"}
    if base is not None:
        for key in ("HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "REMOTE_ADDR", "wsgi.url_scheme"):
            if key in base.META:
                meta[key] = base.META[key]
        proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
        if proxy and proxy[0] in base.META:
            meta[proxy[0]] = base.META[proxy[0]]
    else:
        meta.update({"SERVER_NAME": "localhost", "SERVER_PORT": "80"})
    inner.META = meta
    inner.GET = QueryDict(text)
    inner.user = user
    # DRF's own hook for an already-authenticated request: the view sees exactly this user.
    inner._force_auth_user = user
    inner._dont_enforce_csrf_checks = True
    return inner


def run_scoped(user, path: str, query: str, fmt: str, base: HttpRequest | None = None):
    """The response of the view at ``path`` for ``user`` (rendered unless streamed)."""
    match = resolve(path)
    response = match.func(scoped_request(user, path, query, fmt, base), *match.args, **match.kwargs)
    if hasattr(response, "render") and not getattr(response, "is_rendered", True):
        response.render()
    return response


# -- who may export what -----------------------------------------------------------------------

# Query parameters that pick one team's rows (the usage ``team`` filter, the reports' ``team``).
TEAM_PARAMETERS = ("team", "account")


def check_readable(user, path: str, query: str) -> None:
    """Raise :class:`ExportForbidden` unless ``user`` may read ``path`` now: its view's role
    check passes, and the query names no team the user may not see. The rows themselves are
    scoped when the export runs, as the user (``run_scoped``)."""
    try:
        _checked_view(user, path, query)
    except APIException as exc:
        raise ExportForbidden(f"{path}: {exc.detail}") from exc
    params = QueryDict(query)
    teams = visible_teams(user)
    named = {value for key in TEAM_PARAMETERS for value in params.getlist(key)}
    hidden = sorted(team for team in named if not team_allowed(team, teams))
    if hidden:
        raise ExportForbidden(f"{user} may not see team {', '.join(hidden)}.")


def _checked_view(user, path: str, query: str) -> None:
    """Set up the view at ``path`` for a GET by ``user`` and run its permission checks."""
    match = resolve(path)
    view_class = match.func.cls
    view = view_class(**getattr(match.func, "initkwargs", {}))
    actions = getattr(match.func, "actions", None)
    if actions:
        view.action_map = actions
    view.args, view.kwargs, view.format_kwarg = match.args, match.kwargs, None
    request = view.initialize_request(scoped_request(user, path, query, "json"))
    view.request = request
    view.perform_authentication(request)
    view.check_permissions(request)


def may_download(user, job: ExportJob) -> str:
    """Why ``user`` may not download ``job``'s file now ("" when they may): they may still
    read its path, and see every team the file was built with."""
    try:
        check_readable(user, job.path, job.query)
    except ExportForbidden as exc:
        return exc.detail
    teams = visible_teams(user)
    built = None if job.built_for_teams is None else frozenset(job.built_for_teams)
    if teams is None or (built is not None and built <= teams):
        return ""
    hidden = "every team" if built is None else "team " + ", ".join(sorted(built - teams))
    return f"This file holds rows of {hidden}, which {user} may not see."


# -- tokens -----------------------------------------------------------------------------------


def create_token(
    *, owner, name: str, url: str, fmt: str = "csv", expires_in_days: int = DEFAULT_TOKEN_DAYS
) -> tuple[ExportToken, str]:
    """A new token for one query; returns it and the clear token (shown once, never stored)."""
    path, query = normalize_scope(url)
    check_readable(owner, path, query)
    clear = secrets.token_urlsafe(32)
    token = ExportToken.objects.create(
        owner=owner,
        name=name,
        token_hash=hash_token(clear),
        prefix=clear[:8],
        path=path,
        query=query,
        format=fmt,
        expires_at=timezone.now() + dt.timedelta(days=expires_in_days),
    )
    return token, clear


def revoke(token: ExportToken) -> ExportToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def tokens_for(user):
    """Administrators see every token, everyone else their own."""
    from access.roles import ADMIN, has_role

    tokens = ExportToken.objects.select_related("owner")
    return tokens if has_role(user, ADMIN) else tokens.filter(owner=user)


def find_token(clear: str) -> ExportToken:
    token = ExportToken.objects.select_related("owner").filter(token_hash=hash_token(clear)).first()
    if token is None:
        raise TokenRefused(404, "Unknown export link.")
    state = token.state
    if state != "active":
        raise TokenRefused(410, f"This export link is {state}.", token)
    return token


def log_use(token: ExportToken, response: HttpResponseBase, request: HttpRequest) -> None:
    rows = response.get(ROWS_HEADER) if response.status_code < 400 else None
    ExportTokenUse.objects.create(
        token=token,
        status_code=response.status_code,
        rows=int(rows) if rows and rows.isdecimal() else None,
        remote_addr=request.META.get("REMOTE_ADDR", "")[:64],
        user_agent=request.META.get("HTTP_USER_AGENT", "")[:300],
    )
    if response.status_code < 400:
        ExportToken.objects.filter(pk=token.pk).update(
            last_used_at=timezone.now(), use_count=F("use_count") + 1
        )


def fetch_with_token(clear: str, request: HttpRequest):
    """The scoped export of a token, as its owner; every use of a known token is logged."""
    token = find_token(clear)
    response = run_scoped(token.owner, token.path, token.query, token.format, request)
    log_use(token, response, request)
    logger.info(
        "export token %s… of %s: %s %s → %s",
        token.prefix,
        token.owner,
        token.path,
        token.query,
        response.status_code,
    )
    return response


# -- background XLSX jobs ---------------------------------------------------------------------


@transaction.atomic
def create_job(*, owner, url: str) -> ExportJob:
    """Save the export queued and send it after commit (deferred while the broker is down);
    :class:`~core.jobs.limits.JobLimitReached` when the owner has too many in flight."""
    path, query = normalize_scope(url)
    limit = settings.FLEETWISE_MAX_OPEN_EXPORTS_PER_USER
    check_open_jobs(ExportJob, "owner", owner, limit=limit, what="background export")
    check_readable(owner, path, query)
    job = ExportJob(owner=owner, path=path, query=query)
    return jobs.queue(job, new_run=False)


def jobs_for(user):
    from access.roles import ADMIN, has_role

    jobs = ExportJob.objects.select_related("owner")
    return jobs if has_role(user, ADMIN) else jobs.filter(owner=user)


def _list_view(user, path: str, query: str):
    """The list view at ``path`` set up for ``user`` as DRF would for a GET (or None)."""
    match = resolve(path)
    view_class = getattr(match.func, "cls", None)
    actions = getattr(match.func, "actions", None) or {}
    if view_class is None or not issubclass(view_class, TabularListMixin):
        return None
    if actions.get("get") != "list":
        return None
    view = view_class(**match.func.initkwargs)
    view.action_map = actions
    for method, action in actions.items():
        setattr(view, method, getattr(view, action))
    view.args, view.kwargs = match.args, match.kwargs
    request = view.initialize_request(scoped_request(user, path, query, "xlsx"))
    view.request = request
    view.headers = view.default_response_headers
    view.initial(request)  # authentication, permissions, content negotiation
    return view


def build_xlsx(job_id: int, run_id: str | None = None) -> ExportJob:
    """Write the job's XLSX (streamed from the queryset where the view allows it) under its
    run ``run_id`` (the current one when None); a superseded run writes nothing."""
    job = ExportJob.objects.select_related("owner").get(pk=job_id)
    run_id = run_id or str(job.run_id)
    if job.status == JobStatus.SUCCEEDED or not jobs.mark_running(ExportJob, job.pk, run_id):
        return job
    built = _teams_list(job.owner)  # before the rows are read: what the file may hold
    try:
        content = _xlsx_bytes(job)
    except Exception as exc:  # the job records why and the worker moves on
        logger.exception("export job %s failed", job.pk)
        jobs.fail(ExportJob, job.pk, run_id, str(exc))
        job.refresh_from_db()
        return job
    name = job.file.field.generate_filename(job, f"export-{job.pk}.xlsx")
    name = job.file.storage.save(name, ContentFile(content))
    if not jobs.finish(
        ExportJob, job.pk, run_id, file=name, size_bytes=len(content), built_for_teams=built
    ):
        job.file.storage.delete(name)  # a newer run owns the job now
    job.refresh_from_db()
    return job


def _teams_list(user) -> list[str] | None:
    """The teams ``user`` sees, as stored on a built file (None: every team)."""
    teams = visible_teams(user)
    return None if teams is None else sorted(teams)


def _xlsx_bytes(job: ExportJob) -> bytes:
    import io

    from rest_framework.exceptions import APIException

    try:
        view = _list_view(job.owner, job.path, job.query)
    except APIException as exc:
        raise RuntimeError(f"{exc.status_code}: {exc.detail}") from exc
    if view is None:
        # A computed list (a report's rows, plan options): small, rendered whole.
        response = run_scoped(job.owner, job.path, job.query, "xlsx")
        if response.status_code >= 400:
            raise RuntimeError(f"{response.status_code}: {response.content[:500]!r}")
        rows = response.get(ROWS_HEADER)
        ExportJob.objects.filter(pk=job.pk).update(
            rows_total=int(rows) if rows else None, rows_written=int(rows or 0)
        )
        return response.content
    queryset = view.filter_queryset(view.get_queryset())
    total = queryset.count()
    ExportJob.objects.filter(pk=job.pk).update(rows_total=total)
    columns, chunks = view.export_table(queryset)

    def progress(written: int) -> None:
        ExportJob.objects.filter(pk=job.pk).update(
            rows_written=written, progress=max(1, min(99, int(99 * written / max(total, 1))))
        )

    buffer = io.BytesIO()
    about = [
        ("query", f"{job.path}?{job.query}" if job.query else job.path),
        ("generated_at", timezone.now()),
        ("times", "UTC (Excel has no time zones)"),
    ]
    write_xlsx(buffer, columns, chunks, about=about, progress=progress)
    return buffer.getvalue()
