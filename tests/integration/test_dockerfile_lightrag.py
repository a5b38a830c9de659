"""deploy/lightrag/Dockerfile, checked without Docker: the build context it copies is the one
that makes a wheel, and the commands it runs are our console scripts.

The build is replayed as far as it can be here: exactly the paths the ``COPY`` lines name are
copied into a fresh folder, and pip builds the wheel from that folder alone (a missing file, such
as the README the metadata reads, fails here as it would in ``docker build``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "lightrag" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_dockerfile_runs_only_our_console_scripts():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    commands = [args for op, args in _instructions() if op in ("RUN", "ENTRYPOINT")]
    used = {shlex.split(c.strip("[]").replace(",", " "))[0] for c in commands}
    assert used - {"pip"} <= set(scripts) and "e2rag-lightrag-server" in used


def test_the_copied_files_alone_build_a_wheel_with_our_entry_points(tmp_path: Path):
    context = tmp_path / "src"
    context.mkdir()
    for op, args in _instructions():
        if op != "COPY":
            continue
        *sources, destination = args.split()
        assert destination.startswith("/src"), destination
        for source in sources:
            path = REPO / source
            assert path.exists(), f"the Dockerfile copies {source}, which does not exist"
            inside = context / destination.removeprefix("/src").strip("/")
            # Docker: into a folder when the destination ends with "/", else onto that name
            target = inside / path.name if destination.endswith("/") else inside
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)

    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "-w", str(tmp_path / "dist"), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("llama_index_e2rag-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [entry_file] = [n for n in names if n.endswith("entry_points.txt")]
        entry_points = archive.read(entry_file).decode()
    assert "lightrag_ext/workspace_lock.py" in names and "lightrag_ext/tiktoken_files.py" in names
    assert "e2rag-lightrag-tiktoken = lightrag_ext.tiktoken_files:main" in entry_points
    assert "e2rag-lightrag-server = lightrag_ext.commands:server" in entry_points
