"""The rule for names: one line of visible text (pure; `core.text` applies it to forms and API).

A name (a site, cluster, pool, team, schedule, alert rule, plan, link, a user's display name)
may not hold:

* control characters, C0 and C1 (line breaks, tabs, NUL …) and the line/paragraph separators:
  a line break in a schedule's name became a line break in an e-mail header;
* bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069; "Trojan Source",
  CVE-2021-42574): they reorder what a page or a spreadsheet shows;
* zero-width characters (U+200B–U+200D, U+2060, U+FEFF): two names that look alike but differ.

Text stored before the rule, or read from files, is made harmless where it leaves: an e-mail
subject takes :func:`one_line`, a spreadsheet cell :func:`strip_invisible`. The rule sits in
the engine because both `core` and `access` apply it and neither may import the other.
"""

from __future__ import annotations

import re
import unicodedata

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
LINE_SEPARATORS = "\u2028\u2029"
INVISIBLE = BIDI_CONTROLS + ZERO_WIDTH
# C0 (with DEL) and C1 controls, then the invisible and line-breaking characters above.
REFUSED_IN_NAMES = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{INVISIBLE}{LINE_SEPARATORS}]")
_INVISIBLE_TABLE = dict.fromkeys(map(ord, INVISIBLE))
# Any run of controls, separators and white space becomes one space in a one-line text.
_LINE_BREAKING = re.compile(f"[\\s\\x00-\\x1f\\x7f-\\x9f{LINE_SEPARATORS}]+")
_SHORT_NAMES = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", "\x00": "NUL"}
NAME_RULE = (
    "A name is one line of visible text: no control characters (line breaks, tabs), "
    "direction overrides or zero-width characters."
)


def refused_characters(text: str) -> list[str]:
    """The characters of ``text`` that no name may hold, each once, in order of appearance."""
    return list(dict.fromkeys(REFUSED_IN_NAMES.findall(text)))


def describe_character(char: str) -> str:
    """``a line break`` or ``U+202E (RIGHT-TO-LEFT OVERRIDE)``: what a person can act on."""
    if char in _SHORT_NAMES:
        return _SHORT_NAMES[char]
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} ({name or 'a control character'})"


def name_error(text: str) -> str | None:
    """Why ``text`` cannot be a name, or None when it can."""
    found = refused_characters(text)
    if not found:
        return None
    return f"{NAME_RULE} Found {', '.join(describe_character(char) for char in found[:3])}."


def strip_invisible(text: str) -> str:
    """``text`` without bidi controls and zero-width characters (kept: tabs, line breaks)."""
    return text if text.isascii() else text.translate(_INVISIBLE_TABLE)


def one_line(text: str, max_chars: int | None = None) -> str:
    """``text`` for an e-mail subject or header: one line, visible characters, trimmed."""
    flat = _LINE_BREAKING.sub(" ", strip_invisible(text)).strip()
    return flat[:max_chars].rstrip() if max_chars is not None else flat
