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
    path("analyses/<int:pk>/rows/", views.AnalysisRowsView.as_view(), name="analysis-rows"),
    path(
        "estimates/utilization/",
        views.UtilizationEstimateView.as_view(),
        name="estimate-utilization",
    ),
]

# Capacity plans and the training estimate (planner.api.plan_views). A SimpleRouter, so the
# DefaultRouter above keeps the only API root view.
from rest_framework.routers import SimpleRouter  # noqa: E402

from planner.api import inference_plan_views, inference_views, plan_views  # noqa: E402

plan_router = SimpleRouter()
plan_router.register("plans", plan_views.PlanViewSet, basename="plan")
plan_router.register(
    "inference-plans", inference_plan_views.InferencePlanViewSet, basename="inference-plan"
)

urlpatterns += [
    *plan_router.urls,
    path(
        "estimates/training/",
        plan_views.TrainingEstimateView.as_view(),
        name="estimate-training",
    ),
    path(
        "estimates/inference/",
        inference_views.InferenceEstimateView.as_view(),
        name="estimate-inference",
    ),
]
