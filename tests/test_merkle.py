"""RFC 6962 Merkle tree: public test vectors, the reference tree, and property tests."""

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lineage.core.errors import ProofError
from lineage.verifiable_log.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    consistency_proof,
    consistency_proof_nodes,
    fold_subtrees,
    inclusion_proof,
    inclusion_proof_nodes,
    is_complete_subtree,
    leaf_hash,
    node_hash,
    range_hash,
    root_hash,
    subtree_node,
    subtree_ranges,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parent / "data" / "rfc6962"

REFERENCE_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]

# Published roots of the reference tree (transparency-dev/merkle testonly), by tree size.
REFERENCE_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

MAX_SIZE = 300
LEAVES = tuple(leaf_hash(i.to_bytes(2, "big")) for i in range(MAX_SIZE))
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, database=None)


# --- test vectors -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InclusionVector:
    leaf_idx: int
    tree_size: int
    root: bytes
    leaf_hash: bytes
    proof: list[bytes]
    want_err: bool


@dataclass(frozen=True)
class ConsistencyVector:
    size1: int
    size2: int
    root1: bytes
    root2: bytes
    proof: list[bytes]
    want_err: bool


def _missing_vectors() -> NoReturn:
    pytest.fail(
        f"RFC 6962 test vectors not found: expected inclusion/ and consistency/ JSON files under "
        f"{VECTORS} (tests/data/rfc6962 is part of the repository)"
    )


def _vector_files(kind: str) -> list[Path]:
    folder = VECTORS / kind
    return sorted(folder.rglob("*.json")) if folder.is_dir() else []


def _vector_params(kind: str) -> list[Any]:
    files = _vector_files(kind)
    if not files:
        return [pytest.param(None, id=f"{kind}-vectors-missing")]
    return [pytest.param(path, id=path.relative_to(VECTORS).as_posix()) for path in files]


def _b64(value: object) -> bytes:
    assert isinstance(value, str), value
    return base64.b64decode(value, validate=True)


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


def _proof(value: object) -> list[bytes]:
    if value is None:
        return []
    assert isinstance(value, list), value
    return [_b64(item) for item in value]


def _want_err(raw: dict[str, object]) -> bool:
    value = raw["wantErr"]
    assert isinstance(value, bool), value
    return value


def _load_inclusion(path: Path) -> InclusionVector:
    raw: dict[str, object] = json.loads(path.read_text())
    return InclusionVector(
        leaf_idx=_int(raw["leafIdx"]),
        tree_size=_int(raw["treeSize"]),
        root=_b64(raw["root"]),
        leaf_hash=_b64(raw["leafHash"]),
        proof=_proof(raw["proof"]),
        want_err=_want_err(raw),
    )


def _load_consistency(path: Path) -> ConsistencyVector:
    raw: dict[str, object] = json.loads(path.read_text())
    return ConsistencyVector(
        size1=_int(raw["size1"]),
        size2=_int(raw["size2"]),
        root1=_b64(raw["root1"]),
        root2=_b64(raw["root2"]),
        proof=_proof(raw["proof"]),
        want_err=_want_err(raw),
    )


def _check_inclusion(v: InclusionVector) -> None:
    verify_inclusion(v.leaf_hash, v.leaf_idx, v.tree_size, v.proof, v.root)


def _check_consistency(v: ConsistencyVector) -> None:
    verify_consistency(v.size1, v.size2, v.root1, v.root2, v.proof)


def test_vectors_are_present() -> None:
    for kind in ("inclusion", "consistency"):
        files = _vector_files(kind)
        if not files:
            _missing_vectors()
        assert any(path.name == "happy-path.json" for path in files), kind


@pytest.mark.parametrize("path", _vector_params("inclusion"))
def test_inclusion_vector(path: Path | None) -> None:
    if path is None:
        _missing_vectors()
    vector = _load_inclusion(path)
    if vector.want_err:
        with pytest.raises(ProofError):
            _check_inclusion(vector)
    else:
        _check_inclusion(vector)


@pytest.mark.parametrize("path", _vector_params("consistency"))
def test_consistency_vector(path: Path | None) -> None:
    if path is None:
        _missing_vectors()
    vector = _load_consistency(path)
    if vector.want_err:
        with pytest.raises(ProofError):
            _check_consistency(vector)
    else:
        _check_consistency(vector)


