"""W3C PROV out: a walk-back as a PROV document, built and serialised with the `prov` package.

- Each context the walk reached is an entity `ctx:<context_id>` with `prov:type`
  `lineage:<kind>` and its fields as `lineage:` attributes (content_hash, source_uri,
  index_snapshot, trace_id, created_at, and attributes as RFC 8785 JSON).
- Each transform is one activity `transform:<name@version>` (the name alone when unversioned);
  an entity it made `wasGeneratedBy` it (at the record's created_at), and it `used` each of that
  entity's parents the walk reached.
- Each produced_by is an agent `agent:<produced_by>`; the entity `wasAttributedTo` it.
- Each edge of the walk is `wasDerivedFrom(child, parent, transform)`.

Identifiers are URNs under `urn:lineage:<tenant>:`; characters PROV-N or XML cannot carry in a
name are percent-encoded there, and each activity and agent keeps its name as `prov:label`.
"""

from datetime import datetime
from typing import Any
from urllib.parse import quote

import rfc8785
from prov.model import ProvDocument, ProvEntity
from prov.serializers import DoNotExist

from lineage.core.errors import BadParameter, UnavailableFormat
from lineage.services.walks import Walk, walk_from_json

__all__ = ["MEDIA_TYPES", "UnavailableFormat", "prov_document", "serialize"]

# The formats asked for and the media type each is served as.
MEDIA_TYPES = {
    "json": "application/json",
    "provn": "text/provenance-notation",
    "jsonld": "application/ld+json",
    "xml": "application/xml",
}
RECORD_FIELDS = ("content_hash", "source_uri", "index_snapshot", "trace_id")
# Kept as typed in identifiers; everything else is percent-encoded.
_SAFE = "@:._-~/"


def _local(name: str) -> str:
    return quote(name, safe=_SAFE)


def prov_document(walk: Walk, tenant_id: str) -> ProvDocument:
    document = ProvDocument()
    base = f"urn:lineage:{tenant_id}:"
    document.add_namespace("lineage", base)
    document.add_namespace("ctx", base + "context:")
    document.add_namespace("transform", base + "transform:")
    document.add_namespace("agent", base + "agent:")

    entities: dict[str, ProvEntity] = {}
    for node in walk.nodes:
        attributes: dict[str, Any] = {
            "prov:type": document.valid_qualified_name(f"lineage:{node['kind']}"),
            "lineage:created_at": datetime.fromisoformat(node["created_at"]),
        }
        attributes |= {f"lineage:{name}": node[name] for name in RECORD_FIELDS if node[name]}
        if node["attributes"]:
            attributes["lineage:attributes"] = rfc8785.dumps(node["attributes"]).decode()
        entities[node["context_id"]] = document.entity(f"ctx:{node['context_id']}", attributes)

    activities: dict[str, Any] = {}
    agents: dict[str, Any] = {}
    used: set[tuple[str, str]] = set()
    for node in walk.nodes:
        entity = entities[node["context_id"]]
        reached = [entities[p] for p in node["parent_ids"] if p in entities]
        transform = node["transform_version"] or node["transform"]
        activity = None
        if transform:
            if transform not in activities:
                activities[transform] = document.activity(
                    f"transform:{_local(transform)}", other_attributes={"prov:label": transform}
                )
            activity = activities[transform]
            document.wasGeneratedBy(entity, activity, datetime.fromisoformat(node["created_at"]))
            for parent in reached:
                if (transform, str(parent.identifier)) not in used:
                    used.add((transform, str(parent.identifier)))
                    document.used(activity, parent)
        for parent in reached:
            document.wasDerivedFrom(entity, parent, activity)
        produced_by = node["produced_by"]
        if produced_by:
            if produced_by not in agents:
                agents[produced_by] = document.agent(
                    f"agent:{_local(produced_by)}", {"prov:label": produced_by}
                )
            document.wasAttributedTo(entity, agents[produced_by])
    return document


def written(walk: Walk, tenant_id: str, output: str) -> str:
    """The walk-back as a PROV document written in `output` (a format of MEDIA_TYPES)."""
    return serialize(prov_document(walk, tenant_id), output)


def written_from_json(context_id: str, records: bytes, tenant_id: str, output: str) -> bytes:
    """written() of a walk-back as the database wrote its records (walks.walk_back_json),
    decoded and encoded here: in the worker process that writes it, not on the event loop."""
    return written(walk_from_json(context_id, records), tenant_id, output).encode()


def serialize(document: ProvDocument, output: str) -> str:
    """The document as PROV-JSON, PROV-N, PROV-JSONLD or PROV-XML."""
    if output not in MEDIA_TYPES:
        raise BadParameter(f"format {output!r} is not one of: {', '.join(MEDIA_TYPES)}")
    try:
        return str(document.serialize(format=output))
    except DoNotExist as exc:
        raise UnavailableFormat(f"PROV format {output!r} is unavailable here: {exc}") from exc
