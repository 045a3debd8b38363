"""Tool featurize: your own XLA HLO programs as TpuGraphs test graphs, in the official npz folder layout.

`python -m pipeline.featurize PROGRAM.hlo.txt [more files] --out DIR [--train-from ROOT] [overrides]` writes, per
program, `DIR/npz/layout/xla/{random,default}/test/<stem>.npz` (the whole module; needs a convolution, dot or
reshape) and `DIR/npz/tile/xla/test/<stem>_<hash>.npz` (one per distinct fused kernel; needs optimised text),
test split, runtimes all zero. Settings: the `featurize` conf group. Every program is parsed before anything is
written; each collection's test folder is staged, validated with the data layer and then swapped in whole, so a
crash leaves the previous folder. DIR may not be a folder the DVC stages write (paths.*) nor an existing dataset
whose graphs featurize did not write (`DIR/featurize.json` records its own); a program that gives no graph is named
with the reason. `--train-from ROOT` links the train and valid splits of an existing dataset root
(e.g. the built-in one; hard links, copies across file systems) beside the test files, so the pipeline
trains on ROOT and ranks your programs:
`python -m pipeline.config data=tpugraphs data.root=DIR 'data.collections=[...]' && dvc repro`.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from pipeline.errors import run_main
from pipeline.files import given_path, output_error
from pipeline.config import load_cfg, module_prog, stage_output_key
from pipeline.overrides import split_overrides, value_flags
from pipeline.featurizer.dataset import featurize
from pipeline.hlo.featurize import HloParseError
from pipeline.settings.featurize import featurize_settings
from pipeline.tpugraphs.schema import NPZ_SUBDIR


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=module_prog("featurize"), description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+", type=given_path, help="HLO module text files")
    parser.add_argument("--out", required=True, type=given_path, help="dataset root to write (DIR/npz/...)")
    parser.add_argument("--train-from", type=given_path, help="dataset root whose train/valid splits are linked in")
    overrides, rest = split_overrides(argv, value_flags(parser))
    args = parser.parse_args(rest)
    cfg = load_cfg(overrides)
    if "featurize" not in cfg:
        raise SystemExit("featurize: the configuration has no `featurize` group; regenerate params.yaml with "
                         "`python -m pipeline.config` (or pass overrides)")
    settings = featurize_settings(cfg)
    key = stage_output_key(cfg, args.out, "--out")
    if key is not None:
        raise SystemExit(f"featurize: --out {args.out}: inside paths.{key} ({cfg.paths[key]}), which DVC stages "
                         f"write; choose a folder elsewhere")
    try:
        done = featurize(args.programs, args.out, settings, args.train_from)
    except (HloParseError, ValueError) as err:
        raise SystemExit(f"featurize: {err}") from None
    except OSError as err:                  # making or writing --out (the programs are read in read_hlo_text)
        out = os.path.abspath(args.out)
        if err.filename is not None and os.path.commonpath([out, os.path.abspath(err.filename)]) == out:
            err = output_error("--out", args.out, err)
        raise SystemExit(f"featurize: {err}") from None
    counts = done.counts
    if not any(counts.values()):
        raise SystemExit("featurize: " + "; ".join(f"{path}: {why}" for path, why in done.empty.items())
                         + "; nothing written")
    print(f"wrote {args.out / NPZ_SUBDIR} (test split): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for path, why in done.empty.items():       # programs that gave nothing, named (the others were written)
        print(f"  skipped {path}: {why}")
    for slug, count in counts.items():
        if count == 0:
            print(f"  {slug}: no graph (layout needs a convolution, dot or reshape; tile needs fused kernels, "
                  f"i.e. optimised HLO such as .compile().as_text())")
    written = ",".join(k for k, v in counts.items() if v)
    if written:
        print(f"next: python -m pipeline.config data=tpugraphs data.root={args.out} 'data.collections=[{written}]'"
              " && dvc repro")


if __name__ == "__main__":
    run_main(main)
