"""The package's shape, checked from its source (ast only: nothing is imported, torch not needed).

1. Imports point down the layers below, never up, and no module imports itself back through
   others (no cycle). Every import counts: module level, inside functions (lazy imports are still
   dependencies), under `if TYPE_CHECKING`, and the facade's lazy table (`_LAZY` in the package root).
2. No function in src/ is longer than MAX_FUNCTION_LINES.
3. No two modules in different packages share a file name (two `init.py` tabs in an editor, two
   `labels.py` in a traceback), except the ones listed in SHARED_NAMES, each with its reason.

The layers, lowest first (a module may import its own layer and those below; docs/architecture.md
draws them). Data flows up: signals and sources make records, the detectors turn records into
findings, the report renders findings; preflight, triage, the live half (`live/`: the monitor, the
live diagnoser, watch's options and the run-log writer) and the integrations sit above the
reasoning they use. The run directory's reader is a source (`sources/rundir.py`), below its writer
(`live/runlog.py`), so `diagnose` never loads the live half.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "lossdoctor"

#: (layer, the top-level modules or sub-packages in it), lowest first
LAYERS: list[tuple[str, set[str]]] = [
    ("words", {"_version", "vocabulary", "messages"}),
    ("records", {"records", "findings"}),
    ("collect", {"signals", "sources"}),
    ("reason", {"detectors"}),
    ("preflight", {"preflight"}),
    ("triage", {"triage"}),
    ("live", {"live"}),  # monitor, live diagnoser, watch's options, the run-log writer
    ("integrations", {"integrations", "demo"}),
    ("report", {"report"}),
    ("package facade", {""}),  # lossdoctor/__init__.py: `watch`, `diagnose`, `check`... lazily
    ("command line", {"cli", "__main__"}),
]

MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PKG).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(importer: str, path: Path, level: int, module: str | None) -> str:
    package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
    if level == 0:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str) -> set[str]:
    """The package's modules `name` imports, wherever in the file the import is."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(name, path, node.level, node.module)
            for alias in node.names:  # `from . import batches`: the submodule itself
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            # the package root's lazy attributes: {"watch": ("monitor", "watch"), ...}
            for value in getattr(node.value, "values", []):
                mod = value.elts[0].value if isinstance(value, ast.Tuple) else None
                if isinstance(mod, str):
                    out.add(_resolve(name, path, 1, mod))
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for i, (_, members) in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS (and docs/architecture.md)")


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of `graph` that points up the layers, as a line naming both ends."""
    return [
        f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
        for a, targets in graph.items()
        for b in sorted(targets)
        if layer_of(b) > layer_of(a)
    ]


def test_imports_point_down_the_layers():
    up = upward_imports(GRAPH)
    assert not up, "imports that point up the stack:\n" + "\n".join(up)


def _cycle(graph: dict[str, set[str]] | None = None) -> list[str] | None:
    """One import cycle of `graph` (the modules' by default), or None (depth-first search, three
    colours)."""
    graph = GRAPH if graph is None else graph
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return stack[stack.index(t) :] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def top_package(module: str) -> str:
    """The top-level package (or root module) a module belongs to: "sources" for
    lossdoctor.sources.rundir, "" for the package root."""
    return module.split(".")[1] if "." in module else ""


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to top-level packages: `a -> b` when some module of a imports one
    of b. A cycle here (sources/rundir.py importing the live half's runlog, which imports sources)
    is one even when no two modules import each other."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        out.setdefault(top_package(a), set()).update(top_package(b) for b in targets)
    for pkg, targets in out.items():
        targets.discard(pkg)
        for t in targets:
            out.setdefault(t, set())
    return out


def test_no_package_cycle():
    cycle = _cycle(package_graph(GRAPH))
    assert cycle is None, "package import cycle: " + " -> ".join(cycle or [])


def test_the_run_directory_reader_does_not_import_the_live_half():
    """The offline half reads what the live half writes without loading it: the reader's modules
    import nothing from live/, and an import of the writer put back into the reader fails both the
    layer check and the package-cycle check."""
    offline = {"sources", "detectors", "report"}
    into_live = sorted(
        f"{a} -> {b}" for a, ts in GRAPH.items() if top_package(a) in offline for b in ts if top_package(b) == "live"
    )
    assert not into_live, into_live
    graph = {m: set(ts) for m, ts in GRAPH.items()}
    graph["lossdoctor.sources.rundir"].add("lossdoctor.live.runlog")  # the upward import of 0.1.0
    assert any(
        line.startswith("lossdoctor.sources.rundir (collect) imports lossdoctor.live.runlog")
        for line in upward_imports(graph)
    )
    cycle = _cycle(package_graph(graph))
    assert cycle is not None and {"sources", "live"} <= set(cycle)


def test_the_checks_can_fail():
    """The walker sees lazy imports and the facade's table, and the cycle search finds a cycle."""
    assert "lossdoctor.detectors.engine" in GRAPH["lossdoctor.live.monitor"]  # imported inside diagnose()
    assert "lossdoctor.live.monitor" in GRAPH["lossdoctor"]  # through _LAZY only
    GRAPH["lossdoctor.records"].add("lossdoctor.findings")
    GRAPH["lossdoctor.findings"].add("lossdoctor.records")
    try:
        assert _cycle() is not None
    finally:
        GRAPH["lossdoctor.records"].discard("lossdoctor.findings")
        GRAPH["lossdoctor.findings"] = imports_of("lossdoctor.findings")
    assert layer_of("lossdoctor.cli.main") > layer_of("lossdoctor.live.monitor") > layer_of("lossdoctor.signals.tracer")
    assert layer_of("lossdoctor.live.runlog") > layer_of("lossdoctor.sources.rundir")


