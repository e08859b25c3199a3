"""The benchmark: a synthetic RAG DAG, the product's walks and ingest against the baselines users
would otherwise run, a load run, and RESULTS.md."""
