"""The usage import form: a file (or pasted text) for one cluster, handed to the accounting
service exactly as the API's ``POST /api/v1/usage-records/import/`` hands it."""

from __future__ import annotations

from django import forms
from django.core.files.base import ContentFile
from django.template.defaultfilters import filesizeformat

from accounting import services
from accounting.models import ImportJob, ImportKind
from frontend.kept_uploads import KeptUpload
from inventory.models import Cluster

# Pasting is for a few hundred lines; bigger exports go through the file field.
MAX_PASTED_CHARS = 1_000_000
PASTED_NAMES = {
    ImportKind.SACCT: "pasted-sacct.txt",
    ImportKind.SREPORT: "pasted-sreport.txt",
    ImportKind.CSV: "pasted.csv",
}
DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
# Fields shown folded under "More options" (opened when one of them has an error).
ADVANCED_FIELDS = (
    "timezone",
    "exported_at",
    "report_period_start",
    "report_period_end",
    "columns_preset",
    "columns",
    "delimiter",
    "time_unit",
    "gpuutil",
)
LAYOUT_FIELDS = ("columns", "columns_preset", "delimiter", "time_unit", "gpuutil")


class ClusterField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Cluster) -> str:
        return f"{obj.site.name} / {obj.name}"


class UsageImportForm(forms.Form):
    cluster = ClusterField(
        label="Target cluster",
        queryset=Cluster.objects.select_related("site").order_by("site__name", "name"),
        empty_label="Choose a cluster",
        help_text="Every record of the file must come from this cluster.",
    )
    kind = forms.ChoiceField(
        label="File kind",
        choices=[("", "Choose a kind"), *ImportKind.choices],
        help_text="sacct: sacct --parsable2 (with the header line); sreport: sreport cluster "
        "utilization -P; CSV or XLSX with the documented header.",
    )
    file = forms.FileField(
        label="Usage file",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".txt,.log,.psv,.csv,.tsv,.xlsx"}),
    )
    pasted_text = forms.CharField(
        label="Or paste the file's text",
        required=False,
        max_length=MAX_PASTED_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text="For a short sacct, sreport or CSV export, header line first.",
    )
    timezone = forms.CharField(
        label="Time zone of the file's times",
        initial="UTC",
        max_length=64,
        help_text="IANA name the scheduler printed its times in, such as UTC or Europe/Berlin.",
    )
    exported_at = forms.DateTimeField(
        label="As of",
        required=False,
        widget=DATETIME_INPUT,
        help_text="When the file was exported, if it holds no time of its own (its latest time "
        "comes first, the upload time last); running jobs count up to it (server time zone).",
    )
    report_period_start = forms.DateTimeField(
        label="Report period from",
        required=False,
        widget=DATETIME_INPUT,
        help_text="Only for sreport output without its banner (server time zone).",
    )
    report_period_end = forms.DateTimeField(
        label="Report period to", required=False, widget=DATETIME_INPUT
    )
    columns_preset = forms.ChoiceField(
        label="Columns of a file without header",
        required=False,
        choices=[
            ("", "The file has a header line"),
            ("default", "sacct: default list"),
            ("xdmod", "sacct: Open XDMoD's 26 fields"),
        ],
        help_text="For sacct --noheader output; or list the columns below.",
    )
    columns = forms.CharField(
        label="Or the column list",
        required=False,
        max_length=4000,
        help_text="The --format list the file was exported with, comma-separated.",
    )
    delimiter = forms.CharField(
        label="Delimiter",
        required=False,
        max_length=8,
        strip=False,
        help_text="What sacct --delimiter was given; empty: read from the header line, else |.",
    )
    time_unit = forms.ChoiceField(
        label="sreport time unit",
        required=False,
        choices=[("", "From the banner"), ("hours", "hours"), ("minutes", "minutes")]
        + [("seconds", "seconds")],
        help_text="Only for sreport output without its banner (sreport -t).",
    )
    kept_upload = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    gpuutil = forms.ChoiceField(
        label="sacct gres/gpuutil is",
        required=False,
        choices=[
            ("", "summed over the step's GPUs (Slurm 24.05.1 and later)"),
            ("one-gpu", "one GPU's figure (Slurm before 24.05.1)"),
        ],
    )

    def __init__(self, *args, kept: KeptUpload | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept = kept  # the file kept from a preview (frontend/kept_uploads.py)
        self.fields["file"].help_text = (
            f"sacct or sreport text, .csv or .xlsx; at most "
            f"{filesizeformat(services.max_upload_bytes())} (larger: manage.py import_usage)."
        )

    def show_kept(self, kept: KeptUpload) -> None:
        """The page comes back holding ``kept``: its token in the hidden field, its name under
        the file input (a browser cannot refill a file input)."""
        self.kept = kept
        self.data = self.data.copy()
        self.data["kept_upload"] = kept.token
        note = (
            f"Your file is kept: {kept.name} ({filesizeformat(kept.size_bytes)}). Import "
            "uses it, unless you choose another file or paste text."
        )
        self.fields["file"].help_text = self["file"].help_text = note  # the bound one is cached

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        limit = services.max_upload_bytes()
        if upload and upload.size > limit:
            raise forms.ValidationError(
                f"The file is larger than the upload limit of {limit:,} bytes; split it "
                "(sacct --starttime/--endtime) or use manage.py import_usage."
            )
        return upload

    def clean(self):
        cleaned = super().clean()
        has_file = bool(cleaned.get("file"))
        has_text = bool((cleaned.get("pasted_text") or "").strip())
        if has_file and has_text:
            self.add_error("file", "Choose a file or paste text, not both.")
        elif not has_file and not has_text and "file" not in self.errors and not self.kept:
            self.add_error("file", "Choose a file or paste its text.")
        elif has_text and cleaned.get("kind") == ImportKind.XLSX:
            self.add_error("pasted_text", "An Excel workbook cannot be pasted; upload the file.")
        return cleaned

    def upload(self):
        """The chosen file, the pasted text as a named in-memory file, or the kept file."""
        if self.cleaned_data.get("file"):
            return self.cleaned_data["file"]
        if self.kept and not (self.cleaned_data.get("pasted_text") or "").strip():
            return self.kept.open()
        kind = self.cleaned_data["kind"]
        return ContentFile(self.cleaned_data["pasted_text"].encode(), name=PASTED_NAMES[kind])

    def chosen_file(self):
        """The file chosen in this request, when nothing refused it (to keep for the next)."""
        return None if "file" in self.errors else getattr(self, "cleaned_data", {}).get("file")

    def advanced_open(self) -> bool:
        return any(name in self.errors for name in ADVANCED_FIELDS)


def start_import(form: UsageImportForm, user) -> ImportJob | None:
    """Create and queue the import through the accounting service; None when the form or
    the service refused it (the reasons are then errors on the form's fields)."""
    if not form.is_valid():
        return None
    data = form.cleaned_data
    upload = form.upload()
    try:
        return services.create_import_job(
            kind=data["kind"],
            cluster=data["cluster"],
            upload=upload,
            source_name=upload.name,
            timezone_name=data["timezone"].strip(),
            exported_at=data.get("exported_at"),
            report_period_start=data.get("report_period_start"),
            report_period_end=data.get("report_period_end"),
            parse_options={name: data.get(name) or None for name in LAYOUT_FIELDS},
            user=user,
        )
    except services.ImportInputError as exc:
        for field, message in exc.errors.items():
            if field == "file" and not data.get("file") and (data.get("pasted_text") or "").strip():
                field = "pasted_text"
            form.add_error(field if field in form.fields else None, message)
        return None


def preview_import(form: UsageImportForm) -> dict | None:
    """The file's preview (nothing stored); None when the form or its options were refused."""
    from accounting.parsing.layouts import LayoutError, layout_options
    from accounting.usage_preview import preview_usage

    if not form.is_valid():
        return None
    data = form.cleaned_data
    try:
        options = layout_options(
            data["kind"], **{name: data.get(name) or None for name in LAYOUT_FIELDS}
        )
        job = ImportJob(
            kind=data["kind"],
            cluster=data["cluster"],
            timezone=data["timezone"].strip(),
            exported_at=data.get("exported_at"),
            parse_options=options,
        )
        return preview_usage(job, form.upload())
    except (LayoutError, services.ImportInputError) as exc:
        for field, message in exc.errors.items():
            form.add_error(field if field in form.fields else None, message)
        return None
