from django.urls import path

from frontend import charts, import_views, sharing
from frontend import inventory_views as inv
from frontend.dashboards import (
    analyses,
    costs,
    fleet,
    inference,
    kubernetes_sources,
    live_sources,
    planner,
    track_record,
    usage,
    usage_imports,
)
from frontend.history_views import history_urls

app_name = "frontend"


def crud(prefix: str, name: str, list_view, detail, create, update, delete) -> list:
    """The five URLs of one inventory object type."""
    return [
        path(f"inventory/{prefix}/", list_view.as_view(), name=f"{name}-list"),
        path(f"inventory/{prefix}/new/", create.as_view(), name=f"{name}-create"),
        path(f"inventory/{prefix}/<int:pk>/", detail.as_view(), name=f"{name}-detail"),
        path(f"inventory/{prefix}/<int:pk>/edit/", update.as_view(), name=f"{name}-update"),
        path(f"inventory/{prefix}/<int:pk>/delete/", delete.as_view(), name=f"{name}-delete"),
    ]


urlpatterns = [
    *fleet.urlpatterns,
    path("inventory/", inv.InventoryIndexView.as_view(), name="inventory"),
    *crud(
        "sites",
        "site",
        inv.SiteListView,
        inv.SiteDetailView,
        inv.SiteCreateView,
        inv.SiteUpdateView,
        inv.SiteDeleteView,
    ),
    *crud(
        "clusters",
        "cluster",
        inv.ClusterListView,
        inv.ClusterDetailView,
        inv.ClusterCreateView,
        inv.ClusterUpdateView,
        inv.ClusterDeleteView,
    ),
    *crud(
        "pools",
        "pool",
        inv.PoolListView,
        inv.PoolDetailView,
        inv.PoolCreateView,
        inv.PoolUpdateView,
        inv.PoolDeleteView,
    ),
    path(
        "inventory/pools/<int:pk>/node-groups/new/",
        inv.PoolNodeGroupCreateView.as_view(),
        name="pool-add-nodegroup",
    ),
    path(
        "inventory/pools/<int:pk>/serving-loads/new/",
        inv.PoolServingLoadCreateView.as_view(),
        name="pool-add-servingload",
    ),
    path(
        "inventory/pools/<int:pk>/serving-loads/<int:load_pk>/edit/",
        inv.PoolServingLoadUpdateView.as_view(),
        name="pool-edit-servingload",
    ),
    path(
        "inventory/pools/<int:pk>/serving-loads/<int:load_pk>/delete/",
        inv.PoolServingLoadDeleteView.as_view(),
        name="pool-delete-servingload",
    ),
    *crud(
        "node-groups",
        "nodegroup",
        inv.NodeGroupListView,
        inv.NodeGroupDetailView,
        inv.NodeGroupCreateView,
        inv.NodeGroupUpdateView,
        inv.NodeGroupDeleteView,
    ),
    *crud(
        "accelerators",
        "accelerator",
        inv.AcceleratorListView,
        inv.AcceleratorDetailView,
        inv.AcceleratorCreateView,
        inv.AcceleratorUpdateView,
        inv.AcceleratorDeleteView,
    ),
    *history_urls(path),
    path("inventory/import/", import_views.ImportIndexView.as_view(), name="import-index"),
    path(
        "inventory/import/<slug:kind>/",
        import_views.ImportUploadView.as_view(),
        name="import-upload",
    ),
    path(
        "inventory/import/<slug:kind>/preview/",
        import_views.ImportPreviewView.as_view(),
        name="import-preview",
    ),
    path(
        "inventory/import/<slug:kind>/template.<str:fmt>",
        import_views.ImportTemplateView.as_view(),
        name="import-template",
    ),
    path("charts/<slug:key>.<str:fmt>", charts.chart_data, name="chart-data"),
    *analyses.urlpatterns,
    *usage.urlpatterns,
    *usage_imports.urlpatterns,
    *live_sources.urlpatterns,
    *kubernetes_sources.urlpatterns,
    *costs.urlpatterns,
    *inference.urlpatterns,
    *planner.urlpatterns,
    *track_record.urlpatterns,
    *sharing.urlpatterns,
]
