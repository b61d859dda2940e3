"""Scalar indexes on ``__manifest``, and keeping it small under churn.

A plan for one partition, a commit's lookup of the rows it rewrites, and a
write's lookup of the partitions its keys name are all filters on
``__manifest``. Without indexes each reads the whole table, so their cost grows
with the namespace; with them Lance answers from the index
(``docs/FORMAT.md`` "Indexes on ``__manifest``"):

- ``object_id``: BTREE (commits look rows up by id; ``merge_insert`` joins on it);
- every ``partition_field_<id>`` column: BTREE (pruning, and partition lookups).

Not ``object_type``: it only ever narrows rows the other indexes already
selected, and a bitmap of half the table would be intersected in every query.

They are ordinary Lance indexes, which any Lance reader uses or ignores, so the
format does not change. Lance keeps them correct through every commit (rows a
commit replaces are masked; rows it adds live in new fragments that queries
scan next to the index); ``maintain`` keeps that unindexed tail short.

When: a small ``__manifest`` is read whole faster than through an index, and
every index is a commit, so nothing is created below ``INDEX_MIN_ROWS`` rows.
After each commit of rows (``Manifest.commit``), ``maintain`` creates missing
indexes once the table is big enough, and when more than ``LOOSE_FRAGMENTS``
fragments have piled up (each commit adds one) it does a writer's share of the
upkeep (``tidy``): work in proportion to what the last commits added, never to
the namespace's size, since it runs inside someone's commit. ``ns.compact()``
does all of it (``refresh``). All of it is best effort: a concurrent commit that
wins makes it a no-op, and a failure is logged, never raised to the writer whose
commit already succeeded.
"""

from __future__ import annotations

import logging

import lance

log = logging.getLogger(__name__)

Options = dict[str, str] | None

PARTITION_PREFIX = "partition_field_"
# Below this many rows a full read of __manifest is as fast as an indexed one.
INDEX_MIN_ROWS = 2_000
# Fragments (one per commit) tolerated before compacting __manifest.
LOOSE_FRAGMENTS = 32
# A writer's upkeep rewrites a fragment only once this share of its rows is masked
# (rows later commits replaced). Lance's default, 0.1, rewrote a million-row
# __manifest fragment every hundred commits of 1,000 rows, 2 s inside a commit.
TIDY_MASKED_SHARE = 0.5
# Index segments (the first, plus one delta per upkeep) before a writer's upkeep
# merges the deltas. Merging them all into the first each time cost 0.6 s at a
# million rows; a delta costs 0.03 s, and lookups over 2 segments are as fast.
MAX_INDEX_SEGMENTS = 8


def wanted(ds: lance.LanceDataset) -> dict[str, str]:
    """Column -> Lance index type that ``__manifest`` should carry."""
    names = ds.schema.names
    out = {"object_id": "BTREE"} if "object_id" in names else {}
    out.update({c: "BTREE" for c in names if c.startswith(PARTITION_PREFIX)})
    return out


def indexed_columns(ds: lance.LanceDataset) -> dict[str, str]:
    """Column -> name of a single-column scalar index on it (any name)."""
    return {
        idx.field_names[0]: idx.name for idx in ds.describe_indices() if len(idx.field_names) == 1
    }


def missing(ds: lance.LanceDataset) -> dict[str, str]:
    """The wanted indexes ``ds`` lacks."""
    have = indexed_columns(ds)
    return {c: t for c, t in wanted(ds).items() if c not in have}


def _unindexed_fragments(ds: lance.LanceDataset) -> int:
    """Fragments some index does not cover (new rows of later commits)."""
    names = indexed_columns(ds).values()
    return max((ds.stats.index_stats(n)["num_unindexed_fragments"] for n in names), default=0)


def ensure(ds: lance.LanceDataset, storage_options: Options = None) -> lance.LanceDataset:
    """Create the missing indexes (each one Lance commit); returns the latest dataset."""
    todo = missing(ds)
    for column, index_type in todo.items():
        ds.create_scalar_index(column, index_type)
    return lance.dataset(ds.uri, storage_options=storage_options) if todo else ds


def refresh(
    ds: lance.LanceDataset,
    storage_options: Options = None,
    compact: bool = True,
    materialize: bool = True,
) -> bool:
    """Compact ``__manifest``, create missing indexes and index the rows no index
    covers. Returns whether anything was committed.

    ``materialize``: also rewrite fragments to drop every masked row (``ns.compact()``);
    without it only small fragments are merged and a fragment is rewritten once a
    tenth of it is masked (Lance's default), which keeps a writer's share of the
    upkeep proportional to what commits added, not to the namespace.
    """
    changed = False
    if compact and (
        len(ds.get_fragments()) > 1
        or any(f.metadata.deletion_file is not None for f in ds.get_fragments())
    ):
        ds.optimize.compact_files(
            **({"materialize_deletions_threshold": 0.0} if materialize else {})
        )
        changed = True
        ds = lance.dataset(ds.uri, storage_options=storage_options)
    if ds.count_rows() >= INDEX_MIN_ROWS or indexed_columns(ds):
        before = ds.version
        ds = ensure(ds, storage_options)
        changed |= ds.version != before
        if _unindexed_fragments(ds):
            ds.optimize.optimize_indices()
            changed = True
    return changed


def maintain(ds: lance.LanceDataset, storage_options: Options = None) -> None:
    """After a commit of rows: the cheap checks, and the work only when due (best effort)."""
    try:
        if len(ds.get_fragments()) > LOOSE_FRAGMENTS:
            tidy(ds, storage_options)
        elif missing(ds) and ds.count_rows() >= INDEX_MIN_ROWS:
            refresh(ds, storage_options, compact=False)
    except Exception as exc:  # a concurrent commit won, or the store refused: next time
        log.info("__manifest maintenance at version %d skipped: %s", ds.version, exc)


def tidy(ds: lance.LanceDataset, storage_options: Options = None) -> None:
    """A writer's share of the upkeep, in proportion to what commits added.

    Merges the small fragments commits left (rewriting a large one only once
    ``TIDY_MASKED_SHARE`` of it is masked), indexes their rows as a new delta
    segment of each index, and merges the deltas once there are more than
    ``MAX_INDEX_SEGMENTS`` segments, leaving the first (the bulk of the table)
    as it is. ``refresh`` (``ns.compact()``) merges everything.
    """
    ds.optimize.compact_files(materialize_deletions_threshold=TIDY_MASKED_SHARE)
    ds = lance.dataset(ds.uri, storage_options=storage_options)
    if ds.count_rows() < INDEX_MIN_ROWS and not indexed_columns(ds):
        return
    ds = ensure(ds, storage_options)
    if _unindexed_fragments(ds):
        ds.optimize.optimize_indices(num_indices_to_merge=0)
        ds = lance.dataset(ds.uri, storage_options=storage_options)
    for name in indexed_columns(ds).values():
        segments = ds.stats.index_stats(name)["num_indices"]
        if segments > MAX_INDEX_SEGMENTS:
            ds.optimize.optimize_indices(index_names=[name], num_indices_to_merge=segments - 1)
