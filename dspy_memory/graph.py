"""The memory graph as data: entities, the memories about them and the links between the two, for
looking at what memory holds (`memory.graph(...)`) and for debugging retrieval.

Memories are nodes of their own, not only edges between entities: a fact about one entity
("Ada likes tea") has no second entity to point at, and every version of a fact (with its validity
times) stays visible. Exports: `to_json()` (node-link JSON, as networkx reads it), `to_dot()`
(Graphviz DOT text; the `graphviz` package quotes it), `to_networkx()` and `draw(path)` (a PNG via
networkx and matplotlib). `pip install 'dspy-memory[graph]'` brings those libraries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from dspy_memory.errors import DSPyMemoryError
from dspy_memory.types import Entity, MemoryRecord

# subject / object: the memory is about the entity (object: the other end of its relation);
# mention: the memory's text names it; replaced_by: an old memory to the one that replaced it.
LinkType = Literal["subject", "object", "mention", "replaced_by"]

LABEL_CHARS = 60


class GraphLink(BaseModel):
    """A memory to an entity it is about or names, or an old memory to the memory that replaced
    it. `source` is a memory id; `target` an entity id, or a memory id for `replaced_by`."""

    source: str
    target: str
    type: LinkType
    # The relation (predicate) of a memory to its subject, e.g. lives_in.
    label: str | None = None


class MemoryGraph(BaseModel):
    """Entities, the memories about them (current and past versions, dated) and their links."""

    entities: list[Entity] = Field(default_factory=list)
    memories: list[MemoryRecord] = Field(default_factory=list)
    links: list[GraphLink] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Node-link JSON (networkx's `node_link_graph` reads it): nodes with `id`, `node_type`
        ("entity" or "memory") and their fields; links with `source`, `target`, `type`, `label`."""
        nodes: list[dict[str, Any]] = [
            {"id": entity.id, "node_type": "entity", **entity.model_dump(mode="json", exclude={"id"})}
            for entity in self.entities
        ]
        nodes += [
            {"id": memory.id, "node_type": "memory", **memory.model_dump(mode="json", exclude={"id"})}
            for memory in self.memories
        ]
        return {
            "directed": True,
            "multigraph": True,
            "graph": {},
            "nodes": nodes,
            "links": [link.model_dump(mode="json") for link in self.links],
        }

    def to_dot(self) -> str:
        """Graphviz DOT text: entities as ellipses, memories as boxes (dashed when no longer
        true), labelled with the relation; render with `dot -Tpng`."""
        graphviz = _require("graphviz", "to_dot()")
        dot = graphviz.Digraph("memory", graph_attr={"rankdir": "LR"})
        for entity in self.entities:
            dot.node(entity.id, label=graphviz.escape(entity.name), shape="ellipse")
        for memory in self.memories:
            dot.node(
                memory.id,
                label=graphviz.escape(_memory_label(memory)),
                shape="box",
                style="dashed" if memory.status != "current" else "solid",
            )
        for link in self.links:
            label = link.label if link.type == "subject" and link.label else link.type
            dot.edge(link.source, link.target, label=graphviz.escape(label))
        return dot.source

    def to_networkx(self) -> Any:
        """A networkx MultiDiGraph of the same nodes and links."""
        networkx = _require("networkx", "to_networkx()")
        return networkx.node_link_graph(self.to_json(), edges="links")

    def draw(self, path: str | Path) -> Path:
        """A PNG of the graph (networkx layout, drawn by matplotlib), for debugging."""
        networkx = _require("networkx", "draw()")
        _require("matplotlib", "draw()")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        graph = self.to_networkx()
        names = {entity.id: entity.name for entity in self.entities}
        names.update({memory.id: _memory_label(memory, 30) for memory in self.memories})
        figure, axes = plt.subplots(figsize=(12, 9))
        layout = networkx.spring_layout(graph, seed=0)
        entity_ids = [entity.id for entity in self.entities]
        memory_ids = [memory.id for memory in self.memories]
        networkx.draw_networkx_nodes(graph, layout, nodelist=entity_ids, node_color="#8fbcd4", ax=axes)
        networkx.draw_networkx_nodes(
            graph, layout, nodelist=memory_ids, node_color="#f2d19b", node_shape="s", ax=axes
        )
        networkx.draw_networkx_edges(graph, layout, ax=axes, arrows=True)
        networkx.draw_networkx_labels(graph, layout, labels=names, font_size=7, ax=axes)
        axes.set_axis_off()
        path = Path(path)
        figure.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(figure)
        return path


def _memory_label(memory: MemoryRecord, chars: int = LABEL_CHARS) -> str:
    text = memory.content if len(memory.content) <= chars else memory.content[: chars - 1] + "…"
    dates = [
        f"{name} {value.date().isoformat()}"
        for name, value in (("from", memory.valid_at), ("until", memory.invalid_at))
        if value is not None
    ]
    return text + (f"\n({', '.join(dates)})" if dates else "")


def _require(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DSPyMemoryError(
            f"MemoryGraph.{what} needs the {module} package: pip install 'dspy-memory[graph]'"
        ) from None
