"""RFC 6962 / RFC 9162 Merkle tree hashing, proof generation and proof verification.

Leaf ranges are half-open ``(start, end)`` pairs. A range is a *complete subtree* when its length
is a power of two and ``start`` is a multiple of that length; it then has the stable node id
``(level, index) = (log2(end - start), start >> level)`` (see `subtree_node`), so its hash can be
stored once and never changes as the log grows.

Every element of an inclusion or consistency proof is the MTH of one range, listed by
`inclusion_proof_nodes` and `consistency_proof_nodes`. Nearly all of those ranges are complete
subtrees. At most one per proof is not: a right-hand sibling that ends at the tree's right edge,
such as ``(4, 7)`` in a tree of 7 leaves. `subtree_ranges` splits any range into the
power-of-two pieces MTH is built from, and `fold_subtrees` combines the pieces' hashes back into
the range's MTH. For every range the ``*_proof_nodes`` functions return, those pieces are complete
subtrees, so a database-backed log can assemble any proof from O(log n) stored subtree hashes:

    proof = [
        fold_subtrees([stored[subtree_node(*piece)] for piece in subtree_ranges(*rng)])
        for rng in inclusion_proof_nodes(index, tree_size)
    ]

Appending needs only the old tree's `frontier` (its largest complete subtrees):
`completed_subtrees` returns every node the new leaves complete, to be stored once.
"""

import hashlib
from collections.abc import Mapping, Sequence
from typing import Final

from lineage.core.errors import ProofError

