"""Inventory serializers. Validation rules live on the models; serializers run them."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.text import SafeNamesSerializerMixin
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from inventory.pool_models import catalog_model
from inventory.selectors import pool_totals


class ModelCleanMixin(SafeNamesSerializerMixin):
    """Run the model's clean() so the API enforces the same rules as the admin and forms (and
    the names' rule of the forms, core.text: ``name_fields``, default ``name``)."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        instance = self.instance or self.Meta.model()
        for key, value in attrs.items():
            setattr(instance, key, value)
        try:
            instance.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return attrs


class AcceleratorField(serializers.PrimaryKeyRelatedField):
    """An accelerator given by id or by its exact catalog name."""

    default_error_messages = {
        **serializers.PrimaryKeyRelatedField.default_error_messages,
        "unknown_name": 'No accelerator named "{name}" in the catalog.',
    }

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:  # PostgreSQL text cannot hold NUL
            self.fail("unknown_name", name=data.replace("\x00", "\\x00"))
        if isinstance(data, str) and not data.isdecimal():
            try:
                return self.get_queryset().get(name=data)
            except AcceleratorModel.DoesNotExist:
                self.fail("unknown_name", name=data)
        return super().to_internal_value(data)


# A new site states its tariff (or that it is unknown) and its currency: no silent 0.0 USD.
TARIFF_MISSING = (
    'Give the tariff per kWh in the site\'s currency, or send "tariff_unknown": true '
    "(stored as 0: the site's energy adds no cost until a tariff is entered)."
)
CURRENCY_MISSING = "Give the site's ISO 4217 currency code (of its tariff and costs), e.g. EUR."
TARIFF_AND_UNKNOWN = "Give a tariff or send tariff_unknown: true, not both."


class SiteSerializer(ModelCleanMixin, serializers.ModelSerializer):
    name_fields = ("name", "location")
    tariff_unknown = serializers.BooleanField(
        write_only=True,
        required=False,
        help_text="True: the tariff is unknown and stored as 0 (the form's “Tariff unknown”). "
        "A new site needs a tariff_per_kwh or this.",
    )

    class Meta:
        model = Site
        fields = ["id", *Site.EDITABLE_FIELDS, "tariff_unknown", "created", "updated"]

    def validate(self, attrs):
        unknown = attrs.pop("tariff_unknown", False)
        errors: dict = stated_money_errors(attrs, unknown, creating=self.instance is None)
        if unknown and not errors:
            attrs["tariff_per_kwh"] = 0.0
        try:
            attrs = super().validate(attrs)
        except serializers.ValidationError as exc:  # every problem in one answer
            errors = {**exc.detail, **errors} if isinstance(exc.detail, dict) else errors
            if not errors:
                raise
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


def stated_money_errors(attrs: dict, unknown: bool, *, creating: bool) -> dict[str, str]:
    """What a site's tariff and currency lack: stated on create, never both a tariff and
    unknown (an edit leaves what it does not send as it is)."""
    errors = {}
    if "tariff_per_kwh" in attrs and unknown:
        errors["tariff_unknown"] = TARIFF_AND_UNKNOWN
    elif creating and "tariff_per_kwh" not in attrs and not unknown:
        errors["tariff_per_kwh"] = TARIFF_MISSING
    if creating and not attrs.get("currency"):
        errors["currency"] = CURRENCY_MISSING
    return errors


class AcceleratorModelSerializer(ModelCleanMixin, serializers.ModelSerializer):
    name_fields = ("vendor", "name")

    class Meta:
        model = AcceleratorModel
        fields = ["id", *AcceleratorModel.EDITABLE_FIELDS]


class ClusterSerializer(ModelCleanMixin, serializers.ModelSerializer):
    site_name = serializers.CharField(source="site.name", read_only=True)

    class Meta:
        model = Cluster
        fields = ["id", "site_name", *Cluster.EDITABLE_FIELDS, "created", "updated"]


class NodeGroupSerializer(ModelCleanMixin, serializers.ModelSerializer):
    accelerator = AcceleratorField(queryset=AcceleratorModel.objects.all())
    accelerator_name = serializers.CharField(source="accelerator.name", read_only=True)
    cards = serializers.IntegerField(read_only=True)

    class Meta:
        model = NodeGroup
        fields = [
            "id",
            "pool",
            "name",
            "accelerator",
            "accelerator_name",
            "node_count",
            "cards_per_node",
            "cards",
            "mfu",
            "created",
            "updated",
        ]


class AcceleratorMixSerializer(serializers.Serializer):
    accelerator_id = serializers.IntegerField()
    accelerator = serializers.CharField()
    vendor = serializers.CharField()
    cards = serializers.IntegerField()
    peak_pflops = serializers.FloatField()
    it_power_kw = serializers.FloatField()


class PoolSerializer(ModelCleanMixin, serializers.ModelSerializer):
    cluster_name = serializers.CharField(source="cluster.name", read_only=True)
    site = serializers.IntegerField(source="cluster.site_id", read_only=True)
    node_groups = NodeGroupSerializer(many=True, read_only=True)
    cards = serializers.SerializerMethodField()
    peak_pflops = serializers.SerializerMethodField()
    it_power_kw = serializers.SerializerMethodField(
        help_text="kW: the cards' TDP plus each node's own draw, as the cost model counts it"
    )
    heterogeneous = serializers.SerializerMethodField()
    accelerator_mix = serializers.SerializerMethodField()

    class Meta:
        model = Pool
        fields = [
            "id",
            "cluster",
            "cluster_name",
            "site",
            "name",
            "purpose",
            "planned_utilization",
            "model_name",
            "assumptions",
            "notes",
            "cards",
            "peak_pflops",
            "it_power_kw",
            "heterogeneous",
            "accelerator_mix",
            "node_groups",
            "created",
            "updated",
        ]

    def validate(self, attrs):
        attrs = super().validate(attrs)  # the model's clean(): an unknown model name is a 400
        if attrs.get("model_name"):  # stored as the catalog spells it, as clean() does
            attrs["model_name"] = catalog_model(attrs["model_name"].strip()).name
        return attrs

    def _totals(self, pool: Pool):
        # One computation per pool per response, from the prefetched node groups.
        cache = self.context.setdefault("_pool_totals", {})
        if pool.pk not in cache:
            cache[pool.pk] = pool_totals(pool)
        return cache[pool.pk]

    def get_cards(self, pool: Pool) -> int:
        return self._totals(pool).cards

    def get_peak_pflops(self, pool: Pool) -> float:
        return round(self._totals(pool).peak_pflops, 6)

    def get_it_power_kw(self, pool: Pool) -> float:
        return round(self._totals(pool).it_power_kw, 3)

    def get_heterogeneous(self, pool: Pool) -> bool:
        return self._totals(pool).is_heterogeneous

    @extend_schema_field(AcceleratorMixSerializer(many=True))
    def get_accelerator_mix(self, pool: Pool) -> list[dict]:
        return [m.__dict__ for m in self._totals(pool).mix]
