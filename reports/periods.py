"""Pure schedule and period maths for scheduled reports: no Django, no Celery.

A schedule *fires* at local wall-clock times in its own time zone; each firing produces the
report of one *period*, which is a pure function of the fire time, so a retried or duplicated
beat tick always names the same period (and collapses on the Report uniqueness constraint).

* daily: fires every day at ``at``; period = the previous local day.
* weekly: fires on Mondays at ``at``; period = the previous ISO week (Monday to Monday).
* monthly: fires on the 1st at ``at``; period = the previous calendar month.
* quarterly: fires on 1 Jan/Apr/Jul/Oct at ``at``; period = the previous calendar quarter.
* cron: fires at the times of a 5-field cron expression (local time); period = from the
  previous fire time to this one.

Daylight saving time: a local fire time that does not exist (the spring-forward gap) fires at
the same wall-clock reading shifted by the gap (02:30 → 03:30); one that exists twice (the
autumn fold) fires once, at its first occurrence. Period bounds are local midnights, so a
period that spans a DST change is 23 or 25 hours longer or shorter than 24·n hours.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, croniter

DAILY = "daily"
WEEKLY = "weekly"
MONTHLY = "monthly"
QUARTERLY = "quarterly"
CRON = "cron"
FREQUENCIES: tuple[str, ...] = (DAILY, WEEKLY, MONTHLY, QUARTERLY, CRON)

# How far a cron search looks before it gives up (an expression like "0 0 31 2 *").
CRON_SEARCH_YEARS = 5


class ScheduleError(ValueError):
    """A schedule definition that cannot fire; ``field`` names the offending input."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Period:
    """A half-open interval [start, end) of aware datetimes in the schedule's time zone."""

    start: dt.datetime
    end: dt.datetime

    @property
    def hours(self) -> float:
        return (_utc(self.end) - _utc(self.start)).total_seconds() / 3600.0

    def label(self) -> str:
        """A short human name: 2024-03-04 – 2024-03-10 (the end day is inclusive)."""
        last_day = (self.end - dt.timedelta(microseconds=1)).date()
        first_day = self.start.date()
        if first_day == last_day:
            return first_day.isoformat()
        return f"{first_day.isoformat()} – {last_day.isoformat()}"


