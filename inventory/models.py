"""The fleet inventory: sites, the accelerator catalog, clusters, pools and node groups.

Derived totals (cards, peak PFLOPS, IT power) are computed by `inventory.selectors`,
never stored, so they cannot drift from the node groups they come from.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from simple_history.models import HistoricalRecords

from core.jobs.models import DurableJob
from inventory.currency import ExchangeRate, validate_currency  # noqa: F401 (a model)
from inventory.pool_models import pool_model_errors
from inventory.ranges import range_errors

# PUE at or above this is so unusual that the user must confirm it.
PUE_CONFIRMATION_THRESHOLD = 3.0


class CoolingType(models.TextChoices):
    AIR = "air", "Air"
    REAR_DOOR = "rear_door", "Rear-door heat exchanger"
    DIRECT_LIQUID = "direct_liquid", "Direct liquid (cold plate)"
    IMMERSION = "immersion", "Immersion"


class Fabric(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ROCE = "roce", "RoCE"
    ETHERNET = "ethernet", "Ethernet"


class PoolPurpose(models.TextChoices):
    TRAINING = "training", "Training"
    INFERENCE = "inference", "Inference"
    MIXED = "mixed", "Mixed"


class Confidence(models.TextChoices):
    VENDOR = "vendor", "Vendor datasheet"
    CURATED = "curated", "Curated from several sources"
    UNVERIFIED = "unverified", "Unverified"
    USER = "user", "Entered by a user"


non_negative = MinValueValidator(0)


class VersionedModel(models.Model):
    """A counter raised by every save, so an edit can tell that it started from an old state."""

    version = models.PositiveIntegerField(
        default=1, editable=False, help_text="Raised by one on every save (optimistic locking)."
    )

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            # From the stored row, not this instance: a revert must not move the version back.
            rows = type(self)._base_manager.filter(pk=self.pk).values_list("version", flat=True)
            stored = rows.first()
            if stored is not None:
                self.version = stored + 1
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "version"}
        super().save(*args, **kwargs)


class LiveClusterManager(models.Manager):
    """Clusters not (soft-)deleted: what every page, API and analysis reads."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(deleted_at__isnull=True)


class LivePoolManager(models.Manager):
    """Pools neither deleted themselves nor in a deleted cluster."""

    def get_queryset(self) -> models.QuerySet:
        return (
            super().get_queryset().filter(deleted_at__isnull=True, cluster__deleted_at__isnull=True)
        )


class LiveNodeGroupManager(models.Manager):
    """Node groups of live pools in live clusters."""

    def get_queryset(self) -> models.QuerySet:
        return (
            super()
            .get_queryset()
            .filter(pool__deleted_at__isnull=True, pool__cluster__deleted_at__isnull=True)
        )


class SoftDeletable(models.Model):
    """Deleting keeps the row (and what hangs off it: usage records, pools …) hidden, so a
    restore brings it all back; ``inventory.deletion`` purges it after the retention period.
    ``objects`` hides deleted rows everywhere; ``all_objects`` sees them."""

    deleted_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        db_index=True,
        help_text="When it was deleted; hidden until restored or purged.",
    )
    all_objects = models.Manager()
    # The parent its name is unique under (among live rows), and what a clash says.
    name_parent: str = ""
    name_clash_message: str = ""

    class Meta:
        abstract = True

    def name_clash(self) -> dict[str, str]:
        """{"name": why} when a live sibling has this name (the database's unique index is
        partial, so forms and the API check it here to answer 400, never 500)."""
        parent_id = getattr(self, f"{self.name_parent}_id", None)
        name = getattr(self, "name", "")
        if parent_id is None or not name:
            return {}
        siblings = type(self).objects.filter(**{f"{self.name_parent}_id": parent_id}, name=name)
        if siblings.exclude(pk=self.pk).exists():
            return {"name": self.name_clash_message}
        return {}


class AssumptionsMixin(models.Model):
    """Per-object overrides of the engine's documented defaults (site → cluster → pool)."""

    assumptions_scope: str = ""

    assumptions = models.JSONField(
        default=dict,
        blank=True,
        help_text='Overrides of engine defaults, e.g. {"mtbf_card_hours": 30000}. '
        "Keys and ranges: docs/efficiency-model.md.",
    )

    class Meta:
        abstract = True

    def clean_assumptions(self) -> dict[str, str]:
        from engine.defaults import validate_overrides

        if not isinstance(self.assumptions, dict):
            return {"assumptions": "Give the overrides as an object of key: value pairs."}
        try:
            validate_overrides(self.assumptions, self.assumptions_scope)
        except (KeyError, ValueError) as exc:
            return {"assumptions": str(exc)}
        return {}


