"""Tool featurize end to end: a small JAX program's HLO text -> official test files, determinism, --train-from."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_layout_arrays, make_tile_arrays, write_npz

from pipeline.featurize import main
from pipeline.featurizer.dataset import program_stem
from pipeline.submit import expected_rows, validate_submission
from pipeline.tpugraphs.dataset import COLLECTIONS, Collection, graph_paths, load_graph, validate_node_config_feat

FAST = ["featurize.layout_configs=40", "featurize.tile_configs=12"]
WRITTEN = [Collection.parse(c) for c in ("tile-xla", "layout-xla-random", "layout-xla-default")]


@pytest.fixture(scope="module")
def programs(jax_hlo, tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("hlo")
    paths = []
    for style, text in jax_hlo.items():
        paths.append(folder / f"jax_{style}.hlo.txt")
        paths[-1].write_text(text)
    return paths


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.npz"))}


def test_writes_valid_official_test_files_byte_identically(programs, tmp_path, capsys):
    main([*map(str, programs), "--out", str(tmp_path / "a"), *FAST])
    assert "next: python -m pipeline.config data=tpugraphs" in capsys.readouterr().out
    main([*map(str, programs), "--out", str(tmp_path / "b"), *FAST])
    first = digest(tmp_path / "a")
    assert first and first == digest(tmp_path / "b")
    layout = graph_paths(tmp_path / "a", "layout:xla:random", "test")
    assert [p.stem for p in layout] == ["jax_compiled", "jax_lowered"]
    tiles = graph_paths(tmp_path / "a", "tile:xla", "test")
    assert tiles and all(p.stem.startswith("jax_compiled_") for p in tiles)   # only optimised text has kernels
    for collection in WRITTEN:
        for path in graph_paths(tmp_path / "a", collection, "test"):
            graph = load_graph(path, collection, "test")
            validate_node_config_feat(graph)
            assert (graph.config_runtime == 0).all()
            assert graph.n_configs == 40 if collection.kind == "layout" else 1 <= graph.n_configs <= 12
    random_feat = load_graph(layout[1], "layout:xla:random", "test").read_node_config_feat()
    default_feat = load_graph(graph_paths(tmp_path / "a", "layout:xla:default", "test")[1], "layout:xla:default",
                              "test").read_node_config_feat()
    assert not np.array_equal(random_feat, default_feat)                    # the two searches differ


def test_the_record_names_the_fusions_each_tile_file_stands_for(programs, tmp_path):
    """featurize.json's `kernels`: every tile file, with the fusion instructions of the text it stands for (the
    names predict prints), each fusion in one file only."""
    import re

    from pipeline.featurizer.dataset import kernel_names

    main([*map(str, programs), "--out", str(tmp_path), *FAST])
    kernels = kernel_names(tmp_path)
    assert set(kernels) == {p.name for p in graph_paths(tmp_path, "tile:xla", "test")}
    names = [name for fusions in kernels.values() for name in fusions]
    assert names and len(names) == len(set(names))
    text = next(p for p in programs if p.stem.startswith("jax_compiled")).read_text()
    defined = set(re.findall(r"^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*\bfusion\(", text, flags=re.M))
    assert set(names) <= defined, set(names) - defined
    assert kernel_names(tmp_path / "nothing here") == {}


def test_rerun_replaces_the_test_folders(programs, tmp_path):
    main([*map(str, programs), "--out", str(tmp_path), *FAST])
    main([str(programs[0]), "--out", str(tmp_path), *FAST])
    assert [p.stem for p in graph_paths(tmp_path, "layout:xla:random", "test")] == [program_stem(programs[0])]
    assert not (tmp_path / "npz" / "tile" / "xla" / "test").exists()        # no fused kernel: no folder
    assert not [p for p in tmp_path.rglob("*") if "staging" in p.name or ".retired" in p.name or
                p.name.endswith(".tmp")]


def test_train_from_links_train_and_valid_and_a_submission_checks(programs, tmp_path):
    root = tmp_path / "builtin"
    for collection in COLLECTIONS:
        for split in ("train", "valid"):
            arrays = make_tile_arrays() if collection.kind == "tile" else make_layout_arrays()
            write_npz(root / "npz" / collection.subdir / split / f"tiny_{split}.npz", arrays)
    out = tmp_path / "mine"
    main([*map(str, programs), "--out", str(out), "--train-from", str(root), *FAST])
    shutil.rmtree(root)                                          # links are files of their own
    for collection in WRITTEN:
        assert [p.stem for p in graph_paths(out, collection, "train")] == ["tiny_train"]
        assert [p.stem for p in graph_paths(out, collection, "valid")] == ["tiny_valid"]
        load_graph(graph_paths(out, collection, "valid")[0], collection, "valid")
    expected = expected_rows(out, WRITTEN)
    rows = [{"ID": row_id, "TopConfigs": ";".join(map(str, range(n if kind == "layout" else min(5, n))))}
            for row_id, (kind, n) in expected.items()]
    assert validate_submission(pd.DataFrame(rows, columns=["ID", "TopConfigs"]), expected, 5) == []
    assert any(i.startswith("layout:xla:default:jax_lowered") for i in expected)


def test_a_bad_program_stops_before_anything_is_written(programs, tmp_path):
    bad = tmp_path / "bad.hlo.txt"
    bad.write_text(programs[0].read_text().replace(" tanh(", " tanh[", 1))
    line = next(k for k, text in enumerate(bad.read_text().splitlines(), 1) if " tanh[" in text)
    with pytest.raises(SystemExit, match=rf"featurize: {bad}:{line}: expected "):
        main([str(programs[1]), str(bad), "--out", str(tmp_path / "out"), *FAST])
    assert not (tmp_path / "out").exists()


def test_program_stems():
    assert program_stem(Path("a/module_0001.jit_f.before_optimizations.txt")) == \
        "module_0001.jit_f.before_optimizations"
    assert program_stem(Path("my model (v2).hlo.txt")) == "my_model__v2_"


def test_out_may_not_be_the_training_root(programs, tmp_path):
    with pytest.raises(SystemExit, match="is the --train-from root"):
        main([str(programs[0]), "--out", str(tmp_path), "--train-from", str(tmp_path), *FAST])


def test_a_renamed_program_gets_the_same_configurations(programs, tmp_path):
    """The sampled configurations come from the graph, not the file name (as the autotune tool's search does)."""
    renamed = tmp_path / "other_name.hlo.txt"
    shutil.copyfile(programs[0], renamed)
    main([str(programs[0]), "--out", str(tmp_path / "a"), *FAST])
    main([str(renamed), "--out", str(tmp_path / "b"), *FAST])
    first, second = digest(tmp_path / "a"), digest(tmp_path / "b")
    assert len(first) == len(second) > 1
    stem = programs[0].name.removesuffix(".hlo.txt")
    assert {k.replace(stem, "other_name"): v for k, v in first.items()} == second


def test_an_out_holding_other_graphs_or_owned_by_dvc_is_refused_and_left_alone(programs, tmp_path):
    """featurize replaces a root's test split whole: an --out whose test folder holds a graph it did not write (an
    existing dataset) is refused, and so is a folder the DVC stages write; nothing there changes. A rerun into its
    own output is not refused (test_rerun_replaces_the_test_folders)."""
    write_npz(tmp_path / "npz" / "layout" / "xla" / "random" / "test" / "theirs.npz", make_layout_arrays())
    before = digest(tmp_path)
    with pytest.raises(SystemExit, match=r"test holds 1 graph\(s\) featurize did not write \(e.g. theirs.npz"):
        main([str(programs[0]), "--out", str(tmp_path), *FAST])
    assert digest(tmp_path) == before and not (tmp_path / "featurize.json").exists()
    with pytest.raises(SystemExit, match=r"--out data/synthetic/mine: inside paths.synthetic_dir"):
        main([str(programs[0]), "--out", "data/synthetic/mine", *FAST])
    assert not Path("data/synthetic/mine").exists()


def test_train_from_may_not_replace_other_train_graphs(programs, tmp_path):
    root, out = tmp_path / "builtin", tmp_path / "mine"
    for collection in COLLECTIONS:
        for split in ("train", "valid"):
            arrays = make_tile_arrays() if collection.kind == "tile" else make_layout_arrays()
            write_npz(root / "npz" / collection.subdir / split / f"tiny_{split}.npz", arrays)
    write_npz(out / "npz" / "tile" / "xla" / "train" / "mine.npz", make_tile_arrays())
    with pytest.raises(SystemExit, match=r"tile/xla/train holds 1 graph\(s\) featurize did not write \(e.g. mine"):
        main([str(programs[0]), "--out", str(out), "--train-from", str(root), *FAST])



def test_a_train_from_root_missing_a_collection_is_refused_before_anything_is_written(programs, tmp_path):
    """A --train-from root without layout:xla:default's train folder was refused only after the test folders,
    featurize.json and the other collections' train/valid links had been written: a half-built dataset root."""
    root, out = tmp_path / "builtin", tmp_path / "mine"
    for collection in COLLECTIONS:
        for split in ("train", "valid"):
            arrays = make_tile_arrays() if collection.kind == "tile" else make_layout_arrays()
            write_npz(root / "npz" / collection.subdir / split / f"tiny_{split}.npz", arrays)
    shutil.rmtree(root / "npz/layout/xla/default/train")
    with pytest.raises(SystemExit, match=rf"^featurize: --train-from {root}: no layout:xla:default train folder "):
        main([*map(str, programs), "--out", str(out), "--train-from", str(root), *FAST])
    assert not out.exists()
    out.mkdir()                                                   # an --out that was there is left as it was
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="no layout:xla:default train folder"):
        main([*map(str, programs), "--out", str(out), "--train-from", str(root), *FAST])
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_an_out_below_a_file_is_refused(programs, tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        with pytest.raises(SystemExit, match=f"--out {out}: {blocker} is a file; expected a folder"):
            main([str(programs[0]), "--out", str(out), *FAST])


def test_programs_without_a_graph_are_named_and_alone_write_nothing(programs, tmp_path, capsys):
    """Of two programs, one without a convolution, dot or reshape is named with the reason while the other is
    written; programs that all give no graph write nothing (not even a folder), and a rank-8 dot is named as
    such, not as 'no dot'."""
    empty, rank8 = tmp_path / "params.hlo.txt", tmp_path / "rank8.hlo.txt"
    empty.write_text("HloModule p\n\nENTRY main {\n  ROOT x = f32[4,4]{1,0} parameter(0)\n}\n")
    rank8.write_text("HloModule r\n\nENTRY main {\n  a = f32[2,2,2,2,2,2,2,4]{7,6,5,4,3,2,1,0} parameter(0)\n"
                     "  b = f32[4,8]{1,0} parameter(1)\n  ROOT c = f32[2,2,2,2,2,2,2,8]{7,6,5,4,3,2,1,0} dot(a, b), "
                     "lhs_contracting_dims={7}, rhs_contracting_dims={0}\n}\n")
    main([str(empty), str(programs[0]), "--out", str(tmp_path / "a"), *FAST])
    assert (f"skipped {empty}: no configurable node (convolution, dot, reshape) to lay out; no fused kernel"
            in capsys.readouterr().out)
    assert [p.stem for p in graph_paths(tmp_path / "a", "layout:xla:random", "test")] == [program_stem(programs[0])]
    with pytest.raises(SystemExit, match=rf"{rank8}: no configurable node: its 1 convolution, dot or reshape node"
                                         rf"\(s\) are none of rank 1-6 .*c: ranks \[8, 8, 2\]\).*; nothing written"):
        main([str(empty), str(rank8), "--out", str(tmp_path / "b"), *FAST])
    assert not (tmp_path / "b").exists()


def test_paths_holding_an_equals_sign_are_paths_not_overrides(programs, tmp_path, capsys):
    """Every argument with a `=` was taken for a Hydra override: a program under Hydra's multirun folder
    `lr=0.1` gave "the following arguments are required: programs", and `--out runs/x=1` lost its value."""
    folder = tmp_path / "lr=0.1"
    folder.mkdir()
    program = folder / "p.hlo.txt"
    shutil.copy(programs[0], program)
    main([str(program), "--out", str(tmp_path / "out=1"), *FAST])
    assert graph_paths(tmp_path / "out=1", "layout:xla:random", "test")
    assert "wrote" in capsys.readouterr().out


def test_a_device_an_undecodable_program_and_an_unwritable_out_are_one_line(programs, tmp_path):
    """A device (`/dev/zero` never ends: reading it would not stop before the memory ran out) is refused unread; a
    byte that is not UTF-8 is named with its line; an --out the system cannot make (a name too long here; no
    permission, a read-only disk) was an OSError traceback."""
    with pytest.raises(SystemExit, match=r"^featurize: /dev/null: cannot read HLO text \(a device, not a file\)$"):
        main(["/dev/null", "--out", str(tmp_path / "a"), *FAST])
    bad = tmp_path / "bad.hlo.txt"
    bad.write_bytes(programs[0].read_bytes().replace(b"\n", b"\n\xff", 2).replace(b"\n\xff", b"\n", 1))
    with pytest.raises(SystemExit, match=rf"^featurize: {bad}:3: cannot read HLO text \(not UTF-8: byte 0xff\)$"):
        main([str(bad), "--out", str(tmp_path / "a"), *FAST])
    out = tmp_path / ("x" * 300)
    with pytest.raises(SystemExit, match=rf"^featurize: --out {out}: cannot write there.* \(File name too long\); "
                                         r"expected a path this user can create and write$"):
        main([str(programs[0]), "--out", str(out), *FAST])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hlo.txt"]


def test_a_pipe_no_program_writes_is_refused_and_one_written_is_read(programs, tmp_path, monkeypatch):
    """A named pipe (mkfifo) with no writer: the read waited for one forever (featurize, autotune, predict's HLO
    text). It is one line after featurize.FIFO_WAIT_S; a pipe a program writes is read as before."""
    import os
    import threading
    import time

    from pipeline.hlo import featurize as hlo_featurize

    monkeypatch.setattr(hlo_featurize, "FIFO_WAIT_S", 0.2)
    fifo = tmp_path / "p.hlo.txt"
    os.mkfifo(fifo)
    with pytest.raises(SystemExit, match=rf"^featurize: {fifo}: cannot read HLO text \(a pipe no program wrote to "
                                         r"in 0.2 s\); expected a file, or a pipe a program writes$"):
        main([str(fifo), "--out", str(tmp_path / "a"), *FAST])
    writer = threading.Thread(target=lambda: fifo.write_bytes(programs[0].read_bytes()))
    writer.start()
    assert hlo_featurize.read_hlo_text(fifo) == programs[0].read_text()
    writer.join()

    def slow_writer():                  # holds the pipe, writes after FIFO_WAIT_S (a program lowering a large model)
        with fifo.open("wb") as pipe:
            time.sleep(0.6)
            pipe.write(programs[0].read_bytes())
    writer = threading.Thread(target=slow_writer)
    writer.start()
    assert hlo_featurize.read_hlo_text(fifo) == programs[0].read_text()
    writer.join()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.hlo.txt"]


def test_a_loop_of_symbolic_links_is_one_line(programs, tmp_path):
    """--out or --train-from on a loop of symbolic links was a RuntimeError traceback (Path.resolve)."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    loop = tmp_path / "loop1"
    with pytest.raises(ValueError, match=rf"^--out {loop}: a loop of symbolic links; expected a path that leads to "
                                         r"a file or folder$"):
        main([str(programs[0]), "--out", str(loop), *FAST])
    with pytest.raises(SystemExit, match=rf"^featurize: --train-from {loop}: a loop of symbolic links"):
        main([str(programs[0]), "--out", str(tmp_path / "a"), "--train-from", str(loop), *FAST])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2"]


@pytest.mark.parametrize("flag", ["--out", "--train-from", "program"])
def test_an_empty_path_is_refused_not_the_current_folder(programs, tmp_path, monkeypatch, flag):
    """`--out "$DIR"` with DIR unset gave '', the current folder: featurize wrote npz/ and featurize.json there."""
    monkeypatch.chdir(tmp_path)
    argv = {"--out": [str(programs[0]), "--out", ""], "--train-from": [str(programs[0]), "--out", "a", "--train-from", ""],
            "program": ["", "--out", "a"]}[flag]
    with pytest.raises(SystemExit) as stop:
        main([*argv, *FAST])
    assert stop.value.code == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("blocker", ["npz", "npz/layout/xla/random/test"])
def test_a_file_where_a_test_folder_goes_is_refused_up_front(programs, tmp_path, blocker):
    """A file at DIR/npz was an error after the graphs were written, with DIR/.featurize-staging/ left behind; a file
    at a test folder's path was replaced by the folder, silently."""
    out = tmp_path / "out"
    (out / blocker).parent.mkdir(parents=True, exist_ok=True)
    (out / blocker).write_text("mine\n")
    with pytest.raises(SystemExit, match=rf"^featurize: --out {out}: {out / blocker} is a file; expected a folder "
                                         r"\(featurize writes "):
        main([str(programs[0]), "--out", str(out), *FAST])
    assert (out / blocker).read_text() == "mine\n" and sorted(out.rglob("*")) == [
        out / p for p in ("npz", "npz/layout", "npz/layout/xla", "npz/layout/xla/random", blocker)[
            :1 if blocker == "npz" else None]]


def test_a_program_given_twice_is_named_as_such(programs, tmp_path):
    """The same file twice (or a link to it) was refused with 'same file stem ... rename one of them', which cannot
    help; two programs of one stem still are."""
    link = tmp_path / "link"
    link.mkdir()
    (link / programs[0].name).symlink_to(programs[0])
    for twice in (programs[0], link / programs[0].name):
        with pytest.raises(SystemExit, match=rf"^featurize: {twice}: given twice; give each program once$"):
            main([str(programs[0]), str(twice), "--out", str(tmp_path / "a"), *FAST])
    other = tmp_path / programs[0].name
    other.write_text(programs[1].read_text())
    with pytest.raises(SystemExit, match="rename one of them"):
        main([str(programs[0]), str(other), "--out", str(tmp_path / "a"), *FAST])
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("record, found", [('{"files": 3}', "found 3"),
                                           ('{"files": {"tile-xla": 3}}', "found {'tile-xla': 3}"),
                                           ('{"files": {"tile-xla": [3]}}', r"found {'tile-xla': \[3\]}")])
def test_a_rerun_refuses_a_record_edited_by_hand_naming_it(programs, tmp_path, record, found):
    """An earlier run's featurize.json whose 'files' is not {slug: [name]} was an AttributeError or TypeError
    traceback (or, names that are not text, blamed on the graphs as 'an existing dataset?')."""
    main([str(programs[0]), "--out", str(tmp_path), *FAST])
    (tmp_path / "featurize.json").write_text(record)
    before = digest(tmp_path)
    with pytest.raises(SystemExit, match=rf"featurize\.json: key 'files' expected {{collection slug: \[file name, "
                                         rf"\.\.\.\]}} as featurize writes it, {found}"):
        main([str(programs[0]), "--out", str(tmp_path), *FAST])
    assert digest(tmp_path) == before