# --- reference tree -----------------------------------------------------------------------------


def _reference_folders(kind: str) -> list[Path]:
    """The numbered vector folders, which are all built from the reference tree."""
    files = _vector_files(kind)
    if not files:
        _missing_vectors()
    return sorted(
        {p.parent for p in files if p.parent.parent.name == kind and p.parent.name.isdigit()}
    )


def test_reference_roots() -> None:
    hashes = [leaf_hash(data) for data in REFERENCE_LEAVES]
    assert (
        root_hash([])
        == EMPTY_ROOT
        == bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    )
    for size, expected in REFERENCE_ROOTS.items():
        assert root_hash(hashes[:size]).hex() == expected, size


def test_reference_roots_match_vector_roots() -> None:
    hashes = [leaf_hash(data) for data in REFERENCE_LEAVES]
    seen: dict[int, bytes] = {}
    for folder in _reference_folders("inclusion"):
        inc = _load_inclusion(folder / "happy-path.json")
        seen[inc.tree_size] = inc.root
        assert inc.leaf_hash == hashes[inc.leaf_idx], folder
    for folder in _reference_folders("consistency"):
        con = _load_consistency(folder / "happy-path.json")
        seen[con.size1] = con.root1
        seen[con.size2] = con.root2
    assert set(seen) >= {1, 2, 3, 5, 6, 7, 8}
    for size, root in seen.items():
        assert root_hash(hashes[:size]) == root, size


def test_reference_proofs_match_vectors() -> None:
    hashes = [leaf_hash(data) for data in REFERENCE_LEAVES]
    for folder in _reference_folders("inclusion"):
        inc = _load_inclusion(folder / "happy-path.json")
        proof = inclusion_proof(hashes, inc.leaf_idx, inc.tree_size)
        assert proof == inc.proof, folder
        verify_inclusion(hashes[inc.leaf_idx], inc.leaf_idx, inc.tree_size, proof, inc.root)
    for folder in _reference_folders("consistency"):
        con = _load_consistency(folder / "happy-path.json")
        proof = consistency_proof(hashes, con.size1, con.size2)
        assert proof == con.proof, folder
        verify_consistency(con.size1, con.size2, con.root1, con.root2, proof)


def test_reference_tree_every_proof_verifies() -> None:
    hashes = [leaf_hash(data) for data in REFERENCE_LEAVES]
    roots = {size: bytes.fromhex(h) for size, h in REFERENCE_ROOTS.items()}
    for size, root in roots.items():
        for index in range(size):
            proof = inclusion_proof(hashes, index, size)
            verify_inclusion(hashes[index], index, size, proof, root)
        for first in range(1, size + 1):
            proof = consistency_proof(hashes, first, size)
            verify_consistency(first, size, roots[first], root, proof)


# --- error messages and argument checks ---------------------------------------------------------


def test_error_messages_name_the_failed_check() -> None:
    root = root_hash(LEAVES[:5])
    proof = inclusion_proof(LEAVES, 2, 5)
    with pytest.raises(ProofError, match=r"leaf index 5 is outside a tree of size 5"):
        verify_inclusion(LEAVES[2], 5, 5, proof, root)
    with pytest.raises(ProofError, match=r"leaf hash is 31 bytes long"):
        verify_inclusion(LEAVES[2][:31], 2, 5, proof, root)
    with pytest.raises(ProofError, match=r"proof hash #1 is 0 bytes long"):
        verify_inclusion(LEAVES[2], 2, 5, [proof[0], b"", *proof[1:]], root)
    with pytest.raises(ProofError, match=r"has 4 hashes, but .* needs exactly 3"):
        verify_inclusion(LEAVES[2], 2, 5, [*proof, proof[0]], root)
    with pytest.raises(ProofError, match=r"has 2 hashes, but .* needs exactly 3"):
        verify_inclusion(LEAVES[2], 2, 5, proof[:2], root)
    with pytest.raises(ProofError, match=r"does not match the root"):
        verify_inclusion(LEAVES[3], 2, 5, proof, root)

    root3 = root_hash(LEAVES[:3])
    cproof = consistency_proof(LEAVES, 3, 5)
    with pytest.raises(ProofError, match=r"size1 is 0"):
        verify_consistency(0, 5, root3, root, cproof)
    with pytest.raises(ProofError, match=r"size1 5 is larger than size2 3"):
        verify_consistency(5, 3, root, root3, cproof)
    with pytest.raises(ProofError, match=r"proof must be empty"):
        verify_consistency(5, 5, root, root, cproof)
    with pytest.raises(ProofError, match=r"roots differ"):
        verify_consistency(5, 5, root, root3, [])
    with pytest.raises(ProofError, match=r"is empty; it needs 4 hashes"):
        verify_consistency(3, 5, root3, root, [])
    with pytest.raises(ProofError, match=r"root2 \(newer tree root\) is 33 bytes long"):
        verify_consistency(3, 5, root3, root + b"\0", cproof)
    with pytest.raises(ProofError, match=r"does not reproduce root1"):
        verify_consistency(3, 5, root, root, cproof)
    with pytest.raises(ProofError, match=r"does not reproduce root2"):
        verify_consistency(3, 5, root3, root3, cproof)


