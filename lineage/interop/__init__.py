"""The standard vocabularies: OpenLineage in, W3C PROV and provenance headers out."""
