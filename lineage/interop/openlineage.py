"""OpenLineage in: RunEvents, as openlineage-python's HTTP transport sends them, become records.

Each dataset of an event is a `document` whose source_uri is `<namespace>/<name>` (one slash
between: `s3://warehouse` + `raw/orders` is `s3://warehouse/raw/orders`).

- Only a COMPLETE event records outputs: a START, RUNNING or OTHER event (or one without an
  eventType) opens or reports on a run that has written nothing yet, and a FAIL or ABORT run's
  outputs were never written, so a later run that reads the same dataset does not walk back
  through them. Every event records its inputs (what the run read, failed or not); the answer
  says the run's state and which outputs were not recorded.
- A FAIL or ABORT event records the failure itself: a `tool_call` record of the run (its tool
  the job), derived from its inputs, with no source_uri (no later run can read it as a
  dataset), its attributes `openlineage.state` and the outputs it never wrote
  (`outputs_not_recorded`); the error message facet is not kept (it may quote data).
- An **output** is derived from the inputs the event says it comes from: the datasets its
  lineage facet or `columnLineage` facet names, else every input of the run (the rules are in
  lineage/interop/openlineage_event.py). Its transform is the job, `<job namespace>/<job name>`;
  its transform_version is `<transform>@<version>` when the job's `sourceCodeLocation` facet
  gives a version (the client fills it from git).
- An **input** resolves to the record this run already read (sql/openlineage_input.sql), else
  to the newest record with its source_uri that the run did not write (another run's output,
  or a document a pipeline loaded through derive()), else it enters as a new root.
- Every record an event makes carries the run id (its 32 hex digits) as trace_id, so
  `GET /v1/traces/<run id hex>` lists a run's records.
- A record's content is the RFC 8785 JSON of what the event says identifies the dataset:
  `namespace`, `name`, the `version` facet's `datasetVersion` when given, and for an output the
  `run_id`. Ids are deterministic, so a replayed event (or START then COMPLETE with the same
  datasets) records nothing new; the first event that makes a record gives its facets.
- Facets are kept in `attributes.openlineage_facets`, by where the event put them: a new
  input's `dataset` and `input` facets; an output's `dataset`, `output`, `job` and `run` facets
  (the job's lineage facet narrowed to that output's entries); a failed run's `job` and `run`
  facets. Smallest first, within MAX_FACETS_BYTES a record; those that may quote data or hold
  secrets (PRIVATE_FACETS), those past the budget and those that cannot be stored are named
  in `omitted` instead.
"""

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import rfc8785
from pydantic import Field, ValidationError

from lineage.core.body import Body
from lineage.core.derive import Derivation, derive_many, propose
from lineage.core.errors import BadParameter, BodyTooLarge, InvalidRecord, UnsupportedEncoding
from lineage.core.record import MAX_ATTRIBUTES_BYTES, attribute_size, canonical_json
from lineage.db.database import Database, Transaction
from lineage.interop.openlineage_event import Dataset, DatasetName, RunEvent
from lineage.services.records import get_records
from lineage.services.transaction_store import TransactionStore

__all__ = [
    "BodyTooLarge",
    "RunEvent",
    "RunEventRecorded",
    "UnsupportedEncoding",
    "decode_body",
    "parse_run_event",
    "record_run_event",
]

ENCODINGS = ("gzip", "identity")
# Facets whose text may quote data or hold secrets: named in `omitted`, never stored.
PRIVATE_FACETS = {
    "run": frozenset({"errorMessage", "extractionError", "environmentVariables"}),
    "job": frozenset({"sql", "sourceCode"}),
}
MAX_FACETS_BYTES = MAX_ATTRIBUTES_BYTES // 2
MAX_OMITTED_BYTES = 1024  # the names listed in `omitted`, as JSON
# What wraps the facets in the attributes (section keys, braces) beside the facets' own bytes.
FACETS_OVERHEAD = 128


