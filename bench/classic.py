"""A DAG the project did not make: a table in the classic schema tutorials use (one row per
record, its parents as an array), loaded into the project's tables through the bulk path the
generated DAG takes, with the figures' inputs picked from the data.

`python -m bench --classic-table SCHEMA.TABLE` benchmarks such a table (a user's own data);
`python -m bench.classic` writes one of the tutorial shape (documents -> chunks -> retrievals
of 8 -> summaries of 3 -> claims -> answers, skewed popularity) to have one to try it on.
"""

import asyncio
import json
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import asyncpg
import typer

from bench.dag import Picks, Row
from bench.database import copy_dag
from lineage.core.errors import InvalidRecord
from lineage.core.progress import Progress, unwatched
from lineage.core.record import NewContext, validate
from lineage.core.versions import version_key
from lineage.services.root_sources import Roots, carry

# The classic table's columns, in the order they are read and written.
CLASSIC_COLUMNS = (
    "id",
    "parent_ids",
    "kind",
    "content_hash",
    "transform",
    "version",
    "source_uri",
    "snapshot",
    "created_at",
)
CLASSIC_TABLE = """
CREATE TABLE {table} (
    id           text        PRIMARY KEY,
    parent_ids   text[]      NOT NULL DEFAULT '{{}}',
    kind         text        NOT NULL,
    content_hash text        NOT NULL,
    transform    text,
    version      text,
    source_uri   text,
    snapshot     text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON {table} USING gin (parent_ids);
"""
# Tutorials keep a bare hex digest; the project names its algorithm.
BARE_SHA256_LENGTH = 64
TYPICAL_DOCUMENTS = 200
SAMPLED_ANSWERS = 2000


def quoted_table(name: str) -> str:
    """SCHEMA.TABLE or TABLE, each part quoted as an identifier."""
    parts = name.split(".")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"classic table {name!r}: write it as SCHEMA.TABLE or TABLE")
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


# ---------------------------------------------------------------------------------------------
# A tutorial-shaped DAG, written to a classic table.


