"""Forms that exist only in the browser app (the inventory forms live in inventory.forms)."""

from __future__ import annotations

from django import forms

from inventory.imports import MAX_ROWS

# The hidden field of an edit form holding the version of the object it was opened at.
OPENED_VERSION = "opened_version"


def add_opened_version(form: forms.ModelForm) -> forms.ModelForm:
    """Give an edit form the object's version, so a stale save can be told apart."""
    form.fields[OPENED_VERSION] = forms.IntegerField(
        widget=forms.HiddenInput, required=False, min_value=0, initial=form.instance.version
    )
    return form


class ImportUploadForm(forms.Form):
    file = forms.FileField(
        label="File (.csv or .xlsx)",
        required=False,
        widget=forms.FileInput(attrs={"accept": ".csv,.xlsx,.tsv,.txt"}),
        help_text="The first sheet of a workbook is read. Row 1 holds the column names.",
    )
    pasted_rows = forms.CharField(
        label="Or paste rows",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text=f"Copy cells from a spreadsheet (header row first) or type CSV. "
        f"At most {MAX_ROWS} rows.",
    )

    def clean(self):
        cleaned = super().clean()
        has_file = bool(cleaned.get("file"))
        has_text = bool((cleaned.get("pasted_rows") or "").strip())
        if has_file == has_text:
            message = (
                "Choose a file or paste rows, not both."
                if has_file
                else "Choose a file or paste rows."
            )
            self.add_error("file", message)
        return cleaned
