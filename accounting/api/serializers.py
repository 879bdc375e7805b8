"""Accounting API serializers: stored rows, the upload form, report queries and report bodies."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from access.scoping import visible_teams
from accounting import selectors
from accounting.imports.rows import ImportInputError, find_cluster
from accounting.models import (
    AsOfSource,
    GresAlias,
    ImportJob,
    ImportKind,
    PartitionMapping,
    SreportUtilization,
    UsageRecord,
)
from accounting.parsing import normalize_gres_type
from core.bounds import WithinDates, date_error
from core.text import SafeNamesSerializerMixin
from engine.cost import IDLE_RULES
from inventory.api.serializers import AcceleratorField
from inventory.currency import ISO_4217_CODES
from inventory.models import AcceleratorModel

DEFAULT_REPORT_DAYS = 30

# -- stored rows ---------------------------------------------------------------------------


class UsageRecordSerializer(serializers.ModelSerializer):
    cluster_name = serializers.CharField(source="cluster.name", read_only=True)
    pool_name = serializers.CharField(source="pool.name", read_only=True, allow_null=True)
    accelerator_name = serializers.CharField(
        source="accelerator.name", read_only=True, allow_null=True
    )
    team = serializers.CharField(source="account", read_only=True)

    class Meta:
        model = UsageRecord
        fields = [
            "id",
            "cluster",
            "cluster_name",
            "pool",
            "pool_name",
            "record_key",
            "job_id",
            "job_label",
            "parent_job_id",
            "team",
            "user",
            "partition",
            "accelerator",
            "accelerator_name",
            "gres_type",
            "mig_profile",
            "cards",
            "nodes",
            "submit",
            "start",
            "end",
            "duration_h",
            "card_hours",
            "state",
            "scheduler_state",
            "gpu_utilization",
            "tokens_per_s",
            "model_params",
            "mfu",
            "import_job",
        ]
        read_only_fields = fields


class ImportJobSerializer(serializers.ModelSerializer):
    cluster_name = serializers.CharField(source="cluster.name", read_only=True)
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, default=None, allow_null=True
    )
    # Blank until the file is read: the schema says so.
    as_of_source = serializers.ChoiceField(
        choices=AsOfSource.choices,
        allow_blank=True,
        read_only=True,
    )

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "kind",
            "cluster",
            "cluster_name",
            "source_name",
            "size_bytes",
            "timezone",
            "exported_at",
            "as_of",
            "as_of_source",
            "report_period_start",
            "report_period_end",
            "status",
            "progress",
            "error",
            "issues",
            "warnings",
            "bytes_read",
            "lines_read",
            "records_read",
            "records_created",
            "records_updated",
            "records_unchanged",
            "records_skipped",
            "created_by",
            "created",
            "started_at",
            "finished_at",
            "duration_s",
        ]
        read_only_fields = fields


class ClusterReferenceField(serializers.CharField):
    """A cluster by id, by name (when unique) or by ``site/name``."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        if "\x00" in text:  # PostgreSQL text cannot hold NUL: refuse before any query
            raise serializers.ValidationError("Null characters are not allowed.")
        try:
            return find_cluster(text)
        except ImportInputError as exc:
            raise serializers.ValidationError(exc.errors["cluster"]) from exc


