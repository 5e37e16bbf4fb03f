"""The import graph (docs/architecture.md, "Layers"): no cycle, no upward edge, no private name across modules.

Every import counts, function-local and TYPE_CHECKING ones too (they are dependencies all the same), and so
does a module named by a dotted string for the layer check ("finetune.commands.fix" in a command table is
an import by another name; it runs in another process or later, so it is no cycle). Read from the source
with `ast`: the check needs nothing installed and imports none of the code. Run it as a script to print the
edges between layers: `python tests/test_layers.py`.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRING = "<named by a string>"
#: Top-level packages from the bottom up: a module may import only its own layer and the ones below.
LAYERS = ("evals", "workbench", "finetune", "apptabs", "app", "hallucination_workbench")
#: Inside a layer, packages nothing else in the layer may import (commands sit on top of their half).
TOPS = ("workbench.cli", "finetune.commands")


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the layers (a package is its `__init__`)."""
    found = {"app": ROOT / "app.py"}
    found.update({p.stem: p for p in sorted(ROOT.glob("app_*.py"))})  # the app's tabs in their own modules
    for top in LAYERS:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in `path` that lands in `known`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:  # `from pkg import submodule` is an edge to the submodule
                sub = f"{base}.{a.name}"
                out.append((sub, []) if sub in known else (base, [a.name]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            out.append((node.value, [STRING]))
    return [(target, names) for target, names in out if target in known]


def graph(strings: bool = False) -> dict[str, dict[str, list[str]]]:
    """module -> imported module -> names taken from it; `strings` adds modules named by a string."""
    known = modules()
    edges: dict[str, dict[str, list[str]]] = {}
    for name, path in known.items():
        for target, names in imports(name, path, known):
            if target != name and (strings or STRING not in names):
                edges.setdefault(name, {}).setdefault(target, []).extend(names)
    return edges


def layer(module: str) -> int:
    top = module.split(".")[0]
    return LAYERS.index("app" if top.startswith("app_") else top)


def cycles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(edges: dict[str, dict[str, list[str]]]) -> list[str]:
    bad = [f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a)]
    for top in TOPS:
        bad += [f"{a} -> {b}" for a, targets in edges.items() for b in targets
                if (b == top or b.startswith(top + ".")) and not (a == top or a.startswith(top + "."))
                and layer(a) == layer(b)]
    return sorted(bad)


def private(edges: dict[str, dict[str, list[str]]]) -> list[str]:
    """`from m import _x` from another module, or a private module `pkg._m` imported from outside `pkg`."""
    bad = []
    for a, targets in edges.items():
        for b, names in targets.items():
            bad += [f"{a} imports {b}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
            parent, _, last = b.rpartition(".")
            if last.startswith("_") and not last.startswith("__") and not (a == parent or a.startswith(parent + ".")):
                bad.append(f"{a} imports private module {b}")
    return sorted(bad)


def folders(edges: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    """The graph between folders: a module of a package (`workbench.html.plots`, `finetune.job.methods.sft`) counts
    as its package's second-level folder (`workbench.html`, `finetune.job`); a top-level module is its own node."""
    known = modules()

    def folder(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 or known[m].name == "__init__.py" else m

    out: dict[str, dict[str, list[str]]] = {}
    for a, targets in edges.items():
        for b in targets:
            if folder(a) != folder(b):
                out.setdefault(folder(a), {}).setdefault(folder(b), []).append(f"{a} -> {b}")
    return out


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_no_two_folders_import_each_other() -> None:
    """A loop between folders (the gate's package rendering through the HTML package, which shows the gate) makes
    neither readable alone, even without a module-level cycle."""
    found = cycles(folders(graph()))
    assert found == [], [(c, {b: folders(graph())[a][b] for a in c for b in folders(graph()).get(a, {}) if b in c})
                         for c in found]


def test_every_import_points_down() -> None:
    assert upward(graph(strings=True)) == []


def test_no_private_name_crosses_modules() -> None:
    assert private(graph()) == []


def test_the_checks_catch_what_they_look_for() -> None:
    """The checks on a made-up graph: a cycle, an upward edge, a private import."""
    edges = {"workbench.a": {"workbench.b": []}, "workbench.b": {"workbench.a": [], "finetune.x": ["_y"]},
             "workbench.runner": {"workbench.cli.eval": []}, "finetune.x": {"workbench.cli._common": []}}
    assert cycles(edges) == [["workbench.a", "workbench.b"]]
    loop = {"workbench.html.plots": {"workbench.regression.stats": []}, "workbench.regression.report": {
        "workbench.html.gate_report": []}, "workbench.regression.stats": {}, "workbench.html.gate_report": {}}
    assert cycles(folders(loop)) == [["workbench.html", "workbench.regression"]]
    table = imports("hallucination_workbench", ROOT / "hallucination_workbench" / "__init__.py", modules())
    assert ("finetune.commands.fix", [STRING]) in table  # the command table's strings are edges too
    assert upward(edges) == ["workbench.b -> finetune.x", "workbench.runner -> workbench.cli.eval"]
    assert private(edges) == ["finetune.x imports private module workbench.cli._common",
                              "workbench.b imports finetune.x._y"]
    # the app's tabs sit between finetune and app.py: finetune may not import them, app.py may
    assert upward({"finetune.ui": {"apptabs.fix": []}, "app": {"apptabs.fix": []}}) == ["finetune.ui -> apptabs.fix"]


if __name__ == "__main__":
    g = graph()
    tops = [(a.split(".")[0], b.split(".")[0]) for a, targets in g.items() for b in targets]
    between = Counter((a, b) for a, b in tops if a != b)
    for (a, b), n in sorted(between.items(), key=lambda kv: (layer(kv[0][0]), layer(kv[0][1]))):
        print(f"{a:>24} -> {b:<24} {n} imports")
    print(f"{len(g)} modules with imports; cycles {cycles(g)}; upward {upward(graph(strings=True))}; "
          f"private {private(g)}")
