"""Exceptions and warnings raised by lance-partitioned: every one is defined here.

Every exception is a ``PartitionedNamespaceError`` (so one ``except`` catches all of
the library's own errors), and also of the builtin kind a caller may catch instead
(``ValueError``, ``OSError``, ...). Every message names the offending thing.
(``tests/test_errors_home.py`` checks that no other module defines an exception.)"""

from __future__ import annotations

import bisect
import functools
import inspect
import numbers
import re
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar


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


class RestoreError(PartitionedNamespaceError):
    """``ns.restore`` cannot bring back a ``__manifest`` version that exists: a partition
    table version it reads was removed (by ``cleanup``), or the version itself was left
    damaged by a foreign writer. Nothing was changed. (A version or tag that does not
    exist raises ``VersionNotFoundError``, as ``lp.open`` does.)"""


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


class FilterParseError(PartitionedNamespaceError, ValueError):
    """A filter (or a partition spec, which is lexed like one) could not be parsed.

    ``reason`` is the problem, ``text`` the filter, ``position`` the character offset of
    the problem (or None); the message shows the line with a caret there. Scans raise it
    as a ``FilterError``, spec parsing as a ``SpecError``."""

    def __init__(self, message: str, text: str | None = None, position: int | None = None):
        self.reason = message
        self.text = text
        self.position = position
        if text is not None and position is not None:
            line_start = text.rfind("\n", 0, position) + 1
            line_end = text.find("\n", position)
            line = text[line_start : line_end if line_end >= 0 else len(text)]
            caret = " " * (position - line_start) + "^"
            full = f"{message} at position {position} in filter {text!r}\n    {line}\n    {caret}"
        elif text is not None:
            full = f"{message} in filter {text!r}"
        else:
            full = message
        super().__init__(full)


class AmbiguousTimeError(PartitionedNamespaceError, ValueError):
    """A wall-clock time that a zone shows twice (DST ends) or never (DST starts)."""


class TypeConversionError(PartitionedNamespaceError, ValueError):
    """An Arrow type has no JSON form, or a JSON object is not a valid type; the message names it."""


class FieldIdLayoutError(SchemaError):
    """The wanted ids cannot be given to a Lance table with these columns.

    Lance numbers a struct's children right after the struct and a list's item
    right after the list, so e.g. ids that decrease depth-first within one
    column, or an unused id between a list and its item, cannot be built.
    """


class UnsupportedTypeError(SchemaError):
    """A column has a type that Spark (or the namespace, when writing) cannot hold."""


class LeaseLostError(CommitConflictError):
    """The transaction's lease expired and maintenance may have removed its files.

    Nothing was published; retrying the whole write is safe.
    """


class StagedFilesMissingError(CommitConflictError):
    """A staged leaf version, or a file it adds, was removed before the transaction published.

    Maintenance (a ``vacuum``/``cleanup`` that did not see the transaction's
    lease, e.g. one that expired) removed it. Nothing was published; retrying
    the whole write is safe.
    """


class DistributedTaskError(PartitionedNamespaceError):
    """A task of a distributed operation (Spark's executors) failed, so the operation
    published nothing. The task's error is ``__cause__``; leaf versions that tasks had
    staged are unpublished, and ``vacuum`` removes them."""


class SearchError(PartitionedNamespaceError, ValueError):
    """A search or an index request is invalid (bad query, k, metric, index type, column type)."""


class SPJNotPossibleError(PartitionedNamespaceError, RuntimeError):
    """``require_spj=True`` and part of the join would need a shuffle."""


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


class InvalidArgumentError(PartitionedNamespaceError, ValueError):
    """An argument is outside what it may be: a size or count that must be a positive
    integer (``max_rows_per_file``, ``batch_size``, ``target_rows_per_fragment``, ...).
    Raised before anything is read or written; the message names the argument."""


class DuplicateKeyError(InvalidArgumentError):
    """A merge's source gives one key more than once (which row would win is undefined)."""