def test_generation_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"outside a tree of size 3"):
        inclusion_proof_nodes(3, 3)
    with pytest.raises(ValueError, match=r"outside a tree of size 0"):
        inclusion_proof_nodes(0, 0)
    with pytest.raises(ValueError, match=r"need 0 < first <= second"):
        consistency_proof_nodes(0, 3)
    with pytest.raises(ValueError, match=r"need 0 < first <= second"):
        consistency_proof_nodes(4, 3)
    with pytest.raises(ValueError, match=r"exceeds the 4 leaf hashes"):
        inclusion_proof(LEAVES[:4], 1, 5)
    with pytest.raises(ValueError, match=r"exceeds the 4 leaf hashes"):
        consistency_proof(LEAVES[:4], 1, 5)
    with pytest.raises(ValueError, match=r"not the data itself"):
        root_hash([b"raw data"])
    with pytest.raises(ValueError, match=r"not a complete subtree"):
        subtree_node(1, 3)


def test_incomplete_right_edge_range() -> None:
    assert inclusion_proof_nodes(0, 7) == [(1, 2), (2, 4), (4, 7)]
    assert not is_complete_subtree(4, 7)
    assert subtree_ranges(4, 7) == [(4, 6), (6, 7)]
    assert range_hash(LEAVES, 4, 7) == node_hash(range_hash(LEAVES, 4, 6), LEAVES[6])


def test_same_proof_can_fit_another_tree_size() -> None:
    """A proof alone does not pin the tree size; a signed tree head binds size and root."""
    root3 = root_hash(LEAVES[:3])
    proof = inclusion_proof(LEAVES, 0, 3)
    verify_inclusion(LEAVES[0], 0, 4, proof, root3)
    verify_consistency(1, 4, LEAVES[0], root3, consistency_proof(LEAVES, 1, 3))


# --- properties ---------------------------------------------------------------------------------


@st.composite
def tree_and_index(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(1, MAX_SIZE))
    return size, draw(st.integers(0, size - 1))


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    size2 = draw(st.integers(1, MAX_SIZE))
    return draw(st.integers(1, size2)), size2


@cache
def _root(size: int) -> bytes:
    return root_hash(LEAVES[:size])


@cache
def _stored_subtrees(size: int) -> dict[tuple[int, int], bytes]:
    """Every complete subtree hash of a tree, keyed by (level, index), as a log would store it."""
    stored: dict[tuple[int, int], bytes] = {}
    level_hashes = list(LEAVES[:size])
    level = 0
    while level_hashes:
        stored.update({(level, i): h for i, h in enumerate(level_hashes)})
        level_hashes = [
            node_hash(level_hashes[i], level_hashes[i + 1])
            for i in range(0, len(level_hashes) - 1, 2)
        ]
        level += 1
    return stored


def _flip(value: bytes, bit: int) -> bytes:
    out = bytearray(value)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def _flip_in(proof: Sequence[bytes], position: int, bit: int) -> list[bytes]:
    out = list(proof)
    out[position] = _flip(out[position], bit)
    return out


def _inclusion_shape(index: int, size: int) -> tuple[bool, ...] | None:
    """Which side each proof hash joins on; equal shapes make verification compute the same root."""
    if not 0 <= index < size:
        return None
    return tuple(end <= index for _, end in inclusion_proof_nodes(index, size))


