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
- An **output** is derived from the event's inputs. Its transform is the job,
  `<job namespace>/<job name>`; its transform_version is `<transform>@<version>` when the job's
  `sourceCodeLocation` facet gives a version (the client fills it from git).
- An **input** resolves to the record this run already read (sql/openlineage_input.sql), else
  to the newest record with its source_uri that the run did not write (another run's output,
  or a document a pipeline loaded through derive()), else it enters as a new root.
- Every record an event makes carries the run id (its 32 hex digits) as trace_id, so
  `GET /v1/traces/<run id hex>` lists a run's records.
- A record's content is the RFC 8785 JSON of what the event says identifies the dataset:
  `namespace`, `name`, the `version` facet's `datasetVersion` when given, and for an output the
  `run_id`. Ids are deterministic, so a replayed event (or START then COMPLETE with the same
  datasets) records nothing new.

Facets other than these are not kept: provenance holds identities and hashes, not metadata.
"""

import json
import zlib
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import rfc8785
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lineage.core.body import Body
from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import BadParameter, BodyTooLarge, InvalidRecord, UnsupportedEncoding
from lineage.db.database import Database, Transaction
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


class Dataset(BaseModel):
    model_config = ConfigDict(extra="allow")

    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    facets: dict[str, Any] | None = None

    @property
    def source_uri(self) -> str:
        return f"{self.namespace.rstrip('/')}/{self.name.lstrip('/')}"

    @property
    def version(self) -> str | None:
        facet = (self.facets or {}).get("version")
        version = facet.get("datasetVersion") if isinstance(facet, dict) else None
        return version if isinstance(version, str) and version else None

    def identity(self, run_id: str | None = None) -> dict[str, str]:
        fields = {"namespace": self.namespace, "name": self.name}
        if self.version:
            fields["version"] = self.version
        if run_id:
            fields["run_id"] = run_id
        return fields


class Job(BaseModel):
    model_config = ConfigDict(extra="allow")

    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    facets: dict[str, Any] | None = None

    @property
    def transform(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def version(self) -> str | None:
        facet = (self.facets or {}).get("sourceCodeLocation")
        version = facet.get("version") if isinstance(facet, dict) else None
        return version if isinstance(version, str) and version else None


class Run(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    run_id: UUID = Field(alias="runId")


class RunEvent(BaseModel):
    """The parts of an OpenLineage RunEvent (spec 2-0-x) that lineage records."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    event_type: Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"] | None = Field(
        default=None, alias="eventType"
    )
    event_time: datetime = Field(alias="eventTime")
    run: Run
    job: Job
    inputs: list[Dataset] | None = None
    outputs: list[Dataset] | None = None
    producer: str
    schema_url: str = Field(alias="schemaURL")


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


def _content(identity: dict[str, str]) -> str:
    return rfc8785.dumps(identity).decode()


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
    inputs, declared = _unique(event.inputs), _unique(event.outputs)
    outputs = declared if event.event_type == "COMPLETE" else []
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
            attributes={"openlineage": dataset.identity()},
            deterministic=True,
        )
        for dataset in new
    ]
    for dataset, root in zip(new, await derive_many(TransactionStore(tx), roots), strict=True):
        known[dataset.source_uri] = root.context_id
    parents = [known[dataset.source_uri] for dataset in inputs]
    derived = [
        Derivation(
            parents,
            _content(dataset.identity(run_id)),
            "document",
            event.job.transform,
            event.job.version,
            source_uri=dataset.source_uri,
            trace_id=trace_id,
            attributes={"openlineage": dataset.identity(run_id)},
            deterministic=True,
        )
        for dataset in outputs
    ]
    not_recorded = [dataset.source_uri for dataset in declared if not outputs]
    if event.event_type in ("FAIL", "ABORT"):
        identity = {"run_id": run_id, "state": event.event_type, "job": event.job.transform}
        derived.append(
            Derivation(
                parents,
                _content(identity),
                "tool_call",
                event.job.transform,
                event.job.version,
                trace_id=trace_id,
                attributes={
                    "tool": event.job.transform,
                    "openlineage": {**identity, "outputs_not_recorded": not_recorded},
                },
                deterministic=True,
            )
        )
    written = await derive_many(TransactionStore(tx), derived)
    return RunEventRecorded(
        run_id=run_id,
        state=event.event_type,
        inputs={dataset.source_uri: known[dataset.source_uri] for dataset in inputs},
        outputs={
            dataset.source_uri: c.context_id for dataset, c in zip(outputs, written, strict=False)
        },
        outputs_not_recorded=not_recorded,
        run_record=written[-1].context_id if len(written) > len(outputs) else None,
    )
