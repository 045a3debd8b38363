"""`python -m pipeline.download`: fetch the Kaggle competition's data and unpack it where data=tpugraphs reads it.

The fetch runs the Kaggle API's command line (`kaggle competitions download -c <competition> -p <folder>`, package
`kaggle`, which reads the user's credentials); it is the only part that needs the network, and `fetch_archive`
takes the command runner as an argument so tests stand in for it. `--archive PATH` unpacks a zip already on disk.

`unpack` is pure file work: it checks every member of Kaggle's zip before writing anything (the graph files must sit
at `npz_all/npz/{tile/xla,layout/{xla,nlp}/{random,default}}/{train,valid,test}/<graph>.npz`; a member outside the
archive's folder, any other `.npz`, or no graph at all is a one-line error naming the archive and the member) and
extracts into a temporary sibling of `paths.tpugraphs_dir` that replaces it only when every member was read back
with its checksum (pipeline.files.atomic_path), so a broken or interrupted download leaves no half a dataset.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable, Sequence

from tqdm import tqdm

from pipeline.config import stage_args
from pipeline.errors import PipelineError, run_main
from pipeline.files import atomic_path, blocking_file, given_path, output_error, resolved
from pipeline.tpugraphs.dataset import COLLECTIONS
from pipeline.tpugraphs.schema import KAGGLE_SUBDIR, NPZ_SUBDIR, SPLITS

ARCHIVE_FLAG = "--archive"
DEST_KEY = "paths.tpugraphs_dir"      # the root unpacked into (data=tpugraphs' default data.root)
GRAPH_SUFFIX = ".npz"
COPY_CHUNK_BYTES = 16 << 20          # bytes copied per step while extracting (graph files reach several GB)

Runner = Callable[[list[str]], subprocess.CompletedProcess]
AUTH_REQUIRED = "Authentication required to call the Kaggle API"     # the pinned `kaggle` CLI's words
CREDENTIALS = ("give the Kaggle API one of: a token from https://www.kaggle.com/settings/api in KAGGLE_API_TOKEN "
               "or in ~/.kaggle/access_token; the legacy ~/.kaggle/kaggle.json ({\"username\": ..., \"key\": ...}) or "
               "KAGGLE_USERNAME and KAGGLE_KEY; or run `kaggle auth login`; then accept the competition's rules on "
               "its Kaggle page")


class DownloadError(PipelineError):
    """A download or archive that cannot be used; the message is one line naming the file."""


def graph_folders() -> set[PurePosixPath]:
    """Every folder of the archive that may hold graphs: npz_all/npz/<collection subdir>/<split>."""
    return {PurePosixPath(KAGGLE_SUBDIR, NPZ_SUBDIR, *c.subdir.parts, split) for c in COLLECTIONS for split in SPLITS}


def check_members(archive: Path, names: Sequence[str]) -> list[str]:
    """The names of the graph files in `names`; DownloadError on an unsafe path, a graph in an unknown folder, or
    no graph at all. Other files (Kaggle's sample_submission.csv) are extracted as they are."""
    folders = graph_folders()
    graphs = []
    for name in names:
        member = PurePosixPath(name)
        if member.is_absolute() or ".." in member.parts or "\\" in name:
            raise DownloadError(f"{archive}: member {name!r}: expected a relative path inside the archive")
        if member.suffix == GRAPH_SUFFIX:
            if member.parent not in folders:
                raise DownloadError(f"{archive}: member {name!r}: expected graphs under "
                                    f"{KAGGLE_SUBDIR}/{NPZ_SUBDIR}/<tile/xla|layout/<xla|nlp>/<random|default>>/"
                                    f"<train|valid|test>/")
            graphs.append(name)
    if not graphs:
        raise DownloadError(f"{archive}: expected {KAGGLE_SUBDIR}/{NPZ_SUBDIR}/.../*{GRAPH_SUFFIX} graph files, "
                            f"found none among {len(names)} member(s)")
    return graphs


def open_archive(archive: Path) -> zipfile.ZipFile:
    """The zip at `archive`; DownloadError naming it when it is missing or not a zip."""
    if not archive.is_file():
        raise DownloadError(f"{archive}: no such archive")
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as error:
        raise DownloadError(f"{archive}: not a readable zip archive ({error})") from None


def unpack(archive: str | Path, dest: str | Path, progress: bool = False) -> int:
    """Extract Kaggle's zip into `dest` (replacing what was there); returns the number of graph files.

    `dest` then holds `npz_all/npz/...`, which data.root=dest reads. DownloadError (one line, naming the archive and
    the member) on a bad archive; `dest` is left as it was.
    """
    archive, dest = Path(archive), Path(dest)
    with open_archive(archive) as zf:
        infos = [info for info in zf.infolist() if not info.is_dir()]
        graphs = check_members(archive, [info.filename for info in infos])
        with atomic_path(dest) as tmp:
            for info in tqdm(infos, desc="unpack", unit="file", disable=not progress):
                target = tmp / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zf.open(info) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out, COPY_CHUNK_BYTES)
                except (zipfile.BadZipFile, OSError, EOFError) as error:   # CRC mismatch, truncated data
                    raise DownloadError(f"{archive}: member {info.filename!r}: unreadable ({error})") from None
    return len(graphs)


