"""Finding the namespace rows a merge's source rows match, leaf by leaf.

Which leaves are searched: when the keys determine a spec's partition values
(every source column of every field of the spec is a key), only the leaves of
that spec the source rows map to; otherwise every leaf of the spec. A leaf is
searched by reading its key columns (in namespace form: renamed and lagging
columns conformed, ``ReadMapping``) with their row addresses and joining them
with the source's keys: a hash join, NULL keys never equal.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format.spec import partition_key
from lance_partitioned.operations.change.source import SOURCE_INDEX, ChangeSource
from lance_partitioned.operations.read.scan import ROW_ADDRESS, read_leaf_rows
from lance_partitioned.operations.txn.parallel import for_each

LOOKUP_KEYS = 2_000  # partition keys looked up in __manifest by value; more: read the spec's rows
MATCH_THREADS = 4  # leaves searched at once (Lance reads release the GIL)


def candidate_leaves(snapshot: Snapshot, source: ChangeSource, prune: bool = True) -> list[Leaf]:
    """The leaves that may hold a row matching a source row (all leaves when not ``prune``)."""
    out: list[Leaf] = []
    keyed = source.keyed()
    for spec_id, spec in sorted(snapshot.specs.items()):
        names = {
            snapshot.schema.field_by_id(i).name
            for f in spec.fields
            for i in f.source_ids
            if snapshot.schema.has_id(i)
        }
        determined = (
            prune
            and spec.fields
            and all(all(snapshot.schema.has_id(i) for i in f.source_ids) for f in spec.fields)
            and names <= set(source.on)
        )
        if not determined:
            out.extend(snapshot.leaves_of_spec(spec_id))
            continue
        if keyed.num_rows == 0:
            continue
        values = [f.values(keyed, snapshot.schema).to_pylist() for f in spec.fields]
        keys = {partition_key(k) for k in zip(*values, strict=True)}
        found = snapshot.rows_for_keys(spec_id, list(keys)) if len(keys) <= LOOKUP_KEYS else None
        leaves = found[0] if found is not None else snapshot.leaves_of_spec(spec_id)
        out.extend(leaf for leaf in leaves if partition_key(leaf.values) in keys)
    return out


@dataclass
class LeafMatches:
    """One leaf's matches: ``pairs`` (the source row index, the target row's address),
    and, when asked, the addresses of the leaf's rows no source row matched."""

    leaf: Leaf
    source_rows: np.ndarray
    addresses: np.ndarray
    unmatched: np.ndarray | None = None


def match_leaves(
    snapshot: Snapshot, source: ChangeSource, leaves: Sequence[Leaf], unmatched: bool = False
) -> list[LeafMatches]:
    """Every leaf's matches with the source's keys (``unmatched``: also the addresses of
    its rows without one), searched in parallel; leaves without either are left out."""
    keyed = source.keyed()
    out: list[LeafMatches] = []
    lock = threading.Lock()

    def search(leaf: Leaf) -> None:
        found = _match_leaf(snapshot, leaf, keyed, source.on, unmatched)
        if len(found.addresses) or (found.unmatched is not None and len(found.unmatched)):
            with lock:
                out.append(found)

    for_each(list(leaves), search, min(MATCH_THREADS, max(1, len(leaves))))
    out.sort(key=lambda m: m.leaf.object_id)
    return out


def _match_leaf(
    snapshot: Snapshot, leaf: Leaf, keyed: pa.Table, on: list[str], unmatched: bool
) -> LeafMatches:
    ds = snapshot.open_leaf(leaf)
    rows = read_leaf_rows(ds, snapshot.schema, on, None, [], leaf.object_id, with_address=True)
    if len(on) == 1:  # one key: a hash lookup per row, no join machinery
        position = pc.index_in(rows.column(on[0]), value_set=keyed.column(on[0]))
        found = pc.is_valid(position)
        src = keyed.column(SOURCE_INDEX).take(position.filter(found)).to_numpy()
        addresses = rows.column(ROW_ADDRESS).filter(found).to_numpy().astype(np.uint64)
    else:
        joined = rows.join(keyed, on, join_type="inner", use_threads=False)
        src = joined.column(SOURCE_INDEX).to_numpy()
        addresses = joined.column(ROW_ADDRESS).to_numpy().astype(np.uint64)
    rest = None
    if unmatched:
        all_addresses = rows.column(ROW_ADDRESS).to_numpy().astype(np.uint64)
        rest = np.setdiff1d(all_addresses, addresses, assume_unique=True)
    return LeafMatches(leaf, src, addresses, rest)