class RowsRemovedError(PartitionedNamespaceError):
    """A stream of appended rows (the Spark streaming source without ``readChangeFeed``)
    reached a ``__manifest`` version that deleted or updated rows it streams.

    The stream delivers every version before it and stops there: appended rows alone
    cannot say that rows went away. ``version`` is that version, ``operation`` what its
    commit did (``ns.history()``'s operation), ``rows`` the rows it deleted.
    """

    def __init__(self, message: str, version: int, operation: str, rows: int):
        super().__init__(message)
        self.version = version
        self.operation = operation
        self.rows = rows


class UnknownStorageOptionWarning(UserWarning):
    """A storage option key is not one Lance or this library is known to read.

    Warned, not refused: Lance and ``object_store`` add keys between versions, so the
    list this library checks against (``catalog.storage_options``) cannot be complete.
    An unknown key is usually a misspelling, and Lance ignores it silently."""


# Sizes are handed to Lance as unsigned 64-bit integers; stay within the signed range.
_MAX_SIZE = 2**63 - 1


def positive_int(name: str, value: object) -> int:
    """``value`` as an ``int`` if it is a positive integer, else InvalidArgumentError naming
    ``name``. ``bool`` is refused although Python counts it as an int.

    Example::

        positive_int("max_rows_per_file", 0)  # InvalidArgumentError
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) <= 0:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    if int(value) > _MAX_SIZE:
        raise InvalidArgumentError(f"{name} must be at most 2**63 - 1, got {value!r}")
    return int(value)


# Lance's errors carry the Rust source location: ", /…/planner.rs:1100:20" or
# ", /rustc/<hash>/library/core/src/ops/function.rs:250:5". It is found from its end
# and followed back to the word's start: a pattern starting with the path (",?\s*\S*/…")
# tries every position of a long word, quadratic in its length (a message quoting a
# 240,000-character filter took minutes).
_RUST_LOCATION = re.compile(r"\.rs:\d+:\d+")
_SPACE = re.compile(r"\s")


def _rust_paths(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` holding a Rust source path: the whole word ending in
    ``/<path>.rs:<line>:<column>``, with the ", " before it."""
    locations = list(_RUST_LOCATION.finditer(text))
    if not locations:
        return []
    spaces = [m.start() for m in _SPACE.finditer(text)]
    spans: list[tuple[int, int]] = []
    floor = 0  # where the last span ended: spans do not overlap
    for found in locations:
        end = tail = found.start()
        # back over path characters, which stop at the ":" of an earlier location: each
        # character is looked at once or twice (a regex searching back is quadratic)
        while tail > floor and (text[tail - 1].isalnum() or text[tail - 1] in "_./-"):
            tail -= 1
        if "/" not in text[tail : max(end - 1, tail)]:  # a "/", then path characters
            continue
        word = bisect.bisect_left(spaces, end)
        start = max(spaces[word - 1] + 1 if word else 0, floor)
        while start > floor and text[start - 1].isspace():
            start -= 1
        if start > floor and text[start - 1] == ",":
            start -= 1
        spans.append((start, found.end()))
        floor = found.end()
    return spans


def strip_rust_paths(text: str) -> str:
    """``text`` without the Rust source paths Lance appends."""
    pieces, at = [], 0
    for start, end in _rust_paths(text):
        pieces.append(text[at:start])
        at = end
    return "".join(pieces) + text[at:]


def lance_message(exc: BaseException) -> str:
    """``str(exc)`` without the Rust source paths Lance appends (and pyarrow's
    ``External error:`` prefix): what a user may be shown."""
    text = strip_rust_paths(str(exc)).strip()
    return text.removeprefix("External error: ")


def shows_rust_path(text: str) -> bool:
    """Whether ``text`` holds a Rust source path (what ``lance_message`` removes)."""
    return bool(_rust_paths(text))


class LanceError(PartitionedNamespaceError):
    """Lance failed an operation on the namespace's files: a damaged or missing data file,
    a filter Lance cannot evaluate on some partition's rows, an internal Lance error.

    The message is Lance's without its Rust source paths, naming the partition when one
    was being read; Lance's own exception is ``__cause__`` (the command line's ``--debug``
    shows it). Every instance is also of the builtin kind Lance raised (``OSError``,
    ``FileNotFoundError``, ``ValueError``, ``TypeError``, ``RuntimeError``,
    ``NotImplementedError``), so code catching Lance's errors by kind still catches it.
    A Lance panic (``pyo3_runtime.PanicException``, which ``except Exception`` misses)
    becomes a ``RuntimeError`` one."""