def decode_body(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body as sent, un-gzipped when the client compressed it (at most `limit` bytes)."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in ENCODINGS:
        raise UnsupportedEncoding(
            f"Content-Encoding {content_encoding!r} is not supported; send gzip or none"
        )
    if encoding == "identity":
        return body
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadParameter(f"the body is not valid gzip: {exc}") from exc
    if len(data) > limit:
        raise BodyTooLarge(f"the body inflates past {limit} bytes: send fewer datasets per event")
    if not inflater.eof:
        raise BadParameter("the gzip body is truncated")
    return data


def parse_run_event(data: bytes) -> RunEvent:
    """Raises InvalidRecord naming what is wrong; DatasetEvents and JobEvents are refused."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRecord("openlineage_not_json", f"the body is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidRecord("openlineage_not_json", "the body must be a JSON object")
    # A lone surrogate is refused wherever it is (UnicodeEncodeError: unpaired_surrogate), also
    # in a field that is not stored, as every other route refuses it.
    json.dumps(document, ensure_ascii=False).encode()
    if "run" not in document:
        raise InvalidRecord(
            "openlineage_not_a_run_event",
            "only OpenLineage RunEvents (with `run` and `job`) are recorded; DatasetEvents and "
            "JobEvents carry no run to derive outputs from",
        )
    try:
        event = RunEvent.model_validate(document)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidRecord("openlineage_bad_event", f"not a valid RunEvent: {where}") from exc
    if event.job.version and "@" in event.job.transform:
        raise InvalidRecord(
            "openlineage_job_name",
            f"job {event.job.transform!r} contains '@', which separates a transform from its "
            "version: rename the job or drop its sourceCodeLocation version",
        )
    return event


def _unique(datasets: list[Dataset] | None) -> list[Dataset]:
    by_uri = {dataset.source_uri: dataset for dataset in datasets or []}
    return list(by_uri.values())


def _with_named(listed: list[Dataset], named: Sequence[DatasetName]) -> list[Dataset]:
    """The event's datasets, then those its facets name that it does not list."""
    uris = {dataset.source_uri for dataset in listed}
    missing = _unique([Dataset(namespace=n.namespace, name=n.name) for n in named])
    return listed + [dataset for dataset in missing if dataset.source_uri not in uris]


def _content(identity: dict[str, str]) -> str:
    return rfc8785.dumps(identity).decode()


def _kept_facets(
    sections: Mapping[str, Mapping[str, Any] | None], others: dict[str, Any]
) -> dict[str, Any]:
    """`others` with the facets a record keeps: smallest first, within what its attributes
    leave (MAX_FACETS_BYTES at most); the rest named in `omitted`."""
    budget = min(
        MAX_FACETS_BYTES,
        MAX_ATTRIBUTES_BYTES - len(canonical_json(others)) - MAX_OMITTED_BYTES - FACETS_OVERHEAD,
    )
    candidates: list[tuple[int, str, str, Any]] = []
    omitted: list[str] = []
    for section, facets in sections.items():
        for name, facet in (facets or {}).items():
            if name in PRIVATE_FACETS.get(section, ()):
                omitted.append(f"{section}.{name}")
                continue
            try:
                candidates.append((attribute_size({name: facet}, depth=3), section, name, facet))
            except InvalidRecord:
                omitted.append(f"{section}.{name}")
    kept: dict[str, Any] = {}
    for size, section, name, facet in sorted(candidates, key=lambda c: c[:3]):
        if size > budget:
            omitted.append(f"{section}.{name}")
            continue
        kept.setdefault(section, {})[name] = facet
        budget -= size
    listed: list[str] = []
    listed_bytes = 0
    for name in sorted(omitted):
        listed_bytes += len(canonical_json(name)) + 1  # and its comma
        if listed_bytes > MAX_OMITTED_BYTES:
            break
        listed.append(name)
    if listed:
        kept["omitted"] = listed
    return others | ({"openlineage_facets": kept} if kept else {})


async def _recorded(tx: Transaction, items: list[Derivation]) -> list[str]:
    """Each item's record id, recording those not stored yet. A record made by an earlier event
    of the run (START then COMPLETE, or a replay) stays as it is, whatever facets came since."""
    ids = [propose(tx.tenant_id, item).context_id for item in items]
    if not ids:
        return []
    stored = await get_records(tx, ids)
    await derive_many(
        TransactionStore(tx), [i for i, c in zip(items, ids, strict=True) if c not in stored]
    )
    return ids


# Which record each dataset of an event is: source_uri -> context_id.
class RunEventRecorded(Body):
    run_id: str
    state: str | None
    inputs: dict[str, str] = Field(description="dataset -> context id")
    outputs: dict[str, str] = Field(description="dataset -> context id")
    outputs_not_recorded: list[str]  # outputs of a run that has not completed
    run_record: str | None = Field(description="the record of a failed or aborted run")


async def record_run_event(database: Database, tenant_id: str, event: RunEvent) -> RunEventRecorded:
    """Record the event's datasets in one tenant transaction (all or none)."""
    async with database.tenant(tenant_id) as tx:
        return await _record_run_event(tx, event)


async def _record_run_event(tx: Transaction, event: RunEvent) -> RunEventRecorded:
    run_id = str(event.run.run_id)
    trace_id = event.run.run_id.hex
    declared = _with_named(_unique(event.outputs), event.lineage_targets())
    outputs = declared if event.event_type == "COMPLETE" else []
    sources = {output.source_uri: event.named_sources(output) for output in outputs}
    inputs = _with_named(_unique(event.inputs), [s for n in sources.values() for s in n or []])
    known: dict[str, str] = {}
    for dataset in inputs:
        rows = await tx.fetch(
            "openlineage_input",
            trace_id=trace_id,
            source_uri=dataset.source_uri,
        )
        if rows:
            known[dataset.source_uri] = rows[0]["context_id"]
    new = [dataset for dataset in inputs if dataset.source_uri not in known]
    roots = [
        Derivation(
            [],
            _content(dataset.identity()),
            "document",
            source_uri=dataset.source_uri,
            trace_id=trace_id,
            attributes=_kept_facets(
                {"dataset": dataset.facets_sent(), "input": dataset.input_facets},
                {"openlineage": dataset.identity()},
            ),
            deterministic=True,
        )
        for dataset in new
    ]
    known.update(zip([d.source_uri for d in new], await _recorded(tx, roots), strict=True))
    derived = []
    for dataset in outputs:
        named = sources[dataset.source_uri]
        comes_from = {d.source_uri for d in (inputs if named is None else named)}
        facets = {
            "dataset": dataset.facets_sent(),
            "output": dataset.output_facets,
            "job": event.job_facets(dataset),
            "run": event.run.facets,
        }
        derived.append(
            Derivation(
                [known[d.source_uri] for d in inputs if d.source_uri in comes_from],
                _content(dataset.identity(run_id)),
                "document",
                event.job.transform,
                event.job.version,
                source_uri=dataset.source_uri,
                trace_id=trace_id,
                attributes=_kept_facets(facets, {"openlineage": dataset.identity(run_id)}),
                deterministic=True,
            )
        )
    not_recorded = [dataset.source_uri for dataset in declared if not outputs]
    if event.event_type in ("FAIL", "ABORT"):
        identity = {"run_id": run_id, "state": event.event_type, "job": event.job.transform}
        derived.append(
            Derivation(
                [known[dataset.source_uri] for dataset in inputs],
                _content(identity),
                "tool_call",
                event.job.transform,
                event.job.version,
                trace_id=trace_id,
                attributes=_kept_facets(
                    {"job": event.job_facets(), "run": event.run.facets},
                    {
                        "tool": event.job.transform,
                        "openlineage": {**identity, "outputs_not_recorded": not_recorded},
                    },
                ),
                deterministic=True,
            )
        )
    written = await _recorded(tx, derived)
    return RunEventRecorded(
        run_id=run_id,
        state=event.event_type,
        inputs={dataset.source_uri: known[dataset.source_uri] for dataset in inputs},
        outputs={dataset.source_uri: c for dataset, c in zip(outputs, written, strict=False)},
        outputs_not_recorded=not_recorded,
        run_record=written[-1] if len(written) > len(outputs) else None,
    )
