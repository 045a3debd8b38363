"""Decoding HLO instruction attributes (`window=`, `dim_labels=`, `slice=`, `padding=`, ...) into `HloNode` fields.

Every decoder takes the raw attribute text and raises ValueError(what was expected) on anything else; the caller
(`pipeline.hlo.lower`) turns that into an `HloParseError` naming the line.
"""
from __future__ import annotations

import re
from math import prod

from pipeline.errors import shortened
from pipeline.files import INT64_MAX   # XLA parses every integer attribute as an int64 (its lexer refuses a larger one)
from pipeline.hlo.graph import ConvDims, DotDims, Window
from pipeline.hlo.lexing import split_top
from pipeline.hlo.text import Instruction
from pipeline.tpugraphs.schema import FLOAT32_MAX   # node_feat is float32: a product of window sizes beyond it

# Attributes naming called computations, in the order XLA keeps them in `called_computations`.
CALLED_KEYS = ("calls", "to_apply", "body", "condition", "select", "scatter", "true_computation",
               "false_computation", "branch_computations", "called_computations")
_INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits: \d and int() also take '٣', '1_0', '+3', which XLA refuses


def is_int64(text: str) -> bool:
    """`text` is an ASCII decimal integer within int64 (no int() of a 5000-digit string, which raises)."""
    return _INTEGER.fullmatch(text) is not None and len(text.lstrip("-").lstrip("0")) <= 19 and \
        abs(int(text)) <= INT64_MAX


def integer(value: str, what: str = "an integer", low: int | None = None) -> int:
    """'3' -> 3 (a parameter number, a group count, an iota dimension); an int64, ASCII digits, >= `low`."""
    if not is_int64(value.strip()) or (low is not None and int(value) < low):
        bound = "within int64" if low is None else f">= {low} (within int64)"
        raise ValueError(f"{what} {bound}, found {shortened(value)}")
    return int(value)


def int_list(value: str, what: str = "a list of integers {0,1,...}", low: int | None = None) -> tuple[int, ...]:
    """'{0,1}' -> (0, 1); '{}' -> (); each an int64 >= `low`."""
    text = value.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(what)
    items = split_top(text[1:-1])
    if not all(is_int64(v) and (low is None or int(v) >= low) for v in items):
        raise ValueError(f"{what} ({'int64s' if low is None else f'int64s >= {low}'})")
    return tuple(int(v) for v in items)


def _by_dim(text: str, sep: str, width: int, what: str) -> list[tuple[int, ...]]:
    """'1_1x2_0' (sep '_', width 2) -> [(1, 1), (2, 0)]; a window field or a padding config."""
    rows = []
    for item in text.split("x"):
        parts = item.split(sep) if sep else [item]
        if len(parts) not in (width, width + 1) or not all(is_int64(p) for p in parts):
            raise ValueError(f"{what} (int64s)")
        rows.append(tuple(int(p) for p in parts))
    return rows


