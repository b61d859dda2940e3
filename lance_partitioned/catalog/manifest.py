"""The ``__manifest`` Lance table: rows, table metadata, and compare-and-swap commits.

Layout (``shared/DESIGN.md`` §2.3-2.4): the five ``DirectoryNamespace`` base
columns, then ``read_version`` / ``read_branch`` / ``read_tag``, then one
``partition_field_<field_id>`` column per partition field of any spec version.
Root properties (``schema``, ``partition_spec_v<N>``) live in the table metadata.

Every commit of ``__manifest`` is made here. A change of rows goes through
:meth:`Manifest.commit`, a single Lance commit pinned to the version the caller
read: if anyone else changed the same rows meanwhile, Lance refuses it and we
raise ``CommitConflictError``. Other compare-and-swap commits (table metadata
an operation must not overwrite blindly, a repair's rewrite) go through
:meth:`Manifest.commit_operation`, metadata changes Lance may rebase through
:meth:`Manifest.set_metadata`, the first version through :meth:`Manifest.create`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
from lance.dataset import Transaction

from lance_partitioned.catalog import commit_safety, integrity, manifest_index, storage
from lance_partitioned.catalog.commit_info import CommitInfo, merged
from lance_partitioned.catalog.history import removed_version_error
from lance_partitioned.catalog.layout import TABLE_NAME, join_uri, spec_namespace, split_id
from lance_partitioned.catalog.retry import is_commit_conflict
from lance_partitioned.errors import (
    CommitConflictError,
    CorruptNamespaceError,
    NotAPartitionedNamespaceError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lance_partitioned.format.filters.render import quote_identifier, render_literal

MANIFEST_DIR = "__manifest"
SCHEMA_KEY = "schema"
SPEC_KEY_PREFIX = "partition_spec_v"
READER_FLAGS_KEY = "lance.namespace.manifest.reader_feature_flags"
WRITER_FLAGS_KEY = "lance.namespace.manifest.writer_feature_flags"
KNOWN_READER_FLAGS = 0
KNOWN_WRITER_FLAGS = 0
# A commit joins its rows with __manifest's by object_id. Through the object_id index,
# Lance holds a hash table of every committed row in its DataFusion memory pool (300 MB
# unless LANCE_MEM_POOL_SIZE says otherwise), which cannot spill: the commit of a
# compaction of 1,000,000 partitions failed there ("Resources exhausted"). By a scan of
# __manifest the join streams, and at that size it is faster too (measured on a
# 1,000,000-row table: 400,000 rows in 0.8 s by scan, 2.4 s by index). Small commits keep
# the index: they read only the rows they touch.
MERGE_BY_INDEX_MAX_ROWS = 100_000

BASE_FIELDS = [
    pa.field(
        "object_id",
        pa.string(),
        nullable=False,
        metadata={"lance-schema:unenforced-primary-key:position": "0"},
    ),
    pa.field("object_type", pa.string(), nullable=False),
    pa.field("location", pa.string()),
    pa.field("metadata", pa.string()),
    pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
]
READ_FIELDS = [
    pa.field("read_version", pa.uint64()),
    pa.field("read_branch", pa.string()),
    pa.field("read_tag", pa.string()),
]
BASE_COLUMNS = [f.name for f in BASE_FIELDS]
READ_COLUMNS = [f.name for f in READ_FIELDS]
# A table row's read columns are mirrored in its ``metadata`` JSON under these
# keys (strings), so that a foreign writer that drops the columns loses nothing.
READ_MIRROR_KEYS = {c: f"lp.{c}" for c in READ_COLUMNS}
# Our own metadata key (docs/FORMAT.md "Row counts"): the number of rows of the
# leaf version a table row publishes, as a decimal string. Written together with
# the ``lp.read_version`` mirror, so a count is trusted only where that mirror
# equals the row's ``read_version`` column (``catalog.row_counts``).
NUM_ROWS_KEY = "lp.num_rows"


def _flags(meta: dict[str, str], key: str) -> int:
    raw = meta.get(key)
    if raw is None or raw == "":
        return 0
    try:
        return int(raw)
    except ValueError as exc:
        raise UnsupportedFeatureError(f"{key} is not an integer: {raw!r}") from exc


def is_partitioned(ds: lance.LanceDataset | None) -> bool:
    """Whether ``ds`` (a ``__manifest`` version) has a partition spec in its metadata."""
    return ds is not None and any(k.startswith(SPEC_KEY_PREFIX) for k in ds.metadata)


def _version_ranges(ds: lance.LanceDataset | None) -> str:
    """``1..7`` or ``1, 4..7``: the versions that exist, compactly."""
    if ds is None:
        return "unknown"
    spans: list[list[int]] = []
    for v in sorted(v["version"] for v in ds.versions()):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans) or "none"


# Ids per ``object_id IN (...)`` query: each is an indexed lookup, and Lance plans
# a list of a few thousand literals quickly.
ID_CHUNK = 2000


def id_chunks(ids: Sequence[str], size: int = ID_CHUNK) -> list[Sequence[str]]:
    """``ids`` in slices of at most ``size`` (one query each)."""
    return [ids[i : i + size] for i in range(0, len(ids), size)]


# Above this many ids per row of ``__manifest``, ``rows_by_id`` reads the whole table and
# picks the rows in Arrow: an indexed lookup costs about 25 µs per id, a scan about 1 µs
# per row (250,000 ids of a 500,000-row table: 6.2 s by index, 0.4 s by scan).
SCAN_SHARE = 1 / 16


def rows_by_id(ds: lance.LanceDataset, ids: Sequence[str]) -> pa.Table:
    """The rows of ``ds`` (a ``__manifest`` version) whose ``object_id`` is in ``ids``:
    indexed lookups ``ID_CHUNK`` ids at a time, or one scan when the ids are a large
    share of the table (``SCAN_SHARE``)."""
    if not ids:
        return ds.schema.empty_table()
    if len(ids) >= SCAN_SHARE * ds.count_rows():
        table = ds.to_table()
        return table.filter(is_in(table.column("object_id"), ids))
    return pa.concat_tables(
        [ds.to_table(filter=_sql_in("object_id", chunk)) for chunk in id_chunks(ids)]
    )


def _sql_in(column: str, values: Sequence[Any]) -> str:
    return f"{quote_identifier(column)} IN ({', '.join(render_literal(v) for v in values)})"


_SESSION: list[lance.Session] = []


def _session() -> lance.Session:
    """One Lance session for every ``__manifest`` this process opens.

    A session holds Lance's index and metadata caches. Each ``lance.dataset()``
    call would otherwise start a cold one, and every plan or commit (each opens
    the latest version) would reload the ``__manifest`` index pages: at a million
    partitions a 1,000-id lookup took 0.5-0.7 s cold against 0.05 s warm. Index
    and data files are immutable and cached by path, so sharing is safe across
    versions and roots.
    """
    if not _SESSION:
        _SESSION.append(lance.Session())
    return _SESSION[0]


class Manifest:
    """Access to one root's ``__manifest`` table."""

    def __init__(self, root: str, storage_options: dict[str, str] | None = None):
        self.root = str(root).rstrip("/") if str(root) != "/" else str(root)
        # every path operation goes through the storage layer; Lance gets the same
        # options less our own ``lp_*`` keys
        self.storage = storage.resolve(self.root, storage_options)
        self.storage_options = storage.lance_options(storage_options)
        self.uri = join_uri(self.root, MANIFEST_DIR)

    def __repr__(self) -> str:  # never the storage options: they hold credentials
        return f"Manifest({self.root!r})"

    # -- opening ------------------------------------------------------------
    def exists(self) -> bool:
        try:
            self.dataset()
            return True
        except (ValueError, OSError, FileNotFoundError, RuntimeError):
            return False

    def dataset(self, version: int | str | None = None) -> lance.LanceDataset:
        """The ``__manifest`` dataset at ``version`` (latest when None)."""
        return lance.dataset(
            self.uri, version=version, storage_options=self.storage_options, session=_session()
        )

    def first_partitioned(self, versions: list[int]) -> int:
        """The oldest of ``versions`` (ascending, ending with the latest) that has a
        partition spec. ``create`` commits once, with its spec; a namespace an earlier
        release created has an empty version 1 before it. Specs are only ever added,
        so a binary search opens about log2(len(versions)) of them (one when the
        oldest has a spec)."""
        if versions and is_partitioned(self.dataset(versions[0])):
            return versions[0]
        lo, hi = 0, len(versions) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if is_partitioned(self.dataset(versions[mid])):
                hi = mid
            else:
                lo = mid + 1
        return versions[lo] if versions else 0

    def open_checked(
        self, version: int | str | None = None, for_write: bool = False
    ) -> lance.LanceDataset:
        """Open, and refuse non-partitioned namespaces and unknown feature flags.

        Read-only: a version a foreign writer damaged is returned as it is
        (``Snapshot.load`` reads it through ``catalog.repair``; ``ns.repair()``
        fixes it). ``for_write``: the caller commits on top of the result, which
        is the door every ``__manifest`` commit passes: the store must make
        commits atomic, writer feature flags must be known, and the version's
        files must be intact (``check_intact``: CorruptNamespaceError).
        """
        if not self.present():
            self.storage.check_container(self.root)
            raise NotAPartitionedNamespaceError(
                f"{self.root!r} is not a partitioned namespace: it has no {MANIFEST_DIR} table"
            )
        try:
            ds = self.dataset(version)
        except Exception as exc:
            gone = None if version is None else removed_version_error(self, version)
            if gone is not None:
                raise gone from exc
            if version is not None:
                self._missing_version(version, exc)
            raise NotAPartitionedNamespaceError(
                f"{self.root!r} is not a partitioned namespace: cannot open {MANIFEST_DIR}: {exc}"
            ) from exc
        meta = ds.metadata
        if not any(k.startswith(SPEC_KEY_PREFIX) for k in meta):
            if version is not None and is_partitioned(self._latest_or_none()):
                raise VersionNotFoundError(
                    f"{MANIFEST_DIR} version {ds.version} of {self.root!r} predates the "
                    "namespace's partition specs (it has no partition_spec_v<N> key); "
                    f"open a later one (versions are {_version_ranges(self._latest_or_none())})"
                )
            raise NotAPartitionedNamespaceError(
                f"{self.root!r} is a namespace directory but not a partitioned namespace: "
                f"its {MANIFEST_DIR} metadata has no partition_spec_v<N> key"
            )
        rflags = _flags(meta, READER_FLAGS_KEY)
        if rflags & ~KNOWN_READER_FLAGS:
            raise UnsupportedFeatureError(
                f"{self.root!r} needs reader features {rflags:#x} that this version does not support"
            )
        if for_write:
            self.check_writable()
            wflags = _flags(meta, WRITER_FLAGS_KEY)
            if wflags & ~KNOWN_WRITER_FLAGS:
                raise UnsupportedFeatureError(
                    f"{self.root!r} needs writer features {wflags:#x} that this version does not support; "
                    "refusing to write"
                )
            # every write commits on top of this version: never on top of damage
            self.check_intact(ds)
        return ds

    def check_intact(self, ds: lance.LanceDataset, cause: BaseException | None = None) -> None:
        """Raise CorruptNamespaceError when files version ``ds`` references are missing or
        damaged (``catalog.integrity``: metadata requests only); return when intact.

        Called before every write (``open_checked(for_write=True)``) and tag, and by
        reads that failed (``cause``: their error, chained), so that a damaged
        ``__manifest`` is named as such instead of surfacing Lance's read error.
        """
        damage = integrity.damaged_files(ds, self.uri, self.storage)
        if damage:
            raise self._corrupt(ds, damage) from cause

    def _corrupt(
        self, ds: lance.LanceDataset, damage: list[integrity.Damage]
    ) -> CorruptNamespaceError:
        named = "; ".join(f"{MANIFEST_DIR}/{d}" for d in damage[:5])
        more = f" and {len(damage) - 5} more" if len(damage) > 5 else ""
        intact = self.newest_intact(ds.version)
        earlier = (
            f"the newest intact version is {intact} (lp.open(root, version={intact}) reads it)"
            if intact is not None
            else "no earlier version is intact"
        )
        return CorruptNamespaceError(
            f"{MANIFEST_DIR} version {ds.version} of {self.root!r} is damaged: {len(damage)} "
            f"file(s) it references are missing or damaged: {named}{more}. Nothing is written "
            f"on top of it; restore the file(s) from a backup ({earlier})",
            files=tuple(join_uri(self.uri, d.path) for d in damage),
        )

    def newest_intact(self, below: int, look_back: int = 50) -> int | None:
        """The newest partitioned ``__manifest`` version under ``below`` whose files are
        all intact (of the ``look_back`` versions under it), or None."""
        try:
            listed = sorted((v["version"] for v in self.dataset(below).versions()), reverse=True)
        except Exception:  # what cannot be listed cannot be offered
            return None
        for v in [v for v in listed if v < below][:look_back]:
            try:
                ds = self.dataset(v)
                if is_partitioned(ds) and not integrity.damaged_files(ds, self.uri, self.storage):
                    return v
            except Exception:  # unreadable: not intact
                continue
        return None

    def _latest_or_none(self) -> lance.LanceDataset | None:
        try:
            return self.dataset()
        except Exception:
            return None

    def _missing_version(self, version: int | str, exc: Exception) -> None:
        """Raise VersionNotFoundError naming what exists, when the namespace itself opens."""
        latest = self._latest_or_none()
        if not is_partitioned(latest):
            return  # not a namespace at all: the caller says so
        assert latest is not None
        if isinstance(version, str):
            tags = sorted(latest.tags.list())
            if version not in tags:
                listing = f"tags: {', '.join(tags)}" if tags else "it has no tags"
                raise VersionNotFoundError(
                    f"{self.root!r} has no tag {version!r}; {listing}"
                ) from None
            raise VersionNotFoundError(
                f"tag {version!r} of {self.root!r} names {MANIFEST_DIR} version "
                f"{latest.tags.get_version(version)}, which cannot be opened: {exc}"
            ) from exc
        known = [v["version"] for v in latest.versions()]
        if version not in known:
            if version < 1:
                cleaned = " (versions are numbered from 1)"
            elif known and version < known[-1]:
                cleaned = " (it was cleaned up)"
            else:
                cleaned = ""
            raise VersionNotFoundError(
                f"{MANIFEST_DIR} version {version} of {self.root!r} does not exist{cleaned}; "
                f"versions are {_version_ranges(latest)}"
            ) from None

    def present(self) -> bool:
        """Whether the root holds a ``__manifest`` Lance table (its ``_versions`` directory)."""
        return self.storage.is_dir(join_uri(self.uri, "_versions"))

    def check_writable(self) -> None:
        """Raise UnsafeStoreError when the store cannot make Lance's commits atomic
        (``catalog.commit_safety``); every writer calls it before writing anything."""
        commit_safety.check(self.root, self.storage)

    # -- writing ------------------------------------------------------------
    def commit(
        self,
        base: lance.LanceDataset,
        upserts: pa.Table | None,
        delete_ids: Sequence[str] = (),
        info: CommitInfo | None = None,
    ) -> lance.LanceDataset:
        """Insert/replace rows by ``object_id`` and delete others, in one commit on top of ``base``.

        ``info`` records what the commit did (``catalog.commit_info``); its
        ``partitions``, when None, are counted here: the table rows the commit
        publishes or removes. Raises CommitConflictError when a concurrent commit
        touched the same rows.
        """
        schema = base.schema
        upserts = schema.empty_table() if upserts is None else conform(upserts, schema)
        builder = (
            base.merge_insert("object_id")
            .use_index(upserts.num_rows <= MERGE_BY_INDEX_MAX_ROWS)
            .when_matched_update_all()
            .when_not_matched_insert_all()
        )
        if delete_ids:
            builder = builder.when_not_matched_by_source_delete(
                _sql_in("object_id", list(delete_ids))
            )
        txn, _ = builder.execute_uncommitted(upserts)
        if info is not None:
            if info.partitions is None:
                info = info.with_counts(partitions=_tables_touched(upserts, delete_ids))
            txn.transaction_properties = merged(info, txn.transaction_properties)
        try:
            committed = self._commit(base.version, txn, "the write was not published")
        except Exception:  # refused (a conflict is CommitConflictError) or failed
            self._discard_uncommitted(txn, base.version)
            raise
        # indexes and compaction when due (catalog.manifest_index); never raises
        manifest_index.maintain(committed, self.storage_options)
        return committed

    def commit_operation(
        self,
        base: lance.LanceDataset,
        op: Any,
        properties: dict[str, str] | None = None,
        what: str = "the change",
        info: CommitInfo | None = None,
    ) -> lance.LanceDataset:
        """Commit the Lance operation ``op`` (``UpdateConfig``, ``Overwrite``, ...) on top
        of ``base``, a version of ``__manifest``, compare-and-swap like ``commit``.

        ``properties`` are the Lance transaction's properties, to which ``info`` (what the
        commit did, ``catalog.commit_info``) is added. Raises CommitConflictError,
        Lance's error as its cause, when a commit landed since ``base`` that Lance does not
        rebase ``op`` over (e.g. another change of the same metadata key); ``what`` names
        the change in its message.
        """
        txn = Transaction(base.version, op, transaction_properties=merged(info, properties))
        return self._commit(base.version, txn, f"{what} was not committed")

    def _commit(self, read_version: int, txn: Any, not_done: str) -> lance.LanceDataset:
        """The compare-and-swap commit of ``txn`` on version ``read_version``: Lance does
        not retry, and a conflict (``catalog.retry.is_commit_conflict``) is raised as
        CommitConflictError; ``not_done`` says what did not happen, for its message."""
        try:
            return lance.LanceDataset.commit(
                self.uri,
                txn,
                read_version=read_version,
                storage_options=self.storage_options,
                max_retries=0,
            )
        except Exception as exc:
            if is_commit_conflict(exc):
                raise CommitConflictError(
                    f"__manifest of {self.root!r} changed concurrently (read at version "
                    f"{read_version}); {not_done} and can be retried: {exc}"
                ) from exc
            raise

    def set_metadata(
        self, values: dict[str, str | None], info: CommitInfo | None = None
    ) -> dict[str, str]:
        """Set table-metadata keys of the latest ``__manifest`` version (None removes one),
        in one Lance commit, which Lance rebases over concurrent commits of other keys
        (as ``update_metadata`` does), recording ``info``. Returns the metadata after it."""
        latest = self.dataset()
        op = lance.LanceOperation.UpdateConfig(
            table_metadata_updates=lance.LanceOperation.UpdateMap(dict(values))
        )
        txn = Transaction(latest.version, op, transaction_properties=merged(info, None))
        committed = lance.LanceDataset.commit(
            self.uri, txn, read_version=latest.version, storage_options=self.storage_options
        )
        return committed.metadata

    def create(self, rows: pa.Table, metadata: dict[str, str]) -> lance.LanceDataset:
        """Commit ``__manifest``'s first version, holding ``rows`` and table ``metadata``.

        One commit: Lance cannot put table metadata into a dataset's first commit, so
        the version is built in a ``memory://`` dataset nobody else sees and deep-cloned
        here (a put-if-not-exists of its manifest). Raises what Lance raises when the
        root already holds a ``__manifest`` version (``catalog.creation`` tells a
        concurrent create apart).
        """
        staged = lance.write_dataset(
            rows, f"memory://lp-create-{uuid.uuid4().hex}", schema=rows.schema
        )
        staged.update_metadata(metadata)
        return staged.deep_clone(self.uri, staged.version, storage_options=self.storage_options)

    def _discard_uncommitted(self, txn: Any, base_version: int) -> None:
        """Remove the files an uncommitted merge_insert wrote, so a failed commit leaves nothing."""
        op = txn.operation
        paths = [
            join_uri(self.uri, f"data/{f.path}")
            for frag in getattr(op, "new_fragments", [])
            for f in frag.files
        ]
        for frag in getattr(op, "updated_fragments", []):
            dfile = frag.deletion_file
            if dfile is not None and dfile.read_version == base_version:
                paths.append(join_uri(self.uri, dfile.path(frag.id)))
        for path in paths:
            try:
                self.storage.delete(path)
            except Exception:  # best effort: vacuum reclaims what is left
                pass

    def widen_partition_columns(self, types: dict[str, pa.DataType]) -> None:
        """Cast ``partition_field_*`` columns to wider types (values are unchanged)."""
        ds = self.dataset()
        changes = [
            {"path": column, "data_type": t}
            for column, t in types.items()
            if column in ds.schema.names and not ds.schema.field(column).type.equals(t)
        ]
        if changes:
            ds.alter_columns(*changes)

    def add_partition_columns(self, fields: Sequence[pa.Field]) -> lance.LanceDataset:
        """Add nullable ``partition_field_*`` columns (all NULL for existing rows)."""
        ds = self.dataset()
        missing = [f for f in fields if f.name not in ds.schema.names]
        if missing:
            ds.add_columns([pa.field(f.name, f.type, nullable=True) for f in missing])
            if manifest_index.indexed_columns(ds):  # an indexed manifest indexes them too
                manifest_index.ensure(self.dataset(), self.storage_options)
        return self.dataset()


