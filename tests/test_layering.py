"""The layering, read from the imports of every mirax module (AST, nothing imported):
folders only import the folders below them, no two folders import each other, and
function-level mirax imports are only the allowlisted ones (optional dependencies).

The floors, lowest first (DESIGN.md's layout): a module may import its own floor and any
floor below it. The public faces share one floor and may use each other, but never in a
circle."""
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "mirax"
FLOORS = [
    ("core",),
    ("graph",),
    ("interpreters",),
    ("ops",),
    ("transforms",),
    ("compiler",),
    ("backends",),
    ("distributed",),
    ("ir", "numpy", "lax", "nn", "scipy", "random", "optim", "io", "autograd", "testing",
     "debug", "tree_util", "profiler", "sharding"),
    ("examples",),
    ("mirax",),   # mirax/__init__.py: the public names, re-exported
]
# (file, imported module) -> why it is imported inside a function
FUNCTION_LEVEL_ALLOWED = {
    ("backends/__init__.py", "mirax.backends.cuda"): "optional dependency: CuPy and a GPU",
}


def _floor(folder: str) -> int:
    for i, names in enumerate(FLOORS):
        if folder in names:
            return i
    raise AssertionError(f"folder {folder!r} is on no floor: add it to FLOORS")


def _module(path: Path) -> str:
    parts = ["mirax", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mirax"


def _imports():
    """(file, line, importer module, imported module, inside a function?) for every
    import of a mirax module."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = _module(path)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]

        def visit(node, in_fn):
            for ch in ast.iter_child_nodes(node):
                fn = in_fn or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.Lambda))
                if isinstance(ch, ast.Import):
                    names = [a.name for a in ch.names]
                elif isinstance(ch, ast.ImportFrom):
                    if ch.level:
                        base = package.split(".")[:len(package.split(".")) - ch.level + 1]
                        names = [".".join(base + ([ch.module] if ch.module else []))]
                    else:
                        names = [ch.module or ""]
                    if names == ["mirax"]:   # `from mirax import numpy`: the subpackage
                        names = [f"mirax.{a.name}" for a in ch.names]
                else:
                    visit(ch, fn)
                    continue
                for target in names:
                    if target == "mirax" or target.startswith("mirax."):
                        out.append((path.relative_to(ROOT).as_posix(), ch.lineno, mod,
                                    target, in_fn))
        visit(ast.parse(path.read_text()), False)
    return out


def test_no_cycle_between_folders():
    edges = defaultdict(list)
    for file, line, src, dst, _ in _imports():
        a, b = _folder(src), _folder(dst)
        if a != b and b != "mirax":
            edges[(a, b)].append(f"{file}:{line} imports {dst}")
    succ = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)

    def path(start, goal, seen):   # a folder path start -> ... -> goal, or None
        for nxt in sorted(succ[start]):
            if nxt == goal:
                return [start, goal]
            if nxt not in seen:
                seen.add(nxt)
                rest = path(nxt, goal, seen)
                if rest:
                    return [start] + rest
        return None

    report = []
    for folder in sorted(succ):
        cycle = path(folder, folder, set())
        if cycle:
            hops = [f"  {a} -> {b}: " + "; ".join(edges[(a, b)][:3])
                    for a, b in zip(cycle, cycle[1:])]
            report.append(" -> ".join(cycle) + "\n" + "\n".join(hops))
    assert not report, "import cycles between folders:\n" + "\n".join(report)


def test_imports_only_go_down():
    up = []
    for file, line, src, dst, _ in _imports():
        a, b = _folder(src), _folder(dst)
        if b != "mirax" and _floor(b) > _floor(a):
            up.append(f"  {file}:{line}: {a} (floor {_floor(a)}) imports {dst} "
                      f"(floor {_floor(b)})")
    assert not up, "imports going up a floor:\n" + "\n".join(up)


def test_function_level_imports_are_allowlisted():
    found = [(f, line, dst) for f, line, _, dst, in_fn in _imports() if in_fn]
    bad = [f"  {f}:{line}: {dst}" for f, line, dst in found
           if (f, dst) not in FUNCTION_LEVEL_ALLOWED]
    assert not bad, ("function-level mirax imports outside the allowlist (a cycle dodged "
                     "means something lives on the wrong floor):\n" + "\n".join(bad))
    assert len(found) <= 5, f"{len(found)} function-level imports: more than a handful"


def test_environment_read_only_by_config():
    readers = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")
               if "os.environ" in p.read_text() or "getenv(" in p.read_text()]
    assert readers == ["core/config.py"], f"os.environ read outside core/config.py: {readers}"
