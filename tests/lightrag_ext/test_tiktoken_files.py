"""``e2rag-lightrag-tiktoken``: fills a directory tiktoken then loads offline, never overwrites.

The sources are built from the BPE files ``scripts/test.sh`` put in ``.cache/tiktoken`` (a
litellm-shaped wheel, a folder of ``*.tiktoken`` files); the check that counts is tiktoken itself
loading both encodings from the filled directory in a process that cannot download.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from lightrag_ext.tiktoken_files import BPE_FILES
from server_process import REPO, require_tiktoken_cache

COMMAND = (sys.executable, "-m", "lightrag_ext.tiktoken_files")
_LOAD_BOTH = (
    "import tiktoken; "
    "print(sum(len(tiktoken.get_encoding(n).encode('Hermione')) for n in ('o200k_base', "
    "'cl100k_base')))"
)


@pytest.fixture(scope="module")
def bpe() -> dict[str, bytes]:
    """encoding -> the real BPE file."""
    cache = require_tiktoken_cache()
    return {enc: (cache / name).read_bytes() for enc, (name, _) in BPE_FILES.items()}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=120, env=env
    )


def _tiktoken_folder(bpe: dict[str, bytes], folder: Path) -> Path:
    """A folder of ``<encoding>.tiktoken`` files, as copied from a machine with network."""
    folder.mkdir()
    for enc, data in bpe.items():
        (folder / f"{enc}.tiktoken").write_bytes(data)
    return folder


def _tiktoken_loads_offline(directory: Path) -> bool:
    env = {"PATH": "/usr/bin:/bin", "TIKTOKEN_CACHE_DIR": str(directory)}
    env |= {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}  # no net
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_BOTH], capture_output=True, text=True, timeout=120, env=env
    )
    return done.returncode == 0 and int(done.stdout) > 0


def test_fills_from_a_litellm_wheel_and_tiktoken_then_loads_offline(bpe, tmp_path: Path):
    wheel = tmp_path / "litellm-1.109.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for enc, (name, _) in BPE_FILES.items():
            archive.writestr(f"litellm/litellm_core_utils/tokenizers/{name}", bpe[enc])
    target = tmp_path / "tiktoken"
    assert not _tiktoken_loads_offline(target)  # the check can fail

    done = _run("--wheel", str(wheel), "--dir", str(target))

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target)
    assert f"TIKTOKEN_CACHE_DIR={target}" in done.stderr
    assert sorted(p.name for p in target.iterdir()) == sorted(n for n, _ in BPE_FILES.values())
    assert _tiktoken_loads_offline(target)
    again = _run("--wheel", str(wheel), "--dir", str(target))
    assert again.returncode == 0 and "already complete" in again.stderr


def test_fills_from_a_folder_of_tiktoken_files_into_TIKTOKEN_CACHE_DIR(bpe, tmp_path: Path):
    source = _tiktoken_folder(bpe, tmp_path / "copied")
    target = tmp_path / "cache"
    env = {"PATH": "/usr/bin:/bin", "TIKTOKEN_CACHE_DIR": str(target), "PYTHONPATH": str(REPO)}

    done = _run("--from", str(source), env=env)

    assert done.returncode == 0, done.stderr
    assert _tiktoken_loads_offline(target)


def test_a_different_file_in_the_target_is_never_overwritten(bpe, tmp_path: Path):
    source = _tiktoken_folder(bpe, tmp_path / "copied")
    target = tmp_path / "cache"
    target.mkdir()
    name = BPE_FILES["o200k_base"][0]
    (target / name).write_text("my own file")
    (target / "notes.txt").write_text("mine too")

    done = _run("--from", str(source), "--dir", str(target))

    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("e2rag-lightrag-tiktoken: error: ") and name in line
    assert (target / name).read_text() == "my own file"
    assert (target / "notes.txt").read_text() == "mine too"
    assert sorted(p.name for p in target.iterdir()) == sorted([name, "notes.txt"])


def test_a_wrong_source_file_is_refused_and_nothing_is_written(bpe, tmp_path: Path):
    source = tmp_path / "copied"
    source.mkdir()
    (source / "o200k_base.tiktoken").write_bytes(bpe["o200k_base"][:-10])
    (source / "cl100k_base.tiktoken").write_bytes(bpe["cl100k_base"])
    target = tmp_path / "cache"

    done = _run("--from", str(source), "--dir", str(target))

    assert done.returncode == 2 and "o200k_base" in done.stderr
    assert list(target.iterdir()) == []  # neither file, no temporary left


def test_every_console_script_is_registered_and_importable():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["e2rag-lightrag-tiktoken"] == "lightrag_ext.tiktoken_files:main"
    import importlib

    for name, target in scripts.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
