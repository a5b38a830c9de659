"""``e2rag-lightrag-tiktoken``: tiktoken's BPE files where an offline LightRAG server finds them.

LightRAG's server builds tiktoken's ``o200k_base`` tokenizer at start-up (its default
``gpt-4o-mini``), and its OpenAI embedding binding falls back to ``cl100k_base``; tiktoken
downloads both from ``openaipublic.blob.core.windows.net`` unless they are in
``TIKTOKEN_CACHE_DIR`` under the sha1 of their URL. Offline that download fails and the server
dies. This command fills such a directory from a source at hand, checking each file's sha256 as
tiktoken does:

- ``--wheel FILE``: a litellm wheel (litellm ships both files; ``pip download litellm==1.109.1
  --no-deps`` fetches one from PyPI or your mirror), or ``--download`` to have pip fetch it;
- ``--from DIR``: a folder with ``o200k_base.tiktoken`` and ``cl100k_base.tiktoken`` (as
  published by OpenAI, e.g. copied from a machine with network) or with files already named
  as in the cache;
- nothing: the files of an installed ``litellm`` package.

The target is ``--dir``, else ``$TIKTOKEN_CACHE_DIR``, else tiktoken's own default
(``$DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``). A file already there with the right
contents is kept; one with other contents is never overwritten (the command stops, naming it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Optional

PROG = "e2rag-lightrag-tiktoken"
#: encoding -> (tiktoken's cache file name: sha1 of its URL, the sha256 tiktoken checks)
BPE_FILES = {
    "o200k_base": (  # LightRAG's tokenizer (gpt-4o-mini)
        "fb374d419588a4632f3f557e76b4b70aebbca790",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (  # OpenAI embedding truncation
        "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
LITELLM = "litellm==1.109.1"
_LITELLM_TOKENIZERS = "litellm/litellm_core_utils/tokenizers"


class TiktokenFilesError(Exception):
    """A source lacks a file, holds a wrong one, or the target holds a different file."""


def default_dir() -> Path:
    """Where tiktoken itself looks (``tiktoken.load.read_file_cached``)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def complete(directory: Path) -> bool:
    """Whether ``directory`` holds both files with the right contents."""
    return all(
        (directory / name).is_file() and _sha256((directory / name).read_bytes()) == digest
        for name, digest in BPE_FILES.values()
    )


Reader = Callable[[str, str], bytes]  # (encoding, cache name) -> file contents


def _wheel_reader(wheel: Path) -> Reader:
    def read(encoding: str, name: str) -> bytes:
        with zipfile.ZipFile(wheel) as archive:
            try:
                return archive.read(f"{_LITELLM_TOKENIZERS}/{name}")
            except KeyError:
                raise TiktokenFilesError(f"{wheel} does not hold {encoding}") from None

    return read


def _folder_reader(folder: Path) -> Reader:
    def read(encoding: str, name: str) -> bytes:
        for candidate in (folder / f"{encoding}.tiktoken", folder / name):
            if candidate.is_file():
                return candidate.read_bytes()
        raise TiktokenFilesError(f"{folder} holds neither {encoding}.tiktoken nor {name}")

    return read


def _installed_litellm() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise TiktokenFilesError(
            "no source given and litellm is not installed: pass --wheel FILE, --from DIR or "
            "--download"
        )
    return Path(list(spec.submodule_search_locations)[0]).parent


def _store(directory: Path, encoding: str, name: str, data: bytes, digest: str) -> bool:
    """Write one file unless it is there already; True if written."""
    if _sha256(data) != digest:
        raise TiktokenFilesError(f"the source's {encoding} is not tiktoken's (sha256 differs)")
    target = directory / name
    if target.exists():
        if target.is_file() and _sha256(target.read_bytes()) == digest:
            return False
        raise TiktokenFilesError(
            f"{target} exists with other contents; it is not ours to replace: move it away"
        )
    with tempfile.NamedTemporaryFile(dir=directory, prefix=f".{name}.", delete=False) as tmp:
        tmp.write(data)
    try:
        os.link(tmp.name, target)  # never replaces a file that appeared meanwhile
    except FileExistsError:
        if _sha256(target.read_bytes()) != digest:
            raise TiktokenFilesError(f"{target} appeared meanwhile with other contents") from None
        return False
    finally:
        os.unlink(tmp.name)  # our temporary name only
    return True


def fill(directory: Path, read: Reader) -> list[str]:
    """Put both files into ``directory`` (created if needed); the encodings written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for encoding, (name, digest) in BPE_FILES.items():
        target = directory / name
        if target.is_file() and _sha256(target.read_bytes()) == digest:
            continue
        if _store(directory, encoding, name, read(encoding, name), digest):
            written.append(encoding)
    return written


def download_wheel(destination: Path) -> Path:
    """``pip download`` litellm's wheel (no dependencies) from the configured index."""
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
    command += ["--only-binary=:all:", LITELLM, "-d", str(destination)]
    subprocess.run(command, check=True, stdout=sys.stderr)
    return next(destination.glob("litellm-*.whl"))


def fill_from(
    directory: Path,
    *,
    wheel: Optional[Path] = None,
    folder: Optional[Path] = None,
    download: bool = False,
) -> list[str]:
    """``fill`` from the source the command line names (see the module docstring)."""
    if complete(directory):
        return []
    if folder is not None:
        return fill(directory, _folder_reader(folder))
    if wheel is not None:
        return fill(directory, _wheel_reader(wheel))
    if download:
        with tempfile.TemporaryDirectory() as scratch:
            return fill(directory, _wheel_reader(download_wheel(Path(scratch))))
    return fill(directory, _folder_reader(_installed_litellm() / _LITELLM_TOKENIZERS))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fill TIKTOKEN_CACHE_DIR with the BPE files LightRAG's server needs offline.",
    )
    parser.add_argument("--dir", type=Path, help="target (default: $TIKTOKEN_CACHE_DIR, …)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=Path, help="a downloaded litellm wheel")
    source.add_argument("--from", dest="folder", type=Path, help="a folder of *.tiktoken files")
    source.add_argument("--download", action="store_true", help="pip download litellm's wheel")
    args = parser.parse_args(argv)
    directory = args.dir or default_dir()
    try:
        written = fill_from(directory, wheel=args.wheel, folder=args.folder, download=args.download)
    except (TiktokenFilesError, OSError, zipfile.BadZipFile, subprocess.CalledProcessError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    state = f"wrote {', '.join(written)}" if written else "already complete"
    print(f"{PROG}: {directory}: {state}", file=sys.stderr)
    if directory != default_dir():  # tiktoken would not look there by itself
        print(f"{PROG}: set TIKTOKEN_CACHE_DIR={directory} for the server", file=sys.stderr)
    print(directory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
