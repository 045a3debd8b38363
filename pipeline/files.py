"""Atomic writes: every output file (or folder) of the pipeline appears complete or not at all.

`atomic_path(path)` yields a temporary sibling `<name>.tmp` (a leftover of an earlier, killed run is removed
first); the caller writes the file (or fills the folder) there, and on a clean exit it replaces `path` (a folder
`path` is removed first); on an exception the temporary is removed and `path` is left as it was. `write_text`, `write_json` and `write_csv` are the common cases;
`read_json` reads back a JSON object with a one-line error naming the file, `read_csv` a CSV with its text
columns verbatim.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from pipeline.errors import PipelineError

if TYPE_CHECKING:
    import pandas as pd

EMPTY_CELL = ""        # how `write_csv` (pandas) writes a missing value, the one marker `read_csv` reads as NaN


def remove(path: Path) -> None:
    """Remove a file, a link or a folder tree at `path`, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def blocking_file(path: str | os.PathLike, itself: bool = True) -> Path | None:
    """The nearest of `path` (with `itself`) and its ancestors that exists and is not a folder, else None: where a
    folder would have to be made for `path` and cannot be (an output path's one-line error names it)."""
    path = Path(path)
    return next((p for p in ((path,) if itself else ()) + tuple(path.parents) if _is_non_folder(p)), None)


def _is_non_folder(path: Path) -> bool:
    """`path` exists and is no folder; False where the system cannot look (a name longer than the file system takes,
    a folder this user may not search: `Path.exists` raised there), as writing there then fails (`output_error`)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


def given(text: str) -> str:
    """argparse `type` of a path argument: the text as given; an empty one (`--out "$DIR"` with DIR unset) is refused,
    as the path '' is the current folder (featurize and autotune wrote there, `submit --check ''` ran the stage)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path; expected the path of a file or folder")
    return text


def given_path(text: str) -> Path:
    """`given`, as a Path."""
    return Path(given(text))


def resolved(path: str | os.PathLike, name: str = "") -> Path:
    """`Path(path).resolve()`, with a loop of symbolic links (a RuntimeError traceback in Python 3.11) as a
    PipelineError naming `path` (after `name`, a flag such as `--out`, when given)."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise PipelineError(f"{name + ' ' if name else ''}{path}: a loop of symbolic links; expected a path that "
                            f"leads to a file or folder") from None


def output_error(name: str, path: str | os.PathLike, error: OSError) -> PipelineError:
    """An OSError met making or writing the output `path` (given as `name`: `--out`, a setting) as one line naming
    it: a folder that cannot be made, no permission, a read-only or full disk (a traceback until 2026-12-07, or an
    error naming only a `<name>.tmp` and suggesting `dvc repro`)."""
    at = "" if error.filename in (None, str(path), f"{path}.tmp") else f" at {error.filename}"
    return PipelineError(f"{name} {path}: cannot write there{at} ({error.strerror or error}); expected a path this "
                         f"user can create and write")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield the temporary path to write; it replaces `path` when the block exits cleanly (parents are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp")
    remove(tmp)
    try:
        yield tmp
    except BaseException:
        remove(tmp)
        raise
    if tmp.is_dir() and path.exists():
        remove(path)
    try:
        os.replace(tmp, path)
    except OSError:                 # e.g. a folder stands at `path`: no temporary file is left beside it
        remove(tmp)
        raise


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(payload: Mapping, path: str | os.PathLike) -> None:
    """Write JSON atomically (indented, keys sorted, trailing newline)."""
    write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", path)


def write_csv(table: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a CSV atomically, without the index."""
    with atomic_path(path) as tmp:
        table.to_csv(tmp, index=False)


def read_csv(path: str | os.PathLike, text_columns: Sequence[str]) -> pd.DataFrame:
    """A CSV the pipeline wrote (`write_csv`), its `text_columns` read verbatim as str: a graph id such as `NA`,
    `None`, `null` or `nan` (a file stem) stays that text, which pandas' default missing-value markers would turn
    into NaN. Only an empty cell of another column is missing (NaN), as `write_csv` writes one. A file that is no
    CSV (empty, not UTF-8, an unclosed quote) is a PipelineError naming it."""
    import pandas as pd

    try:
        header = pd.read_csv(path, nrows=0).columns
        return pd.read_csv(path, dtype={c: str for c in text_columns if c in header}, keep_default_na=False,
                           na_values={c: [EMPTY_CELL] for c in header if c not in text_columns})
    except UnicodeDecodeError as err:
        raise PipelineError(f"{path}: expected a CSV the pipeline wrote, found bytes that are not UTF-8 text "
                            f"(byte {err.start}: {err.reason}); re-run the stage that writes it") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PipelineError(f"{path}: expected a CSV the pipeline wrote, found one pandas cannot read ({reason}); "
                            f"re-run the stage that writes it") from None


INT64_MAX = 2 ** 63 - 1      # the largest integer numpy, torch and XLA hold (int64): a larger one is a traceback there


def is_number(value: object, low: float | None = None, high: float | None = None) -> bool:
    """A finite int or float (not a bool) within [low, high]: a number as the pipeline writes it into its JSON (an
    integer beyond float's range, which json reads from a long run of digits, is none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        value = float(value)
    except OverflowError:
        return False
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def read_json(path: str | os.PathLike) -> dict:
    """A JSON object from `path`; PipelineError (a ValueError) naming the file when it is not valid JSON or not an object."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise PipelineError(f"{path}: not valid JSON ({err.msg}: line {err.lineno}, column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise PipelineError(f"{path}: not valid JSON (not UTF-8 text: byte {err.start}, {err.reason})") from None
    if not isinstance(payload, dict):
        raise PipelineError(f"{path}: expected a JSON object, found {type(payload).__name__}")
    return payload
