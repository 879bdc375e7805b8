from rest_framework.routers import DefaultRouter

from inventory.api import rates, views

router = DefaultRouter()
router.register("sites", views.SiteViewSet)
router.register("accelerator-models", views.AcceleratorModelViewSet)
router.register("clusters", views.ClusterViewSet)
router.register("pools", views.PoolViewSet)
router.register("node-groups", views.NodeGroupViewSet)
router.register("exchange-rates", rates.ExchangeRateViewSet)

urlpatterns = router.urls
