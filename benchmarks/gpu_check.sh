#!/usr/bin/env bash
# One-shot check of the GPU path on a CUDA machine (see benchmarks/gpu_check.py): gnn=kaggle training with bf16
# autocast, GST, DDP over nccl (torchrun --nproc_per_node=1), inference, CPU/GPU agreement, determinism.
# Writes benchmarks/results/gpu.md. Runs in under 8 minutes (`timeout` below).
#
#   bash benchmarks/gpu_check.sh              # on the GPU machine, from a copy of the repository
#   bash benchmarks/gpu_check.sh --cpu-only --tiny --out /tmp/gpu.md   # no CUDA (what tests/test_gpu_check.py runs)
#
# Python: $PYTHON if set, else .venv/bin/python when present, else python3. When that interpreter has no torch, a
# venv is created in .venv-gpu and requirements.txt installed into it (needs network; torch==2.13.0 from PyPI is
# the CUDA build on Linux x86_64, so the same pin serves CPU and GPU). Offline, with a python that has CUDA torch:
# the check needs hydra-core, omegaconf and antlr4-python3-runtime beside it (`pip wheel --no-deps` them elsewhere,
# `pip install --no-index --target DIR` there, PYTHONPATH=DIR); so it ran on an H200 (docs/results.md, "Scale").
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "gpu_check: $PY has no torch; creating .venv-gpu from requirements.txt" >&2
  python3 -m venv .venv-gpu
  .venv-gpu/bin/pip install --quiet -r requirements.txt
  PY=.venv-gpu/bin/python
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE WANDB_MODE=disabled
exec timeout "${GPU_CHECK_TIMEOUT:-470}" "$PY" -m benchmarks.gpu_check "$@"
