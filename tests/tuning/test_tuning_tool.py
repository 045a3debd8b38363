"""pipeline.tuning.tool: what the tool searches when a program has fused kernels but nothing to lay out."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pipeline.config import load_cfg
from pipeline.tuning import tool
from pipeline.tuning.space import SpaceError

POOL = """HloModule pool, entry_computation_layout={(f32[2,8,8,4]{3,2,1,0})->f32[2,4,4,4]{3,2,1,0}}

max_region {
  a.1 = f32[] parameter(0)
  b.2 = f32[] parameter(1)
  ROOT m.3 = f32[] maximum(a.1, b.2)
}

ENTRY main.4 {
  x.1 = f32[2,8,8,4]{3,2,1,0} parameter(0)
  init.2 = f32[] constant(-inf)
  ROOT rw.3 = f32[2,4,4,4]{3,2,1,0} reduce-window(x.1, init.2), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max_region
}
"""

POOL_OPT = """HloModule pool, is_scheduled=true

%max_region (a.1: f32[], b.2: f32[]) -> f32[] {
  %a.1 = f32[] parameter(0)
  %b.2 = f32[] parameter(1)
  ROOT %m.3 = f32[] maximum(%a.1, %b.2)
}

%fused_pool (p.0: f32[2,8,8,4]) -> f32[2,4,4,4] {
  %p.0 = f32[2,8,8,4]{3,2,1,0} parameter(0)
  %c.1 = f32[] constant(-inf)
  ROOT %rw.2 = f32[2,4,4,4]{3,2,1,0} reduce-window(%p.0, %c.1), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%max_region
}

ENTRY %main.4 (x.1: f32[2,8,8,4]) -> f32[2,4,4,4] {
  %x.1 = f32[2,8,8,4]{3,2,1,0} parameter(0)
  ROOT %pool_fusion = f32[2,4,4,4]{3,2,1,0} fusion(%x.1), kind=kLoop, calls=%fused_pool
}
"""


def test_a_program_with_kernels_but_no_configurable_node_gets_its_tiles(tmp_path, monkeypatch):
    """A pooling-only program (max pool, cumsum, sort, pad: no convolution, dot or reshape) was refused whole
    (`no configurable node`) though its optimised text has kernels to tile: now its tiles are searched, its layouts
    are the compiler's and the JSON says why; without the optimised text it is still refused in one line."""
    (tmp_path / "pool.hlo.txt").write_text(POOL)
    (tmp_path / "pool_opt.hlo.txt").write_text(POOL_OPT)
    guides, tiled = [], []
    monkeypatch.setattr(tool, "load_guide", lambda cfg, model, collection: guides.append(collection.slug) or
                        SimpleNamespace(rule=SimpleNamespace(margin=0.1), collection=collection))
    monkeypatch.setattr(tool, "guarded_pick", lambda *args: pytest.fail("a layout search with nothing to lay out"))
    monkeypatch.setattr(tool, "tune_tiles", lambda cfg, kernels, *args: tiled.extend(k.fusion for k in kernels)
                        or [{"fusion": kernels[0].fusion}])
    cfg = load_cfg([])
    out = tmp_path / "out"
    result, path = tool.autotune(cfg, tool.Request(tmp_path / "pool.hlo.txt", tmp_path / "pool_opt.hlo.txt", "lgbm",
                                                   10, None, out))
    assert guides == ["layout-xla-random", "tile-xla"] and tiled == ["pool_fusion"]
    assert json.loads(path.read_text()) == result
    assert result["layouts"] == [] and result["changes"] == [] and result["tiles"] == [{"fusion": "pool_fusion"}]
    assert result["predicted_runtime_ratio"] == 1.0 and result["evaluations"] == 0
    assert result["layouts_not_searched"] == (f"{tmp_path / 'pool.hlo.txt'}: no configurable node (convolution, dot, "
                                              f"reshape) to lay out")
    with pytest.raises(SpaceError, match="no configurable node"):
        tool.autotune(cfg, tool.Request(tmp_path / "pool.hlo.txt", None, "lgbm", 10, None, tmp_path / "none"))
    assert not (tmp_path / "none").exists()


def test_a_program_with_nothing_to_search_is_refused_in_one_line_with_both_reasons(tmp_path, capsys):
    """`x -> x` with its optimised text: a warning (no fused kernel, give the optimised text) and then the error
    (no configurable node) came out as two lines; now one error gives both reasons."""
    (tmp_path / "id.hlo.txt").write_text(POOL.replace("reduce-window(x.1, init.2), window={size=1x2x2x1 "
                                                      "stride=1x2x2x1}, to_apply=max_region", "negate(x.1)")
                                         .replace("f32[2,4,4,4]", "f32[2,8,8,4]"))
    scheduled = (tmp_path / "id.hlo.txt").read_text().replace("HloModule pool,", "HloModule pool, is_scheduled=true,")
    (tmp_path / "id_opt.hlo.txt").write_text(scheduled)
    with pytest.raises(SpaceError) as refused:
        tool.autotune(load_cfg([]), tool.Request(tmp_path / "id.hlo.txt", tmp_path / "id_opt.hlo.txt", "lgbm", 10,
                                                 None, tmp_path / "out"))
    assert str(refused.value) == (f"{tmp_path / 'id.hlo.txt'}: no configurable node (convolution, dot, reshape) to "
                                  f"lay out; {tmp_path / 'id_opt.hlo.txt'}: no fused kernel (XLA fused nothing in "
                                  f"this optimised module)")
    assert capsys.readouterr().err == "" and not (tmp_path / "out").exists()
