"""`TpuGraphsFormatError`, the data layer's one error type.

Raised by pipeline.tpugraphs (npy, npz, schema, dataset) and by the stages for bad input files: its message names
the file, the key, what was expected and what was found.
"""
from __future__ import annotations

import os

from pipeline.errors import PipelineError


class TpuGraphsFormatError(PipelineError):
    """A data file or folder is not what the TpuGraphs format expects.

    `key` names the offending array, or is a tuple of the arrays that disagree with each other (e.g. two sizes
    of the same configuration axis), or None for the file itself.
    """

    def __init__(self, path: str | os.PathLike, key: str | tuple[str, ...] | None, expected: str, found: str):
        self.path, self.key, self.expected, self.found = str(path), key, expected, found
        if key is None:
            where = self.path
        elif isinstance(key, tuple):
            where = f"{self.path} [keys " + ", ".join(f"'{k}'" for k in key) + "]"
        else:
            where = f"{self.path} [key '{key}']"
        super().__init__(f"{where}: expected {expected}; found {found}")

    def __reduce__(self):  # keep the four fields when pickled across processes
        return type(self), (self.path, self.key, self.expected, self.found)
