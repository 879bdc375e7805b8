"""The alerts page: active and acknowledged events, the rules, a form for a new rule."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from access.pages import role_required
from access.roles import PLANNER, VIEWER, has_role
from alerts import selectors, services
from alerts.forms import AlertRuleForm
from alerts.models import RuleState

EVENT_ROWS = 100


@role_required(read_role=VIEWER, write_role=PLANNER)
def alert_list(request):
    form = AlertRuleForm(request.POST if request.method == "POST" else None, user=request.user)
    if request.method == "POST" and form.is_valid():
        rule = form.save(commit=False)
        rule.created_by = request.user
        rule.save()
        services.evaluate(rule)
        # evaluate() saves its own locked copy: read back the state it found, in words.
        rule.refresh_from_db(fields=["state", "last_reason"])
        messages.success(request, f"Rule “{rule.name}” saved and evaluated: {evaluated(rule)}.")
        return redirect("alerts:list")
    events = selectors.events_for(request.user)
    context = {
        "active": events.filter(cleared_at__isnull=True)[:EVENT_ROWS],
        "past": events.filter(cleared_at__isnull=False)[:EVENT_ROWS],
        "rules": selectors.name_watched_objects(list(selectors.rules_for(request.user))),
        "form": form,
        "can_edit": has_role(request.user, PLANNER),
    }
    return render(request, "alerts/list.html", context, status=400 if form.errors else 200)


def evaluated(rule) -> str:
    """“firing”, “ok”, or “no data (why)”: the state as the page words it."""
    state = rule.get_state_display().lower()
    if rule.state == RuleState.NO_DATA and rule.last_reason:
        return f"{state} ({rule.last_reason})"
    return state


@role_required(read_role=PLANNER, write_role=PLANNER)
@require_POST
def acknowledge(request, pk: int):
    event = get_object_or_404(selectors.events_for(request.user), pk=pk)
    if services.acknowledge(event, request.user):
        messages.success(request, f"Acknowledged: {event.message}")
    return redirect("alerts:list")
