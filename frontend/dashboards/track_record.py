""" "How accurate is the planner?": today's planner against published training runs.

The committed track record (engine/data/track_record.json, through planner.track_record):
the median and worst error, the mean signed error and the 10th–90th band's coverage, for all
runs and for the calibration and held-out runs apart, then every run with its source. Linked
from the planner page and from every plan. Reading needs the viewer role.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe

from access.pages import role_required
from planner.track_record import track_record_page


@role_required()
@require_safe
def track_record(request: HttpRequest):
    return render(request, "frontend/dashboards/track_record.html", track_record_page())


urlpatterns = [
    path("planner/track-record/", track_record, name="planner-track-record"),
]
