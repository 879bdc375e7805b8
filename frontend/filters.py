"""List-page filters: the API's filtersets, with select boxes and labels a person can use."""

from __future__ import annotations

import django_filters

from inventory.filtersets import (
    AcceleratorModelFilterSet,
    ClusterFilterSet,
    NodeGroupFilterSet,
    PoolFilterSet,
    SiteFilterSet,
)
from inventory.forms import PoolChoiceField, clusters_for_choice, pools_for_choice
from inventory.models import AcceleratorModel, Site


def name_contains() -> django_filters.CharFilter:
    return django_filters.CharFilter(lookup_expr="icontains", label="Name contains")


def vendor_choices() -> list[tuple[str, str]]:
    vendors = AcceleratorModel.objects.order_by("vendor").values_list("vendor", flat=True)
    return [(vendor, vendor) for vendor in dict.fromkeys(vendors)]


class PoolChoiceFilter(django_filters.ModelChoiceFilter):
    field_class = PoolChoiceField


class ListFilterMixin:
    """Select boxes offer "Any" rather than a row of dashes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Set before the form fields are built: a built select caches its empty choice.
        for list_filter in self.filters.values():
            if isinstance(
                list_filter, django_filters.ChoiceFilter | django_filters.ModelChoiceFilter
            ):
                list_filter.extra["empty_label"] = "Any"


class SiteListFilter(ListFilterMixin, SiteFilterSet):
    name = name_contains()


class AcceleratorListFilter(ListFilterMixin, AcceleratorModelFilterSet):
    # The list page searches by part of the name; exact names stay an API feature.
    name = name_contains()
    name__icontains = None
    vendor = django_filters.ChoiceFilter(choices=vendor_choices, lookup_expr="iexact")


class ClusterListFilter(ListFilterMixin, ClusterFilterSet):
    name = name_contains()


class PoolListFilter(ListFilterMixin, PoolFilterSet):
    site = django_filters.ModelChoiceFilter(
        field_name="cluster__site", queryset=Site.objects.all(), label="Site"
    )
    cluster = django_filters.ModelChoiceFilter(queryset=clusters_for_choice(), label="Cluster")
    name = name_contains()
    accelerator = django_filters.ModelChoiceFilter(
        field_name="node_groups__accelerator",
        queryset=AcceleratorModel.objects.all(),
        distinct=True,
        label="Holds accelerator",
    )

    class Meta(PoolFilterSet.Meta):
        fields = ["site", "cluster", "name", "purpose", "accelerator"]


class NodeGroupListFilter(ListFilterMixin, NodeGroupFilterSet):
    site = django_filters.ModelChoiceFilter(
        field_name="pool__cluster__site", queryset=Site.objects.all(), label="Site"
    )
    cluster = django_filters.ModelChoiceFilter(
        field_name="pool__cluster", queryset=clusters_for_choice(), label="Cluster"
    )
    pool = PoolChoiceFilter(queryset=pools_for_choice())
    accelerator = django_filters.ModelChoiceFilter(queryset=AcceleratorModel.objects.all())

    class Meta(NodeGroupFilterSet.Meta):
        fields = ["site", "cluster", "pool", "accelerator"]
