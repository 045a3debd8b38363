"""pipeline.download: Kaggle's zip unpacked where data=tpugraphs reads it; bad archives and a failing fetch are
one-line errors. No network: the Kaggle command is a stand-in runner."""
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import make_layout_arrays, make_tile_arrays

from pipeline.config import repo_root
from pipeline.download import DownloadError, fetch_archive, run, unpack
from pipeline.errors import PipelineError
from pipeline.tpugraphs.dataset import graph_paths, load_graph

LAYOUT = "npz_all/npz/layout/xla/random/train/g1.npz"
TILE = "npz_all/npz/tile/xla/valid/t1.npz"


def npz_bytes(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def kaggle_zip(path: Path, members: dict[str, bytes]) -> Path:
    """A zip laid out like Kaggle's predict-ai-model-runtime.zip (npz_all/npz/..., sample_submission.csv)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.fixture
def good_zip(tmp_path) -> Path:
    return kaggle_zip(tmp_path / "predict-ai-model-runtime.zip", {
        LAYOUT: npz_bytes(make_layout_arrays()), TILE: npz_bytes(make_tile_arrays()),
        "sample_submission.csv": b"ID,TopConfigs\n"})


def test_unpack_gives_a_root_the_loader_reads(good_zip, tmp_path):
    dest = tmp_path / "data" / "tpugraphs"
    assert unpack(good_zip, dest) == 2
    [path] = graph_paths(dest, "layout:xla:random", "train")
    assert path == dest / LAYOUT
    assert load_graph(path, "layout:xla:random", "train").n_configs == 4
    assert graph_paths(dest, "tile:xla", "valid") == [dest / TILE]
    assert (dest / "sample_submission.csv").read_bytes() == b"ID,TopConfigs\n"


def test_unpack_replaces_what_was_there(good_zip, tmp_path):
    dest = tmp_path / "root"
    (dest / "stale").mkdir(parents=True)
    unpack(good_zip, dest)
    assert not (dest / "stale").exists() and (dest / TILE).is_file()


@pytest.mark.parametrize("name, message", [
    ("npz_all/npz/layout/xla/sideways/train/g.npz", "expected graphs under npz_all/npz/"),
    ("npz/tile/xla/train/g.npz", "expected graphs under npz_all/npz/"),
    ("../evil.npz", "expected a relative path inside the archive"),
    ("/abs/evil.csv", "expected a relative path inside the archive"),
])
def test_bad_member_is_one_line_naming_it_and_writes_nothing(tmp_path, name, message):
    archive = kaggle_zip(tmp_path / "k.zip", {TILE: npz_bytes(make_tile_arrays()), name: b"x"})
    dest = tmp_path / "root"
    with pytest.raises(DownloadError) as error:
        unpack(archive, dest)
    text = str(error.value)
    assert len(text.splitlines()) == 1 and str(archive) in text and repr(name) in text and message in text
    assert not dest.exists()


def test_not_a_zip_and_no_graphs_are_refused(tmp_path):
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"<html>rate limited</html>")
    with pytest.raises(DownloadError, match=r"junk.zip: not a readable zip archive"):
        unpack(junk, tmp_path / "root")
    empty = kaggle_zip(tmp_path / "empty.zip", {"sample_submission.csv": b"ID\n"})
    with pytest.raises(DownloadError, match=r"empty.zip: expected npz_all/npz/.*found none among 1 member"):
        unpack(empty, tmp_path / "root")
    with pytest.raises(DownloadError, match="no such archive"):
        unpack(tmp_path / "missing.zip", tmp_path / "root")


def test_corrupt_member_names_it_and_keeps_the_old_root(good_zip, tmp_path):
    data = bytearray(good_zip.read_bytes())
    start = data.index(b"PK\x03\x04", 1)           # second member's local header (the tile file)
    data[start + 60:start + 80] = bytes(20)         # damage its compressed bytes
    broken = tmp_path / "broken.zip"
    broken.write_bytes(bytes(data))
    dest = tmp_path / "root"
    (dest / "kept").mkdir(parents=True)
    with pytest.raises(DownloadError) as error:
        unpack(broken, dest)
    assert f"{broken}: member '{TILE}': unreadable" in str(error.value)
    assert (dest / "kept").is_dir() and not (tmp_path / "root.tmp").exists()


def test_fetch_runs_the_kaggle_command_and_unpacks(good_zip, tmp_path):
    calls = []

    def kaggle(cmd):                       # stands in for the network: copies the zip where the CLI would
        calls.append(cmd)
        folder = Path(cmd[cmd.index("-p") + 1])
        (folder / "predict-ai-model-runtime.zip").write_bytes(good_zip.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    dest = tmp_path / "data" / "tpugraphs"
    assert run(dest, "predict-ai-model-runtime", "kaggle", runner=kaggle) == 2
    assert calls[0][:5] == ["kaggle", "competitions", "download", "-c", "predict-ai-model-runtime"]
    assert (dest / LAYOUT).is_file()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tpugraphs"]      # the zip's folder is gone


def test_fetch_failures_are_one_line(tmp_path):
    def no_credentials(cmd):
        return subprocess.CompletedProcess(cmd, 1, "", "Traceback...\nOSError: Could not find kaggle.json\n")

    with pytest.raises(DownloadError, match=r"failed \(OSError: Could not find kaggle.json\)$"):
        fetch_archive("c", tmp_path, runner=no_credentials)
    with pytest.raises(DownloadError, match="command not found"):
        fetch_archive("c", tmp_path, cli=str(tmp_path / "no-such-kaggle"))
    with pytest.raises(DownloadError, match=r"expected it to write .*c.zip, found \[\]"):
        fetch_archive("c", tmp_path, runner=lambda cmd: subprocess.CompletedProcess(cmd, 0, "", ""))


def test_command_line_unpacks_a_local_archive_into_the_default_root(good_zip, tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline.download", "--archive", str(good_zip),
                          f"paths.tpugraphs_dir={tmp_path / 'tg'}"], cwd=repo_root(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "unpacked 2 graph files" in out.stdout and (tmp_path / "tg" / TILE).is_file()
    bad = subprocess.run([sys.executable, "-m", "pipeline.download", "--archive", str(tmp_path / "nope.zip")],
                         cwd=repo_root(), capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.zip'}: no such archive"]


KAGGLE_ENV = ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "KAGGLE_CONFIG_DIR")


@pytest.fixture
def bare_home(tmp_path, monkeypatch):
    """A home without any Kaggle credentials (HOME and ~/.kaggle in tmp_path, no KAGGLE_* variable)."""
    for name in KAGGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".kaggle").mkdir(parents=True)
    return tmp_path / "home"


def test_no_credentials_through_the_pinned_kaggle_cli_is_one_line_saying_what_is_needed(bare_home, tmp_path):
    """The real `kaggle` command of requirements.txt, with no credentials, stops before any network access; the
    stage turns its 17-line help into one line naming every form of credentials it accepts."""
    import shutil
    cli = shutil.which("kaggle", path=str(Path(sys.executable).parent))
    assert cli, "the pinned kaggle CLI is not installed beside this python"
    with pytest.raises(DownloadError) as caught:
        fetch_archive("predict-ai-model-runtime", tmp_path, cli=cli)
    message = str(caught.value)
    assert "\n" not in message and "no Kaggle credentials; give the Kaggle API one of:" in message
    for needed in ("KAGGLE_API_TOKEN", "~/.kaggle/access_token", "~/.kaggle/kaggle.json", "KAGGLE_USERNAME and "
                   "KAGGLE_KEY", "kaggle auth login", "accept the competition's rules"):
        assert needed in message


@pytest.mark.parametrize("form", ["kaggle.json", "username and key", "api token variable", "access_token file"])
def test_every_credential_form_the_message_names_is_accepted_by_the_pinned_kaggle_api(bare_home, monkeypatch,
                                                                                       form):
    """The Kaggle API package itself (its network stubbed: the token's owner is looked up online) authenticates
    with each form the one-line message names, legacy key or token, file or environment."""
    import json
    from kaggle.api.kaggle_api_extended import KaggleApi

    kaggle_dir = bare_home / ".kaggle"
    if form == "kaggle.json":
        (kaggle_dir / "kaggle.json").write_text(json.dumps({"username": "me", "key": "k" * 32}))
        (kaggle_dir / "kaggle.json").chmod(0o600)
    elif form == "username and key":
        monkeypatch.setenv("KAGGLE_USERNAME", "me")
        monkeypatch.setenv("KAGGLE_KEY", "k" * 32)
    elif form == "api token variable":
        monkeypatch.setenv("KAGGLE_API_TOKEN", "token-from-settings")
    else:
        (kaggle_dir / "access_token").write_text("token-from-settings\n")
    monkeypatch.setattr(KaggleApi, "_introspect_token", lambda self, token: "me" if token == "token-from-settings"
                        else None)
    api = KaggleApi()
    api.authenticate()                                    # exits (SystemExit 1) when it finds none
    assert api.config_values.get(api.CONFIG_NAME_USER) == "me"


def test_a_root_that_is_a_file_a_link_loop_or_unwritable_is_one_line(good_zip, tmp_path):
    """paths.tpugraphs_dir on a file replaced that file with the unpacked folder, silently; on a loop of symbolic
    links it was a NotADirectoryError traceback, where the system refuses writes (/sys) a PermissionError one."""
    from pipeline.download import main

    held = tmp_path / "mine.csv"
    held.write_text("kept\n")
    for dest in (held, held / "x"):
        with pytest.raises(SystemExit, match=rf"^error: paths.tpugraphs_dir {dest}: {held} is a file; expected a "
                                             r"folder to unpack into$"):
            main(["--archive", str(good_zip), f"paths.tpugraphs_dir={dest}"])
    assert held.read_text() == "kept\n"
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    with pytest.raises(PipelineError, match=r"^paths.tpugraphs_dir .*loop1: a loop of symbolic links"):
        main(["--archive", str(good_zip), f"paths.tpugraphs_dir={tmp_path / 'loop1'}"])
    with pytest.raises(PipelineError, match=r"^paths.tpugraphs_dir /sys/tg: cannot write there \("):
        main(["--archive", str(good_zip), "paths.tpugraphs_dir=/sys/tg"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([good_zip.name, "loop1", "loop2", "mine.csv"])