#: modules that import by a computed name (invisible to the walk above), and what they load:
#: the facade its `_LAZY` table (read above), the detectors and messages packages their own modules
DYNAMIC_IMPORTS = {
    "lossdoctor": "the _LAZY table",
    "lossdoctor.detectors": "its detector families",
    "lossdoctor.messages": "its template tables",
}


def test_imports_by_computed_name_are_only_the_known_ones():
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                arg = node.args[0] if node.args else None
                outside = isinstance(arg, ast.Constant) and not str(arg.value).startswith((PKG, "."))
                if called in ("import_module", "__import__") and not outside:  # __import__("sqlite3") is fine
                    found.add(name)
    assert found == set(DYNAMIC_IMPORTS), f"imports by a computed name: {sorted(found)}"


def _functions() -> list[tuple[str, str, int]]:
    out = []
    for path in MODULES.values():
        rel = path.relative_to(SRC / PKG).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((rel, node.name, node.end_lineno - node.lineno + 1))
    return out


def test_functions_are_short():
    long = [f"{rel}:{fn} has {n} lines" for rel, fn, n in _functions() if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


#: file names two packages share on purpose (messages/<area>.py, named after its area, is not counted)
SHARED_NAMES = {
    # integrations/deepspeed.py watches an engine, sources/deepspeed.py reads its console lines
    # (tests import lossdoctor.sources.deepspeed)
    "deepspeed.py": {"integrations", "sources"},
    # signals/gradients.py (GradProbe) is imported by triage/ and detectors/gradients.py by
    # detectors/loss_shape.py, both being changed by other work: rename one when they are free
    "gradients.py": {"signals", "detectors"},
}


def _shared_names() -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for path in MODULES.values():
        package = path.parent.relative_to(SRC / PKG).as_posix()
        if path.name == "__init__.py" or package == "messages":
            continue
        where.setdefault(path.name, set()).add(package)
    return {name: packages for name, packages in where.items() if len(packages) > 1}


def test_module_names_are_unique_across_packages():
    shared = _shared_names()
    unexpected = {name: sorted(p) for name, p in shared.items() if SHARED_NAMES.get(name) != p}
    assert not unexpected, f"modules with the same file name in several packages: {unexpected}"
    gone = set(SHARED_NAMES) - set(shared)
    assert not gone, f"no longer shared: remove {sorted(gone)} from SHARED_NAMES"
