"""Whose usage an import may write: only the teams its creator may see (`access.scoping`).

A team-scoped planner imports usage of their own teams only. Checked twice: when the file is
uploaded (:func:`upload_refusal`, a 400 naming the teams, for a team-scoped creator only)
and on every chunk the worker writes (:class:`TeamCheck`), with the creator's teams of that
moment: a line of another team, or a line that would overwrite another team's record (same
job key), fails the whole file, so nothing of it is stored. Imports without a creator (the
``import_usage`` command, the demo loader) are run by an operator and are not limited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO

import numpy as np
import pandas as pd

from access.roles import PLANNER, has_role
from access.scoping import NO_ACCOUNT, allowed_accounts, visible_teams
from accounting.imports.rows import MAX_ISSUES
from accounting.models import ImportJob, ImportKind, UsageRecord
from accounting.parsing import LineIssue, UsageValidationError

# Existing records are looked up this many job keys at a time (SQL parameter limits).
KEY_BATCH = 5_000


def creator_teams(job: ImportJob) -> frozenset[str] | None:
    """The teams ``job`` may write: None for every team (no creator, or one who sees every
    team); none at all for a creator who no longer holds the planner role."""
    creator = job.created_by
    if creator is None:
        return None
    if not has_role(creator, PLANNER):
        return frozenset()
    return visible_teams(creator)


class TeamCheck:
    """The lines of a chunk that write usage of a team the import's creator may not see."""

    def __init__(self, job: ImportJob, teams: frozenset[str]) -> None:
        self.cluster_id = job.cluster_id
        self.teams = teams
        self.accounts = allowed_accounts(teams)
        self.who = str(job.created_by)

    @classmethod
    def for_job(cls, job: ImportJob) -> TeamCheck | None:
        teams = creator_teams(job)
        return None if teams is None else cls(job, teams)

    def issues(self, chunk: pd.DataFrame) -> list[LineIssue]:
        accounts = chunk["account"].fillna("").astype(str)
        foreign = ~accounts.isin(self.accounts).to_numpy()
        lines = chunk["source_line"].to_numpy()
        issues = [
            LineIssue(int(line), "Account", self._reason(account))
            for line, account in zip(lines[foreign], accounts[foreign], strict=True)
        ][:MAX_ISSUES]
        own = chunk.loc[~foreign, ["record_key", "source_line"]]
        return issues + self._overwrites(own)

    def _reason(self, account: str) -> str:
        mine = ", ".join(sorted(self.teams)) or "none"
        return f"team '{account or NO_ACCOUNT}' is not one of {self.who}'s teams ({mine})"

    def _overwrites(self, own: pd.DataFrame) -> list[LineIssue]:
        """Lines whose job key is already another team's record in this cluster."""
        keys = own["record_key"].astype(str).to_numpy()
        taken: dict[str, str] = {}
        for start in range(0, len(keys), KEY_BATCH):
            batch = list(dict.fromkeys(keys[start : start + KEY_BATCH]))
            taken.update(
                UsageRecord.objects.filter(cluster_id=self.cluster_id, record_key__in=batch)
                .exclude(account__in=self.accounts)
                .values_list("record_key", "account")
            )
        hit = np.isin(keys, list(taken))
        lines = own["source_line"].to_numpy()[hit]
        return [
            LineIssue(int(line), "JobID", f"job {key} is a record of team '{taken[key]}'")
            for line, key in zip(lines, keys[hit], strict=True)
        ][:MAX_ISSUES]


def upload_refusal(job: ImportJob, upload: IO[bytes], chunks: Callable[[], Iterable]) -> str:
    """Why a team-scoped creator may not import this file (the teams it charges that they may
    not see); "" when they may, or when the file is for the worker to judge (bad lines).
    ``chunks`` reads the file with the import's own parser (called only when needed)."""
    teams = creator_teams(job)
    if teams is None or job.kind == ImportKind.SREPORT:
        return ""
    found = _file_accounts(upload, chunks)
    hidden = sorted((account or NO_ACCOUNT) for account in found - set(allowed_accounts(teams)))
    if not hidden:
        return ""
    mine = ", ".join(sorted(teams)) or "none"
    return (
        f"The file charges usage to team {', '.join(hidden)}, which {job.created_by} may not "
        f"see (your teams: {mine}). Import only your teams' usage, or ask an administrator."
    )


def _file_accounts(upload: IO[bytes], chunks: Callable[[], Iterable]) -> set[str]:
    """Every account in the file (then rewound for storing)."""
    found: set[str] = set()
    try:
        for chunk in chunks():
            found.update(chunk["account"].fillna("").astype(str).unique())
    except UsageValidationError:
        pass  # a bad file fails in the worker, with its lines; the teams read so far count
    finally:
        upload.seek(0)
    return found
