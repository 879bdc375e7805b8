"""Time range presets of the time-based pages (Usage, Costs, the report archive): the links
above their filters.

Every range is ``[start, end)`` in days, the pages' own ``?start=&end=`` (end exclusive), so a
preset is an ordinary link that keeps the page's other filters. "Fit to data" is the range
where the page's data is (usage records; the reports' periods); the relative presets count
back from today.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.http import QueryDict

# The longest period a page accepts (its form refuses longer ones).
MAX_RANGE_DAYS = 3 * 366
LAST_DAYS = (7, 30, 90)


@dataclass(frozen=True)
class DayRange:
    key: str
    label: str
    start: dt.date
    end: dt.date  # exclusive


def quarter_start(day: dt.date) -> dt.date:
    return dt.date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)


def data_range(first_day: dt.date | None, last_day: dt.date | None) -> DayRange | None:
    """Where the data is: first to last day with records, capped to the longest period."""
    if first_day is None or last_day is None:
        return None
    end = last_day + dt.timedelta(days=1)
    start = max(first_day, end - dt.timedelta(days=MAX_RANGE_DAYS))
    return DayRange("data", "Fit to data", start, end)


def presets(
    today: dt.date, first_day: dt.date | None = None, last_day: dt.date | None = None
) -> list[DayRange]:
    """The page's ranges, fit to data first (when there is data), then relative to today."""
    tomorrow = today + dt.timedelta(days=1)
    this_quarter = quarter_start(today)
    ranges = [
        DayRange(f"last-{days}", f"Last {days} days", tomorrow - dt.timedelta(days=days), tomorrow)
        for days in LAST_DAYS
    ]
    ranges += [
        DayRange("this-month", "This month", today.replace(day=1), tomorrow),
        DayRange(
            "last-quarter",
            "Last quarter",
            quarter_start(this_quarter - dt.timedelta(days=1)),
            this_quarter,
        ),
        DayRange("year-to-date", "Year to date", dt.date(today.year, 1, 1), tomorrow),
    ]
    fit = data_range(first_day, last_day)
    return [fit, *ranges] if fit is not None else ranges


def preset_links(
    params: QueryDict, ranges: list[DayRange], current: tuple[dt.date, dt.date] | None
) -> list[dict]:
    """Each range as a link keeping the other filters; the one in effect is marked current."""
    links = []
    for day_range in ranges:
        query = params.copy()
        query["start"], query["end"] = day_range.start.isoformat(), day_range.end.isoformat()
        query.pop("page", None)
        links.append(
            {
                "key": day_range.key,
                "label": day_range.label,
                "url": f"?{query.urlencode()}",
                "start": day_range.start,
                "end": day_range.end,
                "current": current == (day_range.start, day_range.end),
            }
        )
    return links
