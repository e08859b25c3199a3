"""Verifiable append-only log: each tenant's records in an RFC 6962 / RFC 9162 Merkle tree.

merkle      the tree: hashes, proofs, verification, appending from stored subtrees (pure)
checkpoint  signed checkpoints (C2SP signed note + tlog-checkpoint, Ed25519) and keys (pure)
storage     the log in PostgreSQL: queue, sequencer, proofs, signing, the background task
audit       verification off the server: a record's walk-back under a checkpoint, monitoring
"""
