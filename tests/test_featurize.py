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


def test_rerun_replaces_the_test_folders(programs, tmp_path):
    main([*map(str, programs), "--out", str(tmp_path), *FAST])
    main([str(programs[0]), "--out", str(tmp_path), *FAST])
    assert [p.stem for p in graph_paths(tmp_path, "layout:xla:random", "test")] == [program_stem(programs[0])]
    assert not (tmp_path / "npz" / "tile" / "xla" / "test").exists()        # no fused kernel: no folder
    assert not [p for p in tmp_path.rglob("*") if ".staging" in p.name or ".retired" in p.name or
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
