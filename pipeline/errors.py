"""The project's own errors and the one top-level handler every command shares.

Bad input (a data file, a CSV, a setting, a model file, HLO text) raises a subclass of `PipelineError` whose message
is one line naming the file or key, what was expected and what was found: `TpuGraphsFormatError`, `SettingsError`,
`HloParseError`, `CheckpointError`, `PredictError`, `SubmissionError`, `DownloadError`, `TrainingDivergedError`.

Every `python -m pipeline.<stage>` (and every tool under benchmarks/) ends with `run_main(main)`: a
`PipelineError`, or a `SystemExit` carrying a message, becomes that one line on stderr and exit status
`EXIT_BAD_INPUT`; so does a `FileNotFoundError` (an input that an earlier stage writes, or that the user names, is
not there: the message names the file); any other exception is a programming error and keeps its traceback. Stages
write their outputs through `pipeline.files.atomic_path`, so an error leaves no output that DVC would accept.
"""
from __future__ import annotations

import sys
from typing import Callable

EXIT_BAD_INPUT = 2          # the status of every refused input (argparse uses the same for bad flags)
EXIT_INTERRUPTED = 130      # Ctrl-C: 128 + SIGINT, what a shell reports for a command it interrupted
ERROR_PREFIX = "error: "
ECHO_CHARS = 80             # the most characters of an input value that a message echoes (`shortened`)
ELLIPSIS = "..."


class PipelineError(ValueError):
    """Bad input the user can fix; the message is one line naming the file or key (a ValueError, as before)."""


class TrainingDivergedError(PipelineError):
    """Training produced a non-finite loss: the message names the step and the setting most likely at fault."""


def one_line(message: str) -> str:
    """The message on one line (inner line breaks become '; '), prefixed with 'error: ' once."""
    text = "; ".join(part.strip() for part in str(message).splitlines() if part.strip()) or "failed"
    return text if text.startswith(ERROR_PREFIX) else ERROR_PREFIX + text


def shortened(value: object, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` for echoing an input value in a message, never much longer than `limit` characters.

    A string of at most `limit` characters is quoted whole; a longer one shows its first `limit - 3` characters,
    quoted, then '...' (so a 10 MB token in a CSV costs one short line). Any other value: its repr, cut to `limit`
    characters the same way.
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else repr(value[:max(limit - len(ELLIPSIS), 0)]) + ELLIPSIS
    return clipped(repr(value), limit)


def clipped(text: str, limit: int = ECHO_CHARS) -> str:
    """`text` itself when at most `limit` characters, else its first `limit - 3` and '...'."""
    return text if len(text) <= limit else text[:max(limit - len(ELLIPSIS), 0)] + ELLIPSIS


def missing_file(error: FileNotFoundError) -> str:
    """A missing file's one line: the project's own message, or the operating system's naming the file and the
    likely cause."""
    if error.filename is None:
        return str(error)
    return (f"{error.filename}: no such file or folder; expected the output of an earlier stage (run `dvc repro`) "
            f"or a path you gave")


def run_main(main: Callable[[], object]) -> None:
    """Run a command's `main()`; the project's errors exit with one stderr line and status EXIT_BAD_INPUT.

    A `SystemExit` with a message (the stages' existing one-line exits) is treated the same way; one with a number
    keeps it. Ctrl-C (KeyboardInterrupt) ends with one line and status EXIT_INTERRUPTED, as a shell reports it
    (outputs are written atomically, so none is left half-written). Anything else propagates with its traceback.
    """
    try:
        main()
    except PipelineError as error:
        print(one_line(str(error)), file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except FileNotFoundError as error:
        print(one_line(missing_file(error)), file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        print(one_line("interrupted (Ctrl-C); nothing half-written is kept, run the command again"), file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(one_line(stop.code), file=sys.stderr)
            raise SystemExit(EXIT_BAD_INPUT) from None
        raise
