"""Usage import pages: upload a usage file (or paste its text), follow the worker's import
with a progress bar, read the result or the bad lines, list recent imports.

The import itself is `accounting.services.create_import_job` / `retry_import`, the same calls
the API makes; these views only map the form onto them.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST, require_safe

from access.pages import role_required
from access.roles import ADMIN, PLANNER, has_role
from accounting import services
from accounting.models import ImportJob
from accounting.parsing.tabular import OPTIONAL_TABLE_COLUMNS, REQUIRED_TABLE_COLUMNS
from accounting.scoping import scope_import_jobs
from core.jobs.dispatch import WORKERS_UNAVAILABLE
from core.jobs.limits import JobLimitReached
from core.jobs.status import JobStatus
from core.retention.files import expired_file
from frontend import kept_uploads
from frontend.forms_usage_import import (
    ADVANCED_FIELDS,
    UsageImportForm,
    preview_import,
    start_import,
)

JOBS_PER_PAGE = 50
IN_FLIGHT = (JobStatus.QUEUED, JobStatus.RUNNING)
# How the parsers word a bad line (accounting.parsing.LineIssue.__str__).
ISSUE_PATTERN = re.compile(r"^line (?P<line>\d+), column (?P<column>[^:]+): (?P<reason>.*)$", re.S)


def import_jobs(user):
    """The user's visible import jobs (`access.scoping`): cluster and user joined, the bulky
    issue lists left out."""
    return scope_import_jobs(
        ImportJob.objects.select_related("cluster__site", "created_by")
        .defer("issues", "warnings")
        .annotate(records_written=F("records_created") + F("records_updated"))
        .order_by("-created", "-pk"),
        user,
    )


def split_issue(text: str) -> dict[str, str]:
    """ "line 3, column State: unknown state" → its line, column and reason (for a table)."""
    match = ISSUE_PATTERN.match(text)
    if match is None:
        return {"line": "", "column": "", "reason": text}
    return match.groupdict()


def failure_summary(error: str, issues: list[dict[str, str]]) -> str:
    """The red banner: how many problems and the first one; the table below lists them all."""
    if not issues:
        return error
    counted = re.match(r"^(\d+) problem", error)
    count = int(counted.group(1)) if counted else len(issues)
    first = issues[0]
    where = f"line {first['line']}, column {first['column']}: " if first["line"] else ""
    noun = "problem" if count == 1 else "problems"
    return f"{count} {noun} in the file; the first: {where}{first['reason']}"


def keep_chosen_file(request: HttpRequest, form: UsageImportForm) -> None:
    """The page comes back: a file chosen now is kept (or the one kept before stays), so the
    next submit does not need it chosen again."""
    chosen = form.chosen_file()
    if chosen is not None:
        form.show_kept(kept_uploads.keep(request.session, chosen))
    elif form.kept is not None:
        form.show_kept(form.kept)


@role_required(read_role=PLANNER)
def usage_import(request: HttpRequest):
    status, preview, retry_after_s = 200, None, None
    if request.method == "POST":
        kept = kept_uploads.kept(request.session, request.POST.get("kept_upload", ""))
        form = UsageImportForm(request.POST, request.FILES, kept=kept)
    else:
        form = UsageImportForm()
    if request.method == "POST" and request.POST.get("action") == "preview":
        preview = preview_import(form)
        status = 200 if preview is not None else 400
        keep_chosen_file(request, form)
    elif request.method == "POST":
        try:
            job = start_import(form, request.user)
        except JobLimitReached as exc:  # too many of this user's imports in flight
            form.add_error(None, exc.message)
            job, retry_after_s = None, exc.retry_after_s
        if job is not None:
            kept_uploads.forget(request.session)  # the job holds its own copy of the file
            messages.success(
                request, f"{job.source_name} queued for import into {job.cluster.name}."
            )
            return redirect("frontend:usage-import-detail", job.pk)
        status = 400 if retry_after_s is None else 429
        keep_chosen_file(request, form)
    context = {
        "form": form,
        "preview": preview,
        "main_fields": [
            form[name] for name in form.fields if name not in (*ADVANCED_FIELDS, "kept_upload")
        ],
        "advanced_fields": [form[name] for name in ADVANCED_FIELDS],
        "required_columns": REQUIRED_TABLE_COLUMNS,
        "optional_columns": OPTIONAL_TABLE_COLUMNS,
    }
    response = render(request, "frontend/dashboards/usage_import.html", context, status=status)
    if retry_after_s is not None:
        response["Retry-After"] = str(retry_after_s)
    return response


@role_required()
@require_safe
def usage_import_detail(request: HttpRequest, pk: int):
    job = get_object_or_404(import_jobs(request.user).defer(None), pk=pk)
    in_flight = job.status in IN_FLIGHT
    issues = [split_issue(text) for text in job.issues]
    context = {
        "job": job,
        "in_flight": in_flight,
        "deferred": in_flight and job.error == WORKERS_UNAVAILABLE,
        "poll_url": reverse("import-job-detail", args=[job.pk]),
        "issues": issues,
        "failure_summary": failure_summary(job.error, issues),
        "can_retry": has_role(request.user, PLANNER)
        and job.status == JobStatus.FAILED
        and bool(job.file),
        "dashboard_url": reverse("frontend:usage") + f"?cluster={job.cluster_id}",
        "file_expired": expired_file(job, "file"),
    }
    return render(request, "frontend/dashboards/usage_import_detail.html", context)


@role_required()
@require_POST
def usage_import_retry(request: HttpRequest, pk: int):
    jobs = scope_import_jobs(ImportJob.objects.only("pk", "file", "source_name"), request.user)
    job = get_object_or_404(jobs, pk=pk)
    try:
        services.retry_import(job)
    except services.ImportInputError as exc:
        messages.error(request, " ".join(exc.errors.values()))
    else:
        messages.success(request, f"Import of {job.source_name} queued again.")
    return redirect("frontend:usage-import-detail", pk)


@role_required()
@require_safe
def usage_import_list(request: HttpRequest):
    page = Paginator(import_jobs(request.user), JOBS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page_obj": page,
        "paginator": page.paginator,
        "is_paginated": page.has_other_pages(),
        "jobs": page.object_list,
        "can_import": has_role(request.user, PLANNER),
        "can_admin": has_role(request.user, ADMIN),  # the Kubernetes sources page is theirs
    }
    return render(request, "frontend/dashboards/usage_import_list.html", context)


urlpatterns = [
    path("usage/import/", usage_import, name="usage-import"),
    path("usage/import/<int:pk>/", usage_import_detail, name="usage-import-detail"),
    path("usage/import/<int:pk>/retry/", usage_import_retry, name="usage-import-retry"),
    path("usage/imports/", usage_import_list, name="usage-imports"),
]
