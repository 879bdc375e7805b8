from django.urls import path
from rest_framework.routers import DefaultRouter

from accounting.api import serving, slurmrestd, views

router = DefaultRouter()
router.register("usage-records", views.UsageRecordViewSet, basename="usage-record")
router.register("import-jobs", views.ImportJobViewSet, basename="import-job")
router.register("gres-aliases", views.GresAliasViewSet, basename="gres-alias")
router.register("partition-mappings", views.PartitionMappingViewSet, basename="partition-mapping")
router.register(
    "sreport-utilization", views.SreportUtilizationViewSet, basename="sreport-utilization"
)

router.register("serving-loads", serving.ServingLoadViewSet, basename="serving-load")
router.register(
    "slurmrestd-sources", slurmrestd.SlurmrestdSourceViewSet, basename="slurmrestd-source"
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
        "accounting/utilization/rows/",
        views.UtilizationRowsView.as_view(),
        name="accounting-utilization-rows",
    ),
    path("accounting/costs/rows/", views.CostRowsView.as_view(), name="accounting-costs-rows"),
    path(
        "accounting/chargeback/rows/",
        views.ChargebackRowsView.as_view(),
        name="accounting-chargeback-rows",
    ),
    path(
        "accounting/chargeback/",
        views.ChargebackReportView.as_view(),
        name="accounting-chargeback",
    ),
]