class UsageImportSerializer(serializers.Serializer):
    """The multipart upload form of ``POST /api/v1/usage-records/import/``."""

    file = serializers.FileField(allow_empty_file=False, use_url=False)
    kind = serializers.ChoiceField(choices=ImportKind.choices)
    cluster = ClusterReferenceField(help_text="Cluster id, name, or site/name.")
    timezone = serializers.CharField(
        default="UTC", help_text="Zone the scheduler printed times in (IANA name)."
    )
    as_of = serializers.DateTimeField(
        required=False,
        help_text="The export's as-of time, used when the file holds no time of its own (the "
        "file's latest time comes first, the upload time last); running jobs count up to it.",
    )
    exported_at = serializers.DateTimeField(
        required=False, help_text="The former name of as_of (still read)."
    )
    report_period_start = serializers.DateTimeField(
        required=False, help_text="sreport output without its banner: the report period."
    )
    report_period_end = serializers.DateTimeField(required=False)
    columns = serializers.CharField(
        required=False,
        max_length=4000,
        help_text="Header-less output: the comma-separated --format list it was exported with.",
    )
    columns_preset = serializers.CharField(
        required=False, max_length=40, help_text="Header-less output: default or xdmod."
    )
    delimiter = serializers.CharField(
        required=False, max_length=8, trim_whitespace=False, help_text="sacct --delimiter."
    )
    time_unit = serializers.CharField(
        required=False,
        max_length=10,
        help_text="sreport output without its banner: hours, minutes or seconds (sreport -t).",
    )
    gpuutil = serializers.CharField(
        required=False,
        max_length=10,
        help_text="sacct gres/gpuutil: summed (Slurm >= 24.05.1, default) or one-gpu (earlier).",
    )


LAYOUT_FIELDS: tuple[str, ...] = (
    "columns",
    "columns_preset",
    "delimiter",
    "time_unit",
    "gpuutil",
)


class GresAliasSerializer(SafeNamesSerializerMixin, serializers.ModelSerializer):
    name_fields = ("gres_type",)
    accelerator = AcceleratorField(queryset=AcceleratorModel.objects.all())
    accelerator_name = serializers.CharField(source="accelerator.name", read_only=True)

    class Meta:
        model = GresAlias
        fields = ["id", "gres_type", "accelerator", "accelerator_name", "cluster", "notes"]
        extra_kwargs = {"cluster": {"required": False}}
        validators: list = []  # the check below compares normalized names (both scopes)

    def validate(self, attrs):
        gres_type = normalize_gres_type(
            attrs.get("gres_type", getattr(self.instance, "gres_type", ""))
        )
        cluster = attrs.get("cluster", getattr(self.instance, "cluster", None))
        same = GresAlias.objects.filter(gres_type=gres_type, cluster=cluster)
        if self.instance is not None:
            same = same.exclude(pk=self.instance.pk)
        if same.exists():
            where = f"cluster {cluster.name}" if cluster else "all clusters"
            raise serializers.ValidationError(
                {"gres_type": f'"{gres_type}" already has an alias for {where}.'}
            )
        return attrs


