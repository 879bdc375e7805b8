from rest_framework.routers import DefaultRouter

from alerts.api import views

router = DefaultRouter()
router.register("alert-rules", views.AlertRuleViewSet, basename="alert-rule")
router.register("alert-events", views.AlertEventViewSet, basename="alert-event")

urlpatterns = router.urls
