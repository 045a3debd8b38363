"""pipeline.tuning.program: the texts of a program read as the tool reads them."""
from __future__ import annotations

from tuning_hlo import DOT_RESHAPE

from pipeline.hlo.text import parse_text
from pipeline.tuning.program import read_program

SCHEDULED = DOT_RESHAPE.replace("HloModule tiny,", "HloModule tiny, is_scheduled=true,")


def test_a_scheduled_module_given_as_the_unoptimised_text_is_searched_with_a_warning(capsys):
    assert parse_text(SCHEDULED).scheduled and not parse_text(DOT_RESHAPE).scheduled
    assert not parse_text(DOT_RESHAPE.replace("tiny,", "tiny, is_scheduled=false,")).scheduled
    plain = read_program("tiny", DOT_RESHAPE, "tiny.hlo.txt")
    assert capsys.readouterr().err == ""
    swapped = read_program("tiny", SCHEDULED, "tiny_opt.hlo.txt")
    assert capsys.readouterr().err.splitlines() == [
        "warning: tiny_opt.hlo.txt: a scheduled (optimised) module where the unoptimised text is expected: its layouts "
        "are the compiler's own choices; give PROGRAM.hlo.txt (before optimisation) first"]
    assert swapped.node_feat.tolist() == plain.node_feat.tolist()        # searched as given
