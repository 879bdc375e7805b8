from django.urls import path
from rest_framework.routers import DefaultRouter

from accounting.api import views

router = DefaultRouter()
router.register("usage-records", views.UsageRecordViewSet, basename="usage-record")
router.register("import-jobs", views.ImportJobViewSet, basename="import-job")
router.register("gres-aliases", views.GresAliasViewSet, basename="gres-alias")
router.register("partition-mappings", views.PartitionMappingViewSet, basename="partition-mapping")
router.register(
    "sreport-utilization", views.SreportUtilizationViewSet, basename="sreport-utilization"
)

urlpatterns = [
    *router.urls,
    path(
        "accounting/utilization/",
        views.UtilizationReportView.as_view(),
        name="accounting-utilization",
    ),
    path("accounting/costs/", views.CostReportView.as_view(), name="accounting-costs"),
    path(
        "accounting/chargeback/",
        views.ChargebackReportView.as_view(),
        name="accounting-chargeback",
    ),
]
