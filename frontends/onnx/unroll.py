"""Control flow known at compile time, for graph resolution (`resolve`):
an `If` whose condition is known becomes its taken branch; a `Loop` with a
known trip count (and a condition known, or passed through unchanged by
the body) and a `Scan` whose scan axis has a known length are unrolled,
their scan outputs joined. Values inlined from a subgraph are renamed
`<node>/<name>` so that diagnostics still point at it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, NodeProto, numpy_helper

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.graph import describe_node, node_label, rename_reads, subgraphs
from forge_opt.frontends.onnx.round import RoundState, static_shape

#: A Loop is unrolled only while the copies of its body stay below this.
MAX_UNROLLED_NODES = 20_000


class UnrollControlFlow(RoundState):
    """The walk's steps for If, Loop and Scan: the nodes that replace one,
    its subgraph inlined under the node's name."""

    def _if(self, node: NodeProto) -> list[NodeProto] | None:
        cond = self.known.get(node.input[0])
        if cond is None:
            return None
        branch = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
        graph = next(a.g for a in node.attribute if a.name == branch)
        nodes, outs = self._inline(graph, f"{node_label(node)}/{branch.split('_')[0]}", {})
        for out, inner in zip(node.output, outs):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [inner], [out], name=f"{node_label(node)}/{out}"))
        return nodes

    def _loop(self, node: NodeProto) -> list[NodeProto] | None:
        trip_name = node.input[0] if node.input else ""
        cond_name = node.input[1] if len(node.input) > 1 else ""
        if not trip_name or trip_name not in self.known:
            return None  # a while loop: its length is data
        trips = int(np.asarray(self.known[trip_name]).reshape(-1)[0])
        body = next(a.g for a in node.attribute if a.name == "body")
        if cond_name:
            if cond_name not in self.known:
                return None
            if not bool(np.asarray(self.known[cond_name]).reshape(-1)[0]):
                trips = 0
            elif not _passes_condition_through(body, self.known):
                return None  # the body may stop early on computed values
        carried = list(node.input[2:])
        n_scans = len(body.output) - 1 - len(carried)
        if trips == 0 and n_scans:
            return None  # empty scan outputs of a shape only a run would give
        self._check_unrolled(node, trips, body)
        label = node_label(node)
        nodes: list[NodeProto] = []
        scans: list[list[str]] = [[] for _ in range(n_scans)]
        cond_value = cond_name or self._constant(f"{label}/cond", np.array(True))
        for i in range(trips):
            bind = {body.input[0].name: self._constant(f"{label}/{i}/iteration", np.array(i, np.int64))}
            if len(body.input) > 1:
                bind[body.input[1].name] = cond_value
            for inner, value in zip(body.input[2:], carried):
                bind[inner.name] = value
            inlined, outs = self._inline(body, f"{label}/{i}", bind)
            nodes += inlined
            carried = outs[1 : 1 + len(carried)]
            for k, scan in enumerate(outs[1 + len(carried) :]):
                scans[k].append(scan)
        results = list(node.output)
        for out, value in zip(results, carried):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [value], [out], name=f"{label}/{out}"))
        for out, values in zip(results[len(carried) :], scans):
            if out:
                parts = [self._unsqueeze(v, 0, nodes, label) for v in values]
                nodes.append(onnx.helper.make_node("Concat", parts, [out], axis=0, name=f"{label}/{out}"))
        return nodes

    def _scan(self, node: NodeProto) -> list[NodeProto] | None:
        """Unrolled along the scan axis, whose length the inputs' types give:
        each step reads slices of the scan inputs (Gather at the step),
        threads the state and adds to the scan outputs (joined on their axes)."""
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        body: GraphProto = attrs["body"]
        m = int(attrs["num_scan_inputs"])
        n = len(node.input) - m
        k = len(body.output) - n
        in_axes = list(attrs.get("scan_input_axes", [0] * m))
        in_reverse = list(attrs.get("scan_input_directions", [0] * m))
        out_axes = list(attrs.get("scan_output_axes", [0] * k))
        out_reverse = list(attrs.get("scan_output_directions", [0] * k))
        shapes = [static_shape(self.types.get(name)) for name in node.input[n:]]
        if any(s is None for s in shapes):
            return None
        lengths = {s[a % len(s)] for s, a in zip(shapes, in_axes) if s is not None}
        if len(lengths) != 1:
            return None
        steps = lengths.pop()
        if steps == 0 and k:
            return None
        label = node_label(node)
        self._check_unrolled(node, steps, body)
        nodes: list[NodeProto] = []
        states = list(node.input[:n])
        outs: list[list[str]] = [[] for _ in range(k)]
        for t in range(steps):
            bind = dict(zip((i.name for i in body.input[:n]), states))
            for j, (inner, outer) in enumerate(zip(body.input[n:], node.input[n:])):
                at = self._constant(f"{label}/{t}/at", np.array(steps - 1 - t if in_reverse[j] else t, np.int64))
                piece = f"{label}/{t}/{inner.name}"
                nodes.append(onnx.helper.make_node("Gather", [outer, at], [piece], axis=in_axes[j], name=piece))
                bind[inner.name] = piece
            inlined, results = self._inline(body, f"{label}/{t}", bind)
            nodes += inlined
            states = results[:n]
            for j, value in enumerate(results[n:]):
                outs[j].append(value)
        for out, value in zip(node.output, states):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [value], [out], name=f"{label}/{out}"))
        for j, (out, values) in enumerate(zip(node.output[n:], outs)):
            if out:
                ordered = values[::-1] if out_reverse[j] else values
                parts = [self._unsqueeze(v, out_axes[j], nodes, label) for v in ordered]
                nodes.append(onnx.helper.make_node("Concat", parts, [out], axis=out_axes[j], name=f"{label}/{out}"))
        return nodes

    def _check_unrolled(self, node: NodeProto, steps: int, body: GraphProto) -> None:
        if steps * max(len(body.node), 1) > MAX_UNROLLED_NODES:
            raise ForgeOptError(
                f"{describe_node(node)}: unrolling {steps} iterations of a {len(body.node)}-node body makes "
                f"{steps * len(body.node):,} nodes, more than the limit of {MAX_UNROLLED_NODES:,}"
            )

    def _inline(self, graph: GraphProto, prefix: str, bind: dict[str, str]) -> tuple[list[NodeProto], list[str]]:
        """The subgraph's nodes with its own values renamed under `prefix`
        and its inputs bound to outer values; the names of its outputs."""
        rename = dict(bind)
        for t in graph.initializer:
            rename[t.name] = self._constant(f"{prefix}/{t.name}", numpy_helper.to_array(t))
        nodes = []
        for inner in graph.node:
            copy = NodeProto()
            copy.CopyFrom(inner)
            copy.name = f"{prefix}/{node_label(inner)}"
            copy.input[:] = [rename.get(n, n) for n in inner.input]
            for sub in subgraphs(copy) if copy.attribute else ():
                rename_reads(sub, rename)
            for i, out in enumerate(inner.output):
                if out:
                    rename[out] = copy.output[i] = f"{prefix}/{out}"
            nodes.append(copy)
        return nodes, [rename.get(o.name, o.name) for o in graph.output]


def _passes_condition_through(body: GraphProto, known: dict[str, np.ndarray]) -> bool:
    """Whether the body's condition output is its condition input or a true
    constant (of the body, or a known outer value), directly or through
    Identity: then only the trip count ends the loop."""
    if len(body.input) < 2:
        return False
    cond_in = body.input[1].name
    name = body.output[0].name
    producers = {o: n for n in body.node for o in n.output}
    initializers = {t.name: t for t in body.initializer}
    while name != cond_in:
        node = producers.get(name)
        if node is not None and node.op_type == "Identity":
            name = node.input[0]
            continue
        if node is not None and node.op_type == "Constant" and node.attribute[0].type == AttributeProto.TENSOR:
            value = numpy_helper.to_array(node.attribute[0].t)
        elif name in initializers:
            value = numpy_helper.to_array(initializers[name])
        elif node is None and name in known:
            value = known[name]
        else:
            return False
        return bool(np.asarray(value).reshape(-1)[0])
    return True