class PartitionMappingSerializer(SafeNamesSerializerMixin, serializers.ModelSerializer):
    name_fields = ("partition",)
    accelerator = AcceleratorField(
        queryset=AcceleratorModel.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = PartitionMapping
        fields = ["id", "cluster", "partition", "pool", "accelerator"]

    def validate(self, attrs):
        cluster = attrs.get("cluster", getattr(self.instance, "cluster", None))
        pool = attrs.get("pool", getattr(self.instance, "pool", None))
        if pool is not None and cluster is not None and pool.cluster_id != cluster.pk:
            raise serializers.ValidationError({"pool": "The pool belongs to another cluster."})
        return attrs


class SreportUtilizationSerializer(serializers.ModelSerializer):
    class Meta:
        model = SreportUtilization
        fields = [
            "id",
            "cluster",
            "tres_name",
            "accelerator",
            "period_start",
            "period_end",
            "allocated_card_hours",
            "down_card_hours",
            "planned_down_card_hours",
            "idle_card_hours",
            "planned_card_hours",
            "reported_card_hours",
            "import_job",
        ]
        read_only_fields = fields


# -- report queries ------------------------------------------------------------------------


class DateOrDateTimeField(serializers.DateTimeField):
    """ISO 8601 date (midnight) or date-time; naive values are in the server's time zone."""

    def to_internal_value(self, value):
        if isinstance(value, str) and len(value.strip()) == 10:
            try:
                day = dt.date.fromisoformat(value.strip())
            except ValueError:
                pass
            else:
                return timezone.make_aware(dt.datetime.combine(day, dt.time()))
        return super().to_internal_value(value)


# Shortest length of one bucket, in days: the bucket count is refused before any work.
_MIN_BUCKET_DAYS = {"day": 1, "week": 7, "month": 28}


def _check_bucket_count(start: dt.datetime, end: dt.datetime, granularity: str) -> None:
    span_days = (end - start).total_seconds() / 86_400
    most = span_days / _MIN_BUCKET_DAYS.get(granularity, span_days or 1)
    if most > selectors.MAX_BUCKETS + 1:
        raise serializers.ValidationError(
            {
                "granularity": f"{start:%Y-%m-%d} to {end:%Y-%m-%d} by {granularity} is more "
                f"than {selectors.MAX_BUCKETS} buckets; choose a coarser one."
            }
        )


class AccountingQuerySerializer(serializers.Serializer):
    """Query parameters shared by the utilization, costs and chargeback reports."""

    group_choices: tuple[str, ...] = selectors.UTILIZATION_GROUPS
    default_group_by = "cluster"

    cluster = ClusterReferenceField(required=False, help_text="Cluster id, name, or site/name.")
    accelerator = AcceleratorField(
        queryset=AcceleratorModel.objects.all(),
        required=False,
        help_text="Card model id or catalog name.",
    )
    start = DateOrDateTimeField(
        required=False,
        validators=[WithinDates()],
        help_text=f"Period start (default: end − {DEFAULT_REPORT_DAYS} days).",
    )
    end = DateOrDateTimeField(
        required=False,
        validators=[WithinDates()],
        help_text="Period end, exclusive (default: today 00:00).",
    )
    granularity = serializers.ChoiceField(choices=selectors.GRANULARITIES, default="month")
    group_by = serializers.CharField(
        required=False,
        help_text="Comma-separated: " + ", ".join(selectors.UTILIZATION_GROUPS),
    )

    def validate_group_by(self, value: str) -> tuple[str, ...]:
        names = tuple(part.strip() for part in value.split(",") if part.strip())
        unknown = [name for name in names if name not in self.group_choices]
        if unknown or not names:
            raise serializers.ValidationError(
                f"Choose from {', '.join(self.group_choices)} (comma-separated)."
            )
        return names

    def validate(self, attrs):
        end = attrs.get("end")
        start = attrs.get("start")
        if end is None:
            end = (
                start + dt.timedelta(days=DEFAULT_REPORT_DAYS)
                if start is not None
                else timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
            )
        if start is None:
            start = end - dt.timedelta(days=DEFAULT_REPORT_DAYS)
        if end <= start:
            raise serializers.ValidationError({"end": "Must be after start."})
        for key, value in (("start", start), ("end", end)):
            if message := date_error(value):  # a defaulted end or start can still fall outside
                raise serializers.ValidationError({key: message})
        _check_bucket_count(start, end, attrs.get("granularity", "month"))
        attrs["start"], attrs["end"] = start, end
        team = attrs.get("team")
        if team is not None:
            account = "" if team == selectors.NO_ACCOUNT else team
            request = self.context.get("request")
            teams = None if request is None else visible_teams(request.user)
            # A scoped user gets no rows for any team not theirs, existing or not: no hint.
            known = teams is None or team in teams
            if known and not UsageRecord.objects.filter(account=account).exists():
                raise serializers.ValidationError({"team": f'No usage records of team "{team}".'})
        return attrs

    def scope(self) -> selectors.AccountingScope:
        data = self.validated_data
        cluster = data.get("cluster")
        accelerator = data.get("accelerator")
        return selectors.AccountingScope(
            period_start=data["start"],
            period_end=data["end"],
            granularity=data["granularity"],
            cluster_ids=(cluster.pk,) if cluster is not None else None,
            accelerator_id=accelerator.pk if accelerator is not None else None,
            team=data.get("team"),
            group_by=data.get("group_by") or (self.default_group_by,),
            idle_rule=data.get("idle_rule", "proportional"),
            tz=settings.TIME_ZONE,
        )


class UtilizationQuerySerializer(AccountingQuerySerializer):
    team = serializers.CharField(required=False, help_text="Account / team name.")


class ReportingCurrencyMixin(serializers.Serializer):
    """``currency=EUR``: also answer the money totals converted with the dated rates."""

    currency = serializers.CharField(
        required=False,
        max_length=3,
        help_text="Reporting currency (ISO 4217): the per-currency totals converted with the "
        "newest exchange rate on or before the period's end, each rate named; without a rate "
        "for every currency nothing is converted and the reason says so.",
    )

    def validate_currency(self, value: str) -> str:
        code = value.strip().upper()
        if code not in ISO_4217_CODES:
            raise serializers.ValidationError(f"“{value}” is not an ISO 4217 currency code.")
        return code


class ConvertedTotalsSerializer(serializers.Serializer):
    currency = serializers.CharField()
    figures = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        allow_null=True,
        help_text="Each money total in the reporting currency; null when a rate is missing.",
    )
    notes = serializers.ListField(child=serializers.CharField(), help_text="The rates used.")
    reason = serializers.CharField(allow_null=True, help_text="Why nothing was converted.")


