"""Verifiable append-only log: RFC 6962 / RFC 9162 Merkle trees, proofs and their verification."""