def fetch_archive(competition: str, folder: Path, cli: str = "kaggle", runner: Runner | None = None) -> Path:
    """Run `<cli> competitions download -c <competition> -p <folder>`; returns the zip it wrote.

    DownloadError (one line) when the command is missing, fails (its last line of output, e.g. missing
    credentials) or writes no `<competition>.zip`.
    """
    runner = runner or (lambda cmd: subprocess.run(cmd, capture_output=True, text=True))
    cmd = [cli, "competitions", "download", "-c", competition, "-p", str(folder)]
    try:
        result = runner(cmd)
    except FileNotFoundError:
        raise DownloadError(f"{cli}: command not found; install the pinned Kaggle API with "
                            f"`pip install -r requirements.txt`") from None
    if result.returncode != 0:
        output = f"{result.stdout or ''}\n{result.stderr or ''}"
        if AUTH_REQUIRED in output:
            raise DownloadError(f"{' '.join(cmd)}: no Kaggle credentials; {CREDENTIALS}")
        lines = [l for l in output.splitlines() if l.strip()]
        last = lines[-1].strip() if lines else f"exit status {result.returncode}"
        raise DownloadError(f"{' '.join(cmd)}: failed ({last})")
    archive = folder / f"{competition}.zip"
    if not archive.is_file():
        raise DownloadError(f"{' '.join(cmd)}: expected it to write {archive}, found "
                            f"{sorted(p.name for p in folder.iterdir())}")
    return archive


def run(dest: Path, competition: str, cli: str, archive: Path | None = None, runner: Runner | None = None) -> int:
    """Unpack `archive`, or fetch the competition's zip into a temporary folder beside `dest` and unpack it."""
    if archive is not None:
        return unpack(archive, dest, progress=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-download-") as folder:
        fetched = fetch_archive(competition, Path(folder), cli, runner)
        return unpack(fetched, dest, progress=True)


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False, dvc_outputs=False,
                           add_flags=lambda parser: parser.add_argument(
                               ARCHIVE_FLAG, type=given_path, default=None,
                               help="unpack this zip (Kaggle's download) instead of fetching it"))
    dest = Path(cfg.paths.tpugraphs_dir)
    blocking = blocking_file(resolved(dest, DEST_KEY))
    if blocking is not None:                # atomic_path replaced a file standing at dest with the folder
        raise SystemExit(f"error: {DEST_KEY} {dest}: {blocking} is a file; expected a folder to unpack into")
    try:
        count = run(dest, cfg.download.competition, cfg.download.cli, args.archive)
    except DownloadError as error:
        raise SystemExit(f"error: {error}") from None
    except OSError as error:                # making or writing dest (the archive's own errors are DownloadError)
        raise output_error(DEST_KEY, dest, error) from None
    print(f"unpacked {count} graph files into {dest} (data=tpugraphs' default data.root): "
          f"`python -m pipeline.config data=tpugraphs && dvc repro`")


if __name__ == "__main__":
    run_main(main)