class CostQuerySerializer(ReportingCurrencyMixin, AccountingQuerySerializer):
    group_choices = selectors.COST_GROUPS
    group_by = serializers.CharField(
        required=False, help_text="Comma-separated: " + ", ".join(selectors.COST_GROUPS)
    )


class ChargebackQuerySerializer(ReportingCurrencyMixin, AccountingQuerySerializer):
    team = serializers.CharField(required=False, help_text="List only this team's charges.")
    idle_rule = serializers.ChoiceField(
        choices=IDLE_RULES,
        default="proportional",
        help_text="Who pays for idle cards: proportional to use, even per team, or none.",
    )
    group_by = None


# -- report bodies (documented shapes; rows come from accounting.selectors) ----------------


def _float(**kwargs) -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, **kwargs)


class UtilizationRowSerializer(serializers.Serializer):
    cluster_id = serializers.IntegerField(required=False, allow_null=True)
    cluster = serializers.CharField(required=False)
    pool_id = serializers.IntegerField(required=False, allow_null=True)
    pool = serializers.CharField(required=False)
    site_id = serializers.IntegerField(required=False, allow_null=True)
    site = serializers.CharField(required=False)
    accelerator = serializers.CharField(required=False)
    team = serializers.CharField(required=False)
    bucket_start = serializers.DateTimeField()
    bucket_end = serializers.DateTimeField()
    bucket_hours = serializers.FloatField()
    in_service_card_hours = _float()
    planned_down_card_hours = _float()
    available_card_hours = _float()
    allocated_card_hours = _float()
    lost_card_hours = _float(help_text="Card-hours of failed, node_fail and preempted jobs.")
    down_card_hours = _float(help_text="Unplanned Down card-hours (sreport).")
    allocation_share = _float(help_text="allocated ÷ available")
    utilization = _float(help_text="(allocated + Down) ÷ available: the measured factor 5")
    effective_time = _float(help_text="(allocated − lost) ÷ (allocated + Down): factor 4")
    productive_share = _float(help_text="utilization × effective_time")
    provenance = serializers.CharField()


class CoverageSerializer(serializers.Serializer):
    cluster_id = serializers.IntegerField()
    cluster = serializers.CharField()
    records = serializers.IntegerField()
    first_start = serializers.DateTimeField()
    last_time = serializers.DateTimeField()
    provenance = serializers.CharField(
        help_text='Where the records came from: "measured (Slurm)" or "measured (Kubernetes)".'
    )


class ReportSerializer(serializers.Serializer):
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()
    granularity = serializers.CharField()


class UtilizationReportSerializer(ReportSerializer):
    group_by = serializers.ListField(child=serializers.CharField())
    rows = UtilizationRowSerializer(many=True)
    coverage = CoverageSerializer(many=True)
    coverage_notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="Clusters without usage data in the period (no rows: no data, not 0 %), or "
        "covered for part of it (figures over the covered days only).",
    )


class FactorValuesSerializer(serializers.Serializer):
    energy = _float()
    mfu = _float()
    scaling = _float()
    effective_time = _float()
    utilization = _float()


class FactorProvenanceSerializer(serializers.Serializer):
    energy = serializers.CharField()
    mfu = serializers.CharField()
    scaling = serializers.CharField()
    effective_time = serializers.CharField()
    utilization = serializers.CharField()