class Site(AssumptionsMixin, VersionedModel):
    assumptions_scope = "site"
    # What a user edits, in order: shared by the API, the forms and the bulk import.
    EDITABLE_FIELDS = (
        "name",
        "location",
        "cooling_type",
        "pue",
        "pue_confirmed",
        "metered_facility_energy_kwh",
        "metered_it_energy_kwh",
        "metered_period_start",
        "metered_period_end",
        "tariff_per_kwh",
        "currency",
        "grid_carbon_g_per_kwh",
        "assumptions",
        "notes",
    )

    name = models.CharField(max_length=100, unique=True)
    location = models.CharField(max_length=200, blank=True)
    cooling_type = models.CharField(
        max_length=20, choices=CoolingType.choices, default=CoolingType.AIR
    )
    pue = models.FloatField(
        "measured PUE",
        null=True,
        blank=True,
        validators=[MinValueValidator(1.0)],
        help_text="Measured power usage effectiveness (facility power / IT power), at least 1.0.",
    )
    pue_confirmed = models.BooleanField(
        "PUE confirmed",
        default=False,
        help_text=f"Tick to keep a PUE of {PUE_CONFIRMATION_THRESHOLD} or more.",
    )
    metered_facility_energy_kwh = models.FloatField(
        null=True, blank=True, validators=[non_negative]
    )
    metered_it_energy_kwh = models.FloatField(null=True, blank=True, validators=[non_negative])
    metered_period_start = models.DateField(null=True, blank=True)
    metered_period_end = models.DateField(null=True, blank=True)
    tariff_per_kwh = models.FloatField(
        "electricity tariff per kWh", default=0.0, validators=[non_negative]
    )
    currency = models.CharField(
        max_length=3, default="USD", validators=[validate_currency], help_text="ISO 4217 code."
    )
    grid_carbon_g_per_kwh = models.FloatField(
        "grid carbon intensity (gCO₂/kWh)", default=0.0, validators=[non_negative]
    )
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # Who changed what and when, before and after (inventory.history reverts from it).
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.currency = (self.currency or "").upper()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors: dict[str, str] = self.clean_assumptions()
        if (
            self.pue is not None
            and self.pue >= PUE_CONFIRMATION_THRESHOLD
            and not self.pue_confirmed
        ):
            errors["pue"] = (
                f"A PUE of {self.pue} is unusually high (≥ {PUE_CONFIRMATION_THRESHOLD}); "
                "tick 'PUE confirmed' to keep it."
            )
        facility, it = self.metered_facility_energy_kwh, self.metered_it_energy_kwh
        if (facility is None) != (it is None):
            missing = "metered_it_energy_kwh" if it is None else "metered_facility_energy_kwh"
            errors[missing] = "Metered facility and IT energy must be given together."
        elif facility is not None and it is not None:
            if it <= 0:
                errors["metered_it_energy_kwh"] = "Metered IT energy must be above zero."
            elif facility < it:
                errors["metered_facility_energy_kwh"] = (
                    "Facility energy cannot be below IT energy (that would be a PUE under 1.0)."
                )
        start, end = self.metered_period_start, self.metered_period_end
        if start and end and end < start:
            errors["metered_period_end"] = "The metered period must end after it starts."
        try:
            validate_currency(self.currency or "")
        except ValidationError as exc:
            errors["currency"] = exc.messages[0]
        errors = {**range_errors(self), **errors}
        if errors:
            raise ValidationError(errors)


# NVLink Switch systems join at most 576 cards in one scale-up domain (NVIDIA GB200 NVL576).
NVLINK_DOMAIN_MAX_CARDS = 576
NVLINK_DOMAIN_HELP = (
    "Cards that share one NVLink / Infinity Fabric scale-up domain (8 on an HGX or OAM board, "
    "72 on a GB200/GB300 NVL72 rack); blank when unknown: the node is the domain."
)