class LanceOSError(LanceError, OSError):
    """A ``LanceError`` from a Lance ``OSError``."""


class LanceFileNotFoundError(LanceError, FileNotFoundError):
    """A ``LanceError`` from a Lance ``FileNotFoundError``."""


class LanceValueError(LanceError, ValueError):
    """A ``LanceError`` from a Lance ``ValueError`` (pyarrow's ``ArrowInvalid`` too)."""


class LanceTypeError(LanceError, TypeError):
    """A ``LanceError`` from a Lance ``TypeError``."""


class LanceNotImplementedError(LanceError, NotImplementedError):
    """A ``LanceError`` from a Lance ``NotImplementedError``."""


class LanceRuntimeError(LanceError, RuntimeError):
    """A ``LanceError`` from a Lance ``RuntimeError``, a panic, or any other kind."""


# most specific first: the first kind the original is an instance of
_KINDS: tuple[tuple[type[BaseException], type[LanceError]], ...] = (
    (FileNotFoundError, LanceFileNotFoundError),
    (OSError, LanceOSError),
    (NotImplementedError, LanceNotImplementedError),
    (RuntimeError, LanceRuntimeError),
    (ValueError, LanceValueError),
    (TypeError, LanceTypeError),
)


def _is_panic(exc: BaseException) -> bool:
    # pyo3's PanicException derives from BaseException and has no importable home
    return type(exc).__name__ == "PanicException"


def lance_error(exc: BaseException, where: str | None = None) -> LanceError:
    """The ``LanceError`` of the same kind as Lance's ``exc``: its message without Rust
    source paths, after ``where`` (what was being done) when given. Raise it ``from exc``."""
    kind = next((ours for base, ours in _KINDS if isinstance(exc, base)), LanceRuntimeError)
    message = lance_message(exc) or type(exc).__name__
    if _is_panic(exc):
        message = f"Lance stopped on an internal error (a panic): {message}"
    return kind(f"{where}: {message}" if where else message)


def raise_for_user(exc: BaseException, where: str | None = None) -> NoReturn:
    """Raise ``exc`` as a user may see it: never with a Rust source path in its message.

    One of ours is raised itself, its message cleaned if it quotes Lance's. Another
    ``Exception`` (or a Lance panic) becomes a ``LanceError`` chained to it when
    ``where`` is given (a partition being read: every error there is Lance's or
    Arrow's) or when its message shows a Rust source path; otherwise it is raised
    unchanged, as is anything that is not an error (``KeyboardInterrupt``,
    ``GeneratorExit``).
    """
    if isinstance(exc, PartitionedNamespaceError):
        if len(exc.args) == 1 and isinstance(exc.args[0], str) and shows_rust_path(exc.args[0]):
            exc.args = (strip_rust_paths(exc.args[0]).strip(),)
        raise exc
    if _is_panic(exc) or (
        isinstance(exc, Exception) and (where is not None or shows_rust_path(str(exc)))
    ):
        raise lance_error(exc, where) from exc
    raise exc


F = TypeVar("F", bound=Callable[..., Any])


def lance_boundary(fn: F) -> F:
    """Wrap ``fn`` (a function or a generator function), where Lance's errors reach a
    user, so that what it raises goes through ``raise_for_user``.

    Example::

        @lance_boundary
        def count(self) -> int: ...
    """
    if getattr(fn, "_lance_boundary", False):
        return fn
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from fn(*args, **kwargs))
            except BaseException as exc:
                raise_for_user(exc)

        wrapper: Any = stream
    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                raise_for_user(exc)

        wrapper = call
    wrapper._lance_boundary = True
    return wrapper  # type: ignore[no-any-return]


C = TypeVar("C", bound=type)


def lance_boundaries(cls: C) -> C:
    """Make every public method of ``cls`` (inherited ones and class methods too) a
    ``lance_boundary``: the class is a surface users call.

    Example::

        @lance_boundaries
        class Scan: ...
    """
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, (classmethod, staticmethod)) and inspect.isfunction(member.__func__):
            setattr(cls, name, type(member)(lance_boundary(member.__func__)))
        elif inspect.isfunction(member):
            setattr(cls, name, lance_boundary(member))
    return cls
