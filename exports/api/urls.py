from django.urls import path
from rest_framework.routers import SimpleRouter

from exports.api import views

router = SimpleRouter()
router.register("export-tokens", views.ExportTokenViewSet, basename="export-token")
router.register("export-jobs", views.ExportJobViewSet, basename="export-job")

urlpatterns = [
    *router.urls,
    path("export/<str:token>/", views.ExportTokenFetchView.as_view(), name="export-fetch"),
]