def window(value: str) -> Window:
    """'{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}' -> Window."""
    what = "a window {size=AxB stride=... pad=lo_hixlo_hi lhs_dilate=... rhs_dilate=... rhs_reversal=...}"
    text = value.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(what)
    fields = dict(item.partition("=")[::2] for item in text[1:-1].split())
    if not fields:
        return Window((), (), (), ())
    unknown = set(fields) - {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
    if "size" not in fields or unknown:
        raise ValueError(what)
    size = [d[0] for d in _by_dim(fields["size"], "", 1, what)]
    n = len(size)

    def per_dim(key: str, default: int) -> tuple[int, ...]:
        values = [d[0] for d in _by_dim(fields[key], "", 1, what)] if key in fields else [default] * n
        if len(values) != n:
            raise ValueError(what + f" ({key} has {len(values)} dims, size has {n})")
        return tuple(values)

    pads = _by_dim(fields["pad"], "_", 2, what) if "pad" in fields else [(0, 0)] * n
    if len(pads) != n:
        raise ValueError(what + f" (pad has {len(pads)} dims, size has {n})")
    if min(size + [v for key in ("stride", "lhs_dilate", "rhs_dilate") for v in per_dim(key, 1)], default=1) < 1:
        raise ValueError(what + " (size, stride and dilations >= 1, as XLA requires)")
    return Window(tuple(size), per_dim("stride", 1), tuple(p[0] for p in pads), tuple(p[1] for p in pads),
                  per_dim("rhs_dilate", 1), per_dim("lhs_dilate", 1),
                  tuple(bool(v) for v in per_dim("rhs_reversal", 0)))


def conv_dims(value: str) -> ConvDims:
    """'b01f_01io->b01f' -> ConvDims (spatial dimensions listed by their digit)."""
    m = re.fullmatch(r"([bf\d]+)_([io\d]+)->([bf\d]+)", value.strip())
    if not m:
        raise ValueError("dim_labels like b01f_01io->b01f")
    labels = []
    for text, letters in zip(m.groups(), ("bf", "io", "bf")):
        found = {ch: i for i, ch in enumerate(text) if not ch.isdigit()}
        spatial = tuple(i for _, i in sorted((int(ch), i) for i, ch in enumerate(text) if ch.isdigit()))
        if set(found) != set(letters) or len(text) != len(spatial) + 2:
            raise ValueError("dim_labels like b01f_01io->b01f")
        labels.append((found[letters[0]], found[letters[1]], spatial))
    (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = labels
    return ConvDims(ib, if_, isp, ki, ko, ksp, ob, of, osp)


def dot_dims(attrs: dict[str, str], lhs_rank: int) -> DotDims:
    """DotDims from lhs/rhs_contracting_dims and lhs/rhs_batch_dims."""
    lhs_c, rhs_c = int_list(attrs.get("lhs_contracting_dims", "{}")), int_list(attrs.get("rhs_contracting_dims", "{}"))
    lhs_b, rhs_b = int_list(attrs.get("lhs_batch_dims", "{}")), int_list(attrs.get("rhs_batch_dims", "{}"))
    if len(lhs_c) != len(rhs_c) or len(lhs_b) != len(rhs_b):
        raise ValueError("as many lhs as rhs contracting (and batch) dimensions")
    first = (lhs_c[0], rhs_c[0]) if lhs_c else (max(lhs_rank - 1, 0), 0)
    return DotDims(first[0], first[1], len(lhs_b), lhs_c, rhs_c, lhs_b, rhs_b)


def check_dot_ranks(dot: DotDims, lhs_rank: int, rhs_rank: int) -> None:
    """ValueError unless every contracting and batch dimension indexes its operand (XLA's verifier refuses it too)."""
    for side, rank, dims in (("lhs", lhs_rank, dot.lhs_contracting_dims + dot.lhs_batch_dims),
                             ("rhs", rhs_rank, dot.rhs_contracting_dims + dot.rhs_batch_dims)):
        bad = [d for d in dims if not 0 <= d < rank]
        if bad or len(set(dims)) != len(dims):
            raise ValueError(f"{side} contracting and batch dimensions distinct and below the {side} operand's rank "
                             f"{rank}, found {bad[0] if bad else list(dims)}")


def check_conv_ranks(conv: ConvDims, size: int | None, ranks: tuple[int, int, int]) -> None:
    """ValueError unless dim_labels has as many dimensions as the input, kernel and output (`ranks`) and the window
    (`size` dims, None when not written) one per spatial dimension."""
    n_spatial = len(conv.input_spatial)
    for what, rank, spatial in zip(("input", "kernel", "output"), ranks,
                                   (conv.input_spatial, conv.kernel_spatial, conv.output_spatial)):
        if len(spatial) + 2 != rank:
            raise ValueError(f"dim_labels with one label per {what} dimension ({rank}), found {len(spatial) + 2}")
    if (size or 0) != n_spatial:
        raise ValueError(f"a window with one size per spatial dimension ({n_spatial}), found {size or 0}")


def slice_dims(value: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """'{[0:4], [2:8:2]}' -> (start, stride, limit)."""
    what = "slice={[start:limit], [start:limit:stride], ...}"
    text = value.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(what)
    start, stride, limit = [], [], []
    for item in split_top(text[1:-1]):
        m = re.fullmatch(r"\[(-?[0-9]+):(-?[0-9]+)(?::(-?[0-9]+))?\]", item)
        if not m or not all(is_int64(v) for v in m.groups() if v is not None):
            raise ValueError(f"{what} (int64s)")
        start.append(int(m.group(1)))
        limit.append(int(m.group(2)))
        stride.append(int(m.group(3) or 1))
    if min(stride, default=1) < 1:
        raise ValueError(f"{what} (strides >= 1, as XLA requires)")
    return tuple(start), tuple(stride), tuple(limit)


def padding(value: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """'1_2x0_0' or with interior padding '1_2_1x0_0_0' -> (edge low, edge high)."""
    if not value.strip():
        return (), ()
    rows = _by_dim(value.strip(), "_", 2, "padding=low_high[_interior]x...")
    return tuple(r[0] for r in rows), tuple(r[1] for r in rows)


def called_computations(inst: Instruction) -> list[str]:
    """Names of the computations `inst` calls, in XLA's order (while: body then condition)."""
    names = []
    for key in CALLED_KEYS:
        if key not in inst.attrs:
            continue
        value = inst.attrs[key].strip()
        items = split_top(value[1:-1]) if value.startswith("{") and value.endswith("}") else [value]
        for item in items:
            if not re.fullmatch(r"%?[A-Za-z_][\w.\-]*", item):
                raise ValueError(f"{key}= a computation name or a list {{%a, %b}}")
            names.append(item.lstrip("%"))
    return names


def check_float32(fields: dict) -> None:
    """ValueError unless the sums and products node_feat holds of a node's window, slice, dynamic-slice sizes and
    padding fit its float32 (int64 sizes multiply past it: float32 inf, or Python's OverflowError past float64)."""
    w, sliced, pads = fields.get("window"), fields.get("slice") or (), fields.get("padding") or ()
    named = [(f"window {k}", getattr(w, k)) for k in ("size", "stride", "pad_low", "pad_high", "window_dilation",
                                                      "base_dilation")] if w else []
    named += list(zip(("slice start", "slice stride", "slice limit"), sliced))
    named += [("dynamic_slice_sizes", fields.get("dynamic_slice_sizes", ()))]
    named += list(zip(("padding low", "padding high"), pads))
    for name, values in named:
        if abs(prod(values)) > FLOAT32_MAX or abs(sum(values)) > FLOAT32_MAX:
            raise ValueError(f"{name} whose sum and product fit node_feat's float32 (at most {FLOAT32_MAX:.4g}), "
                             f"found {shortened(list(values))}")
