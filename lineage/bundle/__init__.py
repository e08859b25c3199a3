"""Export bundles: a tenant's records with what proves them complete, and their import."""
