"""Each setting is validated in one place: the schema (pipeline/settings_schema.py) refuses a bad value of every
key it declares, naming that key, and no library checks a setting again (ast: no `raise` outside the config layer
names a setting key, raises SettingsError, or follows a test of a `cfg.<group>...` value). What a library may still
raise on is its data (files, arrays, shapes); the few raises that name a setting as the remedy for a data or
runtime fault are listed in ALLOWED with the reason."""
from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipeline.config import compose
from pipeline.settings_schema import SCHEMA, validate
from pipeline.settings_types import (AnyMapping, Bool, BySearch, Either, Float, Group, Int, List, Optional,
                                     SettingsError, Str)

ROOT = Path(__file__).resolve().parent.parent
CONFIG_LAYER = {"pipeline/settings_schema.py", "pipeline/settings_synth.py", "pipeline/settings_types.py",
                "pipeline/config.py", "pipeline/selection.py"}       # what loads, composes and checks the configuration
ALLOWED = {                                     # (file, key named in a raise): why it is not a settings check
    ("pipeline/graphnet/train_loop.py", "gnn.resume"): "a checkpoint of another run (data); names the remedy",
    ("pipeline/graphnet/train_loop.py", "gnn.lr"): "training diverged (a runtime fault); names the remedy",
    ("pipeline/graphnet/train_loop.py", "gnn.device"): "gnn.device=cuda on a machine without CUDA (environment)",
    ("pipeline/graphnet/scoring.py", "gnn.seeds"): "a member's model file is missing (data)",
    ("pipeline/tpugraphs/dataset.py", "data.root"): "npz_root(None): no folder to read the graphs from (data)",
    ("pipeline/pruned.py", "data.root"): "the pruned graphs are not data.root's (prune not re-run: data)",
    ("pipeline/tuning/tool.py", "data.collections"): "the asked collection's models were not trained (data)",
    ("pipeline/synthesize.py", "data.kind"): "stage synthesize does not apply to real data (valid for the others)",
    ("pipeline/synthesize.py", "paths.synthetic_dir"): "the folder it replaces holds files it did not write (data)",
}
ALLOWED |= {
    ("pipeline/graphnet/losses.py", "gnn.min_gap_quantile"): "prune's report lacks the spread (data); the remedy",
    ("pipeline/graphnet/losses.py", "gnn.min_gap"): "the same message: what the remedy falls back to",
    ("pipeline/graphnet/segments.py", "gst.segmentation"): "a graph without node_splits (data)",
    ("pipeline/lgbm_model/train.py", "lgbm.min_data_in_leaf"): "no feature splits the train rows (data); the remedy",
    ("pipeline/lgbm_model/infer.py", "lgbm.features"): "a model of other feature columns (stale data); a cause",
    ("pipeline/predict.py", "predict.run_dir"): "the CSV's folder cannot be written (environment): names where it is set",
    ("pipeline/tuning/tool.py", "autotune.out_dir"): "the JSON's folder cannot be written (environment): names where",
}
for key in ("checkpoints_dir", "metrics_dir", "models_dir", "multirun_dir", "plots_dir", "predictions_dir",
            "pruned_dir", "submissions_dir", "synthetic_dir", "tpugraphs_dir"):    # `--out` inside `paths.{key}`
    ALLOWED |= {(path, f"paths.{key}"): "a command's --out argument inside a folder DVC writes (not a setting)"
                for path in ("pipeline/predict.py", "pipeline/tuning/tool.py", "pipeline/featurize.py")}


def leaves(spec=SCHEMA, prefix: str = ""):
    """(dotted key, spec) of every value the schema declares (groups walked, everything else a leaf)."""
    for name, child in spec.fields.items():
        key = f"{prefix}{name}"
        if isinstance(child, Group):
            yield from leaves(child, f"{key}.")
        else:
            yield key, child


def invalid(spec):
    """A value `spec` refuses: past a bound when it has one, else of the wrong type or outside the choices."""
    if isinstance(spec, Int):
        return spec.low - 1 if spec.low is not None else "not a number"
    if isinstance(spec, Float):
        return float("nan")
    if isinstance(spec, Str):
        return "not-a-choice" if spec.choices else ""
    if isinstance(spec, (Optional, BySearch)):
        return invalid(spec.inner if isinstance(spec, Optional) else spec.item)
    if isinstance(spec, Either):
        return [invalid(o) for o in spec.options]                  # a list: none of the options takes one
    if isinstance(spec, Bool):
        return "yes"
    if isinstance(spec, List):
        return "not a list"
    assert isinstance(spec, AnyMapping), spec
    return "not a mapping"


