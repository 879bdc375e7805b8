"""Report pages under /reports/: the archive with downloads, schedules, run now and preview.

Roles: viewers read the archive and the schedules; planners may also run a schedule now,
preview it and retry a failed delivery (they produce reports, they change no configuration);
admins create, edit, pause and delete schedules (issue #9: admin manages report schedules).
"""

from __future__ import annotations

from django.contrib import messages
from django.db.models import ProtectedError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from access.pages import role_required
from access.roles import ADMIN, PLANNER, VIEWER, has_role
from core import timerange
from core.retention.files import expired_file
from reports import selectors, services
from reports.authorization import deliverable
from reports.forms import ArchivePeriodForm, RunNowForm, ScheduleForm
from reports.models import ReportFormat, ReportSchedule, ReportStatus
from reports.render import render_html

PAGE_SIZE = 50
DOWNLOAD_TYPES = {
    ReportFormat.XLSX: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ReportFormat.CSV: "text/csv",
    ReportFormat.PRINT_HTML: "text/html",
}


def _roles(request) -> dict[str, bool]:
    return {
        "can_run": has_role(request.user, PLANNER),
        "can_manage": has_role(request.user, ADMIN),
    }


def _page(request, queryset):
    from django.core.paginator import Paginator

    paginator = Paginator(queryset, PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    return {
        "page_obj": page,
        "paginator": paginator,
        "is_paginated": paginator.num_pages > 1,
        "rows": page.object_list,
    }


def _time_range(request, reports) -> tuple[ArchivePeriodForm, dict]:
    """The archive's period filter and its presets, fit to the periods of the user's reports."""
    form = ArchivePeriodForm(request.GET)
    query = form.cleaned_data if form.is_valid() else {}
    first_day, last_day = selectors.period_extent(reports)
    ranges = timerange.presets(timezone.localdate(), first_day, last_day)
    start, end = query.get("start"), query.get("end")
    current = (start, end) if start and end else None
    return form, {
        "presets": timerange.preset_links(request.GET, ranges, current),
        "query": {"start": start, "end": end} if current else {},
    }


@role_required(read_role=VIEWER)
@require_safe
def archive(request):
    reports = selectors.reports_queryset(request.user)
    period_form, time_range = _time_range(request, reports)
    schedule_id = request.GET.get("schedule") or ""
    status = request.GET.get("status") or ""
    if schedule_id.isdecimal():
        reports = reports.filter(schedule_id=int(schedule_id))
    if status in ReportStatus.values:
        reports = reports.filter(status=status)
    if period_form.is_valid():
        reports = selectors.overlapping(reports, **period_form.cleaned_data)
    context = {
        **_page(request, reports),
        **_roles(request),
        **time_range,
        "period_form": period_form,
        "schedules": selectors.schedule_choices(request.user),
        "statuses": ReportStatus.choices,
        "selected_schedule": schedule_id,
        "selected_status": status,
    }
    status_code = 200 if period_form.is_valid() else 400
    return render(request, "reports/archive.html", context, status=status_code)


@role_required(read_role=VIEWER)
@require_safe
def report_detail(request, pk: int):
    report = get_object_or_404(selectors.reports_queryset(request.user), pk=pk)
    return render(request, "reports/report_detail.html", {"report": report, **_roles(request)})


def expired_message(report, file) -> str | None:
    """Why a report's file is gone when the retention task deleted it (core.retention)."""
    expired = expired_file(report, file.field.name) if file is not None else None
    if expired is None:
        return None
    return f"{expired.message} The report page still shows its figures."


@role_required(read_role=VIEWER)
@require_safe
def report_download(request, pk: int, file_format: str):
    report = get_object_or_404(selectors.reports_queryset(request.user), pk=pk)
    file = report.file_for(file_format)
    if not file:
        if expired := expired_message(report, file):
            return HttpResponse(expired, status=410, content_type="text/plain; charset=utf-8")
        raise Http404(f"This report has no {file_format} file.")
    filename = file.name.rsplit("/", 1)[-1]
    response = FileResponse(
        file.open("rb"),
        content_type=DOWNLOAD_TYPES[file_format],
        as_attachment=True,
        filename=filename,
    )
    return response


@role_required(read_role=VIEWER)
@require_safe
def report_view(request, pk: int):
    """The report as its stand-alone print page (print to PDF from the browser)."""
    report = get_object_or_404(selectors.reports_queryset(request.user), pk=pk)
    if report.html_file:
        with report.html_file.open("rb") as handle:
            return HttpResponse(handle.read(), content_type="text/html; charset=utf-8")
    if not report.numbers:
        raise Http404("This report has not been generated yet.")
    return HttpResponse(render_html(report.numbers, mode="print"))


@role_required(read_role=PLANNER, write_role=PLANNER)
@require_POST
def report_retry_delivery(request, pk: int):
    report = get_object_or_404(selectors.reports_queryset(request.user), pk=pk)
    if services.retry_delivery(report):
        messages.success(request, "Delivery queued again.")
    else:
        messages.error(request, "Only a report whose delivery failed can be retried.")
    return redirect("reports:report-detail", pk=report.pk)


@role_required(read_role=VIEWER)
@require_safe
def schedule_list(request):
    context = {**_page(request, selectors.schedules_queryset(request.user)), **_roles(request)}
    return render(request, "reports/schedule_list.html", context)


@role_required(read_role=VIEWER)
@require_safe
def schedule_detail(request, pk: int):
    schedule = get_object_or_404(selectors.schedules_queryset(request.user), pk=pk)
    reports = selectors.reports_queryset(request.user).filter(schedule=schedule)[:20]
    audience = deliverable(schedule)
    context = {
        "schedule": schedule,
        "reports": reports,
        "recipients": audience.allowed,
        "withheld": audience.withheld,
        **_roles(request),
    }
    return render(request, "reports/schedule_detail.html", context)


def _schedule_form(request, instance: ReportSchedule | None):
    form = ScheduleForm(request.POST or None, instance=instance, user=request.user)
    if request.method == "POST" and form.is_valid():
        schedule = form.save(commit=False)
        if schedule.owner_id is None:
            schedule.owner = request.user
        services.save_schedule(schedule)
        form.save_m2m()
        messages.success(request, f"Schedule “{schedule.name}” saved.")
        return redirect("reports:schedule-detail", pk=schedule.pk)
    title = f"Edit {instance.name}" if instance else "New report schedule"
    cancel = (
        reverse("reports:schedule-detail", args=[instance.pk])
        if instance
        else reverse("reports:schedule-list")
    )
    return render(
        request, "reports/schedule_form.html", {"form": form, "title": title, "cancel_url": cancel}
    )


@role_required(read_role=ADMIN, write_role=ADMIN)
def schedule_create(request):
    return _schedule_form(request, None)


@role_required(read_role=ADMIN, write_role=ADMIN)
def schedule_update(request, pk: int):
    return _schedule_form(request, get_object_or_404(ReportSchedule, pk=pk))


@role_required(read_role=ADMIN, write_role=ADMIN)
@require_POST
def schedule_toggle(request, pk: int):
    schedule = get_object_or_404(ReportSchedule, pk=pk)
    services.set_enabled(schedule, not schedule.enabled)
    state = "resumed" if schedule.enabled else "paused"
    messages.success(request, f"Schedule “{schedule.name}” {state}.")
    return redirect("reports:schedule-detail", pk=schedule.pk)


@role_required(read_role=ADMIN, write_role=ADMIN)
def schedule_delete(request, pk: int):
    schedule = get_object_or_404(ReportSchedule, pk=pk)
    report_count = schedule.reports.count()
    if request.method == "POST":
        try:
            schedule.delete()
        except ProtectedError:  # pragma: no cover - nothing protects a schedule today
            messages.error(request, "This schedule cannot be deleted.")
            return redirect("reports:schedule-detail", pk=pk)
        messages.success(request, f"Schedule “{schedule.name}” deleted.")
        return redirect("reports:schedule-list")
    return render(
        request,
        "reports/schedule_confirm_delete.html",
        {"schedule": schedule, "report_count": report_count},
    )


@role_required(read_role=PLANNER, write_role=PLANNER)
def schedule_run(request, pk: int):
    schedule = get_object_or_404(selectors.schedules_queryset(request.user), pk=pk)
    form = RunNowForm(request.POST or None, schedule=schedule)
    if request.method == "POST" and form.is_valid():
        period = form.period_for(form.cleaned_data["day"])
        report, queued = services.run_now(
            schedule, period, user=request.user, deliver=form.cleaned_data["deliver"]
        )
        if queued:
            messages.success(request, f"Report for {period.label()} queued.")
        else:
            messages.info(
                request,
                f"The report for {period.label()} already exists "
                f"({report.get_status_display().lower()}); nothing was sent again.",
            )
        return redirect("reports:report-detail", pk=report.pk)
    return render(request, "reports/schedule_run.html", {"schedule": schedule, "form": form})


@role_required(read_role=PLANNER)
@require_safe
def schedule_preview(request, pk: int):
    """The report for the period holding ?day= (default: the last complete one), unsaved."""
    schedule = get_object_or_404(selectors.schedules_queryset(request.user), pk=pk)
    form = RunNowForm(request.GET or None, schedule=schedule)
    if request.GET and not form.is_valid():
        errors = "; ".join(f"{field}: {', '.join(msgs)}" for field, msgs in form.errors.items())
        return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
    day = form.cleaned_data["day"] if request.GET else form.initial["day"]
    return HttpResponse(services.preview(schedule, form.period_for(day)))
