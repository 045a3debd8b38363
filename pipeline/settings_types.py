"""The value types of the settings schema (pipeline/settings_schema.py) and its one error type.

Each type has `describe()` (what is allowed, for the error) and `check(value, key)`, which raises `SettingsError`
(one line: the key, the value, what is allowed). Values are the plain Python values OmegaConf holds: an integer is
never a bool, a number is finite, a string is not empty.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from pipeline.errors import PipelineError, clipped, shortened
from pipeline.files import INT64_MAX, is_number

SEPARATORS = tuple({"/", os.sep, "\0"})        # characters no file name holds
SEARCH_ENTRIES = ("tile", "random", "default")   # keys of a by-search mapping (tile: the tile collection)


class SettingsError(PipelineError):
    """A configuration value or key that the schema does not allow (one line: key, value, what is allowed)."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"setting {key}={shortened(value)}: expected {allowed}")   # a 5 KB value: 80 characters


@dataclass(frozen=True)
class Int:
    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        if self.low is not None and self.low == self.high:
            return f"{self.low}"
        bounds = [f">= {self.low}" if self.low is not None else "", f"<= {self.high}" if self.high is not None else ""]
        return " and ".join(["an integer"] + [b for b in bounds if b]).replace("integer and", "integer")

    def check(self, value, key: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(key, value, self.describe())
        if abs(value) > INT64_MAX:               # no array, tensor or library takes it: a traceback where it went
            raise SettingsError(key, value, f"{self.describe()} that fits in 64 bits")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class Float:
    low: float | None = None
    high: float | None = None
    low_open: bool = False        # True: value > low (else >= low)
    high_open: bool = False

    def describe(self) -> str:
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {self.high}")
        return "a finite number" + (" " + " and ".join(bounds) if bounds else "")

    def check(self, value, key: str) -> None:
        if not is_number(value):                 # an integer beyond float's range too (an OverflowError before)
            raise SettingsError(key, value, self.describe())
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        above = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if below or above:
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class Bool:
    def describe(self) -> str:
        return "true or false"

    def check(self, value, key: str) -> None:
        if not isinstance(value, bool):
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class Str:
    choices: tuple[str, ...] = ()      # empty: any non-empty string

    def describe(self) -> str:
        return f"one of {list(self.choices)}" if self.choices else "a non-empty string"

    def check(self, value, key: str) -> None:
        if not isinstance(value, str) or not value.strip() or (self.choices and value not in self.choices):
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class FileName(Str):
    """The name of one file inside a folder a setting names (submit.name): no path separator, not `.` or `..`."""

    def describe(self) -> str:
        return "a file name (no '/', not '.' or '..')"

    def check(self, value, key: str) -> None:
        super().check(value, key)
        if any(sep in value for sep in SEPARATORS) or value.strip() in (os.curdir, os.pardir):
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class Optional:
    inner: Any

    def describe(self) -> str:
        return f"null or {self.inner.describe()}"

    def check(self, value, key: str) -> None:
        if value is None:
            return
        try:
            self.inner.check(value, key)
        except SettingsError:
            raise SettingsError(key, value, self.describe()) from None


@dataclass(frozen=True)
class Either:
    """A value that one of several types allows (e.g. prune.hops: an integer >= 0 or `all`)."""
    options: tuple

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def check(self, value, key: str) -> None:
        for option in self.options:
            try:
                option.check(value, key)
                return
            except SettingsError:
                continue
        raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class List:
    item: Any
    min_len: int = 0
    unique: bool = True
    max_len: int | None = None      # None: any length (min_len == max_len: exactly that many)

    def describe(self) -> str:
        if self.max_len is not None:
            size = f"{self.min_len} " if self.min_len == self.max_len else f"{self.min_len} to {self.max_len} "
        else:
            size = f"at least {self.min_len} " if self.min_len else ""
        return f"a list of {size}{'distinct ' if self.unique else ''}items, each {self.item.describe()}"

    def check(self, value, key: str) -> None:
        if not isinstance(value, (list, tuple)) or len(value) < self.min_len or (
                self.max_len is not None and len(value) > self.max_len):
            raise SettingsError(key, value, self.describe())
        if self.unique and len({repr(v) for v in value}) != len(value):
            raise SettingsError(key, value, self.describe())
        for i, item in enumerate(value):
            self.item.check(item, f"{key}[{i}]")


@dataclass(frozen=True)
class AnyMapping:
    """A mapping (or null when `nullable`) whose keys are not checked here (an owner module validates them)."""
    nullable: bool = False

    def describe(self) -> str:
        return "a mapping" + (" or null" if self.nullable else "")

    def check(self, value, key: str) -> None:
        if not (isinstance(value, Mapping) or (self.nullable and value is None)):
            raise SettingsError(key, value, self.describe())


@dataclass(frozen=True)
class Entries:
    """A mapping whose keys are among `keys` (any of them may be left out; empty `keys`: any non-empty string), each
    value `item` (e.g. data.generator.programs: {source: {split: count}})."""
    item: Any
    keys: tuple[str, ...] = ()

    def describe(self) -> str:
        among = f" among {list(self.keys)}" if self.keys else ""
        return f"a mapping with keys{among}, each value {self.item.describe()}"

    def check(self, value, key: str) -> None:
        if not isinstance(value, Mapping):
            raise SettingsError(key, value, self.describe())
        for name, item in value.items():
            if not isinstance(name, str) or not name.strip() or (self.keys and name not in self.keys):
                raise SettingsError(f"{key}.{name}", item, f"a key among {list(self.keys)}" if self.keys else
                                    "a non-empty string key")
            self.item.check(item, f"{key}.{name}")


@dataclass(frozen=True)
class BySearch:
    """One value for every collection, or a mapping {tile, random, default} of values (gnn.lr, gnn.norm ...).

    Which entries are needed depends on data.collections: `validate` checks them (`needed`).
    """
    item: Any

    def describe(self) -> str:
        return f"{self.item.describe()}, or a mapping with keys among {list(SEARCH_ENTRIES)} of them"

    def check(self, value, key: str, needed: tuple[str, ...] = ()) -> None:
        if not isinstance(value, Mapping):
            try:
                self.item.check(value, key)
            except SettingsError:
                raise SettingsError(key, value, self.describe()) from None
            return
        for entry, item in value.items():
            if entry not in SEARCH_ENTRIES:
                raise SettingsError(f"{key}.{entry}", item, f"no such entry: {key} takes {list(SEARCH_ENTRIES)}")
            self.item.check(item, f"{key}.{entry}")
        missing = [entry for entry in needed if entry not in value]
        if missing:
            raise SettingsError(key, dict(value), f"an entry for each configured collection: missing {missing}")


@dataclass(frozen=True)
class Group:
    """A mapping with exactly these keys (unknown keys refused with the closest known one); those of `optional` may be
    left out."""
    fields: dict = field(default_factory=dict)
    optional: frozenset = frozenset()

    def describe(self) -> str:
        return f"a mapping with keys {sorted(self.fields)}"

    def check(self, value, key: str) -> None:
        if not isinstance(value, Mapping):
            raise SettingsError(key or "<root>", value, self.describe())
        prefix = f"{key}." if key else ""
        for name in value:
            if name not in self.fields:
                raise unknown_key(f"{prefix}{name}", value[name], [f"{prefix}{f}" for f in self.fields])
        for name, spec in self.fields.items():
            if name not in value and name in self.optional:
                continue
            if name not in value:
                raise SettingsError(f"{prefix}{name}", "<missing>", spec.describe())
            spec.check(value[name], f"{prefix}{name}")


def unknown_key(key: str, value, known: list[str]) -> SettingsError:
    """The error for a key no code reads, naming the closest known key."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    parent = key.rpartition(".")[0]                 # the keys beside it, not every key of the schema
    here = [k for k in known if k.rpartition(".")[0] == parent] or {k.split(".")[0] for k in known}
    hint = f"did you mean {close[0]}?" if close else f"known keys here: {sorted(here)}"
    return SettingsError(clipped(key), value, f"a known key (no code reads this one); {hint}")


# value specs both schema modules use (pipeline/settings_schema.py, pipeline/settings_synth.py)
COUNT = Int(low=1)
FRACTION = Float(low=0.0, high=1.0)
POSITIVE = Float(low=0.0, low_open=True)
NON_NEGATIVE = Float(low=0.0)
