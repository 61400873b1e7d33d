"""The listing: how people read graphs. Stable, one line per node, sub-graphs indented.

    graph loss(w: f32[4,3], x: f32[8,4]) -> f32[]
      a: f32[8,3] = dot_general[contract=((1,), (0,))] x, w      # model.py:14
      return a
"""
from __future__ import annotations

import itertools
import string

from mirax.core.dtypes import short_name


def _fresh_names(taken: set):
    for n in itertools.count(1):
        for combo in itertools.product(string.ascii_lowercase, repeat=n):
            name = "".join(combo)
            if name not in taken:
                taken.add(name)
                yield name


def _is_graph(v) -> bool:
    # NOTE: graph.py imports this module (Graph.__str__ is `listing`), so a Graph is known
    # here by its shape rather than its class.
    return hasattr(v, "nodes") and hasattr(v, "outputs") and hasattr(v, "consts")


def _fmt_param(v) -> str:
    if _is_graph(v):
        return f"{{{v.name}}}"
    if isinstance(v, float):
        return repr(v)
    if hasattr(v, "name") and hasattr(v, "itemsize"):  # a dtype
        return short_name(v)
    return str(v)


def _subgraphs(v) -> list:
    """The Graphs a param holds: one Graph, or a tuple of them (cond's branches)."""
    if _is_graph(v):
        return [v]
    if isinstance(v, tuple) and v and all(_is_graph(g) for g in v):
        return list(v)
    return []


def listing(graph, indent: int = 0, names: dict | None = None,
            taken: set | None = None) -> str:
    names = {} if names is None else names
    taken = set() if taken is None else taken
    fresh = _fresh_names(taken)

    def name(v):
        if v not in names:
            if v.hint and v.hint.isidentifier() and v.hint not in taken:
                taken.add(v.hint)
                names[v] = v.hint
            else:
                names[v] = next(fresh)
        return names[v]

    pad = "  " * indent
    ins = ", ".join(f"{name(v)}: {v.aval}" for v in graph.inputs)
    outs = ", ".join(str(v.aval) for v in graph.outputs)
    outs = outs if len(graph.outputs) == 1 else f"({outs})"
    lines = [f"{pad}graph {graph.name}({ins}) -> {outs}"]
    for v, val in graph.consts.items():
        shown = val.item() if getattr(val, "size", 2) == 1 else "..."
        lines.append(f"{pad}  {name(v)}: {v.aval} = const {shown}")
    rows = []
    for node in graph.nodes:
        lhs = ", ".join(f"{name(o)}: {o.aval}" for o in node.outputs)
        shown_params = node.prim.format_params(node.params) if node.prim.format_params \
            else node.params
        params = {k: v for k, v in shown_params.items() if v is not None and not _subgraphs(v)}
        ptxt = ("[" + ", ".join(f"{k}={_fmt_param(v)}" for k, v in params.items()) + "]"
                if params else "")
        args = ", ".join(name(v) for v in node.inputs)
        rows.append((lhs, f"= {node.prim.name}{ptxt} {args}".rstrip(), node))
    # align the `=` of single-result nodes (multi-result ones are left as they are)
    lhs_width = max((len(lhs) for lhs, _, node in rows if len(node.outputs) == 1), default=0)
    rows = [(f"{pad}  {lhs.ljust(lhs_width)} {rhs}", node) for lhs, rhs, node in rows]
    width = max((len(r) for r, _ in rows), default=0)
    for text, node in rows:
        lines.append(f"{text.ljust(width)}      # {node.source}" if node.source else text)
        for sub in (g for v in node.params.values() for g in _subgraphs(v)):
            lines.append(listing(sub, indent + 3, dict(names), set(taken)))
    lines.append(f"{pad}  return {', '.join(name(v) for v in graph.outputs)}")
    return "\n".join(lines)
