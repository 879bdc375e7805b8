"""Report API bodies: schedules (admins write), reports (read), run-now requests."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from core.bounds import WithinDates
from core.text import SafeNamesSerializerMixin
from reports import periods, services
from reports.authorization import Recipients, check_schedule, stored_recipients
from reports.models import FILE_FORMATS, Report, ReportFormat, ReportSchedule

SCHEDULE_FIELDS = [
    "id",
    "name",
    "scope",
    "site",
    "cluster",
    "team",
    "template",
    "frequency",
    "cron_expression",
    "send_time",
    "timezone",
    "reporting_currency",
    "recipient_users",
    "recipient_addresses",
    "formats",
    "enabled",
    "owner",
    "next_run_at",
    "last_run_at",
    "created",
    "updated",
]


class ReportScheduleSerializer(SafeNamesSerializerMixin, serializers.ModelSerializer):
    name_fields = ("name", "team")
    recipient_users = serializers.PrimaryKeyRelatedField(
        many=True,
        required=False,
        queryset=get_user_model().objects.filter(is_active=True),
        help_text="User ids; each receives the report at the e-mail address of the account.",
    )
    recipient_addresses = serializers.ListField(
        child=serializers.EmailField(), required=False, help_text="Plain e-mail addresses."
    )
    formats = serializers.ListField(
        child=serializers.ChoiceField(choices=ReportFormat.choices),
        allow_empty=False,
        required=False,
        help_text="html_email (the body), xlsx, csv, print_html (files, attached and archived).",
    )
    timezone = serializers.CharField(
        required=False, help_text="IANA time zone, e.g. Europe/Berlin."
    )
    owner = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = ReportSchedule
        fields = SCHEDULE_FIELDS
        read_only_fields = ["next_run_at", "last_run_at", "created", "updated"]

    def validate_timezone(self, value: str) -> str:
        try:
            periods.zone(value)
        except periods.ScheduleError as exc:
            raise serializers.ValidationError(exc.message) from exc
        return value

    def validate(self, attrs):
        # The model's clean() checks scope targets and cron, each error under its field.
        instance = self.instance or ReportSchedule()
        candidate = ReportSchedule(
            **{
                field.name: attrs.get(field.name, getattr(instance, field.name))
                for field in ReportSchedule._meta.concrete_fields
                if field.name not in ("id",)
            }
        )
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        self._authorize(candidate, attrs)
        return attrs

    def _authorize(self, candidate: ReportSchedule, attrs: dict) -> None:
        """The acting user may see the scope; the recipients may too (403, 400)."""
        stored = stored_recipients(self.instance) if self.instance else Recipients()
        users = attrs.get("recipient_users")
        recipients = Recipients(
            tuple(users) if users is not None else stored.users,
            tuple(candidate.recipient_addresses or []),
        )
        check = check_schedule(
            self.context["request"].user,
            scope=candidate.scope,
            team=candidate.team,
            recipients=recipients,
            before=self.instance,
        )
        if check.forbidden:
            raise PermissionDenied(check.forbidden)
        if check.errors:
            raise serializers.ValidationError(check.errors)

    def _save(self, instance: ReportSchedule, validated: dict) -> ReportSchedule:
        users = validated.pop("recipient_users", None)
        for name, value in validated.items():
            setattr(instance, name, value)
        try:
            services.save_schedule(instance)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        if users is not None:
            instance.recipient_users.set(users)
        return instance

    def create(self, validated_data):
        schedule = ReportSchedule(owner=self.context["request"].user)
        return self._save(schedule, validated_data)

    def update(self, instance, validated_data):
        return self._save(instance, validated_data)


class ReportFilesSerializer(serializers.Serializer):
    xlsx = serializers.URLField(allow_null=True)
    csv = serializers.URLField(allow_null=True)
    print_html = serializers.URLField(allow_null=True)


class ReportSerializer(serializers.ModelSerializer):
    schedule_name = serializers.CharField(source="schedule.name", read_only=True)
    period_label = serializers.CharField(read_only=True)
    files = serializers.SerializerMethodField()

    class Meta:
        model = Report
        fields = [
            "id",
            "schedule",
            "schedule_name",
            "period_start",
            "period_end",
            "period_label",
            "status",
            "trigger",
            "requested_by",
            "deliver",
            "recipients",
            "error",
            "delivery_attempts",
            "queued_at",
            "generated_at",
            "delivered_at",
            "files",
        ]
        read_only_fields = fields

    @extend_schema_field(ReportFilesSerializer)
    def get_files(self, report: Report) -> dict[str, str | None]:
        request = self.context.get("request")
        files = {}
        for fmt in FILE_FORMATS:
            url = None
            if report.file_for(fmt):
                url = reverse("report-download", args=[report.pk, fmt.value])
                url = request.build_absolute_uri(url) if request else url
            files[fmt.value] = url
        return files


class ReportDetailSerializer(ReportSerializer):
    numbers = serializers.JSONField(read_only=True, help_text="The figures the report shows.")

    class Meta(ReportSerializer.Meta):
        fields = [*ReportSerializer.Meta.fields, "numbers"]
        read_only_fields = fields


class RunNowSerializer(serializers.Serializer):
    day = serializers.DateField(
        required=False,
        validators=[WithinDates()],  # year 9999 or 0001 has no period: its end overflows
        help_text="A day inside the period to report on (the schedule's period holding it); "
        "default: the last complete period.",
    )
    deliver = serializers.BooleanField(default=True, help_text="E-mail it to the recipients.")

    def period(self, schedule: ReportSchedule, now: dt.datetime) -> periods.Period:
        spec = schedule.spec()
        day = self.validated_data.get("day")
        if day is None:
            return periods.period_for_fire(spec, periods.previous_fire(spec, now))
        period = periods.period_containing(spec, day)
        if period.end > now:
            raise serializers.ValidationError(
                {"day": f"The period {period.label()} has not ended yet; choose an earlier day."}
            )
        return period


class RunNowResultSerializer(serializers.Serializer):
    queued = serializers.BooleanField(help_text="False: the period already had this report.")
    report = ReportSerializer()
