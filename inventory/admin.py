from django.contrib import admin

from core.text import SafeNamesAdminMixin
from inventory.currency import ExchangeRate
from inventory.forms import SiteForm
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from inventory.selectors import pool_totals, pools_with_node_groups


@admin.register(Site)
class SiteAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    name_fields = ("name", "location")
    # The site form's rule: tariff, currency and grid carbon stated or ticked unknown.
    form = SiteForm
    fieldsets = [(legend, {"fields": names}) for legend, _, names, _ in SiteForm.SECTIONS]
    list_display = ["name", "location", "cooling_type", "pue", "tariff_per_kwh", "currency"]
    list_filter = ["cooling_type", "currency"]
    search_fields = ["name", "location"]


@admin.register(AcceleratorModel)
class AcceleratorModelAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    name_fields = ("name", "vendor")
    list_display = [
        "name",
        "vendor",
        "dense_bf16_tflops",
        "dense_fp8_tflops",
        "dense_int8_tops",
        "memory_gb",
        "tdp_w",
        "default_training_mfu",
        "confidence",
    ]
    list_filter = ["vendor", "confidence"]
    search_fields = ["name", "vendor"]


class PoolInline(SafeNamesAdminMixin, admin.TabularInline):
    model = Pool
    extra = 0
    fields = ["name", "purpose", "planned_utilization"]
    show_change_link = True


@admin.register(Cluster)
class ClusterAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    list_display = [
        "name",
        "site",
        "fabric",
        "inter_node_bandwidth_gbps_per_card",
        "commissioned_on",
    ]
    list_filter = ["site", "fabric"]
    list_select_related = ["site"]
    search_fields = ["name", "site__name"]
    inlines = [PoolInline]


class NodeGroupInline(SafeNamesAdminMixin, admin.TabularInline):
    model = NodeGroup
    extra = 1
    fields = ["name", "accelerator", "node_count", "cards_per_node", "mfu"]
    autocomplete_fields = ["accelerator"]


@admin.register(Pool)
class PoolAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    list_display = ["name", "cluster", "purpose", "card_mix", "total_cards"]
    list_filter = ["purpose", "cluster__site", "cluster"]
    search_fields = ["name", "cluster__name"]
    inlines = [NodeGroupInline]

    def get_queryset(self, request):
        return pools_with_node_groups(super().get_queryset(request))

    @admin.display(description="cards")
    def total_cards(self, pool: Pool) -> int:
        return pool_totals(pool).cards

    @admin.display(description="card mix")
    def card_mix(self, pool: Pool) -> str:
        return " + ".join(f"{m.cards} × {m.accelerator}" for m in pool_totals(pool).mix)


@admin.register(NodeGroup)
class NodeGroupAdmin(SafeNamesAdminMixin, admin.ModelAdmin):
    list_display = ["name", "pool", "accelerator", "node_count", "cards_per_node"]
    list_filter = ["accelerator", "pool__cluster"]
    list_select_related = ["pool", "accelerator"]
    autocomplete_fields = ["accelerator"]


@admin.register(ExchangeRate)
class ExchangeRateAdmin(admin.ModelAdmin):
    list_display = ["from_currency", "to_currency", "rate", "valid_on", "source"]
    list_filter = ["from_currency", "to_currency"]
    date_hierarchy = "valid_on"