class TutorialDag:
    """Documents chunked by chunker 1.0 (the older half) or 2.1 (the newer half); each answer
    from a retrieval of 8 chunks under one of six index snapshots, two summaries of 3 of those
    chunks (with the retrieval: diamonds), a claim on each summary and the answer on both
    claims. Documents are picked with a Zipf popularity of exponent 1."""

    RECORDS_PER_DOCUMENT = 60
    RECORDS_PER_ANSWER = 6  # retrieval, 2 summaries, 2 claims, answer
    SNAPSHOTS = 6

    def __init__(self, records: int, seed: int = 21) -> None:
        self.random = random.Random(seed)
        self.documents = max(4, records // self.RECORDS_PER_DOCUMENT)
        corpus = self.documents * 9  # a document and 8 chunks on average
        self.answers = max(10, (records - corpus) // self.RECORDS_PER_ANSWER)
        self.start = datetime(2025, 6, 1, tzinfo=UTC)

    def _row(
        self,
        parents: list[str],
        kind: str,
        moment: datetime,
        transform: str | None = None,
        version: str | None = None,
        source_uri: str | None = None,
        snapshot: str | None = None,
    ) -> Row:
        record_id = str(uuid.UUID(int=self.random.getrandbits(128)))
        digest = f"{self.random.getrandbits(256):064x}"
        return (record_id, parents, kind, digest, transform, version, source_uri, snapshot, moment)

    def rows(self) -> Iterator[Row]:
        """Rows in CLASSIC_COLUMNS order, parents first."""
        chunks: list[list[str]] = []
        for number in range(self.documents):
            moment = self.start + timedelta(minutes=number)
            document = self._row(
                [], "document", moment, source_uri=f"https://wiki.example.org/page/{number}"
            )
            yield document
            version = "1.0" if number < self.documents // 2 else "2.1"
            own = []
            for _ in range(self.random.randint(4, 12)):
                chunk = self._row([document[0]], "chunk", moment, "chunker", version)
                own.append(chunk[0])
                yield chunk
            chunks.append(own)
        weights = [1 / (rank + 1) for rank in range(self.documents)]
        for number in range(self.answers):
            moment = self.start + timedelta(days=30, seconds=number)
            snapshot = f"index-{number * self.SNAPSHOTS // self.answers:02d}"
            retrieved: set[str] = set()
            while len(retrieved) < 8:
                [document_chunks] = self.random.choices(chunks, weights)
                retrieved.add(self.random.choice(document_chunks))
            picked = sorted(retrieved)
            retrieval = self._row(picked, "retrieval", moment, "retriever", "0.9", None, snapshot)
            yield retrieval
            claims = []
            for _ in range(2):
                summary = self._row(
                    [retrieval[0], *self.random.sample(picked, 3)], "summary", moment, "summarise"
                )
                yield summary
                claim = self._row([summary[0]], "claim", moment, "extract")
                claims.append(claim[0])
                yield claim
            yield self._row(claims, "answer", moment, "answer")


async def write_tutorial_table(url: str, table: str, records: int, seed: int = 21) -> int:
    """A fresh classic table of about `records` rows at `url`; returns how many it holds."""
    name = quoted_table(table)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(f"DROP TABLE IF EXISTS {name}")
        await connection.execute(CLASSIC_TABLE.format(table=name))
        schema, _, relation = table.rpartition(".")
        rows = list(TutorialDag(records, seed).rows())
        await connection.copy_records_to_table(
            relation, records=rows, columns=CLASSIC_COLUMNS, schema_name=schema or None
        )
        await connection.execute(f"ANALYZE {name}")
    finally:
        await connection.close()
    return len(rows)


# ---------------------------------------------------------------------------------------------
# A classic table into the project's tables.


class ClassicTableError(ValueError):
    """The classic table cannot be loaded as it is: the message says what to fix."""


@dataclass
class ClassicDag:
    """The table's records in the project's column order, parents first, with root sources."""

    rows: list[tuple[Row, Roots]] = field(default_factory=list)
    transform_versions: list[str] = field(default_factory=list)
    picks: Picks = field(default_factory=Picks)


def project_row(tenant_id: str, row: asyncpg.Record | dict[str, Any]) -> Row:
    """A classic row in the provenance table's columns (bench.dag.COLUMNS)."""
    content_hash = row["content_hash"]
    if ":" not in content_hash and len(content_hash) == BARE_SHA256_LENGTH:
        content_hash = f"sha256:{content_hash.lower()}"
    transform, version = row["transform"], row["version"]
    transform_version = f"{transform}@{version}" if transform and version else None
    return (
        tenant_id,
        row["id"],
        list(row["parent_ids"] or []),
        row["kind"],
        row["source_uri"],
        content_hash,
        transform,
        transform_version,
        None,
        row["snapshot"],
        None,
        row["created_at"],
        "{}",
    )


def check(row: Row) -> None:
    try:
        validate(
            NewContext(
                context_id=row[1], parent_ids=row[2], kind=row[3], source_uri=row[4],
                content_hash=row[5], transform=row[6], transform_version=row[7],
                index_snapshot=row[9],
            )
        )  # fmt: skip
    except (InvalidRecord, ValueError) as exc:
        raise ClassicTableError(f"row id={row[1]!r}: {exc}") from None


def parents_first(rows: list[Row]) -> Iterator[Row]:
    """The rows in an order where every parent comes before its children."""
    by_id = {row[1]: row for row in rows}
    waiting = {row[1]: len(row[2]) for row in rows}
    children: defaultdict[str, list[str]] = defaultdict(list)
    for row in rows:
        for parent in row[2]:
            if parent not in by_id:
                raise ClassicTableError(
                    f"row id={row[1]!r}: parent {parent!r} is not in the table "
                    "(load the parents too, or drop the dangling id from parent_ids)"
                )
            children[parent].append(row[1])
    ready = [row[1] for row in rows if not row[2]]
    emitted = 0
    while ready:
        record_id = ready.pop()
        emitted += 1
        yield by_id[record_id]
        for child in children.pop(record_id, ()):
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    if emitted != len(rows):
        stuck = next(record_id for record_id, count in waiting.items() if count)
        raise ClassicTableError(
            f"row id={stuck!r}: parent_ids form a cycle ({len(rows) - emitted:,} rows on or "
            "below it); a lineage DAG has none"
        )


async def read_classic(
    url: str, table: str, tenant_id: str, seed: int = 9, progress: Progress = unwatched
) -> ClassicDag:
    """Every row of the classic table, checked as the service checks a record, in the project's
    layout and parents-first order; nothing is written if a row is refused."""
    name = quoted_table(table)
    connection = await asyncpg.connect(url)
    try:
        progress("read the classic table")
        try:
            fetched = await connection.fetch(f"SELECT {', '.join(CLASSIC_COLUMNS)} FROM {name}")
        except asyncpg.UndefinedTableError:
            raise ClassicTableError(f"classic table {table!r}: no such table at {url}") from None
        except asyncpg.UndefinedColumnError as exc:
            raise ClassicTableError(
                f"classic table {table!r}: {exc}; it needs the columns {', '.join(CLASSIC_COLUMNS)}"
            ) from None
    finally:
        await connection.close()
    rows = [project_row(tenant_id, row) for row in fetched]
    del fetched
    if not rows:
        raise ClassicTableError(f"classic table {table!r} is empty")
    for row in rows:
        check(row)
    dag = ClassicDag()
    roots_by_id: dict[str, Roots] = {}
    descendants: Counter[str] = Counter()
    answers: list[str] = []
    for row in parents_first(rows):
        parents = row[2]
        roots = carry(roots_by_id[p] for p in parents) if parents else {row[4]: 0}
        roots_by_id[row[1]] = roots
        if parents:
            descendants.update(roots.keys())
        if row[3] == "answer":
            answers.append(row[1])
        dag.rows.append((row, roots))
    if not answers:
        raise ClassicTableError(f"classic table {table!r} has no kind='answer' rows to walk from")
    dag.picks = picks_from(rows, descendants, answers, random.Random(seed))
    dag.transform_versions = sorted({row[7] for row in rows if row[7]})
    return dag


def picks_from(
    rows: list[Row], descendants: Counter[str], answers: list[str], chooser: random.Random
) -> Picks:
    """The figures' inputs from the data: sampled answers, a sample of the documents' sources
    (typical), the one with the most descendants (hottest), the oldest version of the
    transform whose oldest version made the most records, and the index snapshot most records
    name."""
    # Documents when the data names them (a query root is not what a blast radius starts from).
    roots = [row for row in rows if not row[2]]
    sources = sorted({row[4] for row in roots if row[3] == "document"} or {row[4] for row in roots})
    versions: Counter[str] = Counter(row[7] for row in rows if row[7])
    by_transform: defaultdict[str, list[str]] = defaultdict(list)
    for version in versions:
        by_transform[version.partition("@")[0]].append(version)
    oldest = [
        min(group, key=lambda v: (version_key(v) is None, version_key(v) or v))
        for group in by_transform.values()
        if len(group) > 1
    ] or list(versions)
    snapshots = Counter(row[9] for row in rows if row[9])
    return Picks(
        hottest_source_uri=max(sources, key=lambda s: (descendants[s], s)),
        typical_source_uris=chooser.sample(sources, min(TYPICAL_DOCUMENTS, len(sources))),
        answer_ids=chooser.sample(answers, min(SAMPLED_ANSWERS, len(answers))),
        snapshot=snapshots.most_common(1)[0][0] if snapshots else "",
        transform_version=max(oldest, key=lambda v: (versions[v], v)) if oldest else "",
        answers=len(answers),
        records=len(rows),
    )


async def load_classic(
    url: str, source_url: str, table: str, tenant_id: str, progress: Progress = unwatched
) -> tuple[Picks, dict[str, float]]:
    """The classic table at source_url into the (fresh, migrated) database at url."""
    dag = await read_classic(source_url, table, tenant_id, progress=progress)
    timings = await copy_dag(
        url,
        tenant_id,
        iter(dag.rows),
        len(dag.rows),
        dag.transform_versions,
        dag.picks,
        progress,
    )
    return dag.picks, timings


def main(
    table: Annotated[str, typer.Option(help="SCHEMA.TABLE to (re)create.")] = "classic_provenance",
    records: Annotated[int, typer.Option(help="About how many records.")] = 20_000,
    url: Annotated[
        str, typer.Option(help="The database to write it in.")
    ] = "postgresql://postgres@127.0.0.1:5432/postgres",
    seed: Annotated[int, typer.Option(help="The random seed.")] = 21,
) -> None:
    """Write a tutorial-shaped DAG into a classic table, for `python -m bench --classic-table`."""
    written = asyncio.run(write_tutorial_table(url, table, records, seed))
    print(json.dumps({"table": table, "records": written}))


if __name__ == "__main__":
    typer.run(main)
