"""DistributedDataParallel plumbing for `torchrun --nproc_per_node=N -m pipeline.gnn ...`.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; without them everything runs as a single
process (rank 0 of 1). Backend: gloo on CPU, nccl on CUDA. Graphs are sharded across ranks; rank 0 writes outputs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group torchrun describes (no-op for a single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def gather_objects(obj, info: DistInfo) -> list:
    """Every rank's `obj`, in rank order, on every rank ([obj] when not distributed)."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world
    dist.all_gather_object(out, obj)
    return out


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


def average_gradients(model: torch.nn.Module, info: DistInfo) -> None:
    """Mean of every trainable parameter's gradient over the ranks (what DDP does for a model that is not
    wrapped: GST runs its segments outside one forward call). A missing gradient counts as zeros."""
    if not info.enabled:
        return
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= info.world