def _utc(moment: dt.datetime) -> dt.datetime:
    # Aware datetimes sharing a tzinfo compare and subtract by wall time (fold ignored): use UTC.
    return moment.astimezone(dt.UTC)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` or a ScheduleError naming the ``timezone`` field."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError("timezone", f'Unknown time zone "{name}".') from exc


def timezone_names() -> list[str]:
    return sorted(available_timezones())


def local_datetime(day: dt.date, at: dt.time, tz: ZoneInfo) -> dt.datetime:
    """The aware instant of wall-clock ``day at`` in ``tz`` (gap: shifted forward; fold: first)."""
    naive = dt.datetime.combine(day, at.replace(tzinfo=None, fold=0))
    # fold=0 reads a gap time with the offset before the change, so the UTC round trip lands
    # the gap's length later (02:30 → 03:30); a fold time reads as its first occurrence.
    return naive.replace(tzinfo=tz).astimezone(dt.UTC).astimezone(tz)


def _midnight(day: dt.date, tz: ZoneInfo) -> dt.datetime:
    return local_datetime(day, dt.time(0, 0), tz)


def _first_of_month(year: int, month: int) -> dt.date:
    # Months outside 1..12 roll over the year: month 0 is December of the year before.
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return dt.date(year, month, 1)


# -- cron ------------------------------------------------------------------------------------
# croniter reads the expression and walks its local wall-clock times; turning a wall time into
# an instant (DST gap and fold) stays `local_datetime`, as for the other frequencies.

_CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day", 1, 31),
    ("month", 1, 12),
    ("day_of_week", 0, 7),
)
_PLAIN_FIELD = re.compile(r"[0-9A-Za-z*,/-]+")


@dataclass(frozen=True)
class CronExpression:
    """A standard 5-field cron expression: minute hour day-of-month month day-of-week."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday … 6 = Saturday


def _field_values(text: str, index: int) -> list[int]:
    """One field expanded by croniter (the others "*"), or a ScheduleError naming the field."""
    name, low, high = _CRON_FIELDS[index]
    not_a_number = ScheduleError("cron", f'"{text}" is not a number in the {name} field.')
    if not _PLAIN_FIELD.fullmatch(text):  # croniter's "?", "#" extensions
        raise not_a_number
    probe = ["*"] * 5
    probe[index] = text
    try:
        # The stubs say strings; croniter gives ints, or "*" and "L" as strings.
        values: Sequence[object] = croniter(" ".join(probe)).expanded[index]
    except CroniterNotAlphaError as exc:
        raise not_a_number from exc
    except CroniterBadCronError as exc:
        if "Hashed" in str(exc):  # croniter's "H"
            raise not_a_number from exc
        if "step" in str(exc):
            raise ScheduleError("cron", f'Bad step in "{text}" in the {name} field.') from exc
        raise ScheduleError(
            "cron", f'"{text}" is outside {low}-{high} in the {name} field.'
        ) from exc
    if values == ["*"]:
        return list(range(low, high + 1))
    numbers = [value for value in values if isinstance(value, int)]
    if len(numbers) != len(values):  # croniter's "L"
        raise not_a_number
    return numbers


def _check_ranges(text: str, index: int) -> None:
    # croniter reads "5-1" as a wrap-around; a schedule says what it means: ranges run upwards.
    name, low, high = _CRON_FIELDS[index]
    for part in text.split(","):
        ends = part.split("/", 1)[0].split("-")
        if len(ends) == 2 and _field_values(ends[0], index) > _field_values(ends[1], index):
            raise ScheduleError("cron", f'"{part}" is outside {low}-{high} in the {name} field.')


def parse_cron(expression: str) -> CronExpression:
    """Parse ``expression`` or raise ScheduleError("cron", why)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ScheduleError(
            "cron", "Needs 5 fields: minute hour day-of-month month day-of-week (e.g. 0 7 * * 1)."
        )
    for index, text in enumerate(fields):
        _check_ranges(text, index)
    minutes, hours, days, months, weekdays = (
        _field_values(text, index) for index, text in enumerate(fields)
    )
    return CronExpression(
        text=" ".join(fields),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(value % 7 for value in weekdays),
    )


def _cron_fire(
    cron: CronExpression, edge: dt.datetime, tz: ZoneInfo, backwards: bool
) -> dt.datetime:
    """The fire time nearest ``edge``, strictly after it (or before it, ``backwards``).

    A DST gap shifts a wall time by the gap's length, which can reorder the instants of one
    local day: the wall times are taken a whole local day at a time and ordered as instants.
    """
    local = edge.astimezone(tz).replace(tzinfo=None)
    start = local + dt.timedelta(days=1 if backwards else -1)  # a gap may shift into that day
    walls = croniter(cron.text, start, max_years_between_matches=CRON_SEARCH_YEARS)
    step = walls.get_prev if backwards else walls.get_next
    day: dt.date | None = None
    found: list[dt.datetime] = []
    try:
        while True:
            wall = step(dt.datetime)
            if wall.date() != day and found:
                return max(found) if backwards else min(found)
            day = wall.date()
            moment = _utc(local_datetime(day, wall.time(), tz))
            if (moment < _utc(edge)) if backwards else (moment > _utc(edge)):
                found.append(moment)
    except CroniterBadDateError as exc:
        raise ScheduleError("cron", "Never fires (no matching date within five years).") from exc


def cron_next(cron: CronExpression, after: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """The first fire time strictly after ``after``."""
    return _cron_fire(cron, after, tz, backwards=False)


def cron_previous(cron: CronExpression, before: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """The last fire time strictly before ``before``."""
    return _cron_fire(cron, before, tz, backwards=True)


# -- schedules -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """What the maths needs of a ReportSchedule."""

    frequency: str
    timezone: str
    at: dt.time = dt.time(7, 0)
    cron: str = ""

    def __post_init__(self) -> None:
        if self.frequency not in FREQUENCIES:
            raise ScheduleError("frequency", f"Must be one of {', '.join(FREQUENCIES)}.")
        zone(self.timezone)
        if self.frequency == CRON:
            parse_cron(self.cron)

    @property
    def tz(self) -> ZoneInfo:
        return zone(self.timezone)


def _fire_day_on_or_after(schedule: Schedule, day: dt.date) -> dt.date:
    if schedule.frequency == DAILY:
        return day
    if schedule.frequency == WEEKLY:
        return day + dt.timedelta(days=(7 - day.weekday()) % 7)
    step = 1 if schedule.frequency == MONTHLY else 3
    month_index = day.year * 12 + day.month - 1
    if day.day > 1:
        month_index += 1
    month_index += (-month_index) % step  # quarters start in months 0, 3, 6, 9 (Jan, Apr, …)
    return dt.date(month_index // 12, month_index % 12 + 1, 1)


def _fire_day_on_or_before(schedule: Schedule, day: dt.date) -> dt.date:
    if schedule.frequency == DAILY:
        return day
    if schedule.frequency == WEEKLY:
        return day - dt.timedelta(days=day.weekday())
    step = 1 if schedule.frequency == MONTHLY else 3
    month_index = day.year * 12 + day.month - 1
    month_index -= month_index % step
    return dt.date(month_index // 12, month_index % 12 + 1, 1)


def next_fire(schedule: Schedule, after: dt.datetime) -> dt.datetime:
    """The first fire time of ``schedule`` strictly after the aware ``after`` (in UTC)."""
    tz = schedule.tz
    if schedule.frequency == CRON:
        return cron_next(parse_cron(schedule.cron), after, tz)
    day = _fire_day_on_or_after(schedule, after.astimezone(tz).date() - dt.timedelta(days=1))
    while True:
        moment = local_datetime(day, schedule.at, tz)
        if _utc(moment) > _utc(after):
            return _utc(moment)
        day = _fire_day_on_or_after(schedule, day + dt.timedelta(days=1))


def previous_fire(schedule: Schedule, at_or_before: dt.datetime) -> dt.datetime:
    """The last fire time at or before the aware ``at_or_before`` (in UTC)."""
    tz = schedule.tz
    if schedule.frequency == CRON:
        return cron_previous(
            parse_cron(schedule.cron), at_or_before + dt.timedelta(microseconds=1), tz
        )
    day = _fire_day_on_or_before(schedule, at_or_before.astimezone(tz).date() + dt.timedelta(1))
    while True:
        moment = local_datetime(day, schedule.at, tz)
        if _utc(moment) <= _utc(at_or_before):
            return _utc(moment)
        day = _fire_day_on_or_before(schedule, day - dt.timedelta(days=1))


def period_for_fire(schedule: Schedule, fire_at: dt.datetime) -> Period:
    """The period a firing at ``fire_at`` reports on: the last complete one before it."""
    tz = schedule.tz
    if schedule.frequency == CRON:
        cron = parse_cron(schedule.cron)
        end = fire_at.astimezone(tz)
        return Period(cron_previous(cron, end, tz).astimezone(tz), end)
    day = fire_at.astimezone(tz).date()
    return period_containing(schedule, _period_start_day(schedule, day) - dt.timedelta(days=1))


def _period_start_day(schedule: Schedule, day: dt.date) -> dt.date:
    """First day of the calendar period (day, ISO week, month, quarter) holding ``day``."""
    if schedule.frequency == DAILY:
        return day
    if schedule.frequency == WEEKLY:
        return day - dt.timedelta(days=day.weekday())
    if schedule.frequency == MONTHLY:
        return day.replace(day=1)
    return dt.date(day.year, (day.month - 1) // 3 * 3 + 1, 1)


def period_containing(schedule: Schedule, moment: dt.datetime | dt.date) -> Period:
    """The period of ``schedule`` that holds ``moment`` (a date means its local day)."""
    tz = schedule.tz
    if schedule.frequency == CRON:
        instant = (
            _midnight(moment, tz) if not isinstance(moment, dt.datetime) else moment.astimezone(tz)
        )
        end = next_fire(schedule, instant)
        start = cron_previous(parse_cron(schedule.cron), end, tz)
        return Period(start.astimezone(tz), end.astimezone(tz))
    day = moment.astimezone(tz).date() if isinstance(moment, dt.datetime) else moment
    first = _period_start_day(schedule, day)
    if schedule.frequency == DAILY:
        after = first + dt.timedelta(days=1)
    elif schedule.frequency == WEEKLY:
        after = first + dt.timedelta(days=7)
    else:
        after = _first_of_month(
            first.year, first.month + (1 if schedule.frequency == MONTHLY else 3)
        )
    return Period(_midnight(first, tz), _midnight(after, tz))


def previous_period(schedule: Schedule, period: Period) -> Period:
    """The period just before ``period`` (what "vs the previous period" compares with)."""
    if schedule.frequency == CRON:
        tz = schedule.tz
        start = cron_previous(parse_cron(schedule.cron), period.start, tz)
        return Period(start.astimezone(tz), period.start)
    return period_containing(
        schedule, period.start.astimezone(schedule.tz).date() - dt.timedelta(1)
    )


def fires_between(schedule: Schedule, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """Every fire time in (start, end]: what a scheduler that was down must catch up on."""
    times: list[dt.datetime] = []
    moment = next_fire(schedule, start)
    while _utc(moment) <= _utc(end):
        times.append(moment)
        moment = next_fire(schedule, moment)
    return times
