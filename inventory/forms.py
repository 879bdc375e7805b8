"""Model forms for the browser app; validation is the models' own (full_clean via ModelForm)."""

from __future__ import annotations

from typing import NamedTuple

from django import forms

from core.parsers import BoundedJSONFormField
from core.text import SafeNamesFormMixin
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

ISO_DATE = forms.DateInput(format="%Y-%m-%d", attrs={"type": "date"})


# Clearer labels than the models' generated verbose names (units in brackets); the import
# column help uses them too.
FIELD_LABELS = {
    "metered_facility_energy_kwh": "Metered facility energy (kWh)",
    "metered_it_energy_kwh": "Metered IT energy (kWh)",
    "assumptions": "Assumption overrides (JSON)",
    "amortization_years": "Amortization period (years)",
    "capital_cost_per_card": "Capital cost per card",
    "rental_price_per_card_hour": "Rental price per card-hour",
    "planned_utilization": "Planned utilization (0 to 1)",
    "model_name": "Catalog model",
    "memory_gb": "Memory (GB)",
    "memory_bandwidth_tbs": "Memory bandwidth (TB/s)",
    "dense_int8_tops": "Dense INT8 (TOPS)",
    "dense_fp4_tflops": "Dense FP4 (TFLOPS)",
    "tdp_w": "TDP (W)",
    "intra_node_interconnect_gbs": "Intra-node interconnect (GB/s)",
    "node_count": "Node count",
    "mfu": "Measured or entered MFU (0 to 1)",
    "default_training_mfu": "Default training MFU (0 to 1)",
}


# The assumption overrides are JSON text: read with the API's bounds (depth, finite numbers).
JSON_BOXES = {"assumptions": BoundedJSONFormField}


def short_textarea() -> forms.Textarea:
    return forms.Textarea(attrs={"rows": 3})


class PoolChoiceField(forms.ModelChoiceField):
    """Pools named by their full path, since pool names repeat across clusters."""

    def label_from_instance(self, obj: Pool) -> str:
        return f"{obj.cluster.site.name} / {obj.cluster.name} / {obj.name}"


def clusters_for_choice():
    return Cluster.objects.select_related("site")


def pools_for_choice():
    return Pool.objects.select_related("cluster__site")


class AssumptionsFormMixin:
    """An empty overrides box means "no overrides", not an invalid value."""

    def clean_assumptions(self):
        value = self.cleaned_data.get("assumptions")
        return {} if value in (None, "") else value


# A site's figure that is stated or explicitly unknown (stored as 0: it adds no cost or CO₂),
# never pre-filled: a new site does not silently get free energy.
STATED_OR_UNKNOWN = {
    "tariff_per_kwh": (
        "tariff_unknown",
        "Give the tariff per kWh in the site's currency, or tick “Tariff unknown”.",
    ),
    "grid_carbon_g_per_kwh": (
        "grid_carbon_unknown",
        "Give the grid's carbon intensity, or tick “Carbon intensity unknown”.",
    ),
}


class FormSection(NamedTuple):
    """A fieldset of a form: its legend, a hint, its fields in tab order, and whether they
    sit in two columns (only for pairs read left to right, such as start and end)."""

    legend: str
    hint: str
    fields: list[forms.BoundField]
    paired: bool = False


