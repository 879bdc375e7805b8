"""A static-files finder for plotly.js as shipped inside the plotly package (no CDN, no copy)."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = "plotly.min.js"
PREFIX = "plotly"


class PlotlyJsFinder(BaseFinder):
    """Serves only `plotly/plotly.min.js`, so collectstatic and whitenoise pick it up."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.location = Path(plotly.__file__).parent / "package_data"
        self.storage = FileSystemStorage(location=self.location)
        self.storage.prefix = PREFIX

    def find(self, path: str, find_all: bool = False, **kwargs):
        if path == f"{PREFIX}/{PLOTLY_JS}":
            match = str(self.location / PLOTLY_JS)
            return [match] if find_all else match
        return [] if find_all else None

    def list(self, ignore_patterns):
        yield PLOTLY_JS, self.storage

    def check(self, **kwargs):
        return []
