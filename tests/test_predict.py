"""Command predict on the outputs of the shared end-to-end `dvc repro` (programs_ci), plus unit checks."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import BIN, run, write_npz

from pipeline.featurizer.dataset import kernel_names
from pipeline.predict import (PredictError, file_kind, graphs_dir, input_files, keep_graphs, kernel_label,
                              path_collection, ranking_table, resolve_collection)
from pipeline.predictions import load_predictions, predictions_path
from pipeline.tpugraphs.dataset import Collection, load_graph

LAYOUT = Collection.parse("layout-xla-random")


def predict(dest, env, *args):
    return subprocess.run([str(BIN / "python"), "-m", "pipeline.predict", *map(str, args)], cwd=dest, env=env,
                          capture_output=True, text=True)


def renamed_reversed_copy(src, dest):
    """A graph the models never saw: a test graph under a new name with its configurations in reverse order."""
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for key in ("node_config_feat", "config_feat", "config_runtime", "config_runtime_normalizers"):
        if key in arrays:
            arrays[key] = arrays[key][::-1].copy()
    return write_npz(dest, arrays)


def test_ranking_table_orders_best_first(tmp_path):
    table = ranking_table(tmp_path / "g.npz", LAYOUT, "lgbm", "g", np.array([0.5, -1.0, 0.5, 2.0]))
    assert table["config_index"].tolist() == [1, 0, 2, 3] and table["rank"].tolist() == [1, 2, 3, 4]
    assert table["score"].tolist() == [-1.0, 0.5, 0.5, 2.0]


def test_graphs_featurised_from_hlo_text_are_kept_beside_the_csv(tmp_path):
    """keep_graphs copies the featurised tree next to the CSV, points graph_file there, replaces an earlier run's
    folder, and refuses a folder of other files or one holding the input."""
    work = tmp_path / "work"
    graph = work / "npz" / "layout" / "xla" / "random" / "test" / "mine.npz"
    graph.parent.mkdir(parents=True)
    graph.write_bytes(b"npz bytes")
    (work / "featurize.json").write_text("{}")
    table = ranking_table(graph, LAYOUT, "lgbm", "mine", np.array([0.3, 0.1]))
    dest = graphs_dir(tmp_path / "out" / "ranks.csv")
    assert dest == tmp_path / "out" / "ranks_graphs"
    kept = keep_graphs(table, work, dest, tmp_path / "mine.hlo.txt")
    assert list(kept["graph_file"]) == [str(dest / "npz/layout/xla/random/test/mine.npz")] * 2
    assert (dest / "npz/layout/xla/random/test/mine.npz").read_bytes() == b"npz bytes"
    assert list(kept["config_index"]) == [1, 0] and list(table["graph_file"]) == [str(graph)] * 2
    graph.write_bytes(b"second run")                                # a second run replaces the first's graphs
    keep_graphs(table, work, dest, tmp_path / "mine.hlo.txt")
    assert (dest / "npz/layout/xla/random/test/mine.npz").read_bytes() == b"second run"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ranks_graphs"]      # no .tmp left behind
    (dest / "notes.md").write_text("mine")
    with pytest.raises(PredictError, match="holds files predict did not write"):
        keep_graphs(table, work, dest, tmp_path / "mine.hlo.txt")
    assert (dest / "notes.md").read_text() == "mine"
    inside = tmp_path / "in_graphs" / "p.hlo.txt"
    with pytest.raises(PredictError, match="holds the input"):
        keep_graphs(table, work, tmp_path / "in_graphs", inside)
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(PredictError, match="is a file"):
        keep_graphs(table, work, tmp_path / "a_file", tmp_path / "mine.hlo.txt")


def test_kernel_label_names_a_tile_graphs_fusions():
    assert kernel_label([]) == ""
    assert kernel_label(["fusion.3"]) == " kernel fusion.3"
    assert kernel_label(["f.1", "f.2", "f.3"]) == " kernel f.1 (= f.2, f.3)"
    assert kernel_label([f"f.{i}" for i in range(10)]) == " kernel f.0 (= f.1, f.2, f.3 and 6 more)"


def test_a_folder_names_the_files_it_leaves_out(tmp_path, capsys):
    folder = tmp_path / "graphs"
    for name in ("b.npz", "sub/a.npz", "C.NPZ", "notes.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")
    assert input_files(folder) == [folder / "b.npz", folder / "sub/a.npz"]
    assert capsys.readouterr().err == (f"warning: {folder}: left out 2 files that are not *.npz graph files: "
                                       "C.NPZ, notes.txt\n")
    input_files(folder / "b.npz")                                        # a file: nothing else to name
    assert capsys.readouterr().err == ""



def test_an_entry_named_npz_that_is_no_file_is_named(tmp_path):
    """A folder holding good graphs beside a folder named `x.npz` or a dangling `y.npz` link was refused as
    'expected an .npz graph file or a folder holding some', naming the folder given, not the entry at fault."""
    folder = tmp_path / "graphs"
    (folder / "x.npz").mkdir(parents=True)
    (folder / "good.npz").write_bytes(b"")
    with pytest.raises(PredictError) as info:
        input_files(folder)
    assert str(info.value) == f"{folder / 'x.npz'}: expected an .npz graph file (in {folder}); found a folder"
    (folder / "x.npz").rmdir()
    (folder / "y.npz").symlink_to(tmp_path / "gone.npz")
    with pytest.raises(PredictError) as info:
        input_files(folder)
    assert str(info.value) == (f"{folder / 'y.npz'}: expected an .npz graph file (in {folder}); found a dangling "
                               f"link to {tmp_path / 'gone.npz'}")
    with pytest.raises(PredictError) as info:
        input_files(tmp_path / "none.npz")
    assert str(info.value) == f"{tmp_path / 'none.npz'}: expected an .npz graph file or a folder holding some"


def test_kind_and_collection_come_from_the_file(tiny_npz, tmp_path):
    assert file_kind(tiny_npz["layout"]) == "layout" and file_kind(tiny_npz["tile"]) == "tile"
    official = tmp_path / "npz" / "layout" / "nlp" / "default" / "test" / "g.npz"
    official.parent.mkdir(parents=True)
    assert path_collection(official) == Collection.parse("layout:nlp:default")
    with pytest.raises(PredictError, match="a tile graph, but the layout:xla:random model ranks layout graphs"):
        resolve_collection(tiny_npz["tile"], "layout-xla-random")
    assert resolve_collection(tiny_npz["layout"], None) == LAYOUT          # from the official folders
    loose = shutil.copy(tiny_npz["layout"], tmp_path / "loose.npz")
    with pytest.raises(PredictError, match="loose.npz: collection unknown .* pass --collection"):
        resolve_collection(loose, None)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lgbm", "gnn", "ensemble", "heuristic"])
def test_predict_ranks_like_the_stage_and_ranks_an_unseen_graph(repo, tmp_path, model):
    """On a test graph, predict's scores are the stage's test predictions; on a graph the models never saw (the
    same graph renamed, configurations reversed) they are those scores reversed (the GNN's TTA orderings depend
    on the graph id, so to float tolerance). The CSV ranks every config once, the top K is printed."""
    from scipy.stats import kendalltau

    dest, env = repo
    slug = "layout-xla-random"
    src = sorted((dest / "data" / "synthetic" / "npz" / "layout" / "xla" / "random" / "test").glob("*.npz"))[0]
    stage = load_predictions(predictions_path(dest / "predictions", model, slug, "test"))[src.stem]
    unseen = renamed_reversed_copy(src, tmp_path / "unseen.npz")
    for path, expected, atol in ((src, stage, 1e-9), (unseen, stage[::-1], 1e-5)):
        out = tmp_path / f"{model}-{path.stem}.csv"
        result = predict(dest, env, path, "--model", model, "--collection", slug, "--top", 3, "--out", out)
        assert result.returncode == 0, result.stderr[-2000:]
        table = pd.read_csv(out)
        n = len(expected)
        assert table["rank"].tolist() == list(range(1, n + 1)) and set(table["graph_id"]) == {path.stem}
        assert sorted(table["config_index"]) == list(range(n)) and set(table["model"]) == {model}
        assert f"top 3 of {n}: " + ", ".join(map(str, table["config_index"].head(3))) in result.stdout
        scores = table.sort_values("config_index")["score"].to_numpy()
        np.testing.assert_allclose(scores, expected, rtol=0, atol=atol)
        assert kendalltau(scores, expected).statistic > 0.99


@pytest.mark.slow
def test_predict_refuses_a_wrong_kind_and_a_dvc_output_path(repo, tmp_path):
    dest, env = repo
    tile = sorted((dest / "data" / "synthetic" / "npz" / "tile" / "xla" / "test").glob("*.npz"))[0]
    copy = shutil.copy(tile, tmp_path / "t.npz")
    refused = predict(dest, env, copy, "--model", "lgbm", "--collection", "layout-nlp-default")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        f"error: {copy}: a tile graph, but the layout:nlp:default model ranks layout graphs"]
    inside = predict(dest, env, tile, "--model", "heuristic", "--out", "predictions/x.csv")
    assert inside.returncode == 2 and "inside paths.predictions_dir" in inside.stderr
    ok = predict(dest, env, tile, "--model", "heuristic")         # collection from the official path
    assert ok.returncode == 0, ok.stderr[-2000:]
    written = list((dest / "runs" / "predict").glob("heuristic-tile-xla-*.csv"))
    assert len(written) == 1 and len(pd.read_csv(written[0])) > 0
    run(["git", "check-ignore", "-q", str(written[0].relative_to(dest))], dest, env)


@pytest.mark.slow
def test_predict_ranks_hlo_text_of_a_program_it_never_saw(repo, tmp_path, jax_hlo):
    """HLO text (a compiled JAX program) is featurised, then each graph is ranked by its collection's model."""
    dest, env = repo
    program = tmp_path / "mine.hlo.txt"
    program.write_text(jax_hlo["compiled"])
    out = tmp_path / "ranks.csv"
    done = predict(dest, env, program, "--model", "lgbm", "--top", "2", "--out", out)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert set(table["collection"]) == {"tile:xla", "layout:xla:random", "layout:xla:default"}
    assert set(table["source_file"]) == {str(program)}
    kept = tmp_path / "ranks_graphs"                  # the graphs ranked, so that a config_index names a configuration
    assert f"kept the graphs ranked in {kept}" in done.stdout
    for (collection, graph_file), rows in table.groupby(["collection", "graph_file"]):
        assert graph_file.startswith(f"{kept}/npz/") and Path(graph_file).is_file()
        split = Path(graph_file).parent.name
        assert load_graph(graph_file, collection, split).n_configs == len(rows)
    for collection in ("layout:xla:random", "layout:xla:default"):   # one summary line per layout collection
        assert f"{program} ({collection}, lgbm): top 2 of " in done.stdout
    kernels = kernel_names(kept)                       # a line per tile graph, naming its fusion instructions
    tile_files = table.loc[table["collection"] == "tile:xla", "graph_file"]
    assert kernels and set(kernels) == {Path(f).name for f in tile_files}
    for fusions in kernels.values():
        assert f"{program}{kernel_label(fusions)} (tile:xla, lgbm): top " in done.stdout   # top 1 of 1, top 2 of 12
    for (_, graph_id), rows in table.groupby(["collection", "graph_id"]):   # every config ranked exactly once
        assert sorted(rows["rank"]) == list(range(1, len(rows) + 1))
        assert sorted(rows["config_index"]) == list(range(len(rows)))
    refused = predict(dest, env, program, "--collection", "tile-xla", "--out", tmp_path / "x.csv")
    assert refused.returncode != 0 and "drop --collection" in refused.stderr
