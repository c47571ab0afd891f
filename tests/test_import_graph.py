"""The package's modules import each other without cycles: neither at module
level nor through imports inside functions (which hide a cycle instead of
removing it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import forge_opt

ROOT = Path(forge_opt.__file__).resolve().parent
SKIP = {".venv", "build", "tests", "benchmarks", "lit_tests", "examples", "docs"}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP:
            continue
        name = ".".join(("forge_opt", *rel.with_suffix("").parts)).removesuffix(".__init__")
        modules[name] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Each module's forge_opt imports, wherever in the module they are."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                targets |= {f"{node.module}.{a.name}" for a in node.names}
        # the root package only re-exports lazily, for users
        graph[name] = {t for t in targets if t in modules and t not in (name, "forge_opt")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_is_read():
    graph = import_graph()
    assert "forge_opt.execution.engine" in graph["forge_opt.check.model"]
    assert "forge_opt.dialects.tir" in graph["forge_opt.interpreters.tir"]


def test_no_import_cycles():
    cycle = _cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_cycle_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


#: the floors of the house: a package imports nothing from those above it
FORBIDDEN = {
    "dialects": ("interpreters", "transforms", "split", "check", "frontends", "tools", "targets"),
    "transforms": ("split", "check", "execution", "tools"),
    "execution": ("split", "check", "tools"),
    "targets": ("split", "check", "tools"),
    "plan": ("transforms", "targets", "split", "check", "execution", "tools", "interpreters"),
    "split": ("check", "tools"),
    "frontends": ("transforms", "split", "check", "execution", "tools", "targets"),
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


@pytest.mark.parametrize("package", list(FORBIDDEN))
def test_a_floor_imports_nothing_from_above(package):
    graph = import_graph()
    above = [
        f"{module} imports {target}"
        for module, targets in graph.items() if _package(module) == package
        for target in targets if _package(target) in FORBIDDEN[package]
    ]
    assert not above, "\n".join(above)


def test_no_lowering_family_imports_another():
    """A family of ONNX lowerings (a module registering some) takes what it
    shares from the `tir` builder (`transforms/tir_builder.py`) or a helper
    module of no lowerings (`windows.py`), never from a sibling family."""
    prefix = "forge_opt.transforms.onnx_lowerings."
    modules = _modules()
    families = {name for name, path in modules.items()
                if name.startswith(prefix) and "@lowers(" in path.read_text()}
    assert {prefix + f for f in ("nn", "shape", "reductions", "pool", "quantize")} <= families
    crossing = [f"{name} imports {target}" for name, targets in import_graph().items() if name in families
                for target in targets if target in families]
    assert not crossing, "\n".join(crossing)


#: a hand-written module longer than this is split by family
MAX_LINES = 600


def test_no_hand_written_module_is_over_600_lines():
    """The package's modules, and the tests, benchmarks and tools beside them."""
    checkout = Path(__file__).resolve().parents[1]
    beside = {str(p.relative_to(checkout)): p for d in ("tests", "benchmarks", "tools")
              for p in (checkout / d).glob("*.py")}
    long = [
        f"{name}: {count} lines"
        for name, path in {**_modules(), **beside}.items()
        if (count := len(path.read_text().splitlines())) > MAX_LINES and "GENERATED" not in path.read_text()[:600]
    ]
    assert not long, "\n".join(long)
