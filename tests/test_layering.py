"""The layout stays true: the shared layer imports no paper package, and no module imports in a circle.

The import graph is read statically (``ast``), counting every ``import``/``from ... import`` of a
``concord`` module anywhere in a file (top level or inside a function), so a lazy import cannot
hide a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "concord"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, node, path.name == "__init__.py")
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                # The longest known module that the imported name lies in (a name may be a symbol).
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("concord"):
                    graph[name].add(target)
    return graph


def is_paper(module: str) -> bool:
    return module == "concord.papers" or module.startswith("concord.papers.")


def is_app(module: str) -> bool:
    """The command line sits above the papers: it may import anything."""
    return module == "concord.cli" or module.startswith("concord.cli.") or module == "concord.__main__"


def test_the_shared_layer_imports_no_paper_package():
    graph = import_graph()
    offenders = sorted(
        f"{m} -> {t}" for m, ts in graph.items() if not is_paper(m) and not is_app(m) for t in ts if is_paper(t)
    )
    assert not offenders, "shared modules import paper packages:\n" + "\n".join(offenders)


def test_papers_do_not_import_each_other():
    graph = import_graph()

    def paper_of(m):
        parts = m.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "papers" else None

    offenders = sorted(
        f"{m} -> {t}"
        for m, ts in graph.items()
        if paper_of(m)
        for t in ts
        if paper_of(t) and paper_of(t) != paper_of(m)
    )
    assert not offenders, "paper packages import each other:\n" + "\n".join(offenders)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _without_package_inits(graph):
    # A package's __init__ re-exporting its own submodules is not a circle between modules.
    return {
        m: {t for t in ts if not (t.startswith(m + ".") or m.startswith(t + "."))}
        for m, ts in graph.items()
    }


def test_no_import_circles():
    cycles = _cycles(_without_package_inits(import_graph()))
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_circle():
    # The check above would pass vacuously if _cycles never reported anything.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("paper", ["core", "fmv", "scmoa"])
def test_each_paper_has_its_package_rules_and_commands(paper, repo_root):
    import concord.cli

    assert (PACKAGE / "papers" / paper / "__init__.py").is_file()
    assert list((repo_root / "rules" / paper).glob("*.smk"))
    commands = concord.cli.build_parser()._subparsers._group_actions[0].choices
    assert any(name.startswith(f"{paper}-") for name in commands)


def test_registry_suggests_close_names_and_lists_the_known_ones():
    from concord.engines import ENGINES
    from concord.registry import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"unknown engine backend 'vlm'\. Did you mean: 'vllm'\? Available: 'hf', 'vllm'"):
        ENGINES.get("vlm")
