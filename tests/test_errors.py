"""pipeline.errors: the one top-level handler every command ends with."""
from __future__ import annotations

import pytest

from pipeline.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, PipelineError, one_line, run_main, shortened
from pipeline.graphnet.checkpoint import CheckpointError
from pipeline.hlo.text import HloParseError
from pipeline.settings_types import SettingsError
from pipeline.tpugraphs.errors import TpuGraphsFormatError


def raising(error: BaseException):
    def main():
        raise error
    return main


@pytest.mark.parametrize("error, line", [
    (TpuGraphsFormatError("g.npz", "node_feat", "finite values", "nan"),
     "error: g.npz [key 'node_feat']: expected finite values; found nan"),
    (SettingsError("gnn.lr", "x", "a number"), "error: setting gnn.lr='x': expected a number"),
    (HloParseError("m.hlo", 3, "an instruction"), "error: m.hlo:3: expected an instruction"),
    (CheckpointError("model.pt: not a checkpoint"), "error: model.pt: not a checkpoint"),
    (SystemExit("error: --collection: unknown"), "error: --collection: unknown"),
    (SystemExit("featurize: no program\nproduced output"), "error: featurize: no program; produced output"),
    (FileNotFoundError(2, "No such file or directory", "pruned/tile-xla/index.csv"),   # open() of a missing input
     "error: pruned/tile-xla/index.csv: no such file or folder; expected the output of an earlier stage (run `dvc "
     "repro`) or a path you gave"),
    (FileNotFoundError("model.pt: no GNN model here; run the gnn stage"), "error: model.pt: no GNN model here; run the "
     "gnn stage"),
])
def test_the_projects_errors_exit_2_with_one_line(capsys, error, line):
    with pytest.raises(SystemExit) as stop:
        run_main(raising(error))
    assert stop.value.code == EXIT_BAD_INPUT == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_programming_errors_and_numeric_exits_pass_through(capsys):
    with pytest.raises(KeyError):
        run_main(raising(KeyError("a bug")))
    with pytest.raises(ValueError, match="plain"):                  # not the project's: keeps its traceback
        run_main(raising(ValueError("plain")))
    with pytest.raises(SystemExit) as stop:
        run_main(raising(SystemExit(1)))
    assert stop.value.code == 1 and capsys.readouterr().err == ""
    run_main(lambda: None)


def test_ctrl_c_ends_with_one_line_and_the_shells_status(capsys):
    with pytest.raises(SystemExit) as stop:
        run_main(raising(KeyboardInterrupt()))
    assert stop.value.code == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err.splitlines() == [
        "error: interrupted (Ctrl-C); nothing half-written is kept, run the command again"]


def test_every_project_error_is_a_pipeline_error_and_still_a_value_error():
    for kind in (TpuGraphsFormatError, SettingsError, HloParseError, CheckpointError):
        assert issubclass(kind, PipelineError) and issubclass(kind, ValueError)
    assert one_line("error: x") == "error: x" and one_line("") == "error: failed"


def test_shortened_quotes_short_values_whole_and_cuts_long_ones():
    assert shortened("abc") == "'abc'" and shortened("x" * 80) == f"'{'x' * 80}'"
    assert shortened("x" * 81) == f"'{'x' * 77}'..." and shortened("abcdef", limit=5) == "'ab'..."
    assert shortened([1, 2]) == "[1, 2]" and shortened(list(range(100))) == repr(list(range(100)))[:77] + "..."
