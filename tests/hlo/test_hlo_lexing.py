"""pipeline.hlo.lexing: comments, strings and brackets of HLO text, on hand-written lines."""
from __future__ import annotations

from pipeline.hlo.lexing import closing, first_statement, scan_brackets, split_top, strip_comments


def test_split_top_cuts_at_top_level_commas_only():
    assert split_top("a, f32[2,3]{1,0} b, (c, d), \"x,y\"") == ["a", "f32[2,3]{1,0} b", "(c, d)", "\"x,y\""]
    assert split_top("  ") == [] and split_top("a,,b") == ["a", "", "b"]


def test_closing_finds_the_matching_bracket_past_strings():
    text = "f(a, \")\", g(b)) tail"
    assert closing(text, 1) == text.index(" tail") - 1
    assert closing("(never", 0) == -1


def test_comments_go_and_every_line_keeps_its_number():
    text = "a /* one\ntwo */ b // tail\n\"// kept\" c"
    assert strip_comments(text) == "a \n b \n\"// kept\" c"
    assert first_statement("// RUN: x\n/* note */\n  HloModule m, is_scheduled=true\n") == \
        "HloModule m, is_scheduled=true"


def test_scan_brackets_tracks_open_brackets_and_strings_over_lines():
    stack: list[str] = []
    assert scan_brackets("f(a, {b", stack, False) is False and stack == ["(", "{"]
    assert scan_brackets("c}, \"open", stack, False) is True and stack == ["("]      # a string left open
    assert scan_brackets("still\") d)", stack, True) is False and stack == []
