"""graph: the Graph IR's internals, one floor above core. Graph / Node / Var (graph.py),
the listing (printer.py), staging a function into a Graph (build.py: make_graph,
trace_to_graph) and running one through whatever interpreters are active (interpret.py).
`mx.ir` is the public face on top."""
