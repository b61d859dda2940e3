"""Building and dropping namespace indexes: per-leaf Lance indexes, published atomically.

Every change of leaf indexes is a namespace transaction like a delete
(``docs/TRANSACTIONS.md``): each touched leaf is *staged* (a Lance
``CreateIndex`` version on top of its published content, built in parallel
with ``create_index_uncommitted`` over all its fragments), then one
``__manifest`` commit moves the ``read_version`` of every touched leaf
(``catalog.manifest.republish_rows`` + ``Manifest.commit``, the same publish
step as deletes and compactions). Readers see all the new indexes or none; a
build that fails on any leaf publishes nothing and rolls the staged leaves
back (``vacuum`` removes what is left).

The definitions live in ``__manifest`` metadata (``search.definitions``) and
change in a second, metadata-only commit: ``create_index`` records the
definition *before* publishing the leaves, ``drop_index`` removes it *after*
publishing them, so the state between the two commits is always "a definition
whose coverage is partial", which ``list_indexes`` shows and
``optimize_indexes`` (or ``drop_index``) completes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.leaf.leaf_schema import leaf_fields_by_id
from lance_partitioned.operations.progress import NO_PROGRESS, Progress
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.driver import (
    LeafTransaction,
    StageMany,
    stage_at_published,
)
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.search.definitions import (
    IndexDefinition,
    SearchError,
    commit_definitions,
    load_definitions,
    make_definition,
)

log = logging.getLogger(__name__)


@dataclass
class IndexInfo:
    """One index definition and its coverage at a snapshot (``ns.list_indexes()``).

    ``partitions``/``rows``: the partitions the definition's filter selects and
    their rows; ``partitions_indexed``/``rows_indexed``: those whose published
    version holds the index, and the rows it covers; ``partitions_flat``:
    vector partitions below the flat threshold (searched exactly, never indexed).
    """

    name: str
    column: str
    index_type: str
    params: dict[str, Any]
    filter: str | None
    min_rows: int | None
    partitions: int
    partitions_indexed: int
    partitions_flat: int
    rows: int
    rows_indexed: int


@dataclass
class IndexReport:
    """What an index build or drop did: the ``__manifest`` version and the partitions changed."""

    version: int
    partitions: list[str] = field(default_factory=list)  # object ids whose leaf changed


def leaf_column(ds: lance.LanceDataset, d: IndexDefinition) -> str | None:
    """The leaf's name for the definition's column (matched by field id); None if it lacks it."""
    f = leaf_fields_by_id(ds).get(d.field_id)
    return None if f is None else f.name


def covered_fragments(ds: lance.LanceDataset, name: str) -> set[int] | None:
    """Fragment ids the leaf's index ``name`` covers (None: the leaf has no such index)."""
    for desc in ds.describe_indices():
        if desc.name == name:
            return {int(i) for s in desc.segments for i in s.fragment_ids}
    return None


def eligible(d: IndexDefinition, rows: int) -> bool:
    """Whether a leaf of ``rows`` rows gets the index (vector leaves below ``min_rows`` stay flat)."""
    if rows == 0:
        return False
    return not d.is_vector or rows >= (d.min_rows or 0)


def needs_build(ds: lance.LanceDataset, d: IndexDefinition) -> bool:
    """Whether the leaf lacks the index, or has fragments it does not cover."""
    if leaf_column(ds, d) is None or not eligible(d, ds.count_rows()):
        return False
    covered = covered_fragments(ds, d.name)
    return covered is None or not {f.fragment_id for f in ds.get_fragments()} <= covered


def _segments(ds: lance.LanceDataset, name: str) -> list[Any]:
    """The leaf's segments of index ``name`` as Lance ``Index`` records (to remove them)."""
    from lance.dataset import Index

    out = []
    for desc in ds.describe_indices():
        if desc.name != name:
            continue
        for s in desc.segments:
            out.append(
                Index(
                    uuid=s.uuid,
                    name=desc.name,
                    fields=list(desc.fields),
                    dataset_version=s.dataset_version_at_last_update,
                    fragment_ids={int(i) for i in s.fragment_ids},
                    index_version=s.index_version,
                )
            )
    return out


def build_segment(
    ds: lance.LanceDataset, column: str, d: IndexDefinition, accelerator: str | None
) -> Any:
    """Build index ``d`` over every fragment of ``ds`` without committing it (Lance ``Index``)."""
    frags = [f.fragment_id for f in ds.get_fragments()]
    params = dict(d.params)
    if d.is_vector:
        metric = params.pop("metric")
        if accelerator is not None:
            params["accelerator"] = accelerator
        return ds.create_index_uncommitted(
            column, d.index_type, name=d.name, metric=metric, replace=True,
            fragment_ids=frags, **params,
        )  # fmt: skip
    segment = ds.create_index_uncommitted(
        column, d.index_type, name=d.name, replace=True, fragment_ids=frags, **params
    )
    if d.index_type == "INVERTED":
        # an INVERTED segment is written as per-worker parts; Lance merges them
        # into the index files (in place, same uuid) before it can be committed
        ds.merge_index_metadata(segment.uuid, "INVERTED")
    return segment


