"""What the usage parsers are told: one options type instead of a long keyword list each.

:class:`ParseOptions` holds what every record parser needs (model resolution, time zone,
chunking, error limit, progress); the sacct, CSV and XLSX parsers extend it with their own
few fields. Parsers take ``options`` or the same names as keywords.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from accounting.parsing.aliases import DEFAULT_GRES_ALIASES
from accounting.parsing.blocks import ProgressCallback
from accounting.parsing.errors import DEFAULT_MAX_ERRORS

Options = TypeVar("Options", bound="ParseOptions")


@dataclass(kw_only=True)
class ParseOptions:
    """Options shared by the sacct, CSV and XLSX usage parsers.

    aliases: gres type -> catalog model (:data:`DEFAULT_GRES_ALIASES`).
    partition_models / default_model: model for untyped ``gres/gpu=N``.
    unknown_model: ``"error"`` rejects lines whose model cannot be resolved.
    timezone: the zone times are in when they carry no offset.
    as_of: export time, only needed for running jobs without an elapsed time.
    chunk_lines: input lines (rows) per chunk; memory is proportional to it.
    max_errors: stop after this many problems.
    progress: called after every block with cumulative :class:`ParseProgress`.
    """

    aliases: Mapping[str, str] = field(default_factory=lambda: DEFAULT_GRES_ALIASES)
    partition_models: Mapping[str, str] | None = None
    default_model: str | None = None
    unknown_model: Literal["keep", "error"] = "keep"
    timezone: str = "UTC"
    as_of: datetime | None = None
    chunk_lines: int = 50_000
    max_errors: int = DEFAULT_MAX_ERRORS
    progress: ProgressCallback | None = None

    def __post_init__(self) -> None:
        self.partition_models = dict(self.partition_models or {})

    @classmethod
    def build(cls: type[Options], options: Options | None, keywords: dict[str, Any]) -> Options:
        """``options`` as given, or built from keyword arguments (not both)."""
        if options is None:
            return cls(**keywords)
        if keywords:
            raise TypeError(f"give options or keywords, not both: {sorted(keywords)}")
        return options
