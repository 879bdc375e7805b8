"""Slurm hostlist expressions (``gpu[01-04,07],login1``) expanded to host names."""

from __future__ import annotations

import re

MAX_HOSTS = 100_000  # hosts one expression may expand to (a job's NodeList)
_BRACKET = re.compile(r"\[([^\[\]]*)\]")


class HostlistError(ValueError):
    pass


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _range_values(spec: str) -> list[str]:
    values: list[str] = []
    for item in spec.split(","):
        low, _, high = item.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise HostlistError(f"'{spec}' is not a hostlist range")
        if not high:
            values.append(low)
            continue
        width = len(low) if low.startswith("0") else 0
        if int(high) < int(low) or int(high) - int(low) >= MAX_HOSTS:
            raise HostlistError(f"'{item}' is not a usable hostlist range")
        values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return values


def _expand_one(name: str, limit: int) -> list[str]:
    match = _BRACKET.search(name)
    if match is None:
        return [name]
    head, tail = name[: match.start()], name[match.end() :]
    hosts: list[str] = []
    for value in _range_values(match.group(1)):
        hosts.extend(_expand_one(head + value + tail, limit - len(hosts)))
        if len(hosts) > limit:
            raise HostlistError(f"the hostlist expands to more than {MAX_HOSTS} hosts")
    return hosts


def expand_hostlist(text: str | None) -> list[str]:
    """``gpu[01-02],cpu7`` -> ``["gpu01", "gpu02", "cpu7"]``; "None assigned"/empty -> []."""
    if not text or text.strip().lower() in {"none assigned", "(null)", "none"}:
        return []
    hosts: list[str] = []
    for part in _split_top(text):
        hosts.extend(_expand_one(part, MAX_HOSTS - len(hosts)))
    return hosts