def _consistency_shape(size1: int, size2: int) -> tuple[object, ...] | None:
    if not 0 < size1 <= size2:
        return None
    if size1 == size2:
        return ("equal",)
    power_of_two = size1 & (size1 - 1) == 0
    return power_of_two, tuple(end <= size1 for _, end in consistency_proof_nodes(size1, size2))


def _inclusion_verifies(index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    try:
        verify_inclusion(LEAVES[index], index, size, proof, root)
    except ProofError:
        return False
    return True


def _consistency_verifies(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]
) -> bool:
    try:
        verify_consistency(size1, size2, root1, root2, proof)
    except ProofError:
        return False
    return True


@PROPERTY_SETTINGS
@given(case=tree_and_index(), data=st.data())
def test_inclusion_proof_verifies_and_tampering_fails(
    case: tuple[int, int], data: st.DataObject
) -> None:
    size, index = case
    leaf, root = LEAVES[index], _root(size)
    proof = inclusion_proof(LEAVES, index, size)
    verify_inclusion(leaf, index, size, proof, root)

    bits = st.integers(0, HASH_SIZE * 8 - 1)
    assert not _inclusion_verifies(index, size, proof, _flip(root, data.draw(bits)))
    with pytest.raises(ProofError):
        verify_inclusion(_flip(leaf, data.draw(bits)), index, size, proof, root)
    extra = data.draw(st.binary(min_size=HASH_SIZE, max_size=HASH_SIZE))
    at = data.draw(st.integers(0, len(proof)))
    assert not _inclusion_verifies(index, size, [*proof[:at], extra, *proof[at:]], root)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1))
        assert not _inclusion_verifies(
            index, size, _flip_in(proof, position, data.draw(bits)), root
        )
        assert not _inclusion_verifies(index, size, proof[:position] + proof[position + 1 :], root)


@PROPERTY_SETTINGS
@given(case=tree_and_index(), other_index=st.integers(-2, MAX_SIZE + 2))
def test_inclusion_other_index_fails(case: tuple[int, int], other_index: int) -> None:
    size, index = case
    assume(other_index != index)
    proof = inclusion_proof(LEAVES, index, size)
    with pytest.raises(ProofError):
        verify_inclusion(LEAVES[index], other_index, size, proof, _root(size))


@PROPERTY_SETTINGS
@given(case=tree_and_index(), other_size=st.integers(-1, 2 * MAX_SIZE))
def test_inclusion_other_size_fails_unless_same_shape(
    case: tuple[int, int], other_size: int
) -> None:
    size, index = case
    assume(other_size != size)
    proof = inclusion_proof(LEAVES, index, size)
    same_shape = _inclusion_shape(index, other_size) == _inclusion_shape(index, size)
    assert _inclusion_verifies(index, other_size, proof, _root(size)) == same_shape


@PROPERTY_SETTINGS
@given(sizes=two_sizes(), data=st.data())
def test_consistency_proof_verifies_and_tampering_fails(
    sizes: tuple[int, int], data: st.DataObject
) -> None:
    size1, size2 = sizes
    root1, root2 = _root(size1), _root(size2)
    proof = consistency_proof(LEAVES, size1, size2)
    verify_consistency(size1, size2, root1, root2, proof)

    bits = st.integers(0, HASH_SIZE * 8 - 1)
    assert not _consistency_verifies(size1, size2, _flip(root1, data.draw(bits)), root2, proof)
    assert not _consistency_verifies(size1, size2, root1, _flip(root2, data.draw(bits)), proof)
    extra = data.draw(st.binary(min_size=HASH_SIZE, max_size=HASH_SIZE))
    at = data.draw(st.integers(0, len(proof)))
    longer = [*proof[:at], extra, *proof[at:]]
    assert not _consistency_verifies(size1, size2, root1, root2, longer)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1))
        flipped = _flip_in(proof, position, data.draw(bits))
        assert not _consistency_verifies(size1, size2, root1, root2, flipped)
        shorter = proof[:position] + proof[position + 1 :]
        assert not _consistency_verifies(size1, size2, root1, root2, shorter)