def _tables_touched(upserts: pa.Table, delete_ids: Sequence[str]) -> int:
    """The table rows (partitions) a commit publishes or removes: upserted rows of type
    ``table``, and removed ids naming a leaf table (``<namespace>$dataset``)."""
    types = upserts.column("object_type").to_pylist()
    ids = {
        o
        for o, t in zip(upserts.column("object_id").to_pylist(), types, strict=True)
        if t == "table"
    }
    ids.update(d for d in delete_ids if split_id(d)[-1] == TABLE_NAME)
    return len(ids)


def with_read_mirror(
    metadata: str | dict[str, Any] | None,
    read_version: int | None,
    read_branch: str | None = None,
    read_tag: str | None = None,
    num_rows: int | None = None,
) -> str:
    """``metadata`` JSON with the ``lp.read_*`` mirror keys and ``lp.num_rows`` set.

    ``metadata`` is the row's JSON, or (a row being built) its keys as a dict,
    which spares a JSON round trip per row. NULL values have no key. This is
    the one place a table row's published version is written, so the row count
    always travels with it: a version published without a known count
    (``num_rows`` None) drops any old count rather than keep a stale one.
    """
    meta = dict(metadata) if isinstance(metadata, dict) else _json_decode(metadata or "{}")
    values = (read_version, read_branch, read_tag, num_rows)
    for key, value in zip(_MIRROR_KEYS, values, strict=True):
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = str(value)
    return _json_encode(meta)