class CostFiguresSerializer(serializers.Serializer):
    currency = serializers.CharField()
    card_hours = _float(help_text="In-service card-hours: what is paid for.")
    allocated_card_hours = _float()
    lost_card_hours = _float()
    down_card_hours = _float()
    it_energy_mwh = _float()
    facility_energy_mwh = _float()
    compute_cost = _float(help_text="Ownership (amortized capital + opex) or rental.")
    energy_cost = _float()
    energy_overhead_cost = _float(help_text="The PUE share of the energy cost.")
    idle_cost = _float()
    total_cost = _float()
    co2_tonnes = _float()
    peak_pflop_days = _float()
    effective_pflop_days = _float()
    effective_utilization = _float(help_text="effective ÷ peak PFLOP-days")
    cost_per_allocated_card_hour = _float()
    cost_per_effective_pflop_day = _float()
    lost_cost = _float(help_text="Money lost to the five factors together.")
    uncovered_card_hours = _float(
        help_text="In-service card-hours outside the usage records' coverage (no data)."
    )
    uncovered_cost = _float(
        help_text="What those hours cost (in total_cost, never charged to a team); ratios, "
        "idle and lost money are over the covered hours only."
    )
    covered_peak_pflop_days = _float(help_text="Peak PFLOP-days of the covered hours.")
    lost_cost_by_factor = FactorValuesSerializer(help_text="Split in proportion to −ln(factor).")
    factors = FactorValuesSerializer(help_text="Peak-FLOP card-hour weighted factors.")
    factor_provenance = FactorProvenanceSerializer()


class CostRowSerializer(CostFiguresSerializer):
    cluster_id = serializers.IntegerField(required=False, allow_null=True)
    cluster = serializers.CharField(required=False)
    pool_id = serializers.IntegerField(required=False, allow_null=True)
    pool = serializers.CharField(required=False)
    site_id = serializers.IntegerField(required=False, allow_null=True)
    site = serializers.CharField(required=False)
    bucket_start = serializers.DateTimeField()
    bucket_end = serializers.DateTimeField()


class CostReportSerializer(ReportSerializer):
    group_by = serializers.ListField(child=serializers.CharField())
    factor_names = serializers.ListField(child=serializers.CharField())
    rows = CostRowSerializer(many=True)
    totals = CostFiguresSerializer(many=True, help_text="One per currency.")
    converted = ConvertedTotalsSerializer(required=False, help_text="Only with ?currency=.")
    warnings = serializers.ListField(child=serializers.CharField())


class ChargebackRowSerializer(serializers.Serializer):
    team = serializers.CharField()
    currency = serializers.CharField()
    bucket_start = serializers.DateTimeField()
    bucket_end = serializers.DateTimeField()
    used_card_hours = serializers.FloatField()
    used_cost = serializers.FloatField(help_text="Used card-hours × (ownership + busy energy).")
    idle_cost_share = serializers.FloatField()
    uncovered_cost = serializers.FloatField(
        help_text="Hours without usage records: only on the row no team pays; "
        "used + idle share + this = chargeback_cost."
    )
    chargeback_cost = serializers.FloatField()
    share_of_total = _float()


class ChargebackTotalSerializer(serializers.Serializer):
    currency = serializers.CharField()
    bucket_start = serializers.DateTimeField()
    bucket_end = serializers.DateTimeField()
    total_cost = serializers.FloatField()
    charged_cost = serializers.FloatField(help_text="Sum of the listed rows.")


class ChargebackReportSerializer(ReportSerializer):
    idle_rule = serializers.CharField()
    rows = ChargebackRowSerializer(many=True)
    totals = ChargebackTotalSerializer(many=True)
    converted = ConvertedTotalsSerializer(required=False, help_text="Only with ?currency=.")
    warnings = serializers.ListField(child=serializers.CharField())


class UploadTooLargeSerializer(serializers.Serializer):
    detail = serializers.CharField()
    max_bytes = serializers.IntegerField()