@PROPERTY_SETTINGS
@given(
    sizes=two_sizes(),
    other1=st.integers(-1, MAX_SIZE + 2),
    other2=st.integers(-1, 2 * MAX_SIZE),
    change=st.sampled_from(["size1", "size2", "both"]),
)
def test_consistency_other_sizes_fail_unless_same_shape(
    sizes: tuple[int, int], other1: int, other2: int, change: str
) -> None:
    size1, size2 = sizes
    new1 = size1 if change == "size2" else other1
    new2 = size2 if change == "size1" else other2
    assume((new1, new2) != (size1, size2))
    proof = consistency_proof(LEAVES, size1, size2)
    same_shape = _consistency_shape(new1, new2) == _consistency_shape(size1, size2)
    verifies = _consistency_verifies(new1, new2, _root(size1), _root(size2), proof)
    assert verifies == same_shape


def test_small_trees_other_sizes_fail_exactly_when_shape_differs() -> None:
    for size in range(1, 33):
        for index in range(size):
            proof, root = inclusion_proof(LEAVES, index, size), _root(size)
            for other in range(65):
                same_shape = _inclusion_shape(index, other) == _inclusion_shape(index, size)
                assert _inclusion_verifies(index, other, proof, root) == same_shape
    for size2 in range(1, 21):
        for size1 in range(1, size2 + 1):
            proof, root1, root2 = (
                consistency_proof(LEAVES, size1, size2),
                _root(size1),
                _root(size2),
            )
            others = {(n, size2) for n in range(42)} | {(size1, n) for n in range(42)}
            for new1, new2 in others:
                same_shape = _consistency_shape(new1, new2) == _consistency_shape(size1, size2)
                assert _consistency_verifies(new1, new2, root1, root2, proof) == same_shape


def _proof_from_store(
    nodes: Sequence[tuple[int, int]], stored: dict[tuple[int, int], bytes]
) -> tuple[list[bytes], int]:
    """Assemble a proof the way a database-backed log would, counting subtree reads."""
    proof: list[bytes] = []
    reads = 0
    for start, end in nodes:
        pieces = subtree_ranges(start, end)
        reads += len(pieces)
        proof.append(fold_subtrees([stored[subtree_node(*piece)] for piece in pieces]))
    return proof, reads


def _check_node_ranges(nodes: Sequence[tuple[int, int]], size: int) -> None:
    incomplete = [(s, e) for s, e in nodes if not is_complete_subtree(s, e)]
    assert len(incomplete) <= 1, nodes
    assert all(end == size for _, end in incomplete), nodes
    for start, end in nodes:
        assert all(is_complete_subtree(*piece) for piece in subtree_ranges(start, end))


@PROPERTY_SETTINGS
@given(case=tree_and_index())
def test_inclusion_proof_from_stored_subtrees(case: tuple[int, int]) -> None:
    size, index = case
    nodes = inclusion_proof_nodes(index, size)
    _check_node_ranges(nodes, size)
    proof, reads = _proof_from_store(nodes, _stored_subtrees(size))
    assert proof == inclusion_proof(LEAVES, index, size)
    assert reads <= 2 * (size - 1).bit_length()


@PROPERTY_SETTINGS
@given(sizes=two_sizes())
def test_consistency_proof_from_stored_subtrees(sizes: tuple[int, int]) -> None:
    size1, size2 = sizes
    nodes = consistency_proof_nodes(size1, size2)
    _check_node_ranges(nodes, size2)
    proof, reads = _proof_from_store(nodes, _stored_subtrees(size2))
    assert proof == consistency_proof(LEAVES, size1, size2)
    assert reads <= 2 * (size2 - 1).bit_length() + 1


@PROPERTY_SETTINGS
@given(start=st.integers(0, MAX_SIZE), length=st.integers(0, MAX_SIZE))
def test_range_hash_equals_fold_of_its_pieces(start: int, length: int) -> None:
    end = min(start + length, MAX_SIZE)
    pieces = subtree_ranges(start, end)
    assert sum(e - s for s, e in pieces) == end - start
    assert range_hash(LEAVES, start, end) == fold_subtrees(
        [range_hash(LEAVES, s, e) for s, e in pieces]
    )
    assert range_hash(LEAVES, start, end) == root_hash(LEAVES[start:end])
