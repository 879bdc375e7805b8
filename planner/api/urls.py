from django.urls import path
from rest_framework.routers import DefaultRouter

from planner.api import views

router = DefaultRouter()
router.register("analyses", views.AnalysisViewSet)

urlpatterns = [
    *router.urls,
    path(
        "estimates/effective-time/",
        views.EffectiveTimeEstimateView.as_view(),
        name="estimate-effective-time",
    ),
    path("estimates/pool/", views.PoolEstimateView.as_view(), name="estimate-pool"),
    path(
        "estimates/utilization/",
        views.UtilizationEstimateView.as_view(),
        name="estimate-utilization",
    ),
]
