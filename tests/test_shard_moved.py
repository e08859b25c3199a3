"""A statement that Citus's split or move of its shard overtook is an outage the client may
retry (503), and the API's append retries it itself; any other internal error stays a bug."""

import asyncpg

from lineage.db.errors import is_outage, is_shard_moved


def test_a_shard_moved_under_a_statement_is_an_outage() -> None:
    for message in (
        "could not find valid entry for shard 102330",  # split: the shard is gone
        "failure on connection marked as essential: 127.0.0.1:57541",  # sent where it was
        "cannot execute a distributed query from a query on a shard",  # delegated where it was
    ):
        moved = asyncpg.exceptions.InternalServerError(message)
        assert is_shard_moved(moved)
        assert is_outage(moved)


def test_another_internal_error_is_not() -> None:
    bug = asyncpg.exceptions.InternalServerError("cache lookup failed for relation 16384")
    assert not is_shard_moved(bug)
    assert not is_outage(bug)
    assert not is_shard_moved(ValueError("could not find valid entry for shard 1"))
