"""The HTTP API: where a request enters."""
