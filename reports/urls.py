from django.urls import path

from reports import views

app_name = "reports"

urlpatterns = [
    path("", views.archive, name="archive"),
    path("<int:pk>/", views.report_detail, name="report-detail"),
    path("<int:pk>/download/<str:file_format>/", views.report_download, name="report-download"),
    path("<int:pk>/view/", views.report_view, name="report-view"),
    path("<int:pk>/retry-delivery/", views.report_retry_delivery, name="report-retry-delivery"),
    path("schedules/", views.schedule_list, name="schedule-list"),
    path("schedules/new/", views.schedule_create, name="schedule-create"),
    path("schedules/<int:pk>/", views.schedule_detail, name="schedule-detail"),
    path("schedules/<int:pk>/edit/", views.schedule_update, name="schedule-update"),
    path("schedules/<int:pk>/pause/", views.schedule_toggle, name="schedule-toggle"),
    path("schedules/<int:pk>/delete/", views.schedule_delete, name="schedule-delete"),
    path("schedules/<int:pk>/run/", views.schedule_run, name="schedule-run"),
    path("schedules/<int:pk>/preview/", views.schedule_preview, name="schedule-preview"),
]
