"""Stage autotune verifies exactly the tile test kernels that the dataset holds."""
from __future__ import annotations

from pipeline.config import compose
from pipeline.hlo.featurize import parse_module
from pipeline.seeds import graph_rng
from pipeline.settings.programs import program_settings
from pipeline.synth.programs import sample_kernels, write_tiles
from pipeline.tpugraphs.dataset import Collection, graph_paths
from pipeline.tuning.verify_tiles import test_kernels as dataset_test_kernels
from pipeline.zoo.common import compiled_text
from pipeline.zoo.registry import programs


def test_the_verified_kernels_are_the_ones_the_dataset_writes(tmp_path):
    """programs_heldout's first xla test program: some of its sampled kernels have too few tilings and are not
    written; the stage verifies the written ones only, in order."""
    cfg = compose(["data=programs_heldout"])
    s = program_settings(cfg.data.generator, cfg.synthesize)
    program = next(p for p in programs(s.programs, s.sizes, s.seed) if p.split == "test" and p.source == "xla")
    written = write_tiles(s, Collection.parse("tile-xla"), program, tmp_path)
    verified = dataset_test_kernels(cfg, [program])
    assert len(verified) == len(written) == len(graph_paths(tmp_path, "tile-xla", "test"))
    module = parse_module(compiled_text(program.spec, program.size), program.name)
    sampled = sample_kernels(module, s.tile_kernels_per_program,
                             graph_rng(s.seed, "tile-kernels", "test", program.name))
    assert len(verified) < len(sampled)                     # the case that differed: kernels skipped by the dataset
