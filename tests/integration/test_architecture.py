"""The layers of DESIGN.md hold in code: import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml) pass, and no module reaches back to itself through imports, counting imports
inside functions (grimp sees those; import-linter's layer contract only forbids upward ones).
The tests mirror the package (tests/README.md): each test module sits in the folder of the
package it tests and is named after one of that package's modules."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("llama_index_e2rag", "lightrag_ext")
#: grimp and import-linter come with the ``test`` extra, not with the package
NEEDS_LINTER = "needs import-linter (brings grimp): pip install -e '.[test]'"


def _linter(module: str) -> Any:
    return pytest.importorskip(module, reason=NEEDS_LINTER)


def test_the_import_contracts_are_kept(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    # import-linter configures its logging with ``dictConfig``, which disables every logger
    # that exists already (ours too): later tests in this process would see no warnings
    for existing in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(existing, logging.Logger):
            monkeypatch.setattr(existing, "disabled", existing.disabled)
    code = _linter("importlinter.cli").lint_imports(config_filename=str(ROOT / "pyproject.toml"),
                                         no_cache=True)
    assert code == 0, capsys.readouterr().out


def _import_graph() -> "nx.DiGraph":
    graph = _linter("grimp").build_graph(*PACKAGES, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_node(module)
        edges.add_edges_from((module, imported)
                             for imported in graph.find_modules_directly_imported_by(module))
    return edges


def test_no_module_imports_itself_back_even_inside_a_function():
    edges = _import_graph()
    cycles = [sorted(group) for group in nx.strongly_connected_components(edges)
              if len(group) > 1]
    assert cycles == [], "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in cycles)


def test_the_cycle_check_sees_function_level_imports(tmp_path, monkeypatch):
    """The rule above can fail: a package whose two modules import each other, one of them
    inside a function, is reported."""
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic_pkg import b\n")
    (package / "b.py").write_text("def late():\n    from cyclic_pkg import a\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = _linter("grimp").build_graph("cyclic_pkg", cache_dir=None)
    assert graph.find_modules_directly_imported_by("cyclic_pkg.b") == {"cyclic_pkg.a"}


# -- function-level imports (issue 24: one stays only where it defers a heavy dependency) -------

def uncommented_function_imports(source: str) -> list[int]:
    """Lines of the imports of ``PACKAGES``' own modules made inside a function with no comment
    saying what they defer: on the import's own lines, on a comment line just above it, or
    inherited from the import just above it (one comment above a run of imports covers it)."""
    import ast
    import io
    import tokenize

    tree = ast.parse(source)
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    lines = source.splitlines()

    def own(node: ast.AST) -> bool:
        if isinstance(node, ast.ImportFrom):
            return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
        return isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] in PACKAGES for alias in node.names)

    inside = {node for function in ast.walk(tree)
              if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
              for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))}
    covered: set[int] = set()  # last lines of commented function-level imports
    missing = []
    for node in sorted(inside, key=lambda n: n.lineno):
        above = node.lineno - 1
        if (comments & set(range(node.lineno, node.end_lineno + 1))
                or (above in comments and lines[above - 1].lstrip().startswith("#"))
                or above in covered):
            covered.add(node.end_lineno)
        elif own(node):
            missing.append(node.lineno)
    return missing


def test_every_function_level_import_of_our_modules_says_what_it_defers():
    missing = [f"{path.relative_to(ROOT)}:{line}"
               for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
               for line in uncommented_function_imports(path.read_text(encoding="utf-8"))]
    assert missing == [], ("import these at the module top, or say what they defer "
                           "(`# deferred: llama-index, ~1 s`):\n" + "\n".join(missing))


def test_the_deferred_import_check_reports_an_uncommented_one():
    source = '''
import json
from llama_index_e2rag.errors import E2RAGError


def bare():
    x = 1  # a comment about x, not about the import below
    from llama_index_e2rag.schema import NodeKind
    import lightrag_ext.rag
    from . import sibling
    import networkx  # a third-party import is not this rule's business
    return NodeKind


def explained():
    # deferred: llama-index (~1 s)
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.retrievers import RETRIEVERS

    from lightrag_ext.storage import layer_workspace  # deferred: LightRAG
    return E2RAGIndex, RETRIEVERS, layer_workspace
'''
    assert uncommented_function_imports(source) == [8, 9, 10]


# -- the tests' layout ----------------------------------------------------------------------------
TESTS = ROOT / "tests"
#: test folders of cross-cutting behaviour (README, examples, faults, offline entry points, ...)
CROSS_CUTTING = ("integration",)
#: a test folder -> the package folder it mirrors (any other folder mirrors
#: llama_index_e2rag/<folder>); benchmarks/ is the evaluation harness, mirrored by folder only
ROOTS = {"lightrag_ext": ROOT / "lightrag_ext", "benchmarks": ROOT / "benchmarks"}


def _mirrored(rel: Path) -> Path:
    """The package folder a test module's folder mirrors (it may not exist)."""
    parts = rel.parts[:-1]
    if parts and parts[0] in ROOTS:
        return ROOTS[parts[0]].joinpath(*parts[1:])
    return ROOT.joinpath("llama_index_e2rag", *parts)


def _module_names(package: Path) -> set[str]:
    names = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    return {"init" if n == "__init__" else n for n in names}


def layout_problems(tests: Path = TESTS) -> list[str]:
    """Test modules outside the mirror: a folder that mirrors no package folder, or a name
    ``test_<module>[_<aspect>]`` whose module is not in the mirrored package."""
    problems = []
    for test in sorted(tests.rglob("test_*.py")):
        rel = test.relative_to(tests)
        if rel.parts[0] in CROSS_CUTTING:
            continue
        package = _mirrored(rel)
        if not (package / "__init__.py").is_file():
            problems.append(f"{rel}: no package folder {package.relative_to(ROOT)}")
            continue
        if rel.parts[0] == "benchmarks":
            continue
        stem = test.stem[len("test_"):]
        if not any(stem == m or stem.startswith(m + "_") for m in _module_names(package)):
            problems.append(f"{rel}: no module {stem.split('_')[0]}... in {package.relative_to(ROOT)}")
    return problems


def test_every_test_module_mirrors_a_package_module_or_is_cross_cutting() -> None:
    assert layout_problems() == []


def test_the_layout_check_reports_a_stray_test_module(tmp_path: Path) -> None:
    (tmp_path / "retrievers").mkdir()
    (tmp_path / "retrievers" / "test_entity_event_anchor.py").write_text("")  # a module's aspect
    (tmp_path / "retrievers" / "test_telepathy.py").write_text("")  # no such module
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "test_x.py").write_text("")  # no such package folder
    (tmp_path / "test_flat_thing.py").write_text("")  # a top-level module names no root module
    (tmp_path / "integration").mkdir()
    (tmp_path / "integration" / "test_readme.py").write_text("")  # cross-cutting: anywhere
    problems = layout_problems(tmp_path)
    assert [p.split(":")[0] for p in problems] == [
        "nowhere/test_x.py", "retrievers/test_telepathy.py", "test_flat_thing.py"
    ], problems
