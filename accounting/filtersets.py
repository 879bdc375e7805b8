"""django-filter filtersets for the accounting API lists (usage records, import jobs)."""

from __future__ import annotations

import datetime as dt

import django_filters
from django.db.models import Q
from rest_framework.exceptions import ValidationError

from accounting.models import (
    GresAlias,
    ImportJob,
    JobState,
    PartitionMapping,
    ServingLoad,
    SreportUtilization,
    UsageRecord,
)
from inventory.models import AcceleratorModel, Cluster, Pool


def _utc(name: str, value: dt.datetime) -> dt.datetime:
    """A time filter in UTC: PostgreSQL refuses offsets beyond ±15:59 (ISO 8601 allows more)."""
    try:
        return value.astimezone(dt.UTC) if value.tzinfo else value
    except OverflowError:
        raise ValidationError({name: ["The time is out of range."]}) from None


class UsageRecordFilterSet(django_filters.FilterSet):
    cluster = django_filters.ModelChoiceFilter(queryset=Cluster.objects.all())
    pool = django_filters.ModelChoiceFilter(queryset=Pool.objects.all())
    team = django_filters.CharFilter(field_name="account", label="Account / team (exact)")
    user = django_filters.CharFilter()
    partition = django_filters.CharFilter()
    accelerator = django_filters.CharFilter(
        method="filter_accelerator", label="Card model (id or catalog name)"
    )
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    job_id = django_filters.CharFilter()
    start = django_filters.IsoDateTimeFilter(
        method="filter_running_after", label="Held cards at or after this time"
    )
    end = django_filters.IsoDateTimeFilter(
        method="filter_running_before", label="Started before this time"
    )

    class Meta:
        model = UsageRecord
        fields = ["cluster", "pool", "team", "user", "partition", "accelerator", "state", "job_id"]

    def filter_accelerator(self, queryset, name, value):
        if value.isdecimal():
            found = AcceleratorModel.objects.filter(pk=int(value)).exists()
            lookup = {"accelerator_id": int(value)}
        else:
            found = AcceleratorModel.objects.filter(name=value).exists()
            lookup = {"accelerator__name": value}
        if not found:
            raise ValidationError({"accelerator": [f'No card model "{value}" in the catalog.']})
        return queryset.filter(**lookup)

    def filter_running_after(self, queryset, name, value):
        value = _utc(name, value)
        return queryset.filter(Q(end__gt=value) | Q(end__isnull=True))

    def filter_running_before(self, queryset, name, value):
        return queryset.filter(start__lt=_utc(name, value))

    def is_valid(self):
        valid = super().is_valid()
        start, end = self.form.cleaned_data.get("start"), self.form.cleaned_data.get("end")
        if valid and start and end and end <= start:
            self.form.add_error("end", "Must be after start.")
            return False
        return valid


class ImportJobFilterSet(django_filters.FilterSet):
    cluster = django_filters.ModelChoiceFilter(queryset=Cluster.objects.all())

    class Meta:
        model = ImportJob
        fields = ["cluster", "kind", "status"]


class GresAliasFilterSet(django_filters.FilterSet):
    class Meta:
        model = GresAlias
        fields = ["accelerator"]


class PartitionMappingFilterSet(django_filters.FilterSet):
    class Meta:
        model = PartitionMapping
        fields = ["cluster", "pool", "partition"]


class SreportUtilizationFilterSet(django_filters.FilterSet):
    cluster = django_filters.ModelChoiceFilter(queryset=Cluster.objects.all())

    class Meta:
        model = SreportUtilization
        fields = ["cluster", "tres_name"]


class ServingLoadFilterSet(django_filters.FilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="pool__cluster", queryset=Cluster.objects.all()
    )
    pool = django_filters.ModelChoiceFilter(queryset=Pool.objects.all())
    ends_after = django_filters.IsoDateTimeFilter(
        method="filter_ends_after", label="Loads whose period ends after this time"
    )
    starts_before = django_filters.IsoDateTimeFilter(
        method="filter_starts_before", label="Loads whose period starts before this time"
    )

    class Meta:
        model = ServingLoad
        fields = ["cluster", "pool", "weight_precision", "kv_precision"]

    def filter_ends_after(self, queryset, name, value):
        return queryset.filter(period_end__gt=_utc(name, value))

    def filter_starts_before(self, queryset, name, value):
        return queryset.filter(period_start__lt=_utc(name, value))
