from rest_framework.routers import DefaultRouter

from reports.api import views

router = DefaultRouter()
router.register("report-schedules", views.ReportScheduleViewSet, basename="report-schedule")
router.register("reports", views.ReportViewSet, basename="report")

urlpatterns = router.urls