@dataclass
class BuildIndexes(LeafChange):
    """(Re)build the definitions a leaf needs, as one Lance ``CreateIndex`` version.

    An existing index of the same name is replaced by one that covers every
    fragment (a full rebuild of that leaf's index: appended rows are indexed,
    IVF centroids are retrained on the leaf's current rows).
    """

    definitions: list[IndexDefinition]
    label: str
    accelerator: str | None = None
    built: list[str] = field(default_factory=list)

    def operation(self, base: lance.LanceDataset) -> Any | None:
        new, removed = [], []
        self.built = []
        for d in self.definitions:
            if not needs_build(base, d):
                continue
            column = leaf_column(base, d)
            assert column is not None
            try:
                new.append(build_segment(base, column, d, self.accelerator))
            except Exception as exc:
                raise SearchError(
                    f"building index {d.name!r} ({d.index_type}) on partition {self.label} "
                    f"failed: {exc}"
                ) from exc
            removed.extend(_segments(base, d.name))
            self.built.append(d.name)
        if not new:
            return None
        return lance.LanceOperation.CreateIndex(new, removed)


@dataclass
class DropIndexes(LeafChange):
    """Remove the leaf's index ``name`` (every segment), as one Lance ``CreateIndex`` version."""

    name: str

    def operation(self, base: lance.LanceDataset) -> Any | None:
        removed = _segments(base, self.name)
        return lance.LanceOperation.CreateIndex([], removed) if removed else None


def scope(snapshot: Snapshot, d: IndexDefinition) -> list[Leaf]:
    """The leaves the definition's filter selects (every leaf without a filter)."""
    return Scan(snapshot, d.filter).leaves if d.filter else snapshot.leaves()


def _publish(
    manifest: Manifest,
    snapshot: Snapshot,
    changes: dict[str, tuple[Leaf, LeafChange]],
    lease: Any,
    info: CommitInfo,
    before_rows: Callable[[], lance.LanceDataset] | None = None,
    progress: Progress = NO_PROGRESS,
    stage_many: StageMany | None = None,
) -> tuple[int | None, list[str]]:
    """Stage every change in parallel (``stage_many``: elsewhere, e.g. Spark's tasks;
    ``LeafTransaction.stage_works``), then publish the changed leaves in one commit,
    recorded as ``info`` (``history()``; an index moves no row).

    ``before_rows`` (create_index: the definition commit) runs after staging
    succeeded and returns the ``__manifest`` version to publish on. Returns the
    published version (None when no leaf changed) and the changed object ids.
    On any failure the staged versions are rolled back and nothing is published.
    """
    with LeafTransaction(manifest, snapshot, "index build", lease=lease) as tx:
        works = [tx.work(oid, *changes[oid]) for oid in sorted(changes)]
        progress.start(len(changes))
        # one partition's index built (thread-safe)
        tx.stage_works(works, stage_at_published, lambda _w, _s: progress.advance(), stage_many)
        versions = tx.versions()
        base = before_rows() if before_rows is not None else snapshot.dataset
        if not versions:
            return None, []
        pause_point("leaves_staged")
        published = tx.publish(
            tx.republished, base=base, info=info.with_counts(rows_added=0, rows_removed=0)
        )
    return published, sorted(versions)


def create_index(
    manifest: Manifest,
    column: str,
    index_type: str,
    name: str | None = None,
    filter: FilterLike = None,
    accelerator: str | None = None,
    progress: Progress = NO_PROGRESS,
    stage_many: StageMany | None = None,
    **params: Any,
) -> IndexReport:
    """Define an index and build it on every leaf in its scope, published atomically.

    ``progress`` counts partitions built (``operations.progress``); ``stage_many``:
    where the leaves' indexes are built (default this process's threads;
    ``LeafTransaction.stage_works``).

    Bad requests (missing column, wrong type, unknown index type, metric or
    parameter, a name or column already indexed) raise before anything is
    read from the leaves or written. A build failing on any leaf publishes
    nothing: neither the definition nor any leaf index.
    """
    snapshot = Snapshot.load(manifest, for_write=True)
    filter_sql = Scan(snapshot, filter).sql if filter is not None else None
    d = make_definition(snapshot.schema, column, index_type, name, filter_sql, params)
    defs = load_definitions(snapshot)
    same = defs.get(d.name)
    if same is not None and same != d:
        raise SearchError(
            f"an index named {d.name!r} already exists ({same.index_type} on "
            f"{same.column!r}); drop it first or choose another name"
        )
    for other in defs.values():
        if other.name != d.name and other.field_id == d.field_id:
            raise SearchError(
                f"column {column!r} already has index {other.name!r} ({other.index_type}); "
                "drop it first (one index definition per column)"
            )
    leaves = scope(snapshot, d)
    changes = {
        leaf.object_id: (leaf, BuildIndexes([d], leaf.object_id, accelerator)) for leaf in leaves
    }

    def record_definition() -> lance.LanceDataset:
        if same is not None:
            return snapshot.dataset
        return commit_definitions(manifest, snapshot.dataset, {**defs, d.name: d})

    with leases.hold(manifest, "create_index") as lease:
        try:
            version, done = _publish(
                manifest,
                snapshot,
                changes,
                lease,
                CommitInfo("create_index", {"name": d.name}),
                record_definition,
                progress,
                stage_many,
            )
        except BaseException:
            if same is None:
                _forget_definition(manifest, d.name, defs)
            raise
    latest = manifest.dataset().version
    log.info("index %s built on %d partitions", d.name, len(done))
    return IndexReport(version or latest, done)


