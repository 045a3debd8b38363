"""How well each GNN member of a collection ranks its own train graphs, beside valid: underfit or overfit?

    python benchmarks/train_fit.py --collection layout-xla-random [overrides, e.g. data=programs]

Loads every member of gnn.seeds from `<models_dir>/gnn/<slug>/` (run stage gnn first) and scores every configuration
of the pruned train and valid graphs through the stage's own inference path (`graphnet.scoring.member_predictions`,
the member's TTA orderings). Prints, per member and split, the mean over graphs of the collection's score (Kendall tau
on layout, the top-5 tile score on tile) and each graph's. A train score far below the dataset's ceiling says the
model cannot fit even the graphs it trains on (capacity, inputs, optimisation), not only that it fails to generalise.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.config import load_cfg  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.graphnet.members import member_seed  # noqa: E402
from pipeline.graphnet.scoring import load_member, member_predictions  # noqa: E402
from pipeline.graphnet.train_loop import pick_device  # noqa: E402
from pipeline.pruned import iter_split  # noqa: E402
from pipeline.scoring.metrics import graph_score  # noqa: E402
from pipeline.settings.gnn import gnn_settings  # noqa: E402
from pipeline.tpugraphs.dataset import Collection  # noqa: E402
from pipeline.tpugraphs.schema import LABELLED_SPLITS  # noqa: E402


def split_scores(model, collection: Collection, graphs: list, settings, member: int, device) -> list[float]:
    """The collection's score of every graph of one split under one member (original config order)."""
    preds = member_predictions(model, collection.kind, graphs, settings, member_seed(settings.seed, member), device)
    return [graph_score(collection.kind, preds[g.graph_id], g.config_runtime[g.config_inverse]) for g in graphs]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", required=True, help="e.g. layout-xla-random")
    args, overrides = parser.parse_known_args(argv)
    cfg = load_cfg(overrides)
    collection = Collection.parse(args.collection)
    settings = gnn_settings(cfg, collection)
    device = pick_device(settings.device)
    model_dir = Path(cfg.paths.models_dir) / "gnn" / collection.slug
    graphs = {split: list(iter_split(cfg.paths.pruned_dir, collection.slug, split)) for split in LABELLED_SPLITS}
    try:
        models = {member: load_member(model_dir, member, device, settings.infer_chunk_mb) for member in settings.members}
    except FileNotFoundError as error:
        raise SystemExit(f"error: {error}") from None
    for member, model in models.items():
        for split, split_graphs in graphs.items():
            scores = split_scores(model, collection, split_graphs, settings, member, device)
            print(f"member {member} {split}: {float(np.mean(scores)):.4f} over {len(scores)} graphs "
                  f"({' '.join(f'{s:.3f}' for s in scores)})", flush=True)


if __name__ == "__main__":
    run_main(main)
