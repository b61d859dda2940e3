"""A pinned view of a namespace: one ``__manifest`` version, its schema, specs and rows.

Everything a read or a write plans against comes from one ``Snapshot``, so a
plan never mixes two manifest versions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog import creation, history, layout, repair
from lance_partitioned.catalog.layout import join_uri
from lance_partitioned.catalog.leaf_open import open_leaf_dataset
from lance_partitioned.catalog.leaf_table import (  # noqa: F401  (Leaf, paused_gc: re-exported)
    LEAF_COLUMNS,
    Leaf,
    LeafTable,
    paused_gc,
    spec_ids_of,
)
from lance_partitioned.catalog.manifest import (
    ID_CHUNK,
    SCHEMA_KEY,
    SPEC_KEY_PREFIX,
    Manifest,
    id_chunks,
)
from lance_partitioned.catalog.manifest_query import (
    NAMESPACE_ROWS,
    TABLE_ROWS,
    object_ids_in,
    spec_members,
    where,
)
from lance_partitioned.catalog.row_counts import trusted_counts
from lance_partitioned.catalog.version_cache import VersionCache
from lance_partitioned.errors import (
    CorruptNamespaceError,
    NamespaceDamagedError,
    NotAPartitionedNamespaceError,
    SpecError,
)
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.filters.render import quote_identifier, render_literal
from lance_partitioned.format.schema import Schema, recorded_last_field_id
from lance_partitioned.format.spec import PartitionSpec, check_field_ids

log = logging.getLogger(__name__)
_T = TypeVar("_T")


# Python types of partition values whose SQL equality in Lance is exactly Python's
# (no NaN, -0.0, time zone or scale subtleties): these keys are looked up by index.
_EXACT_TYPES = (int, bool, str, dt.date)

# (root, version, message) already logged, so that repeated loads of one
# damaged version (every scan refreshes) log once per process.
_warned: BoundedCache = caches.register("snapshot.warned", BoundedCache(maxsize=1024))


def _warn_once(root: str, version: int, message: str) -> None:
    if (root, version, message) not in _warned:
        _warned.put((root, version, message), True)
        log.warning("%s: %s", root, message)


# Leaf tables of recent ``__manifest`` versions (``Snapshot.leaf_table``): a query
# repeated on an unchanged namespace plans without reading ``__manifest`` again.
_version_cache = caches.register("snapshot.leaf_tables", VersionCache(max_bytes=64 << 20))

# ``__manifest`` rows up to which reads skip late materialisation (``_read_rows``).
SMALL_MANIFEST_ROWS = 10_000

# Parsed ``__manifest`` metadata by its text: every scan opens the latest version,
# and re-parsing the same schema and spec JSON (and validating them) was a tenth
# of a small query's planning. Keyed by the exact strings, so any change misses.
_Parsed = tuple[Schema, dict[int, PartitionSpec], str | None, dict[str, Any]]
_parsed: BoundedCache = caches.register("snapshot.parsed_metadata", BoundedCache(maxsize=64))


def _parse_metadata(root: str, meta: dict[str, str]) -> _Parsed:
    """The schema, the specs by id, ``spec_problem`` and the shared
    ``Snapshot.prepared_filters`` of ``__manifest`` metadata ``meta`` (of the
    namespace at ``root``, named in errors). Raises what the parse raises; only
    successful parses are remembered. Callers copy ``specs``."""
    key = tuple(sorted(meta.items()))
    hit = _parsed.get(key)
    if hit is not None:
        return hit
    if SCHEMA_KEY not in meta:
        raise NotAPartitionedNamespaceError(
            f"{root!r}: __manifest metadata has partition specs but no 'schema' key"
        )
    schema = Schema.from_json(meta[SCHEMA_KEY], recorded_last_field_id(meta))
    specs: dict[int, PartitionSpec] = {}
    for key_name, value in meta.items():
        if not key_name.startswith(SPEC_KEY_PREFIX):
            continue
        suffix = key_name[len(SPEC_KEY_PREFIX) :]
        if not suffix.isdigit():
            raise SpecError(f"bad spec key {key_name!r} in {root!r}")
        try:
            spec = PartitionSpec.from_json(value)
        except SpecError as exc:
            raise SpecError(f"{key_name} of {root!r} is invalid: {exc}") from exc
        if spec.spec_id != int(suffix):
            raise SpecError(f"{key_name} of {root!r} has id {spec.spec_id}, expected {suffix}")
        specs[spec.spec_id] = spec
    check_field_ids(specs.values())
    # a spec may name a dropped column's id: it stays retired (reads as NULL)
    schema = schema.with_last_field_id(
        max((i for s in specs.values() for f in s.fields for i in f.source_ids), default=-1)
    )
    parsed = (schema, specs, _spec_problem(schema, specs[max(specs)]), {})
    _parsed.put(key, parsed)
    return parsed


@dataclass
class Snapshot:
    """A namespace as of one ``__manifest`` version.

    ``dataset`` is that version; when a foreign writer left it without columns
    its metadata calls for (``damage``), rows are read from ``rows_dataset``, an
    in-memory rebuild (``catalog.repair``), and nothing is written.
    """

    manifest: Manifest
    dataset: lance.LanceDataset
    schema: Schema
    specs: dict[int, PartitionSpec]
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    damage: list[str] = field(default_factory=list)  # our columns ``dataset`` lacks
    view: lance.LanceDataset | None = field(default=None, repr=False)
    # Filters bound to this schema and these specs (``operations.read.scan``), shared by
    # every snapshot of the same metadata: a repeated query binds once.
    prepared_filters: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def rows_dataset(self) -> lance.LanceDataset:
        """Where rows are read from: the version itself, or its in-memory repair."""
        return self.view if self.view is not None else self.dataset

    @classmethod
    def load(
        cls, manifest: Manifest, version: int | str | None = None, for_write: bool = False
    ) -> Snapshot:
        """The namespace at ``version`` (latest when None). Never writes.

        ``for_write``: the caller will commit on top of it, so a damaged version
        raises NamespaceDamagedError (``ns.repair()`` fixes it) and writer
        feature flags are checked.
        """
        try:
            ds = manifest.open_checked(version, for_write=for_write)
        except NotAPartitionedNamespaceError as exc:
            creation.raise_if_interrupted(manifest, exc)
            raise
        schema, specs, problem, prepared = _parse_metadata(manifest.root, ds.metadata)
        snapshot = cls(manifest, ds, schema, dict(specs), prepared_filters=prepared)
        if problem is not None:
            _warn_once(manifest.root, ds.version, f"{problem}; writes are refused until then")
        snapshot.damage = repair.missing_columns(ds)
        if snapshot.damage:
            what = repair.describe_damage(ds, snapshot.damage)
            if for_write:
                raise NamespaceDamagedError(
                    f"{manifest.root!r}: {what}. Refusing to write; call ns.repair() to restore "
                    "them (one commit), then retry"
                )
            snapshot.view, notes = repair.view(manifest, ds)
            _warn_once(
                manifest.root,
                ds.version,
                f"{what}; reading it through an in-memory reconstruction (nothing is "
                f"written: {'; '.join(notes)}). Call ns.repair() to restore them",
            )
        return snapshot

    @property
    def version(self) -> int:
        return self.dataset.version

    @property
    def current_spec(self) -> PartitionSpec:
        return self.specs[max(self.specs)]

    def leaf_uri(self, location: str) -> str:
        return join_uri(self.manifest.root, location)

    # -- rows ---------------------------------------------------------------
    def leaves(self, filter: str | None = None) -> list[Leaf]:
        """Table rows (optionally filtered by a SQL predicate on manifest columns)."""
        return list(self.leaf_table(filter))

    def leaf_table(
        self, filter: str | None = None, extra: Sequence[str] = (), keep: bool = False
    ) -> LeafTable:
        """The table rows ``filter`` selects as columns (``catalog.leaf_table``): what
        ``leaves`` returns, without building a ``Leaf`` per row. ``extra``: more
        ``__manifest`` columns to keep in ``rows`` (e.g. ``metadata`` for row counts).

        Tables outside the spec version namespaces (other tools') are left out; a
        row under a spec version the metadata does not define raises SpecError.
        ``keep``: a query's plan, which a repeat of it may reuse (kept per version
        content, ``_version_key``); one-off lookups (a writer's) are not kept.
        """
        key = self._version_key("leaf_table", filter, tuple(extra)) if keep else None
        hit = _version_cache.get(key)
        if hit is not None:
            return hit
        rows = self._leaf_rows(filter, extra)
        sids = spec_ids_of(rows.column("object_id"), sorted(self.specs))
        if sids.null_count:
            # Tables other tools created beside the spec versions are not partitions.
            keep = pc.is_valid(sids)
            log.debug(
                "ignoring %d tables outside the spec version namespaces",
                sids.null_count,
            )
            rows, sids = rows.filter(keep), sids.filter(keep)
        present = pc.unique(sids).to_pylist()
        for sid in sorted(present):
            if sid not in self.specs:
                raise SpecError(
                    f"manifest rows under 'v{sid}' belong to unknown spec version v{sid}"
                )
        fields = {sid: [f.column for f in self.specs[sid].fields] for sid in present}
        spec_ids = sids.to_numpy(zero_copy_only=False)
        spec_ids.flags.writeable = False  # shared by every scan of this version
        table = LeafTable(rows, spec_ids, fields)
        _version_cache.put(key, table, rows.nbytes + spec_ids.nbytes)
        return table

    def _version_key(self, *what: Any) -> tuple[Any, ...] | None:
        """A key naming this ``__manifest`` version's exact content, plus ``what``;
        None when there is none (an in-memory repair view, or a pylance without
        ``serialized_manifest``). The serialized manifest lists the version's data
        and deletion files, whose names are unique: a namespace re-created at the
        same path, with the same version numbers, has another key."""
        if self.view is not None:
            return None
        digest = self.memo("version_digest", self._digest)
        return None if digest is None else (self.manifest.uri, digest, *what)

    def _digest(self) -> bytes | None:
        try:
            manifest = self.dataset._ds.serialized_manifest()
        except AttributeError:
            return None
        return hashlib.blake2b(manifest, digest_size=20).digest()

    def memo(self, name: str, build: Callable[[], _T]) -> _T:
        """What ``build()`` derives from this snapshot, built on first use and kept
        with it under ``name`` (a snapshot never changes, so neither does the value).
        Two threads may both build it; the first result stored is kept."""
        try:
            return self._cache[name]
        except KeyError:
            return self._cache.setdefault(name, build())

    def _leaf_rows(self, filter: str | None, extra: Sequence[str] = ()) -> pa.Table:
        """The table rows matching ``filter``: the columns a ``Leaf`` needs, plus ``extra``."""
        spec_cols = {f.column for s in self.specs.values() for f in s.fields}
        cols = [*LEAF_COLUMNS, *sorted(spec_cols), *extra]
        return self._read_rows(cols, filter)

    def _read_rows(self, columns: list[str], filter: str | None) -> pa.Table:
        """``columns`` of the table rows matching ``filter``.

        A small ``__manifest`` is read without late materialisation: its columns
        are short, and fetching them row by row after the filter was 40% of a
        small query's ``__manifest`` read (176 rows: 1.0 vs 1.4 ms). From about
        10,000 rows on, Lance's default is as fast or faster (every row of
        100,000: 23 vs 35 ms).
        """
        ds = self.rows_dataset
        small = ds.count_rows() <= SMALL_MANIFEST_ROWS  # from fragment metadata, no read
        try:
            return ds.to_table(
                columns=columns,
                filter=where(TABLE_ROWS, filter),
                **({"late_materialization": False} if small else {}),
            )
        except Exception as exc:
            self.raise_if_cleaned_up(exc)
            self.raise_if_damaged(exc)
            raise

    def raise_if_damaged(self, exc: BaseException) -> None:
        """After a failed read of ``__manifest`` rows: raise CorruptNamespaceError (``exc``
        chained) when files of this version are missing or damaged; else return."""
        try:
            self.manifest.check_intact(self.dataset, cause=exc)
        except CorruptNamespaceError:
            raise
        except Exception:  # explaining must never hide the original error
            return

    def leaves_by_id(self, object_ids: Collection[str]) -> dict[str, Leaf]:
        """The named leaves that exist, by object id: indexed lookups, not a full read."""
        ids = list(dict.fromkeys(object_ids))
        out: dict[str, Leaf] = {}
        for chunk in id_chunks(ids):
            out.update((leaf.object_id, leaf) for leaf in self.leaves(object_ids_in(chunk)))
        return out

    def row_counts(self, filter: str | None = None) -> tuple[int, list[Leaf]]:
        """The rows of the leaves ``filter`` selects, from the counts ``__manifest`` keeps.

        Returns the sum of every trusted count (``catalog.row_counts``) and the
        leaves without one, which the caller counts by opening them. Opens no
        leaf, and reads only the columns counts need (then the rows of the
        leaves without a count).
        """
        rows = self._spec_rows(self._count_rows(filter))
        counts = trusted_counts(rows)
        known = pc.sum(counts).as_py() or 0
        missing = rows.filter(pc.is_null(counts)).column("object_id").to_pylist()
        if len(missing) <= ID_CHUNK:
            return known, list(self.leaves_by_id(missing).values())
        wanted = set(missing)
        return known, [leaf for leaf in self.leaves(filter) if leaf.object_id in wanted]

    def _count_rows(self, filter: str | None) -> pa.Table:
        cols = ["object_id", "read_version", "read_branch", "read_tag", "metadata"]
        return self._read_rows(cols, filter)

    def _spec_rows(self, rows: pa.Table) -> pa.Table:
        """``rows`` without tables outside the spec version namespaces (as ``_to_leaves``)."""
        heads = pc.list_element(pc.split_pattern(rows.column("object_id"), "$", max_splits=1), 0)
        ours = pc.match_substring_regex(heads, r"^v[0-9]+$")
        for head in pc.unique(pc.filter(heads, ours)).to_pylist():
            if layout.spec_id_of(head) not in self.specs:
                raise SpecError(
                    f"manifest rows under {head!r} belong to unknown spec version {head}"
                )
        return rows if pc.all(ours).as_py() is not False else rows.filter(ours)

    def rows_for_keys(
        self, spec_id: int, keys: Sequence[tuple[Any, ...]]
    ) -> tuple[list[Leaf], pa.Table] | None:
        """Leaves and namespace rows of spec ``spec_id`` that may hold ``keys``.

        One query on the first partition column (an index lookup on an indexed
        ``__manifest``): every row whose first value is one of the keys' is
        returned, so the caller matches whole keys itself. None when the keys
        cannot be looked up exactly that way (no partition fields, or values whose
        SQL equality is not Python's: floats, instants, decimals, bytes); the
        caller then reads every row of the spec.
        """
        spec = self.specs[spec_id]
        if not spec.fields:
            return None
        firsts = {key[0] for key in keys}
        if not all(type(v) in _EXACT_TYPES for v in firsts if v is not None):
            return None
        column = quote_identifier(spec.fields[0].column)
        conds = []
        values = [v for v in firsts if v is not None]
        if values:
            conds.append(f"{column} IN ({', '.join(render_literal(v) for v in values)})")
        if None in firsts:
            conds.append(f"{column} IS NULL")
        if not conds:
            return [], self.rows_dataset.schema.empty_table()
        cond = f"{spec_members(spec_id)} AND ({' OR '.join(conds)})"
        namespaces = self.rows_dataset.to_table(filter=where(NAMESPACE_ROWS, cond))
        return self.leaves(cond), namespaces

    def leaves_of_spec(self, spec_id: int) -> list[Leaf]:
        return self.leaves(spec_members(spec_id))

    def namespace_rows(self, spec_id: int) -> pa.Table:
        cond = where(NAMESPACE_ROWS, spec_members(spec_id))
        return self.rows_dataset.to_table(filter=cond)

    def open_leaf(self, leaf: Leaf, session: lance.Session | None = None) -> lance.LanceDataset:
        """The leaf dataset at its pinned version (through ``session``: see ``read_session``)."""
        try:
            return open_leaf_dataset(
                self.leaf_uri(leaf.location), leaf, self.manifest.storage_options, session
            )
        except Exception as exc:
            self.raise_if_cleaned_up(exc, leaf)
            raise

    def raise_if_cleaned_up(self, exc: BaseException, leaf: Leaf | None = None) -> None:
        """After a failed read: raise VersionNotFoundError naming the cleanup and its
        retention if cleanup removed this snapshot's ``__manifest`` version or the
        version of ``leaf`` it reads (instead of Lance's bare "Not found"); else return.
        """
        pinned = leaf is not None and leaf.read_branch is None and leaf.read_tag is None
        try:
            better = history.explain_failed_read(
                self.manifest,
                self.version,
                leaf.location if pinned else None,
                leaf.read_version if pinned else None,
                self.manifest.storage_options,
            )
        except Exception:  # explaining must never hide the original error
            better = None
        if better is not None:
            raise better from exc


def spec_problem(snapshot: Snapshot) -> str | None:
    """Why the current spec cannot be written under (it fails validation), or None.

    Older specs may name dropped columns (read as NULL, seed 000 "column removal
    resistant"); the current one decides where new rows go, so it must be valid.
    """
    return _spec_problem(snapshot.schema, snapshot.current_spec)


def _spec_problem(schema: Schema, spec: PartitionSpec) -> str | None:
    try:
        spec.validate(schema)
    except SpecError as exc:
        return (
            f"the current partition spec {spec.key} fails validation against the "
            f"namespace schema: {exc}. Add a valid spec with ns.evolve_spec(...)"
        )
    return None