def _forget_definition(manifest: Manifest, name: str, before: dict[str, IndexDefinition]) -> None:
    """After a failed create_index: remove the definition if it was recorded (best effort)."""
    try:
        latest = Snapshot.load(manifest, for_write=True)
        now = load_definitions(latest)
        if name in now and name not in before:
            now.pop(name)
            commit_definitions(manifest, latest.dataset, now)
    except Exception as exc:  # the definition stays, with partial coverage
        log.warning("could not remove the definition of failed index %s: %s", name, exc)


def optimize_indexes(
    manifest: Manifest,
    accelerator: str | None = None,
    progress: Progress = NO_PROGRESS,
    stage_many: StageMany | None = None,
) -> IndexReport:
    """Give every leaf the indexes its definitions call for, published in one commit
    (``stage_many``: where they are built, as for ``create_index``).

    Leaves created by later writes get their indexes; leaves with rows
    appended since their build are rebuilt over all their fragments. Leaves
    already covered are not touched.
    """
    snapshot = Snapshot.load(manifest, for_write=True)
    defs = load_definitions(snapshot)
    per_leaf: dict[str, tuple[Leaf, list[IndexDefinition]]] = {}
    for d in defs.values():
        for leaf in scope(snapshot, d):
            per_leaf.setdefault(leaf.object_id, (leaf, []))[1].append(d)

    def stale(oid: str) -> bool:
        leaf, ds_defs = per_leaf[oid]
        ds = snapshot.open_leaf(leaf)
        return any(needs_build(ds, d) for d in ds_defs)

    with ThreadPoolExecutor(4) as pool:
        todo = [oid for oid, s in zip(per_leaf, pool.map(stale, per_leaf), strict=True) if s]
    changes = {
        oid: (per_leaf[oid][0], BuildIndexes(per_leaf[oid][1], oid, accelerator)) for oid in todo
    }
    if not changes:
        return IndexReport(snapshot.version, [])
    with leases.hold(manifest, "optimize_indexes") as lease:
        version, done = _publish(
            manifest,
            snapshot,
            changes,
            lease,
            CommitInfo("optimize_indexes"),
            progress=progress,
            stage_many=stage_many,
        )
    return IndexReport(version or snapshot.version, done)


def drop_index(manifest: Manifest, name: str) -> IndexReport:
    """Remove index ``name``: every leaf's index in one commit, then the definition.

    Raises SearchError naming the existing indexes when there is no such index.
    """
    snapshot = Snapshot.load(manifest, for_write=True)
    defs = load_definitions(snapshot)
    if name not in defs:
        raise SearchError(f"no index named {name!r}; indexes are {sorted(defs) or 'none'}")
    changes = {leaf.object_id: (leaf, DropIndexes(name)) for leaf in scope(snapshot, defs[name])}
    with leases.hold(manifest, "drop_index") as lease:
        version, done = _publish(
            manifest, snapshot, changes, lease, CommitInfo("drop_index", {"name": name})
        )
    latest = Snapshot.load(manifest, for_write=True)
    now = load_definitions(latest)
    now.pop(name, None)
    ds = commit_definitions(manifest, latest.dataset, now)
    return IndexReport(ds.version, done)


def list_indexes(snapshot: Snapshot) -> list[IndexInfo]:
    """Every definition of ``snapshot`` with its coverage, read at the pinned leaf versions."""
    out = []
    for d in load_definitions(snapshot).values():
        leaves = scope(snapshot, d)

        def coverage(leaf: Leaf, d: IndexDefinition = d) -> tuple[int, int, bool, bool]:
            ds = snapshot.open_leaf(leaf)
            rows = ds.count_rows()
            covered = covered_fragments(ds, d.name)
            if covered is None:
                return rows, 0, False, d.is_vector and 0 < rows < (d.min_rows or 0)
            indexed = sum(f.count_rows() for f in ds.get_fragments() if f.fragment_id in covered)
            return rows, indexed, True, False

        with ThreadPoolExecutor(4) as pool:
            stats = list(pool.map(coverage, leaves))
        out.append(
            IndexInfo(
                d.name,
                d.column_in(snapshot.schema) or d.column,
                d.index_type,
                dict(d.params),
                d.filter,
                d.min_rows,
                len(leaves),
                sum(s[2] for s in stats),
                sum(s[3] for s in stats),
                sum(s[0] for s in stats),
                sum(s[1] for s in stats),
            )
        )
    return out
