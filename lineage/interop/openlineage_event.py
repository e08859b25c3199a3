"""What an OpenLineage RunEvent (spec 2-0-x) says, and which inputs each of its outputs comes from.

OpenLineage reads a run's dataset edges as the cartesian product of its inputs and outputs,
which is wrong for a bulk job (it reads A and B, writes C from A and D from B). Two facets say
better; they are read in the order the explicit lineage facet (`LineageFacet.json` 1-0-0,
OpenLineage proposal #4359) sets for consumers:

1. A lineage facet on the event — `job.facets.lineage` (LineageJobFacet, one entry per target
   dataset) or `facets.lineage` on an output (LineageDatasetFacet: its target is that output) —
   is the whole dataset lineage of the event. An output comes from the datasets its entries
   name, at entity level or in `fields`; `"inputs": []` says it comes from none, and an output
   that no entry describes was made by the job from no tracked dataset.
2. Without one, an output's `columnLineage` facet names what it comes from (`inputFields` and
   `dataset`).
3. Else an output comes from every input of the run.

A dataset that the facets name but the event does not list is read as an input (a source) or an
output (a target), as the OpenLineage client's own translation adds it. Job sources and job
targets (job-to-job flow) make no edge: lineage records datasets, and the job is the transform.
"""

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Dataset", "DatasetName", "Job", "Run", "RunEvent"]


class DatasetName(BaseModel):
    """A dataset as OpenLineage names it; lineage keeps it as `<namespace>/<name>`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)

    @property
    def source_uri(self) -> str:
        return f"{self.namespace.rstrip('/')}/{self.name.lstrip('/')}"


class DatasetSource(DatasetName):
    type: Literal["DATASET"]


class JobReference(BaseModel):
    """Another job, as a source or as an entry: it makes no edge between datasets."""

    model_config = ConfigDict(extra="allow")

    type: Literal["JOB"]


LineageInput = Annotated[DatasetSource | JobReference, Field(discriminator="type")]


class FieldSources(BaseModel):
    model_config = ConfigDict(extra="allow")

    inputs: list[LineageInput]


class LineageSources(BaseModel):
    """What feeds one target: a LineageDatasetFacet, or the body of a LineageDatasetEntry."""

    model_config = ConfigDict(extra="allow")

    inputs: list[LineageInput] | None = None
    fields: dict[str, FieldSources] | None = None

    def datasets(self) -> list[DatasetName]:
        """The source datasets, at entity level and for any field."""
        field_inputs = [source for f in (self.fields or {}).values() for source in f.inputs]
        return [s for s in [*(self.inputs or []), *field_inputs] if isinstance(s, DatasetSource)]


class DatasetEntry(LineageSources, DatasetName):
    type: Literal["DATASET"]


LineageEntry = Annotated[DatasetEntry | JobReference, Field(discriminator="type")]


class LineageJobFacet(BaseModel):
    model_config = ConfigDict(extra="allow")

    entries: list[LineageEntry]

    def about(self, output: DatasetName) -> "LineageJobFacet":
        """The facet as `output` keeps it: its own entries and the job-to-job ones."""
        entries = [
            entry
            for entry in self.entries
            if isinstance(entry, JobReference) or entry.source_uri == output.source_uri
        ]
        return self.model_copy(update={"entries": entries})


class ColumnSources(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    input_fields: list[DatasetName] = Field(alias="inputFields")


class ColumnLineage(BaseModel):
    model_config = ConfigDict(extra="allow")

    fields: dict[str, ColumnSources]
    dataset: list[DatasetName] | None = None

    def datasets(self) -> list[DatasetName]:
        by_field = [source for f in self.fields.values() for source in f.input_fields]
        return [*by_field, *(self.dataset or [])]


class Facets(BaseModel):
    """A facets object: the ones read are typed, the rest kept as sent."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def value(self, name: str, key: str) -> str | None:
        """A string field of an untyped facet, when given."""
        facet = (self.model_extra or {}).get(name)
        value = facet.get(key) if isinstance(facet, dict) else None
        return value if isinstance(value, str) and value else None


class DatasetFacets(Facets):
    lineage: LineageSources | None = None
    column_lineage: ColumnLineage | None = Field(default=None, alias="columnLineage")


class JobFacets(Facets):
    lineage: LineageJobFacet | None = None


class Dataset(DatasetName):
    facets: DatasetFacets | None = None
    input_facets: dict[str, Any] | None = Field(default=None, alias="inputFacets")
    output_facets: dict[str, Any] | None = Field(default=None, alias="outputFacets")

    @property
    def version(self) -> str | None:
        return self.facets.value("version", "datasetVersion") if self.facets else None

    def facets_sent(self) -> dict[str, Any]:
        return self.facets.as_json() if self.facets else {}

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
    facets: JobFacets | None = None

    @property
    def transform(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def version(self) -> str | None:
        return self.facets.value("sourceCodeLocation", "version") if self.facets else None


class Run(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    run_id: UUID = Field(alias="runId")
    facets: dict[str, Any] | None = None


class RunEvent(BaseModel):
    """The parts of an OpenLineage RunEvent that lineage records."""

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

    @property
    def job_lineage(self) -> LineageJobFacet | None:
        return self.job.facets.lineage if self.job.facets else None

    def job_facets(self, output: Dataset | None = None) -> dict[str, Any]:
        """The job's facets as sent; for an output, its lineage facet narrowed to that output."""
        facets = self.job.facets.as_json() if self.job.facets else {}
        if output is not None and self.job_lineage is not None:
            narrowed = self.job_lineage.about(output)
            facets["lineage"] = narrowed.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return facets

    def explicit_lineage(self) -> bool:
        """A lineage facet is the event's whole dataset lineage (no cartesian product)."""
        return self.job_lineage is not None or any(
            output.facets and output.facets.lineage for output in self.outputs or []
        )

    def lineage_targets(self) -> list[DatasetEntry]:
        lineage = self.job_lineage
        return [e for e in lineage.entries if isinstance(e, DatasetEntry)] if lineage else []

    def named_sources(self, output: Dataset) -> list[DatasetName] | None:
        """The datasets `output` comes from as the event's facets name them; None when they do
        not say (it comes from every input)."""
        facets = output.facets
        if self.explicit_lineage():
            named = [
                source
                for entry in self.lineage_targets()
                if entry.source_uri == output.source_uri
                for source in entry.datasets()
            ]
            return named + (facets.lineage.datasets() if facets and facets.lineage else [])
        column_lineage = facets.column_lineage if facets else None
        return (column_lineage.datasets() if column_lineage else []) or None
