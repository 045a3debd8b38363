"""Architecture templates for the layout collections: `xla` = convolutional nets, `nlp` = transformer encoders.

Each template grows blocks until the graph reaches a target node count, so presets control graph size without
changing what the graphs look like. Shapes, dimension numbers and opcodes follow XLA's HLO for these models.
"""
from __future__ import annotations

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import NCHW, NHWC, ConvDims, HloBuilder, HloGraph, Window


class _ConvNet:
    """Conv-net building blocks over one activation data format (NHWC or NCHW)."""

    def __init__(self, b: HloBuilder, dims: ConvDims, rng: np.random.Generator, batch_stats: bool):
        self.b, self.dims, self.rng, self.batch_stats = b, dims, rng, batch_stats

    def act_shape(self, n, h, w, c):
        return (n, h, w, c) if self.dims is NHWC else (n, c, h, w)

    def hwc(self, x):
        s = self.b.shape(x)
        return (s[1], s[2], s[3]) if self.dims is NHWC else (s[2], s[3], s[1])

    def conv(self, x, cout, k, stride=1, base_dilation=1):
        n = self.b.shape(x)[0]
        h, w, cin = self.hwc(x)
        kshape = (k, k, cin, cout) if self.dims is NHWC else (cout, cin, k, k)
        kernel = self.b.parameter(kshape)
        pad = (k - 1) // 2
        window = Window((k, k), (stride, stride), (pad, pad), (k - 1 - pad, k - 1 - pad),
                        base_dilation=(base_dilation, base_dilation))
        ho, wo = -(-h * base_dilation // stride), -(-w * base_dilation // stride)
        return self.b.conv(x, kernel, self.act_shape(n, ho, wo, cout), window, self.dims)

    def per_channel(self, x, opcode):
        c = self.hwc(x)[2]
        param = self.b.parameter((c,), dtype="f32" if self.b.dtype == "f32" else self.b.dtype)
        return self.b.binary(opcode, x, self.b.broadcast(param, self.b.shape(x), (self.dims.output_feature,)))

    def norm(self, x):
        b, f = self.b, self.dims.output_feature
        if self.batch_stats:   # batch statistics: mean and variance over every dimension but the feature one
            axes = [i for i in range(4) if i != f]
            count = b.scalar_like(x)
            mean = b.broadcast(b.reduce(x, axes), b.shape(x), (f,))
            centered = b.binary(op.SUBTRACT, x, b.binary(op.DIVIDE, mean, count))
            var = b.reduce(b.binary(op.MULTIPLY, centered, centered), axes)
            inv = b.unary(op.RSQRT, b.binary(op.ADD, b.broadcast(var, b.shape(x), (f,)), b.scalar_like(x)))
            x = b.binary(op.MULTIPLY, centered, inv)
        return self.per_channel(self.per_channel(x, op.MULTIPLY), op.ADD)

    def relu(self, x):
        return self.b.binary(op.MAXIMUM, x, self.b.scalar_like(x))

    def conv_bn_relu(self, x, cout, k, stride=1):
        return self.relu(self.norm(self.conv(x, cout, k, stride)))

    def residual(self, x, cout, stride, bottleneck):
        if bottleneck:
            y = self.conv_bn_relu(x, cout // 4, 1)
            y = self.conv_bn_relu(y, cout // 4, 3, stride)
            y = self.norm(self.conv(y, cout, 1))
        else:
            y = self.conv_bn_relu(x, cout, 3, stride)
            y = self.norm(self.conv(y, cout, 3))
        if stride != 1 or self.hwc(x)[2] != cout:
            x = self.norm(self.conv(x, cout, 1, stride))
        return self.relu(self.b.binary(op.ADD, x, y))

    def inception(self, x, cout):
        widths = [cout // 4, cout // 4, cout // 4, cout - 3 * (cout // 4)]
        a = self.conv_bn_relu(x, widths[0], 1)
        c = self.conv_bn_relu(self.conv_bn_relu(x, widths[1], 1), widths[1], 3)
        d = self.conv_bn_relu(self.conv_bn_relu(x, widths[2], 1), widths[2], 5)
        e = self.conv_bn_relu(self.pool(x, 3, 1), widths[3], 1)
        return self.b.concatenate([a, c, d, e], self.dims.output_feature)

    def squeeze_excite(self, x):
        b, f = self.b, self.dims.output_feature
        n, c = b.shape(x)[0], self.hwc(x)[2]
        spatial = [i for i in range(4) if i not in (0, f)]
        pooled = b.reduce(x, spatial)                                           # [n, c]
        hidden = max(8, c // 16)
        s = self.relu_2d(b.dot(pooled, b.parameter((c, hidden)), 1, 0))
        s = b.unary(op.LOGISTIC, b.dot(s, b.parameter((hidden, c)), 1, 0))     # [n, c]
        s = b.reshape(s, self.act_shape(n, 1, 1, c))
        s = b.reshape(s, (n, c))
        return b.binary(op.MULTIPLY, x, b.broadcast(s, b.shape(x), (0, f)))

    def relu_2d(self, x):
        return self.b.binary(op.MAXIMUM, x, self.b.scalar_like(x))

    def pool(self, x, k, stride):
        n, (h, w, c) = self.b.shape(x)[0], self.hwc(x)
        size = self.act_shape(1, k, k, 1)
        strides = self.act_shape(1, stride, stride, 1)
        pad = tuple((s - 1) // 2 for s in size)
        window = Window(size, strides, pad, tuple(s - 1 - p for s, p in zip(size, pad)))
        return self.b.reduce_window(x, self.act_shape(n, -(-h // stride), -(-w // stride), c), window)

    def upsample(self, x):
        """Nearest-neighbour 2x: reshape to rank 6, broadcast the new axes, reshape back."""
        b = self.b
        n, (h, w, c) = b.shape(x)[0], self.hwc(x)
        if self.dims is NHWC:
            small, big, bdims = (n, h, 1, w, 1, c), (n, h, 2, w, 2, c), (0, 1, 2, 3, 4, 5)
        else:
            small, big, bdims = (n, c, h, 1, w, 1), (n, c, h, 2, w, 2), (0, 1, 2, 3, 4, 5)
        y = b.broadcast(b.reshape(x, small), big, bdims)
        return b.reshape(y, self.act_shape(n, 2 * h, 2 * w, c))


def conv_net(rng: np.random.Generator, target_nodes: int) -> tuple[HloGraph, str]:
    """A ResNet/Inception/U-Net-like image model; returns (graph, benchmark name)."""
    dims = NHWC if rng.random() < 0.7 else NCHW
    dtype = str(rng.choice(["bf16", "f32"], p=[0.7, 0.3]))
    b = HloBuilder(dtype)
    net = _ConvNet(b, dims, rng, batch_stats=bool(rng.random() < 0.4))
    n, hw = int(rng.choice([8, 16, 32, 64, 128])), int(rng.choice([32, 64, 128, 224]))
    width = int(rng.choice([16, 32, 64]))
    family = str(rng.choice(["resnet", "inception", "unet", "senet"]))
    bottleneck = bool(rng.random() < 0.5)
    x = b.parameter(net.act_shape(n, hw, hw, 3))
    x = net.conv_bn_relu(x, width, int(rng.choice([3, 7])), 2)
    if hw >= 128:
        x = net.pool(x, 3, 2)
    skips, blocks = [], 0
    budget = target_nodes - 60
    while len(b.nodes) < budget:
        h, w, c = net.hwc(x)
        down = blocks % int(rng.integers(2, 5)) == 0 and h > 4 and blocks > 0
        cout = min(2048, c * 2) if down else c
        if family == "unet" and down and len(skips) < 4:
            skips.append(x)
        if family == "inception" and not down:
            x = net.inception(x, cout)
        else:
            x = net.residual(x, cout, 2 if down else 1, bottleneck)
        if family == "senet" and len(b.nodes) < budget:
            x = net.squeeze_excite(x)
        blocks += 1
    while skips:   # decoder: upsample (reshape/broadcast or transposed convolution) and join the skip connection
        skip = skips.pop()
        x = net.upsample(x) if rng.random() < 0.5 else net.conv(x, net.hwc(x)[2], 3, 1, base_dilation=2)
        if net.hwc(x)[:2] == net.hwc(skip)[:2]:
            x = net.conv_bn_relu(b.concatenate([x, skip], dims.output_feature), net.hwc(skip)[2], 3)
    spatial = [i for i in range(4) if i not in (0, dims.output_feature)]
    c = net.hwc(x)[2]
    pooled = b.binary(op.DIVIDE, b.reduce(x, spatial), b.broadcast(b.constant(), (n, c), ()))
    classes = int(rng.choice([10, 100, 1000]))
    logits = b.binary(op.ADD, b.dot(pooled, b.parameter((c, classes)), 1, 0),
                      b.broadcast(b.parameter((classes,)), (n, classes), (1,)))
    name = f"{family}{blocks}_batch_{n}_{hw}px_{'nhwc' if dims is NHWC else 'nchw'}_{dtype}"
    return b.finish([_softmax(b, logits, 1)]), name


def _softmax(b: HloBuilder, x: int, axis: int) -> int:
    keep = tuple(i for i in range(len(b.shape(x))) if i != axis)
    m = b.broadcast(b.reduce(x, [axis]), b.shape(x), keep)
    e = b.unary(op.EXPONENTIAL, b.binary(op.SUBTRACT, x, m))
    return b.binary(op.DIVIDE, e, b.broadcast(b.reduce(e, [axis]), b.shape(x), keep))


def _layer_norm(b: HloBuilder, x: int) -> int:
    """Layer norm over the last axis of a [tokens, d] or [batch, seq, d] tensor."""
    shape, last = b.shape(x), len(b.shape(x)) - 1
    keep = tuple(range(last))
    mean = b.broadcast(b.binary(op.MULTIPLY, b.reduce(x, [last]), b.broadcast(b.constant(), shape[:-1], ())),
                       shape, keep)
    centered = b.binary(op.SUBTRACT, x, mean)
    var = b.reduce(b.binary(op.MULTIPLY, centered, centered), [last])
    inv = b.unary(op.RSQRT, b.binary(op.ADD, var, b.broadcast(b.constant(), shape[:-1], ())))
    y = b.binary(op.MULTIPLY, centered, b.broadcast(inv, shape, keep))
    gamma, beta = b.parameter(shape[-1:]), b.parameter(shape[-1:])
    y = b.binary(op.MULTIPLY, y, b.broadcast(gamma, shape, (last,)))
    return b.binary(op.ADD, y, b.broadcast(beta, shape, (last,)))


def _dense(b: HloBuilder, x: int, d_out: int) -> int:
    """[tokens, d_in] x [d_in, d_out] + bias."""
    tokens, d_in = b.shape(x)
    y = b.dot(x, b.parameter((d_in, d_out)), 1, 0)
    return b.binary(op.ADD, y, b.broadcast(b.parameter((d_out,)), (tokens, d_out), (1,)))


def _gelu(b: HloBuilder, x: int) -> int:
    """tanh approximation: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))."""
    cube = b.binary(op.MULTIPLY, b.binary(op.MULTIPLY, x, x), x)
    inner = b.binary(op.ADD, x, b.binary(op.MULTIPLY, cube, b.scalar_like(x)))
    t = b.unary(op.TANH, b.binary(op.MULTIPLY, inner, b.scalar_like(x)))
    return b.binary(op.MULTIPLY, b.binary(op.MULTIPLY, x, b.scalar_like(x)), b.binary(op.ADD, t, b.scalar_like(x)))


def _attention(b: HloBuilder, x2: int, batch: int, seq: int, heads: int, fused_qkv: bool, mask: int) -> int:
    """Multi-head self-attention on [batch*seq, d] tokens; returns [batch*seq, d]."""
    d = b.shape(x2)[1]
    dh = d // heads
    if fused_qkv:
        qkv = _dense(b, x2, 3 * d)
        parts = [b.slice(qkv, (0, i * d), (batch * seq, (i + 1) * d)) for i in range(3)]
    else:
        parts = [_dense(b, x2, d) for _ in range(3)]
    q, k, v = (b.transpose(b.reshape(p, (batch, seq, heads, dh)), (0, 2, 1, 3)) for p in parts)  # [b, h, s, dh]
    scores = b.dot(q, k, 3, 3, n_batch=2)                                                            # [b, h, s, s]
    scores = b.binary(op.MULTIPLY, scores, b.scalar_like(scores))
    scores = b.binary(op.ADD, scores, b.broadcast(mask, b.shape(scores), (0, 3)))
    ctx = b.dot(_softmax(b, scores, 3), v, 3, 2, n_batch=2)                                         # [b, h, s, dh]
    ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3)), (batch * seq, d))                               # [b*s, d]
    return _dense(b, ctx, d)


def transformer(rng: np.random.Generator, target_nodes: int) -> tuple[HloGraph, str]:
    """A BERT-like encoder: embedding lookup, attention, layer norm, MLP; returns (graph, benchmark name)."""
    b = HloBuilder(str(rng.choice(["bf16", "f32"], p=[0.5, 0.5])))
    batch, seq = int(rng.choice([1, 4, 8, 16, 32])), int(rng.choice([64, 128, 256, 512]))
    d = int(rng.choice([128, 256, 512, 768, 1024]))
    heads, vocab = max(2, d // 64), int(rng.choice([8192, 30522, 32000]))
    fused_qkv = bool(rng.random() < 0.5)
    ids = b.parameter((batch, seq), dtype="s32")
    x = b.gather(b.parameter((vocab, d)), ids, (batch, seq, d))
    x = b.binary(op.ADD, x, b.broadcast(b.parameter((seq, d)), (batch, seq, d), (1, 2)))
    mask = b.parameter((batch, seq))
    x = b.reshape(_layer_norm(b, x), (batch * seq, d))                                              # [b*s, d]
    b.begin_computation()
    layers = 0
    while len(b.nodes) < target_nodes - 40:
        x = _layer_norm(b, b.binary(op.ADD, x, _attention(b, x, batch, seq, heads, fused_qkv, mask)))
        h = _dense(b, _gelu(b, _dense(b, x, 4 * d)), d)
        x = _layer_norm(b, b.binary(op.ADD, x, h))
        layers += 1
    first = b.reshape(b.slice(b.reshape(x, (batch, seq, d)), (0, 0, 0), (batch, 1, d)), (batch, d))
    pooled = b.unary(op.TANH, _dense(b, first, d))
    logits = _dense(b, pooled, int(rng.choice([2, 3, 10])))
    name = f"bert_L-{layers}_H-{d}_A-{heads}_batch_size_{batch}_seq_{seq}_{'fused' if fused_qkv else 'qkv'}"
    return b.finish([_softmax(b, logits, 1)]), name


TEMPLATES = {"xla": conv_net, "nlp": transformer}
