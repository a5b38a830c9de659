"""LightRAG's own test suite, prepared to run against ``E2LightRAG``.

``E2LightRAG`` claims to be a drop-in ``LightRAG``, so the tests shipped in the pinned
``lightrag-hku`` source distribution must pass with it substituted. This module fetches that sdist
(``pip download``, sha256-pinned, cached in the git-ignored ``.cache/lightrag-sdist/``), extracts
its tests and rewrites every way they obtain ``LightRAG``; anything it cannot rewrite is reported,
so a new upstream pattern fails loudly instead of silently testing stock LightRAG.

Run as a script (``scripts/test.sh`` does) to fill the cache before pytest runs.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

LIGHTRAG_VERSION = "1.5.7"
SDIST_NAME = f"lightrag_hku-{LIGHTRAG_VERSION}.tar.gz"
#: The file pypi.org serves for lightrag-hku 1.5.7; a different one is never run.
SDIST_SHA256 = "4d2cbb3f983b2bec209f4f154845869fc9e5800a7a2a9bb7005ba7610f4fbe0a"
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache" / "lightrag-sdist"

#: Top-level sdist entries left out, so the tests import the installed lightrag-hku (the one
#: ``E2LightRAG`` subclasses) rather than the sdist's copy of the package and its metadata.
EXCLUDED_TOP_LEVEL = frozenset({"lightrag", "lightrag_hku.egg-info"})

#: The import forms the tests use, in code or in ``python -c`` strings, up to the end of the
#: statement; other forms (several names, aliases, parentheses) are left for ``stock_uses`` to flag.
STOCK_IMPORT = re.compile(
    r"\bfrom lightrag(?:\.lightrag)? import LightRAG(?=\s*(?:$|;|#|\"|'))", re.M
)
SUBSTITUTE = "from lightrag_ext import E2LightRAG as LightRAG"
#: Ways of getting LightRAG through a string (a ``python -c`` program, a ``getattr`` name) that
#: were not rewritten.
STOCK_IN_STRING = re.compile(
    r"\bfrom\s+lightrag(?:\.\w+)*\s+import\s+(?:\*|\([^)]*\bLightRAG\b|[^;\n(]*\bLightRAG\b)"
    r"|\.LightRAG\b|^LightRAG$"  # ``x.LightRAG``, or the bare name of ``getattr(x, "LightRAG")``
)


class SdistUnavailable(RuntimeError):
    """``pip download`` could not fetch the sdist (typically: no network)."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ensure_sdist(cache_dir: Path = CACHE_DIR) -> Path:
    """The verified sdist in ``cache_dir``, downloaded with pip when missing or not the pinned file.

    Raises ``SdistUnavailable`` when pip fails and ``ValueError`` when PyPI served other bytes.
    """
    cached = cache_dir / SDIST_NAME
    if cached.is_file() and sha256(cached) == SDIST_SHA256:
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as scratch:
        command = [
            sys.executable, "-m", "pip", "download", f"lightrag-hku=={LIGHTRAG_VERSION}",
            "--no-deps", "--no-binary", ":all:", "--timeout", "30", "--retries", "2",
            "-d", scratch,
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SdistUnavailable(f"pip download timed out after {exc.timeout:.0f} s") from exc
        downloaded = Path(scratch) / SDIST_NAME
        if done.returncode != 0 or not downloaded.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SdistUnavailable(f"pip download lightrag-hku=={LIGHTRAG_VERSION} failed: {last}")
        if (digest := sha256(downloaded)) != SDIST_SHA256:
            raise ValueError(f"{SDIST_NAME} has sha256 {digest}, expected {SDIST_SHA256}")
        os.replace(downloaded, cached)  # same filesystem: a reader never sees a partial file
    return cached


def extract(sdist: Path, dest: Path) -> Path:
    """Extract the sdist's files, keeping its layout (the tests read ``lightrag_webui/`` beside
    ``tests/``) but leaving out ``EXCLUDED_TOP_LEVEL``; returns the extracted root."""
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if member.isdir() or len(parts) < 2 or parts[1] in EXCLUDED_TOP_LEVEL:
                continue
            if not member.isfile() or member.name.startswith("/") or ".." in parts:
                raise ValueError(f"unexpected sdist member {member.name!r}")
            target = dest.joinpath(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file always has contents
            target.write_bytes(source.read())
    return dest


def substitute(source: str) -> tuple[str, int]:
    """``source`` with each stock ``LightRAG`` import replaced by ``E2LightRAG``, and the count."""
    return STOCK_IMPORT.subn(SUBSTITUTE, source)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: prose, which may name LightRAG without using it."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _code_strings(tree: ast.AST) -> list[str]:
    prose = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


def names_lightrag(source: str) -> bool:
    """Whether code (not a docstring or comment) of ``source`` refers to ``LightRAG``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (
            (isinstance(node, ast.Name) and node.id == "LightRAG")
            or (isinstance(node, ast.Attribute) and node.attr == "LightRAG")
            or (isinstance(node, ast.alias) and "LightRAG" in (node.name, node.asname))
        ):
            return True
    return any(re.search(r"\bLightRAG\b", text) for text in _code_strings(tree))


def stock_uses(source: str) -> list[str]:
    """Each remaining way ``source`` can get the stock ``LightRAG`` (none after a full rewrite)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lightrag":
            if any(alias.name in ("LightRAG", "*") for alias in node.names):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and node.attr == "LightRAG":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    found += [
        f"in a string: {text!r}" for text in _code_strings(tree) if STOCK_IN_STRING.search(text)
    ]
    return found


def rewrite_tests(tests_dir: Path) -> dict[str, int]:
    """Rewrite the test files in place; returns ``{file name: imports rewritten}`` for the files
    that needed it. Raises ``AssertionError`` listing any file that refers to LightRAG but was not
    rewritten and any stock ``LightRAG`` left, so a new upstream pattern cannot go unnoticed."""
    rewritten: dict[str, int] = {}
    problems: list[str] = []
    for path in sorted(tests_dir.rglob("*.py")):
        new_source, count = substitute(path.read_text(encoding="utf-8"))
        if count:
            path.write_text(new_source, encoding="utf-8")
            rewritten[path.name] = count
        elif names_lightrag(new_source):
            problems.append(f"{path.name}: refers to LightRAG but nothing was rewritten")
        problems += [f"{path.name}: stock LightRAG left, {use}" for use in stock_uses(new_source)]
    if problems:  # raised, not asserted: this module is not assertion-rewritten and may run with -O
        raise AssertionError(
            "LightRAG's tests get LightRAG in a way not substituted:\n" + "\n".join(problems)
        )
    return rewritten


def imports_substitute_at_module_level(source: str) -> bool:
    """Whether the module itself binds ``LightRAG`` to the substitute (not just a function)."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "lightrag_ext"
        and any(alias.name == "E2LightRAG" and alias.asname == "LightRAG" for alias in node.names)
        for node in ast.parse(source).body
    )


if __name__ == "__main__":
    print(ensure_sdist())
