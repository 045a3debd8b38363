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


COMPILED = """HloModule tiny, is_scheduled=true, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0})->f32[4,64]{1,0}}

%fused_dot (p0: f32[8,16], p1: f32[16,32]) -> f32[8,32] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16,32]{1,0} parameter(1)
  %d = f32[8,32]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = f32[8,32]{1,0} tanh(%d)
}

ENTRY %main.5 (Arg_0.1: f32[8,16], Arg_1.2: f32[16,32]) -> f32[4,64] {
  %Arg_0.1 = f32[8,16]{1,0} parameter(0)
  %Arg_1.2 = f32[16,32]{1,0} parameter(1)
  %fusion = f32[8,32]{1,0} fusion(%Arg_0.1, %Arg_1.2), kind=kOutput, calls=%fused_dot
  ROOT %bitcast = f32[4,64]{1,0} bitcast(%fusion)
}
"""


def test_an_optimised_text_of_another_module_or_without_kernels_is_read_with_a_warning(capsys):
    """The optimised text gives the tiles: one of another module (XLA keeps the name through its passes) or one with
    no fusion (the unoptimised text twice) was read silently, tiles of the wrong program or none; now each says so."""
    program = read_program("tiny", DOT_RESHAPE, "tiny.hlo.txt", COMPILED, "tiny_opt.hlo.txt")
    assert capsys.readouterr().err == "" and [t.name for t in program.tiles] == ["tiny.fusion"]
    other = read_program("tiny", DOT_RESHAPE, "tiny.hlo.txt", COMPILED.replace("HloModule tiny,", "HloModule big,"),
                         "big_opt.hlo.txt")
    assert capsys.readouterr().err.splitlines() == [
        "warning: big_opt.hlo.txt: module 'big', not 'tiny' as in tiny.hlo.txt: the tiles are searched for that "
        "module's kernels; give the optimised text of the same program"] and len(other.tiles) == 1
    twice = read_program("tiny", DOT_RESHAPE, "tiny.hlo.txt", DOT_RESHAPE, "tiny.hlo.txt")
    assert twice.no_tiles == "tiny.hlo.txt: no fused kernel (tile needs optimised HLO such as .compile().as_text())"
    assert twice.tiles == () and program.no_tiles is None          # the tool warns, or refuses with it (one line)


def test_an_optimised_text_without_fusions_is_not_told_to_give_the_optimised_text(capsys):
    """XLA fuses nothing in some compiled programs (one convolution, `x -> x`): the warning told the user who gave
    `.compile().as_text()` to give the optimised text."""
    fused_nothing = read_program("tiny", DOT_RESHAPE, "tiny.hlo.txt", SCHEDULED, "tiny_opt.hlo.txt")
    assert fused_nothing.no_tiles == "tiny_opt.hlo.txt: no fused kernel (XLA fused nothing in this optimised module)"
    assert capsys.readouterr().err == ""


def test_the_search_key_is_the_programs_graphs_not_its_text(jax_hlo):
    """The tool seeds its search by the program's graphs: a comment, or an optimised text whose metadata names
    another compiling script (FileNames / StackFrames), gives the same key; another program another key."""
    from pipeline.tuning.tool import program_key

    lowered, compiled = jax_hlo["lowered"], jax_hlo["compiled"]
    key = program_key(read_program("p", lowered, "p.hlo.txt", compiled, "p_opt.hlo.txt"))
    assert "FileNames" in compiled                    # the block a script of another name would change
    relocated = compiled.replace("FileNames\n1 ", "FileNames\n1 \"elsewhere.py\" #", 1)
    assert relocated != compiled
    assert program_key(read_program("q", lowered + "\n// v2\n", "q.hlo.txt", relocated, "q_opt.hlo.txt")) == key
    other = lowered.replace("tanh", "exponential")
    assert program_key(read_program("p", other, "p.hlo.txt", compiled, "p_opt.hlo.txt")) != key
    assert program_key(read_program("p", lowered, "p.hlo.txt")) != key              # no fused kernels: another key