class SiteForm(SafeNamesFormMixin, AssumptionsFormMixin, forms.ModelForm):
    name_fields = ("name", "location")
    tariff_unknown = forms.BooleanField(
        label="Tariff unknown",
        required=False,
        help_text="Stored as 0: the site's energy adds no cost until a tariff is entered.",
    )
    grid_carbon_unknown = forms.BooleanField(
        label="Carbon intensity unknown",
        required=False,
        help_text="Stored as 0: the site's energy counts no CO₂ until a figure is entered.",
    )
    # (legend, hint, fields, paired): the page's order, which is also the tab order.
    SECTIONS = (
        ("Site", "", ("name", "location"), True),
        ("Cooling", "", ("cooling_type", "pue", "pue_confirmed"), False),
        (
            "Energy price and carbon",
            "Each figure is stated or ticked unknown: nothing is assumed for a new site.",
            ("tariff_per_kwh", "tariff_unknown", "currency")
            + ("grid_carbon_g_per_kwh", "grid_carbon_unknown"),
            False,
        ),
        (
            "Metered energy (optional)",
            "Facility and IT energy of one period: they measure the PUE.",
            ("metered_facility_energy_kwh", "metered_it_energy_kwh")
            + ("metered_period_start", "metered_period_end"),
            True,
        ),
        ("Overrides and notes", "", ("assumptions", "notes"), False),
    )

    class Meta:
        model = Site
        fields = list(Site.EDITABLE_FIELDS)
        labels = FIELD_LABELS
        field_classes = JSON_BOXES
        help_texts = {
            "tariff_per_kwh": "Required (or tick unknown): facility energy price, in the "
            "currency below.",
            "grid_carbon_g_per_kwh": "Required (or tick unknown): gCO₂ per kWh of the grid.",
            "currency": "ISO 4217 code of the tariff and of this site's costs, e.g. EUR.",
        }
        widgets = {
            "metered_period_start": ISO_DATE,
            "metered_period_end": ISO_DATE,
            "currency": forms.TextInput(attrs={"size": 3, "autocapitalize": "characters"}),
            "assumptions": short_textarea(),
            "notes": short_textarea(),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.order_fields([name for section in self.SECTIONS for name in section[2]])
        stored = self.instance.pk is not None
        for name, (flag, _) in STATED_OR_UNKNOWN.items():
            self.fields[name].required = False  # required unless ticked unknown (clean)
            unknown = stored and not getattr(self.instance, name)
            self.initial[name] = getattr(self.instance, name) if stored and not unknown else None
            self.initial[flag] = unknown
        if not stored:
            self.initial["currency"] = ""  # the model's USD is a default, not a statement

    def sections(self) -> list[FormSection]:
        return [
            FormSection(legend, hint, [self[name] for name in names], paired)
            for legend, hint, names, paired in self.SECTIONS
        ]

    def clean(self):
        data = super().clean()
        for name, (flag, missing) in STATED_OR_UNKNOWN.items():
            if name in self.errors:
                continue  # already refused (not a number, out of range)
            value, unknown = data.get(name), data.get(flag)
            if value is None and not unknown:
                self.add_error(name, missing)
            elif value is not None and unknown:
                self.add_error(flag, "Give a figure or tick unknown, not both.")
            elif unknown:
                data[name] = 0.0
        return data


class AcceleratorModelForm(SafeNamesFormMixin, forms.ModelForm):
    name_fields = ("vendor", "name")

    class Meta:
        model = AcceleratorModel
        fields = list(AcceleratorModel.EDITABLE_FIELDS)
        labels = FIELD_LABELS
        widgets = {"source": short_textarea()}


class ClusterForm(SafeNamesFormMixin, AssumptionsFormMixin, forms.ModelForm):
    class Meta:
        model = Cluster
        fields = list(Cluster.EDITABLE_FIELDS)
        labels = FIELD_LABELS
        field_classes = JSON_BOXES
        widgets = {
            "commissioned_on": ISO_DATE,
            "assumptions": short_textarea(),
            "notes": short_textarea(),
        }


class PoolForm(SafeNamesFormMixin, AssumptionsFormMixin, forms.ModelForm):
    class Meta:
        model = Pool
        fields = [
            "cluster",
            "name",
            "purpose",
            "planned_utilization",
            "model_name",
            "assumptions",
            "notes",
        ]
        labels = FIELD_LABELS
        field_classes = JSON_BOXES
        widgets = {"assumptions": short_textarea(), "notes": short_textarea()}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Cluster labels include the site name: select it with the clusters, not per option.
        self.fields["cluster"].queryset = clusters_for_choice()


class NodeGroupForm(SafeNamesFormMixin, forms.ModelForm):
    """A node group; with `fixed_pool` the pool comes from the page, not from the request."""

    pool = PoolChoiceField(queryset=Pool.objects.none())

    class Meta:
        model = NodeGroup
        fields = ["pool", "name", "accelerator", "node_count", "cards_per_node", "mfu"]
        labels = FIELD_LABELS

    def __init__(self, *args, fixed_pool: Pool | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["pool"].queryset = pools_for_choice()
        if fixed_pool is not None:
            # Disabled fields ignore submitted data and use the initial value.
            self.fields["pool"].disabled = True
            self.fields["pool"].widget = forms.HiddenInput()
            self.initial["pool"] = fixed_pool.pk
            self.instance.pool = fixed_pool
