"""django-filter filtersets for the inventory API (and later the list pages)."""

import django_filters

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site


class SiteFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Site
        fields = ["name", "cooling_type", "currency"]


class AcceleratorModelFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter()
    name__icontains = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    vendor = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = AcceleratorModel
        fields = ["vendor", "name", "confidence"]


class ClusterFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Cluster
        fields = ["site", "name", "fabric"]


class PoolFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")
    site = django_filters.NumberFilter(field_name="cluster__site")
    accelerator = django_filters.CharFilter(
        method="filter_accelerator", label="Holds this accelerator (id or catalog name)"
    )

    class Meta:
        model = Pool
        fields = ["cluster", "site", "purpose", "name"]

    def filter_accelerator(self, queryset, name, value):
        key = "node_groups__accelerator" if value.isdigit() else "node_groups__accelerator__name"
        return queryset.filter(**{key: value}).distinct()


class NodeGroupFilterSet(django_filters.FilterSet):
    cluster = django_filters.NumberFilter(field_name="pool__cluster")

    class Meta:
        model = NodeGroup
        fields = ["pool", "cluster", "accelerator"]
