"""Nothing in the repository unpickles: the source tree (pipeline/, tests/, benchmarks/, notebooks/) is scanned."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("pipeline", "tests", "benchmarks", "notebooks")
# each pattern is split so that this file does not match itself
FORBIDDEN = {
    "pickle load": re.compile(r"\b(c?pickle|dill|cloudpickle|_pickle)\s*\.\s*(loads?|Unpickler)\b", re.IGNORECASE),
    "pickle-based store": re.compile(r"\b(import\s+(joblib|dill|cloudpickle|shelve)|from\s+(joblib|dill|cloudpickle|shelve)\b)"),
    "np.load with pickles": re.compile(r"allow_pickle\s*=\s*True"),
    "torch.load without weights": re.compile(r"weights_only\s*=\s*False"),
    "pandas pickle": re.compile(r"\bread_pickle\s*\("),
    "marshal load": re.compile(r"\bmarshal\s*\.\s*loads?\b"),
}
TORCH_LOAD = re.compile(r"torch\s*\.\s*load\s*\(")


def source_files() -> list[Path]:
    files = []
    for folder in SCANNED:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()]
    return sorted(files)


def violations(text: str) -> list[str]:
    found = [name for name, pattern in FORBIDDEN.items() if pattern.search(text)]
    for match in TORCH_LOAD.finditer(text):
        call = text[match.end():match.end() + 200].split(")")[0]
        if not re.search(r"weights_only\s*=\s*True", call):
            found.append("torch.load without weights_only=True")
    return found


def test_scanner_catches_every_form():
    """The patterns match what they must (so the tree scan below can fail)."""
    bad = ["x = pickle.loads(b)", "import joblib", "np.load(p, allow_pickle=True)",
           "torch.load(p, weights_only=False)", "torch.load(p)", "pd.read_pickle(p)", "cPickle.load(f)"]
    assert all(violations(line) for line in bad)
    assert not violations("torch.load(path, map_location=m, weights_only=True)")
    assert not violations("np.load(path, allow_pickle=False)")


def test_no_source_file_unpickles():
    files = source_files()
    assert len(files) > 50 and ROOT / "pipeline" / "graphnet" / "checkpoint.py" in files
    bad = {str(p.relative_to(ROOT)): v for p in files if p != Path(__file__).resolve()
           for v in [violations(p.read_text(errors="replace"))] if v}
    assert not bad, f"files that unpickle: {bad}"