# ``json.loads``/``dumps`` with their arguments checked once, not per row: a commit
# republishing a million rows calls ``with_read_mirror`` a million times
_json_decode = json.JSONDecoder().decode
_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_MIRROR_KEYS = (*(READ_MIRROR_KEYS[c] for c in READ_COLUMNS), NUM_ROWS_KEY)


def lock_rows(spec_ids: Iterable[int]) -> list[dict[str, Any]]:
    """The ``v<N>`` rows a commit rewrites to conflict with any concurrent one that does too.

    Lance rebases concurrent *inserts* without conflict, so commits that create
    (or delete, or must not miss newly created) partitions of spec N all rewrite
    the same row, which makes them conflict.
    """
    return [
        {"object_id": spec_namespace(sid), "object_type": "namespace", "metadata": "{}"}
        for sid in sorted(set(spec_ids))
    ]


def republish_rows(
    ds: lance.LanceDataset,
    versions: dict[str, int],
    extra: Sequence[dict[str, Any]] = (),
    branches: dict[str, str | None] | None = None,
    counts: dict[str, int | None] | None = None,
) -> pa.Table:
    """Existing table rows of ``ds`` with ``read_version`` moved to ``versions[object_id]``.

    ``read_branch`` becomes ``branches[object_id]`` (None, i.e. main, when not
    given: the version was staged on main), ``read_tag`` is cleared (the
    published version wins), and the metadata mirror follows, with the row
    count ``counts[object_id]`` of the new version (dropped when unknown).
    ``extra`` rows (lock rows) are appended. Reads only the rows named
    (``rows_by_id``).
    """
    rows = rows_by_id(ds, list(versions))
    # column by column: only the read columns and the metadata JSON change, so the
    # other columns are kept as Arrow arrays (a million rows as Python dictionaries
    # cost half a minute)
    branches, counts = branches or {}, counts or {}
    oids = rows.column("object_id").to_pylist()
    read_versions = [versions[oid] for oid in oids]
    read_branches = [branches.get(oid) for oid in oids]
    metadata = [
        with_read_mirror(meta, version, branch, None, counts.get(oid))
        for oid, meta, version, branch in zip(
            oids, rows.column("metadata").to_pylist(), read_versions, read_branches, strict=True
        )
    ]
    changed = {
        "read_version": read_versions,
        "read_branch": read_branches,
        "read_tag": [None] * len(oids),
        "metadata": metadata,
    }
    columns = [
        pa.array(changed[f.name], f.type) if f.name in changed else rows.column(f.name)
        for f in ds.schema
    ]
    rows = pa.Table.from_arrays(columns, schema=ds.schema)
    if not extra:
        return rows
    return pa.concat_tables([rows, pa.Table.from_pylist(list(extra), schema=ds.schema)])


def manifest_schema(partition_fields: Sequence[pa.Field]) -> pa.Schema:
    """The full ``__manifest`` Arrow schema for the given partition columns."""
    return pa.schema(
        [*BASE_FIELDS, *READ_FIELDS, *[pa.field(f.name, f.type, True) for f in partition_fields]]
    )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Reorder/cast ``table`` to ``schema``, adding NULL columns it lacks."""
    cols = []
    n = table.num_rows
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type.equals(f.type) else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def is_in(column: pa.Array, values: Sequence[Any]) -> pa.Array:
    return pc.is_in(column, value_set=pa.array(values, type=column.type))
