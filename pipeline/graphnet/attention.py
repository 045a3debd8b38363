"""Cross-configuration attention: let the configs of one batch compare with each other along the configs axis.

Both layers are permutation-equivariant over configs (permuting the input configs permutes the output the same
way) because they use no positional information on that axis. They make a prediction depend on the other configs of
its batch, which is why inference averages several random config orderings (TTA).

- `ConfigGate` (per node, inside every SAGE block): the 1st-place layer, a learned-temperature softmax over the
  configs that re-weights each feature, concatenated with its input to keep the config's own signal. Here the
  weights are scaled by the number of configs (mean weight 1), so the layer means the same at 64 training configs
  and at a few hundred inference configs.
- `ConfigCenter` (per node, inside every SAGE block): x mixed with x minus its mean over the configs. Configs of a
  `default` search differ from each other in a few nodes only; centering along the configs axis cancels what they
  share, so the few nodes a config changes stand out instead of being a small change on a large embedding.
- `ConfigSelfAttention` (per config, after pooling): a pre-norm transformer block (multi-head attention + MLP)
  over the pooled config embeddings, without positional encodings, so each config attends to all others.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.choices import GNN_MIXERS


class ConfigGate(nn.Module):
    """[configs, nodes, dim] -> [configs, nodes, dim]: x and x * (configs * softmax_configs(x / T)), mixed linearly."""

    def __init__(self, dim: int, temperature: float = 0.5):
        super().__init__()
        self.temperature = nn.Parameter(torch.tensor(float(temperature)))
        self.mix_self = nn.Linear(dim, dim)               # W [x, x*w] written as two matmuls (no concat copy)
        self.mix_cross = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_configs = x.shape[0]
        temperature = self.temperature.abs().clamp(min=1e-2)
        weights = torch.softmax(x.float() / temperature, dim=0).to(x.dtype) * n_configs  # [configs, nodes, dim]
        return self.mix_self(x) + self.mix_cross(x * weights)                             # [configs, nodes, dim]


class ConfigCenter(nn.Module):
    """[configs, nodes, dim] -> [configs, nodes, dim]: W_self x + W_diff (x - mean over configs of x)."""

    def __init__(self, dim: int):
        super().__init__()
        self.mix_self = nn.Linear(dim, dim)
        self.mix_diff = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # = (W_self + W_diff) x + b_self - W_diff mean(x): one matmul over every config instead of two (an epoch
        # 0.92x on layout-xla-random); on trained default-search models the config-dependent part of the output
        # keeps its float32 error within 1.25x of the explicit centering's (docs/decisions.md, "Faster steps")
        shift = F.linear(x.mean(dim=0, keepdim=True), self.mix_diff.weight)          # [1, nodes, dim]
        return F.linear(x, self.mix_self.weight + self.mix_diff.weight, self.mix_self.bias) - shift


MIXERS = dict(zip(GNN_MIXERS, (ConfigGate, ConfigCenter)))


class ConfigSelfAttention(nn.Module):
    """[configs, dim] -> [configs, dim]: x + MHA(LN(x)) over configs, then x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x).unsqueeze(0)                               # [1, configs, dim]: one sequence of configs
        attended, _ = self.attn(h, h, h, need_weights=False)         # [1, configs, dim]
        x = x + attended.squeeze(0)                                  # [configs, dim]
        return x + self.mlp(self.norm2(x))
