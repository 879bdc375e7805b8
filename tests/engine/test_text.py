"""The names' rule (engine/text.py): what a name may not hold, and the one-line and visible
forms of text stored before the rule."""

from __future__ import annotations

import pytest

from engine.text import (
    describe_character,
    name_error,
    one_line,
    refused_characters,
    strip_invisible,
)

REFUSED = [
    ("\n", "a line break"),
    ("\r", "a carriage return"),
    ("\t", "a tab"),
    ("\x00", "NUL"),
    ("\x1b", "U+001B (a control character)"),
    ("\x7f", "U+007F (a control character)"),
    ("\x85", "U+0085 (a control character)"),  # C1 "next line"
    ("\u2028", "U+2028 (LINE SEPARATOR)"),
    ("\u2029", "U+2029 (PARAGRAPH SEPARATOR)"),
    ("\u202a", "U+202A (LEFT-TO-RIGHT EMBEDDING)"),
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"),
    ("\u200b", "U+200B (ZERO WIDTH SPACE)"),
    ("\u200c", "U+200C (ZERO WIDTH NON-JOINER)"),
    ("\u200d", "U+200D (ZERO WIDTH JOINER)"),
    ("\u2060", "U+2060 (WORD JOINER)"),
    ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
]


@pytest.mark.parametrize(("char", "words"), REFUSED)
def test_each_refused_character_is_named_in_the_error(char, words):
    message = name_error(f"train{char}cluster")
    assert message is not None
    assert message.endswith(f"Found {words}.")
    assert describe_character(char) == words


@pytest.mark.parametrize(
    "name",
    [
        "Oslo DC3",
        "train-1 (H100 SXM5 80GB)",
        "O'Brien & Söhne",
        "東京 第二",
        "مركز البيانات",  # right-to-left script itself is fine; overrides are not
        "GPU 🚀 pool",
        "a" * 200,
        "",
    ],
)
def test_visible_one_line_names_pass(name):
    assert name_error(name) is None


def test_the_error_lists_at_most_three_characters_each_once():
    message = name_error("a\nb\nc\td\u202ee\u200bf")
    assert message is not None
    assert message.endswith("Found a line break, a tab, U+202E (RIGHT-TO-LEFT OVERRIDE).")
    assert refused_characters("a\nb\nc\td") == ["\n", "\t"]


def test_strip_invisible_drops_overrides_and_zero_widths_but_keeps_line_breaks():
    assert strip_invisible("\u202etxt.exe\u200b") == "txt.exe"
    assert strip_invisible("a\u2066b\u2069c\ufeff") == "abc"
    assert strip_invisible("line one\nline two\ttab") == "line one\nline two\ttab"
    assert strip_invisible("Zürich") == "Zürich"


def test_one_line_collapses_every_break_into_one_space():
    assert one_line("Finance\r\nmonthly:\t2024-03") == "Finance monthly: 2024-03"
    assert one_line("a\x00b\x85c\u2028d\u202ee") == "a b c de"
    assert one_line("  padded  \n") == "padded"
    assert one_line("x" * 300, 250) == "x" * 250
    assert one_line("word " * 60, 12) == "word word wo"
