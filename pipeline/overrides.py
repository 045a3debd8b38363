"""Telling Hydra overrides (`key=value`, `group=option`, `+key=v`, `++key=v`, `~key`) from a command's own arguments.

A token is an override when it starts with a Hydra key (`a.b`, `group/sub`, `key@package`, with `+`, `++` or `~`) and
is neither the value of a flag that takes one (`--out runs/lr=0.1`) nor the path of an existing file or folder
(`lr=0.1/prog.hlo.txt`). Paths with `=` are common (Hydra's own multirun folders are named `lr=0.1,bs=32`): every
token with a `=` was taken for an override, so `python -m pipeline.predict multirun/lr=0.1/prog.hlo.txt` said
"the following arguments are required: path" and `--out x=1.csv` lost its value.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import Collection, Sequence

_KEY = re.compile(r"(?:~|\+\+?)?[A-Za-z_][\w\-]*(?:[./][\w\-]+)*(?:@[\w.\-]*)?")


def is_override(token: str) -> bool:
    """`token` reads as a Hydra override and names no existing file or folder."""
    key, eq, _ = token.partition("=")
    if not (eq or token.startswith("~")) or token.startswith("-") or not _KEY.fullmatch(key):
        return False
    return not os.path.exists(token)


def split_overrides(argv: Sequence[str], value_flags: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """Split argv into Hydra overrides and everything else (in order); a token right after one of `value_flags`
    (`--out`: flags that take a value, `value_flags(parser)`) is that flag's value, never an override."""
    overrides, rest, is_value = [], [], False
    for token in argv:
        if not is_value and is_override(token):
            overrides.append(token)
            continue
        rest.append(token)
        is_value = not is_value and token in value_flags
    return overrides, rest


def value_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of `parser` that take a value (`--out`, `--budget`; not `--builtin`, `--help`)."""
    return {flag for action in parser._actions for flag in action.option_strings if action.nargs != 0}

