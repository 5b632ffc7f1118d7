"""The import graph of sec_lib, measured from the code: its levels, its cycles and its upward imports.

    python tools/import_graph.py          # prints the rooms by level, then any cycle or upward import
    python tools/import_graph.py --local  # also lists every function-local import

A *page module* is ``sec_lib/chapters/<name>.py`` of a notebook ``notebooks/<name>.ipynb`` (:func:`page_modules`):
no page module imports another (:func:`page_imports`) or asks what kind of store it reads (:func:`store_kind_checks`).

A *room* is a top-level module or subpackage of ``sec_lib`` (``sec_lib.runs``, ``sec_lib.chapters``,
``sec_lib.sec``, ...). Room A depends on room B when a module of A imports a module of B (any import statement,
at any depth of the file: lazy imports inside functions count). A room's *level* is 1 plus the longest chain of
rooms below it, so the number of levels is the longest chain of dependencies. An *upward import* is one from a
room into a room of a higher layer of :data:`LAYERS` (``../shared/DESIGN.md``'s house: data flows one way). Inside a room,
the modules import one way too: :func:`module_graph` is a room's graph of modules, lazy imports included.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sec_lib"
#: The layers, bottom first. A room may import rooms of its own layer or below.
LAYERS = (
    ("params", "threads", "tempfiles", "lifetime", "kernels", "report", "sec", "losses", "metrics", "monitor"),   # core utilities
    ("data", "models", "reference", "toylab", "scalelab"),                                # core
    ("runs",),                                                                            # a config becomes a result
    ("analysis",),                                                                        # what pages share
    ("figures",),
    ("chapters",),
    ("site",),
    ("book",),
)


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "sec_lib" else None


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)     # `from . import x` names module x
    return {m for m in out if m.startswith("sec_lib")}


def graph() -> dict[str, set[str]]:
    """Room -> the rooms it imports (the package's own __init__ left out)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = _module(path)
        room = _room(module)
        if room is None:
            continue
        edges.setdefault(room, set())
        for target in _imports(path, module):
            other = _room(target)
            if other is None or other == room:
                continue
            if (ROOT / other).is_dir() or (ROOT / f"{other}.py").exists():
                edges[room].add(other)
    return edges


def _is_source(module: str) -> bool:
    """Whether ``module`` is a file of sec_lib: a module, or a package's ``__init__.py``."""
    base = ROOT.parent / module.replace(".", "/")
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def package_rooms() -> list[str]:
    """The rooms that are packages (``sec_lib/<room>/__init__.py``): those with modules of their own to measure."""
    return sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())


#: The notebooks whose code the page modules hold.
NOTEBOOKS = ROOT.parent / "notebooks"


def page_modules() -> list[str]:
    """The *page modules*: ``sec_lib/chapters/<name>.py`` for each ``notebooks/<name>.ipynb``, one per notebook and
    named as it. Every other module of ``chapters/`` serves one page and is no page of its own."""
    return sorted(f"sec_lib.chapters.{nb.stem}" for nb in NOTEBOOKS.glob("*.ipynb")
                  if (ROOT / "chapters" / f"{nb.stem}.py").exists())


def page_imports() -> list[tuple[str, str]]:
    """(page module, page module it imports) for every import of one page module by another: none, since the
    analysis pages share lives outside them (``sec_lib/analysis/``, ``sec_lib/report/``, or a module of
    ``chapters/`` that is no page)."""
    pages = set(page_modules())
    edges = module_graph("chapters")
    return sorted((a, b) for a in pages for b in edges.get(a, ()) if b in pages)


def store_kind_checks(modules=None) -> list[str]:
    """'module:line' for every ``isinstance(x, K)`` in ``modules`` (default: the page modules) whose class ``K``
    names a kind of store (a name ending in ``Store`` or ``Tier``): pages read a
    :class:`~sec_lib.analysis.source.RunSource` and never ask what kind of store is behind it."""
    out = []
    for module in modules or page_modules():
        path = ROOT.parent / (module.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                names = [getattr(k, "id", getattr(k, "attr", "")) for k in kinds]
                if any(n.endswith(("Store", "Tier")) for n in names):
                    out.append(f"{module}:{node.lineno}")
    return out


def module_graph(room: str) -> dict[str, set[str]]:
    """Module -> the modules of the same room (``sec_lib/<room>/``) it imports, at its top or inside a function
    (a circle of modules is a circle however late one of its imports runs); a package's ``__init__`` is a module too."""
    edges: dict[str, set[str]] = {}
    for path in sorted((ROOT / room).rglob("*.py")):
        module = _module(path)
        edges[module] = set()
        for target in _imports(path, module):
            while target and not _is_source(target):
                target = target.rpartition(".")[0]            # `from .x import name`: the module x
            if target != module and _room(target) == room:
                edges[module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more rooms (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def levels(edges: dict[str, set[str]]) -> dict[str, int]:
    """Room -> level (1 for a room that imports no other room); requires no cycles."""
    memo: dict[str, int] = {}

    def level(v):
        if v not in memo:
            memo[v] = 1 + max((level(w) for w in edges.get(v, ())), default=0)
        return memo[v]

    return {v: level(v) for v in edges}


def layer_of(room: str) -> int:
    for i, layer in enumerate(LAYERS):
        if room in layer:
            return i
    raise KeyError(f"room {room!r} is in no layer of tools/import_graph.py LAYERS; add it where it belongs")


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(room, imported room) pairs where the imported room sits in a higher layer."""
    return sorted((a, b) for a, bs in edges.items() for b in bs if layer_of(b) > layer_of(a))


def local_imports(root: Path | None = None) -> list[tuple[str, int, str]]:
    """(file, line, first line of the statement) for every import statement inside a function body of sec_lib:
    the imports that run late. An import under ``if TYPE_CHECKING:`` or ``try:`` at a module's top is not one."""
    root = root or ROOT
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree, lines = ast.parse(text), text.splitlines()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        out.append((str(path.relative_to(root.parent)), node.lineno, lines[node.lineno - 1].strip()))
    return sorted(set(out))


def long_modules(limit: int = 650, root: Path | None = None) -> dict[str, int]:
    """Module file -> its number of lines, for each over ``limit``."""
    root = root or ROOT
    sizes = {str(p.relative_to(root.parent)): len(p.read_text(encoding="utf-8").splitlines())
             for p in sorted(root.rglob("*.py"))}
    return {p: n for p, n in sizes.items() if n > limit}


def main() -> int:
    edges = graph()
    cyc = cycles(edges)
    up = upward(edges)
    if cyc:
        print("cycles:", cyc)
    else:
        lv = levels(edges)
        print(f"{max(lv.values())} levels")
        for n in sorted(set(lv.values()), reverse=True):
            print(f"  level {n}: {', '.join(sorted(r for r, v in lv.items() if v == n))}")
    print("upward imports:", up or "none")
    inner = [c for room in package_rooms() for c in cycles(module_graph(room))]
    print("circles of modules inside a room:", inner or "none")
    runs = levels(module_graph("runs"))
    print(f"levels of modules inside runs: {max(runs.values())}")
    late = local_imports()
    print(f"function-local imports: {len(late)}")
    if "--local" in sys.argv:
        for f, line, text in late:
            print(f"  {f}:{line}: {text}")
    print("modules over 650 lines:", long_modules() or "none")
    across = page_imports()
    print("page modules importing another:", across or "none")
    kinds = store_kind_checks()
    print("page modules asking what kind of store they read:", kinds or "none")
    return 1 if cyc or up or inner or across or kinds else 0


if __name__ == "__main__":
    sys.exit(main())
