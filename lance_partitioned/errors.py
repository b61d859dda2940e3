"""Exceptions raised by lance-partitioned. Every message names the offending thing."""

from __future__ import annotations


class PartitionedNamespaceError(Exception):
    """Base class of every error this library raises on purpose."""


class SpecError(PartitionedNamespaceError, ValueError):
    """A partition spec or partition field is invalid."""


class SchemaError(PartitionedNamespaceError, ValueError):
    """A namespace schema is invalid, or input data does not fit it."""


class ColumnNotFoundError(SchemaError, KeyError):
    """A column the caller named is not in the namespace schema.

    Raised for a projection (``ns.scan(columns=[...])``, ``read_arrow``), the Spark
    ``columns`` option, and a join's columns and keys, with a message naming the
    missing column(s) and the columns there are; ``missing`` holds the names. It is
    a ``SchemaError`` (and a ``KeyError``, the lookup that failed), never a
    ``FilterError``: a column named in a *filter* that does not exist is a
    ``FilterError``, since the filter is what is wrong. ``str()`` is the plain
    message, without ``KeyError``'s quotes.
    """

    def __init__(self, message: str, missing: tuple[str, ...] = ()):
        super().__init__(message)
        self.missing = tuple(missing)

    __str__ = SchemaError.__str__


class NotAPartitionedNamespaceError(PartitionedNamespaceError):
    """The root exists but is not a partitioned namespace (or does not exist)."""


class VersionNotFoundError(PartitionedNamespaceError, LookupError):
    """The namespace exists, but not the ``__manifest`` version or tag asked for."""


class NamespaceDamagedError(PartitionedNamespaceError):
    """``__manifest`` lacks columns its metadata calls for; writes wait for ``ns.repair()``."""


class NamespaceExistsError(PartitionedNamespaceError):
    """create() was called on a root that already holds a namespace."""


class UnsupportedFeatureError(PartitionedNamespaceError):
    """The namespace uses a feature flag this version does not understand."""


class CommitConflictError(PartitionedNamespaceError):
    """A concurrent writer changed the same partitions. Retrying the write is safe."""

    retryable = True


class PinnedSnapshotError(PartitionedNamespaceError):
    """A handle opened at an old version (``lp.open(root, version=...)``) was asked to change
    the namespace. Pinned handles read one snapshot; ``refresh()`` moves to the latest."""


class FilterError(PartitionedNamespaceError, ValueError):
    """A filter could not be parsed or bound to the namespace schema."""


class ForeignChangeError(CommitConflictError):
    """Another writer changed a leaf so that its published version cannot be told.

    The case: the ``__manifest`` row pins the leaf to a tag the leaf no longer
    has. (Unpublished versions above the published one are not this error:
    writes build on the published version and leave them invisible.) Retrying
    does not help.
    """

    retryable = False


class RetentionError(PartitionedNamespaceError, ValueError):
    """A maintenance retention (``older_than``) is not a non-negative ``datetime.timedelta``."""


class CyclicPartitionWarning(UserWarning):
    """A month/day/hour partition field has no coarser time field on its column.

    Seed 000's ``date_part`` values are cyclic (month 1-12, day 1-31, hour 0-23),
    so such a field prunes a range only when the range covers less than a cycle."""


class StorageError(PartitionedNamespaceError, OSError):
    """The storage holding a root cannot be used: a missing bucket, denied credentials, an
    unreachable endpoint, or a path that holds something else. The message names the path
    and the cause (never a secret); nothing was changed."""


class UnsafeStoreError(StorageError):
    """The store cannot make a Lance commit atomic (it ignores conditional writes) and no
    commit lock is configured, so a concurrent writer could silently lose an update. Nothing
    is written; the message names the fix (docs/TRANSACTIONS.md, "Object stores")."""


class UnfinishedNamespaceError(NotAPartitionedNamespaceError):
    """The root holds what an interrupted ``create`` left: a ``__manifest`` table with no
    schema or partition spec and no partition (so no data). ``create`` with the same
    spec finishes it; ``lp.repair(root)`` (CLI ``repair``) removes it."""


class CorruptNamespaceError(PartitionedNamespaceError):
    """Files a ``__manifest`` version references are missing or damaged (truncated, not a
    Lance file). Nothing is written on top of such a version; ``files`` names them."""

    def __init__(self, message: str, files: tuple[str, ...] = ()):
        super().__init__(message)
        self.files = tuple(files)
