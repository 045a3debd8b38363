"""pipeline.pruning.graph: one official file pruned into a PrunedGraph folder, whatever its name."""
from __future__ import annotations

from conftest import make_layout_arrays, write_npz
from pipeline.config import compose
from pipeline.pruned import load_pruned_graph
from pipeline.pruning.graph import prune_file, staging_path
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection

LAYOUT = Collection.parse("layout:xla:random")
LONGEST_STEM = "g" * (255 - len(".npz"))          # the longest `<id>.npz` file name a disk holds


def test_a_graph_id_as_long_as_a_file_name_allows_is_pruned(tmp_path):
    path = write_npz(tmp_path / "npz" / f"{LONGEST_STEM}.npz", make_layout_arrays())
    params = prune_settings(compose(["data=programs_ci"]), LAYOUT)
    split_dir = tmp_path / "train"
    split_dir.mkdir()
    result = prune_file(path, LAYOUT, "train", path.name, params, split_dir)
    assert result.error is None and result.row["configs"] == 4
    assert load_pruned_graph(split_dir / LONGEST_STEM).node_config_feat.shape == (4, 2, 18)
    assert [p.name for p in split_dir.iterdir()] == [LONGEST_STEM]                      # the staged file is gone
    assert len(staging_path(split_dir / LONGEST_STEM).name) == len(staging_path(split_dir / "g").name)