class AcceleratorModel(VersionedModel):
    """One entry of the card catalog; looked up by `name` or id."""

    EDITABLE_FIELDS = (
        "vendor",
        "name",
        "dense_bf16_tflops",
        "dense_fp8_tflops",
        "dense_int8_tops",
        "dense_fp4_tflops",
        "memory_gb",
        "memory_bandwidth_tbs",
        "tdp_w",
        "intra_node_interconnect_gbs",
        "nvlink_domain_cards",
        "default_training_mfu",
        "list_price",
        "rental_price_per_card_hour",
        "currency",
        "confidence",
        "source",
    )

    vendor = models.CharField(max_length=50)
    name = models.CharField(max_length=100, unique=True)
    dense_bf16_tflops = models.FloatField(
        "dense BF16/FP16 TFLOPS", validators=[MinValueValidator(0.001)]
    )
    dense_fp8_tflops = models.FloatField(
        "dense FP8 TFLOPS", null=True, blank=True, validators=[MinValueValidator(0.001)]
    )
    dense_int8_tops = models.FloatField(
        "dense INT8 TOPS",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.001)],
        help_text="Dense INT8 tensor peak; blank when the card has no INT8 tensor path.",
    )
    dense_fp4_tflops = models.FloatField(
        "dense FP4 TFLOPS",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.001)],
        help_text="Dense FP4 (NVFP4/MXFP4) tensor peak, without sparsity; blank when the card "
        "has no FP4 tensor cores (before Blackwell).",
    )
    memory_gb = models.FloatField(validators=[MinValueValidator(0.001)])
    memory_bandwidth_tbs = models.FloatField(
        "memory bandwidth TB/s", validators=[MinValueValidator(0.001)]
    )
    tdp_w = models.FloatField("TDP W", validators=[MinValueValidator(1)])
    intra_node_interconnect_gbs = models.FloatField(
        "intra-node interconnect GB/s", default=64.0, validators=[MinValueValidator(0.001)]
    )
    nvlink_domain_cards = models.PositiveIntegerField(
        "NVLink domain (cards)",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(NVLINK_DOMAIN_MAX_CARDS)],
        help_text=NVLINK_DOMAIN_HELP,
    )
    default_training_mfu = models.FloatField(
        "default training MFU",
        default=0.4,
        validators=[MinValueValidator(0.0001), MaxValueValidator(1.0)],
        help_text="Per-card MFU of a well-tuned large training job before parallel-scaling "
        "losses (the scaling factor carries those), in (0, 1].",
    )
    list_price = models.FloatField(
        "list price per card", null=True, blank=True, validators=[non_negative]
    )
    rental_price_per_card_hour = models.FloatField(null=True, blank=True, validators=[non_negative])
    currency = models.CharField(
        max_length=3, default="USD", validators=[validate_currency], help_text="ISO 4217 code."
    )
    confidence = models.CharField(
        max_length=20, choices=Confidence.choices, default=Confidence.USER
    )
    source = models.TextField(blank=True, help_text="Where the figures come from.")
    history = HistoricalRecords()

    class Meta:
        ordering = ["vendor", "name"]
        verbose_name = "accelerator model"

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.currency = (self.currency or "").upper()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if errors := range_errors(self):
            raise ValidationError(errors)