def setting(cfg: dict, key: str) -> tuple[dict, str]:
    *parents, last = key.split(".")
    for part in parents:
        cfg = cfg[part]
    return cfg, last


@pytest.fixture(scope="module")
def plain():
    cfg = OmegaConf.to_container(compose(["data=programs_ci"]), resolve=True)
    validate(cfg)
    return cfg


@pytest.mark.parametrize("key,spec", list(leaves()), ids=[k for k, _ in leaves()])
def test_the_schema_refuses_a_bad_value_of_every_key_naming_it(plain, key, spec):
    cfg = copy.deepcopy(plain)
    parent, last = setting(cfg, key)
    parent[last] = invalid(spec)
    with pytest.raises(SettingsError) as error:
        validate(cfg)
    assert error.value.key == key, f"a bad {key} was named {error.value.key}"


def code_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pipeline").rglob("*.py")
                  if str(p.relative_to(ROOT)) not in CONFIG_LAYER)


def setting_keys() -> set[str]:
    """Every dotted key of the schema and its shorter tails (`gnn.gst.segment_size` -> `gst.segment_size`)."""
    keys = set()
    for key, _ in leaves():
        parts = key.split(".")
        keys |= {".".join(parts[i:]) for i in range(len(parts) - 1)}
        keys |= {".".join(parts[:i]) for i in range(2, len(parts))}    # the groups inside groups: `gnn.gst`
    return keys


def named_keys(node: ast.AST, keys: set[str]) -> set[str]:
    """The setting keys the string constants of a node name (`gnn.norm=`, `lgbm.{kind}.label_grades`, ...)."""
    text = " ".join(v.value for v in ast.walk(node) if isinstance(v, ast.Constant) and isinstance(v.value, str))
    text = re.sub(r"\{[^}]*\}", "*", ast.unparse(node)) + " " + text
    found = set()
    for token in re.findall(r"[a-z_]+(?:\.[a-z_*]+)+", text):
        token = token.removeprefix("cfg.")
        candidates = {token, *(k for k in keys if re.fullmatch(re.escape(token).replace(r"\*", r"[a-z_]+"), k))}
        found |= candidates & keys
    return found


def reads_cfg(node: ast.AST) -> bool:
    """Whether an expression reads a configuration value `cfg.<group>.<key>...`."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute):
            inner = sub.value
            if isinstance(inner.value, ast.Name) and inner.value.id == "cfg" and inner.attr != "paths":
                return True
    return False


def settings_checks(path: str, keys: set[str]) -> list[str]:
    """What in one file checks a setting: a raise naming a key (not in ALLOWED), a raise of SettingsError, a raise
    right under an `if` on a `cfg.<group>.<key>` value."""
    found = []
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            named = {k for k in named_keys(node.exc, keys) if (path, k) not in ALLOWED}
            if named:
                found.append(f"{path}:{node.lineno}: raise naming {sorted(named)}")
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(call, ast.Name) and call.id == "SettingsError":
                found.append(f"{path}:{node.lineno}: raise SettingsError")
        if isinstance(node, ast.If) and reads_cfg(node.test) and any(isinstance(n, ast.Raise) for n in node.body):
            named = named_keys(node.test, keys) or {"cfg"}
            if not any((path, k) in ALLOWED for k in named_keys(node, keys)):
                found.append(f"{path}:{node.lineno}: raise on a test of {ast.unparse(node.test)}")
    return found


def test_the_scan_finds_a_settings_check():
    keys = setting_keys()
    raise_named = ast.parse('if lr <= 0:\n    raise ValueError(f"gnn.lr={lr}: expected > 0")').body[0]
    assert named_keys(raise_named.body[0].exc, keys) == {"gnn.lr"}
    templated = ast.parse('raise ValueError(f"lgbm.{kind}.label_gain: expected")').body[0]
    assert named_keys(templated.exc, keys) == {"lgbm.tile.label_gain", "lgbm.layout.label_gain"}
    assert reads_cfg(ast.parse("cfg.gnn.tta < 1", mode="eval").body)
    assert not reads_cfg(ast.parse("cfg.paths.pruned_dir", mode="eval").body)
    assert "gst.segment_size" in keys and "gnn.gst" in keys


def test_no_library_checks_a_setting_again():
    keys = setting_keys()
    found = [line for path in code_files() for line in settings_checks(path, keys)]
    assert not found, "settings checked outside the schema (move them to pipeline/settings_schema.py):\n" + \
        "\n".join(found)


def test_every_allowance_is_still_needed():
    keys = setting_keys()
    used = set()
    for path in code_files():
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, (ast.Raise, ast.If)):
                used |= {(path, k) for k in named_keys(node, keys)}
    assert set(ALLOWED) - used == set()
