"""The lexical layer of HLO text: comments, string literals and brackets (pipeline/hlo/text.py parses with it).

XLA's lexer skips `// ...` (to the line's end) and `/* ... */` comments and reads string literals with backslash
escapes; brackets and commas inside strings are text, not structure. Every function here works on text only.
"""
from __future__ import annotations

import re

OPEN, CLOSE = "([{", ")]}"
_IN_STRING = r'(?:[^"\\]|\\.)*'                                      # a string literal's text, escapes included
_COMMENT_OR_STRING = re.compile(f'"{_IN_STRING}"|//[^\\n]*|/\\*.*?\\*/', re.DOTALL)   # strings kept
_STRING_END = re.compile(f'{_IN_STRING}"')                         # the rest of a string opened on an earlier line
_SIGNIFICANT = re.compile(f'"{_IN_STRING}(")?|[()\\[\\]{{}},]')  # a string (group 1: its closing quote), a bracket


def first_statement(head: str) -> str:
    """The first line of `head` (a text's first kilobytes) that is neither blank nor comment: `HloModule ...` in HLO
    text, whatever notes or `// RUN:` lines precede it."""
    return first_line(strip_comments(head).splitlines())[1]


def first_line(lines: list[str]) -> tuple[int, str]:
    """(1-based number, stripped text) of the first non-blank line of comment-stripped `lines`; (1, "") if none."""
    return next(((k + 1, line.strip()) for k, line in enumerate(lines) if line.strip()), (1, ""))


def tokens(text: str):
    """Yield (index, char, bracket depth after it) for each bracket and comma outside string literals."""
    depth = 0
    for m in _SIGNIFICANT.finditer(text):
        ch = m.group()
        if ch[0] == '"':
            continue
        depth += (ch in OPEN) - (ch in CLOSE)
        yield m.start(), ch, depth


def scan_brackets(text: str, stack: list[str], in_string: bool) -> bool:
    """Push the brackets `text` opens onto `stack` and pop those it closes (outside string literals); returns
    whether a string is still open after it. `in_string`: `text` starts inside a string an earlier line opened."""
    if in_string:
        m = _STRING_END.match(text)
        if m is None:
            return True
        text = text[m.end():]
    for m in _SIGNIFICANT.finditer(text):
        token = m.group()
        if token[0] == '"':
            if m.group(1) is None:                          # a string that does not close on this line
                return True
        elif token in OPEN:
            stack.append(token)
        elif token in CLOSE and stack:                      # a close beyond the opens is the parser's to refuse
            stack.pop()
    return False


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets and strings; pieces stripped, empty text gives []."""
    parts, start = [], 0
    for i, ch, depth in tokens(text):
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + [last] if parts or last else []


def closing(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start`, or -1."""
    for i, ch, depth in tokens(text[start:]):
        if depth == 0 and ch in CLOSE:
            return start + i
    return -1


def pieces(text: str, cuts: list[int]) -> list[str]:
    """The stripped pieces of `text` between consecutive cut positions (the cut characters excluded)."""
    return [text[lo + 1:hi].strip() for lo, hi in zip(cuts, cuts[1:])]


def strip_comments(text: str) -> str:
    """Remove `/* ... */` and `// ...` (to the line's end) comments outside strings, as XLA's lexer skips them (XLA
    writes /*index=5*/ in long operand and tuple lists; a dump may open with a /* ... */ note or a `// RUN:` line, or
    end an instruction with `// why`): a comment over lines leaves its line breaks, so every line keeps its number."""
    if "/*" not in text and "//" not in text:
        return text
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] == '"' else "\n" * m.group().count("\n"), text)
