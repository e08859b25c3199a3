"""The record's rules and its canonical form, without a database."""

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from lineage.core.errors import InvalidRecord
from lineage.core.hashing import content_hash
from lineage.core.record import (
    MAX_ATTRIBUTES_BYTES,
    MAX_ATTRIBUTES_DEPTH,
    MAX_PARENTS,
    ContextRecord,
    NewContext,
    canonical_json,
    deterministic_context_id,
    new_context_id,
    validate,
)
from lineage.core.versions import version_key

HASH = content_hash("some text")


def proposal(**fields: object) -> NewContext:
    base: dict[str, object] = {
        "context_id": "ctx_1",
        "kind": "chunk",
        "parent_ids": ["doc_1"],
        "content_hash": HASH,
    }
    return NewContext.model_validate(base | fields)


def nested(levels: int) -> list[Any]:
    """Arrays `levels` deep: [[[...]]]."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"parent_ids": []}, "missing_parents"),
        ({"kind": "document", "parent_ids": []}, "root_without_source"),
        ({"kind": "paragraph"}, "unknown_kind"),
        ({"context_id": "-starts-with-dash"}, "malformed_id"),
        ({"context_id": "has space"}, "malformed_id"),
        ({"context_id": "x" * 129}, "malformed_id"),
        ({"parent_ids": ["ok", "bad id"]}, "malformed_id"),
        ({"parent_ids": ["doc_1", "doc_1"]}, "duplicate_parent"),
        ({"parent_ids": ["ctx_1"]}, "self_parent"),
        ({"parent_ids": [f"p{i}" for i in range(MAX_PARENTS + 1)]}, "too_many_parents"),
        ({"content_hash": "9f86d081884c7d65"}, "malformed_hash"),
        ({"content_hash": "md5:" + "0" * 32}, "unverifiable_hash"),
        ({"content_hash": "blake3:" + "0" * 64}, "unverifiable_hash"),
        ({"transform_version": "2.3.1"}, "malformed_transform_version"),
        ({"transform": "embedder", "transform_version": "chunker@2"}, "transform_mismatch"),
        ({"attributes": {"blob": "x" * MAX_ATTRIBUTES_BYTES}}, "attributes_too_large"),
        ({"attributes": {"n": 2**60}}, "bad_attributes"),
        ({"attributes": {"n": 1e20}}, "number_out_of_range"),
        ({"attributes": {"deep": [{"n": -(2.0**53)}]}}, "number_out_of_range"),
        ({"attributes": {"deep": nested(MAX_ATTRIBUTES_DEPTH)}}, "attributes_too_deep"),
        ({"attributes": {"deep": nested(5000)}}, "bad_attributes"),
        ({"source_uri": ""}, "bad_field"),
    ],
)
def test_each_rule_is_named(fields: dict[str, object], rule: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        validate(proposal(**fields))
    assert caught.value.rule == rule
    assert len(caught.value.message) > 20


def test_valid_records_pass() -> None:
    validate(proposal())
    validate(proposal(attributes={"deep": nested(MAX_ATTRIBUTES_DEPTH - 1)}))
    validate(proposal(kind="document", parent_ids=[], source_uri="s3://a"))
    validate(proposal(transform="chunker", transform_version="chunker@2.3.1"))


def test_generated_ids_follow_the_rule() -> None:
    generated = new_context_id()
    assert generated.startswith("ctx_") and len(generated) == 36
    validate(proposal(context_id=generated))


def test_deterministic_ids_depend_on_every_input() -> None:
    args = ("default", "chunk", ["doc_1"], HASH, None, "chunker@1")
    same = deterministic_context_id(*args)
    assert same == deterministic_context_id(*args)
    assert same != deterministic_context_id("other", *args[1:])
    assert same != deterministic_context_id(*args[:2], ["doc_2"], *args[3:])
    assert same != deterministic_context_id(*args[:5], "chunker@2")


def test_canonical_form_is_rfc8785_of_the_fixed_fields() -> None:
    record = proposal(attributes={"b": 1, "a": [1.5, "x"]}).stamped(
        "default", datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
    )
    expected = (
        '{"attributes":{"a":[1.5,"x"],"b":1},"content_hash":"' + HASH + '",'
        '"context_id":"ctx_1","created_at":"2026-11-29T12:00:00.123456Z","index_snapshot":null,'
        '"kind":"chunk","parent_ids":["doc_1"],"produced_by":null,"source_uri":null,'
        '"tenant_id":"default","trace_id":null,"transform":null,"transform_version":null,"v":1}'
    )
    assert record.canonical_bytes() == expected.encode()
    assert rfc8785.dumps(record.canonical_dict()) == record.canonical_bytes()


def test_same_content_ignores_only_the_time() -> None:
    first = proposal().stamped("default", datetime(2026, 1, 1, tzinfo=UTC))
    assert first.same_content(proposal())
    assert not first.same_content(proposal(attributes={"k": 1}))
    assert isinstance(first, ContextRecord)


def test_hash_names_its_algorithm() -> None:
    assert HASH.startswith("sha256:") and len(HASH) == 7 + 64
    assert content_hash("some text") == HASH
    assert content_hash("other") != HASH


versions = st.builds(
    lambda release, pre, post, dev: Version(
        ".".join(map(str, release))
        + (f"{pre[0]}{pre[1]}" if pre else "")
        + (f".post{post}" if post is not None else "")
        + (f".dev{dev}" if dev is not None else "")
    ),
    st.lists(st.integers(0, 12), min_size=1, max_size=4),
    st.none() | st.tuples(st.sampled_from(["a", "b", "rc"]), st.integers(0, 3)),
    st.none() | st.integers(0, 3),
    st.none() | st.integers(0, 3),
)


@given(st.lists(versions, min_size=2, max_size=8))
def test_version_key_orders_as_pep_440(candidates: list[Version]) -> None:
    def key(version: Version) -> str:
        found = version_key(f"chunker@{version}")
        assert found is not None
        return found

    by_key = sorted(candidates, key=key)
    assert by_key == sorted(candidates)
    for left, right in itertools.pairwise(by_key):
        assert (key(left) == key(right)) == (left == right)


def test_unparseable_versions_have_no_key() -> None:
    assert version_key("chunker@fancy-branch") is None
    assert version_key("chunker@1.4") is not None


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_the_fast_canonical_form_is_rfc8785(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        with pytest.raises(type(exc)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@given(
    attributes=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4),
    text=st.text(max_size=8),
    parent_ids=st.lists(st.text(max_size=8), max_size=3),
    moment=st.datetimes(timezones=st.just(UTC)),
)
def test_canonical_bytes_are_rfc8785_whatever_the_fields_hold(
    attributes: dict[str, Any], text: str, parent_ids: list[str], moment: datetime
) -> None:
    """canonical_bytes checks only the attributes for the fast path: every other field holds
    strings, whose bytes match RFC 8785's whatever they contain (unvalidated, on purpose)."""
    record = ContextRecord(
        tenant_id=text, context_id=text, parent_ids=parent_ids, kind=text, source_uri=text,
        content_hash=text, produced_by=text, trace_id=text, created_at=moment,
        attributes=attributes,
    )  # fmt: skip
    try:
        expected = rfc8785.dumps(record.canonical_dict())
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        with pytest.raises(type(exc)):
            record.canonical_bytes()
        return
    assert record.canonical_bytes() == expected
