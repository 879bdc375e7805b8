"""The upload's synchronous checks: its head read once, judged by accounting.parsing.upload_check.

Answered by ``create_import_job`` (the API, the page and the command alike) before the file is
stored or a worker is asked: a file of another tool, a wrong header or a layout that cannot be
read is a 400 with the fix, not an import that fails a minute later.
"""

from __future__ import annotations

from typing import Any

from accounting.parsing.upload_check import HEAD_BYTES, head_problems
from core.uploads.sniff import peek_head


def upload_layout_problem(upload, kind: str, layout: dict[str, Any], *, period_given: bool) -> str:
    """Why the upload would be refused, one line per problem ("" when none is seen)."""
    head = peek_head(upload, HEAD_BYTES)
    return "\n".join(head_problems(head, kind, layout, period_given=period_given))
