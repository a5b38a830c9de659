"""The layers of DESIGN.md hold in code: import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml) pass, and no module reaches back to itself through imports, counting imports
inside functions (grimp sees those; import-linter's layer contract only forbids upward ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")
importlinter_cli = pytest.importorskip("importlinter.cli")
nx = pytest.importorskip("networkx")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("llama_index_e2rag", "lightrag_ext")


def test_the_import_contracts_are_kept(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = importlinter_cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"),
                                         no_cache=True)
    assert code == 0, capsys.readouterr().out


def _import_graph() -> "nx.DiGraph":
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
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
    graph = grimp.build_graph("cyclic_pkg", cache_dir=None)
    assert graph.find_modules_directly_imported_by("cyclic_pkg.b") == {"cyclic_pkg.a"}