class Cluster(SoftDeletable, AssumptionsMixin, VersionedModel):
    assumptions_scope = "cluster"
    name_parent = "site"
    name_clash_message = "A cluster of this name already exists at this site."
    EDITABLE_FIELDS = (
        "site",
        "name",
        "fabric",
        "inter_node_bandwidth_gbps_per_card",
        "commissioned_on",
        "capital_cost_per_card",
        "amortization_years",
        "yearly_opex",
        "rental_price_per_card_hour",
        "assumptions",
        "notes",
    )

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="clusters")
    name = models.CharField(max_length=100)
    fabric = models.CharField(max_length=20, choices=Fabric.choices, default=Fabric.INFINIBAND)
    inter_node_bandwidth_gbps_per_card = models.FloatField(
        "inter-node bandwidth per card (Gbit/s)",
        default=200.0,
        validators=[MinValueValidator(0.001)],
    )
    commissioned_on = models.DateField(null=True, blank=True)
    capital_cost_per_card = models.FloatField(
        null=True,
        blank=True,
        validators=[non_negative],
        help_text="Card plus its share of server, network and storage.",
    )
    amortization_years = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.1)]
    )
    yearly_opex = models.FloatField(
        "yearly operating cost (whole cluster)", null=True, blank=True, validators=[non_negative]
    )
    rental_price_per_card_hour = models.FloatField(null=True, blank=True, validators=[non_negative])
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    objects = LiveClusterManager()

    class Meta:
        ordering = ["site__name", "name"]
        default_manager_name = "objects"
        constraints = [
            # Among live clusters: a deleted one keeps its name free for a new one.
            models.UniqueConstraint(
                fields=["site", "name"],
                condition=models.Q(deleted_at__isnull=True),
                name="cluster_name_unique_per_site",
                violation_error_message="A cluster of this name already exists at this site.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.site.name} / {self.name}" if self.site_id else self.name

    def clean(self) -> None:
        errors = self.clean_assumptions()
        if self.capital_cost_per_card is not None and not self.amortization_years:
            errors["amortization_years"] = "Give the amortization period for the capital cost."
        errors = {**range_errors(self), **self.name_clash(), **errors}
        if errors:
            raise ValidationError(errors)


POOL_MODEL_HELP = (
    "Optional: the model the pool trains or serves, by its name in the model catalog (e.g. "
    "DeepSeek-V3). Fills model_params; for a mixture of experts analyses score MFU on its "
    "active parameters and gradient traffic on the weights replicated over data parallelism."
)


class Pool(SoftDeletable, AssumptionsMixin, VersionedModel):
    assumptions_scope = "pool"
    name_parent = "cluster"
    name_clash_message = "A pool of this name already exists in this cluster."

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=100)
    purpose = models.CharField(
        max_length=20, choices=PoolPurpose.choices, default=PoolPurpose.TRAINING
    )
    planned_utilization = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0001), MaxValueValidator(1.0)],
        help_text="Planning assumption for allocated ÷ available card-hours, in (0, 1].",
    )
    model_name = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text=POOL_MODEL_HELP,
    )
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    objects = LivePoolManager()

    class Meta:
        ordering = ["cluster__site__name", "cluster__name", "name"]
        default_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"],
                condition=models.Q(deleted_at__isnull=True),
                name="pool_name_unique_per_cluster",
                violation_error_message="A pool of this name already exists in this cluster.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {**range_errors(self), **self.name_clash(), **self.clean_assumptions()}
        # A malformed assumption's own message wins over the named model's disagreement.
        errors = {**pool_model_errors(self), **errors}
        if errors:
            raise ValidationError(errors)


class NodeGroup(VersionedModel):
    """Identical nodes of one accelerator model inside a pool."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="node_groups")
    name = models.CharField(max_length=100)
    accelerator = models.ForeignKey(
        AcceleratorModel, on_delete=models.PROTECT, related_name="node_groups"
    )
    node_count = models.PositiveIntegerField(default=0)
    cards_per_node = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    mfu = models.FloatField(
        "measured or entered MFU",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0001), MaxValueValidator(1.0)],
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    objects = LiveNodeGroupManager()

    class Meta:
        ordering = ["pool", "name"]
        default_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["pool", "name"], name="nodegroup_name_unique_per_pool")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if errors := range_errors(self):
            raise ValidationError(errors)

    @property
    def cards(self) -> int:
        return self.node_count * self.cards_per_node


class PoolTotalsCheck(DurableJob):
    """One worker round-trip: a pool's nameplate totals recomputed on a Celery worker (the
    Fleet page's "check the worker" button reads its status and ``result`` back)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="totals_checks")
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-queued_at"]

    def __str__(self) -> str:
        return f"totals of pool {self.pool_id} ({self.status})"


def hidden_cluster_ids() -> models.QuerySet:
    """Ids of deleted clusters, as a subquery (apps above hide what hangs off them)."""
    return Cluster.all_objects.filter(deleted_at__isnull=False).values("pk")


def hidden_pool_ids() -> models.QuerySet:
    """Ids of pools that are deleted or in a deleted cluster, as a subquery."""
    hidden = models.Q(deleted_at__isnull=False) | models.Q(cluster__deleted_at__isnull=False)
    return Pool.all_objects.filter(hidden).values("pk")