HASH_SIZE: Final = 32
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def root_hash(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH of the whole list; the empty tree hashes to SHA-256("")."""
    return range_hash(leaf_hashes, 0, len(leaf_hashes))


def range_hash(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH(D[start:end]) for any range, complete subtree or not."""
    if not 0 <= start <= end <= len(leaf_hashes):
        raise ValueError(
            f"range [{start}, {end}) is not inside a list of {len(leaf_hashes)} leaf hashes"
        )
    if start == end:
        return EMPTY_ROOT
    return _mth(leaf_hashes, start, end)


def _mth(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    if end - start == 1:
        leaf = leaf_hashes[start]
        if len(leaf) != HASH_SIZE:
            raise ValueError(
                f"leaf hash {start} is {len(leaf)} bytes, expected {HASH_SIZE}; "
                "pass leaf_hash(data), not the data itself"
            )
        return leaf
    mid = start + _split(end - start)
    return node_hash(_mth(leaf_hashes, start, mid), _mth(leaf_hashes, mid, end))


def _split(size: int) -> int:
    """Largest power of two strictly below ``size`` (``size`` >= 2): where MTH splits."""
    return 1 << ((size - 1).bit_length() - 1)


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def subtree_ranges(start: int, end: int) -> list[tuple[int, int]]:
    """Split ``[start, end)`` into the power-of-two ranges MTH is built from, largest first.

    The MTH of the range is `fold_subtrees` of the pieces' MTHs. The pieces are complete
    subtrees whenever ``start`` is a multiple of the smallest power of two >= ``end - start``,
    which holds for every range the ``*_proof_nodes`` functions return.
    """
    if not 0 <= start <= end:
        raise ValueError(f"[{start}, {end}) is not a valid leaf range")
    pieces: list[tuple[int, int]] = []
    while start < end:
        size = end - start
        piece = size if _is_power_of_two(size) else _split(size)
        pieces.append((start, start + piece))
        start += piece
    return pieces


def fold_subtrees(hashes: Sequence[bytes]) -> bytes:
    """Combine the MTHs of a range's `subtree_ranges` pieces into the MTH of the whole range."""
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for left in reversed(hashes[:-1]):
        acc = node_hash(left, acc)
    return acc


def is_complete_subtree(start: int, end: int) -> bool:
    """True when ``[start, end)`` is an aligned power-of-two range, i.e. a stable tree node."""
    size = end - start
    return start >= 0 and _is_power_of_two(size) and start % size == 0


def subtree_node(start: int, end: int) -> tuple[int, int]:
    """``(level, index)`` of a complete subtree; level 0 holds the leaves."""
    if not is_complete_subtree(start, end):
        raise ValueError(f"[{start}, {end}) is not a complete subtree")
    level = (end - start).bit_length() - 1
    return level, start >> level


def frontier(tree_size: int) -> list[tuple[int, int]]:
    """Node ids of the largest complete subtrees a tree is made of, left to right.

    Their hashes are all a log needs to append leaves and compute the new root (see
    `completed_subtrees`); at most log2(tree_size) + 1 of them.
    """
    return [subtree_node(*piece) for piece in subtree_ranges(0, tree_size)]


def completed_subtrees(
    frontier_hashes: Mapping[tuple[int, int], bytes], old_size: int, leaf_hashes: Sequence[bytes]
) -> dict[tuple[int, int], bytes]:
    """Every complete subtree, by node id, that appending ``leaf_hashes`` to a tree of
    ``old_size`` leaves completes, the new leaves (level 0) included.

    ``frontier_hashes`` maps the old tree's `frontier` to their hashes: a new node's left child
    is either new itself or one of those.
    """
    new_size = old_size + len(leaf_hashes)
    made = {(0, old_size + offset): leaf for offset, leaf in enumerate(leaf_hashes)}
    known = {**frontier_hashes, **made}
    level = 1
    while 1 << level <= new_size:
        for index in range(old_size >> level, new_size >> level):
            made[level, index] = known[level, index] = node_hash(
                known[level - 1, 2 * index], known[level - 1, 2 * index + 1]
            )
        level += 1
    return made


def root_from_subtrees(stored: Mapping[tuple[int, int], bytes], tree_size: int) -> bytes:
    """MTH of the whole tree from the hashes of its `frontier`."""
    return fold_subtrees([stored[node] for node in frontier(tree_size)])


def inclusion_proof_nodes(index: int, tree_size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose MTHs form PATH(index, D[tree_size]) (RFC 6962 2.1.1), leaf upwards."""
    if not 0 <= index < tree_size:
        raise ValueError(f"leaf index {index} is outside a tree of size {tree_size}")
    nodes: list[tuple[int, int]] = []
    start, end = 0, tree_size
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            nodes.append((mid, end))
            end = mid
        else:
            nodes.append((start, mid))
            start = mid
    nodes.reverse()
    return nodes


def consistency_proof_nodes(first: int, second: int) -> list[tuple[int, int]]:
    """Leaf ranges whose MTHs form PROOF(first, D[second]) (RFC 6962 2.1.2), in proof order."""
    if not 0 < first <= second:
        raise ValueError(
            f"no consistency proof from size {first} to size {second}; need 0 < first <= second"
        )
    nodes: list[tuple[int, int]] = []
    start, end = 0, second
    # SUBPROOF's flag b: true while [start, end) is still a prefix the verifier already has.
    known_prefix = True
    while first != end:
        mid = start + _split(end - start)
        if first <= mid:
            nodes.append((mid, end))
            end = mid
        else:
            nodes.append((start, mid))
            start = mid
            known_prefix = False
    if not known_prefix:
        nodes.append((start, end))
    nodes.reverse()
    return nodes


def _check_tree(leaf_hashes: Sequence[bytes], tree_size: int) -> None:
    if tree_size > len(leaf_hashes):
        raise ValueError(f"tree size {tree_size} exceeds the {len(leaf_hashes)} leaf hashes given")


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, tree_size: int) -> list[bytes]:
    """PATH(index, D[tree_size]) over the first ``tree_size`` leaf hashes."""
    nodes = inclusion_proof_nodes(index, tree_size)
    _check_tree(leaf_hashes, tree_size)
    return [range_hash(leaf_hashes, start, end) for start, end in nodes]


def consistency_proof(leaf_hashes: Sequence[bytes], first: int, second: int) -> list[bytes]:
    """PROOF(first, D[second]) over the first ``second`` leaf hashes."""
    nodes = consistency_proof_nodes(first, second)
    _check_tree(leaf_hashes, second)
    return [range_hash(leaf_hashes, start, end) for start, end in nodes]


def _check_hash(what: str, value: bytes) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes long; a SHA-256 hash is {HASH_SIZE} bytes")


def _check_proof_hashes(proof: Sequence[bytes]) -> None:
    for position, element in enumerate(proof):
        _check_hash(f"proof hash #{position}", element)


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` sits at ``index`` in the tree of ``tree_size`` with ``root``.

    RFC 9162 section 2.1.3.2. Raises `ProofError` on any failure.
    """
    if not 0 <= index < tree_size:
        valid = f"valid indexes are 0 to {tree_size - 1}" if tree_size > 0 else "it has no leaves"
        raise ProofError(f"leaf index {index} is outside a tree of size {tree_size} ({valid})")
    _check_hash("leaf hash", leaf_hash)
    _check_hash("root hash", root)
    _check_proof_hashes(proof)

    fn, sn = index, tree_size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            raise _inclusion_length_error(index, tree_size, len(proof))
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise _inclusion_length_error(index, tree_size, len(proof))
    if r != root:
        raise ProofError(
            f"inclusion proof for leaf {index} in a tree of size {tree_size} does not match "
            f"the root: it leads to {r.hex()}, expected {root.hex()}"
        )


def _inclusion_length_error(index: int, tree_size: int, got: int) -> ProofError:
    need = len(inclusion_proof_nodes(index, tree_size))
    return ProofError(
        f"inclusion proof has {got} hashes, but leaf {index} in a tree of size {tree_size} "
        f"needs exactly {need}"
    )


def verify_consistency(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``size2`` with ``root2`` extends the one of ``size1`` with ``root1``.

    RFC 9162 section 2.1.4.2. Raises `ProofError` on any failure. Equal sizes need an empty
    proof and byte-equal roots and nothing more, so their roots' lengths are not checked.
    """
    if size1 < 0 or size2 < 0:
        raise ProofError(f"tree sizes cannot be negative (size1 {size1}, size2 {size2})")
    if size1 > size2:
        raise ProofError(
            f"size1 {size1} is larger than size2 {size2}: a log cannot shrink, "
            "so the older tree must be the first one"
        )
    if size1 == 0:
        raise ProofError(
            "size1 is 0: every tree extends the empty tree, so there is nothing to prove; "
            "consistency needs size1 >= 1"
        )
    if size1 == size2:
        if proof:
            raise ProofError(
                f"both trees have size {size1}, so the proof must be empty, "
                f"but it has {len(proof)} hashes"
            )
        if root1 != root2:
            raise ProofError(
                f"both trees have size {size1} but their roots differ: "
                f"{root1.hex()} versus {root2.hex()}"
            )
        return
    _check_hash("root1 (older tree root)", root1)
    _check_hash("root2 (newer tree root)", root2)
    _check_proof_hashes(proof)
    if not proof:
        raise ProofError(
            f"consistency proof from size {size1} to size {size2} is empty; "
            f"it needs {len(consistency_proof_nodes(size1, size2))} hashes"
        )

    path = list(proof)
    # A power-of-two old tree is itself a subtree of the new one, so its root is the seed.
    if _is_power_of_two(size1):
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise _consistency_length_error(size1, size2, len(proof))
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise _consistency_length_error(size1, size2, len(proof))
    if fr != root1:
        raise ProofError(
            f"consistency proof from size {size1} to size {size2} does not reproduce root1: "
            f"it leads to {fr.hex()}, expected {root1.hex()}"
        )
    if sr != root2:
        raise ProofError(
            f"consistency proof from size {size1} to size {size2} does not reproduce root2: "
            f"it leads to {sr.hex()}, expected {root2.hex()}"
        )


def _consistency_length_error(size1: int, size2: int, got: int) -> ProofError:
    need = len(consistency_proof_nodes(size1, size2))
    return ProofError(
        f"consistency proof from size {size1} to size {size2} has {got} hashes, "
        f"but needs exactly {need}"
    )
