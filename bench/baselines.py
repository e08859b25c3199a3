"""What users would otherwise run, on the same data: the lineage walks as tutorials write them,
and networkx in memory."""

import gc
import time
from dataclasses import dataclass

import asyncpg
import networkx as nx

# The classic walk-back: UNION ALL, a depth column, parents joined with = ANY(parent_ids).
TUTORIAL_WALK_BACK = """
WITH RECURSIVE lineage AS (
    SELECT context_id, parent_ids, kind, 0 AS depth
    FROM provenance
    WHERE tenant_id = $1 AND context_id = $2
  UNION ALL
    SELECT p.context_id, p.parent_ids, p.kind, l.depth + 1
    FROM provenance AS p
    JOIN lineage AS l ON p.context_id = ANY (l.parent_ids)
    WHERE p.tenant_id = $1 AND l.depth < 20
)
SELECT context_id, kind, depth FROM lineage
"""

# The classic blast radius: UNION, a depth column, children found with parent_ids @> ARRAY[id].
TUTORIAL_BLAST_RADIUS = """
WITH RECURSIVE impact AS (
    SELECT context_id, kind, 0 AS depth
    FROM provenance
    WHERE tenant_id = $1 AND source_uri = $2
  UNION
    SELECT c.context_id, c.kind, i.depth + 1
    FROM provenance AS c
    JOIN impact AS i ON c.parent_ids @> ARRAY[i.context_id]
    WHERE c.tenant_id = $1 AND i.depth < 20
)
SELECT DISTINCT context_id FROM impact WHERE kind = $3 OR $3 = 'any'
"""


def resident_bytes() -> int:
    """This process's resident memory now (Linux)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * 4096


@dataclass
class InMemoryGraph:
    graph: "nx.DiGraph[str]"  # parent -> child
    load_seconds: float
    memory_bytes: int

    def walk_back(self, context_id: str) -> set[str]:
        return nx.ancestors(self.graph, context_id)

    def answers_of(self, roots: list[str]) -> set[str]:
        reached: set[str] = set()
        for root in roots:
            reached |= nx.descendants(self.graph, root)
        kinds = self.graph.nodes
        return {node for node in reached if kinds[node]["kind"] == "answer"}


async def load_graph(connection: asyncpg.Connection, tenant_id: str) -> InMemoryGraph:
    """The whole tenant graph into networkx, as a user would build it from the table (inside
    the caller's tenant transaction)."""
    gc.collect()
    before = resident_bytes()
    started = time.perf_counter()
    graph: nx.DiGraph[str] = nx.DiGraph()
    cursor = connection.cursor(
        "SELECT context_id, kind, parent_ids FROM provenance WHERE tenant_id = $1",
        tenant_id,
        prefetch=10_000,
    )
    async for row in cursor:
        child = row["context_id"]
        graph.add_node(child, kind=row["kind"])
        graph.add_edges_from((parent, child) for parent in row["parent_ids"])
    seconds = time.perf_counter() - started
    gc.collect()
    return InMemoryGraph(graph, seconds, resident_bytes() - before)


# Classic invalidation: the blast radius's walk from every record a transform version made, or
# every record built or served from an index snapshot, down to the answers.
_TUTORIAL_INVALIDATION = """
WITH RECURSIVE impact AS (
    SELECT context_id, kind, 0 AS depth
    FROM provenance
    WHERE tenant_id = $1 AND {start} = $2
  UNION
    SELECT c.context_id, c.kind, i.depth + 1
    FROM provenance AS c
    JOIN impact AS i ON c.parent_ids @> ARRAY[i.context_id]
    WHERE c.tenant_id = $1 AND i.depth < 20
)
SELECT DISTINCT context_id FROM impact WHERE kind = 'answer'
"""
TUTORIAL_INVALIDATION_BY_VERSION = _TUTORIAL_INVALIDATION.format(start="transform_version")
TUTORIAL_INVALIDATION_BY_SNAPSHOT = _TUTORIAL_INVALIDATION.format(start="index_snapshot")
