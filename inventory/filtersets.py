"""django-filter filtersets for the inventory API (and later the list pages)."""

import django_filters
from django import forms

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

# Ids are 64-bit: a larger number overflows the database driver (a 500), so it is a 400.
MAX_ID = 2**63 - 1


class IdFilter(django_filters.NumberFilter):
    """An object id: a whole number in the database's range, else a 400 naming the field."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


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
    site = IdFilter(field_name="cluster__site")
    accelerator = django_filters.CharFilter(
        method="filter_accelerator", label="Holds this accelerator (id or catalog name)"
    )

    class Meta:
        model = Pool
        fields = ["cluster", "site", "purpose", "name"]

    def filter_accelerator(self, queryset, name, value):
        is_id = value.isdecimal() and int(value) <= MAX_ID
        key = "node_groups__accelerator" if is_id else "node_groups__accelerator__name"
        return queryset.filter(**{key: value}).distinct()


class NodeGroupFilterSet(django_filters.FilterSet):
    cluster = IdFilter(field_name="pool__cluster")

    class Meta:
        model = NodeGroup
        fields = ["pool", "cluster", "accelerator"]
