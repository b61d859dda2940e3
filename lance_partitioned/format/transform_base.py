"""The interface of a partition transform, with the rules most transforms share.

A transform maps source columns to one partition value per row (``apply``,
vectorised over Arrow). It also owns what that meaning implies elsewhere, so
pruning, join planning and spec validation ask the transform instead of checking
its kind (the shape of pyiceberg's ``transforms.py``):

- ``project``: the inclusive projection of one predicate on the source onto the
  partition column (a partition that may hold a matching row is kept);
- ``strict_project``: whether a partition value guarantees a predicate for every
  row of the partition (residual filters);
- ``coarsens_to`` / ``shared_coarsening`` / ``derivation``: storage-partitioned
  join compatibility (bucket divisibility, truncate widths; calendar fields and
  identity only match themselves);
- ``result_follows_source`` / ``check_result_type``: which ``result_type`` a
  spec may declare.

Seed 000's transforms are in ``transforms``, the ``expression`` field's in
``expression_eval``. Logic that spans several fields of one spec (the calendar
hierarchy ``year → month → day → hour``, multi-source equalities) lives in
``format.pruning`` and ``format.time_ranges``; it reads
``calendar_unit`` and calls these methods.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SpecError
from lance_partitioned.format.expressions import Compare, Expr, In, IsNull, Literal, Ref
from lance_partitioned.format.schema import is_lossless_widening
from lance_partitioned.format.types import TypeFamily

# An IN list longer than this is not projected (one transform call per value).
MAX_IN_VALUES = 4096
_RANGE_OPS = ("<", "<=", ">", ">=")
COMPARISONS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_NO_PARTITION_VALUE = object()  # a literal the transform cannot map (wrong type, out of range)


@dataclass(frozen=True)
class Transform:
    """A well-known transform. Subclasses set ``type`` and implement ``apply``."""

    type: ClassVar[str]
    arity: ClassVar[int | None] = 1  # number of source columns; None means "one or more"
    # identity and truncate produce the source type, which may since have been widened;
    # every other transform's result type is fixed.
    result_follows_source: ClassVar[bool] = False
    # NULL in gives NULL out, and a non-NULL source gives a non-NULL value (seed 000's
    # transforms); an expression may map NULL to a value.
    null_in_null_out: ClassVar[bool] = True
    # Equal key values of different types (int32 and int64) have equal partition values.
    depends_on_source_type: ClassVar[bool] = False

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    def result_type(self, source_types: Sequence[pa.DataType]) -> pa.DataType:
        """The natural result type; raises SpecError when the sources don't fit."""
        raise NotImplementedError

    def apply(self, arrays: Sequence[pa.Array]) -> pa.Array:
        """Partition values for each row of the source arrays (natural type)."""
        raise NotImplementedError

    @property
    def preserves_order(self) -> bool:
        """True when ``a <= b`` implies ``f(a) <= f(b)``, so ranges project."""
        return False

    @property
    def calendar_unit(self) -> str | None:
        """``year``/``month``/``day``/``hour`` for a calendar field, else None."""
        return None

    @property
    def parameter(self) -> Any:
        """The transform's parameter (bucket count, truncate width), or None."""
        return None

    def __str__(self) -> str:
        return self.type

    def _check_arity(self, source_types: Sequence[pa.DataType]) -> None:
        n = len(source_types)
        if self.arity is not None and n != self.arity:
            raise SpecError(f"{self.type} takes {self.arity} source column(s), got {n}")
        if self.arity is None and n < 1:
            raise SpecError(f"{self.type} needs at least one source column")

    # -- spec validation ------------------------------------------------------

    def fits_result_type(
        self, source_types: Sequence[pa.DataType], result_type: pa.DataType
    ) -> bool:
        """Whether a field may declare ``result_type`` (SpecError when the sources don't fit)."""
        natural = self.result_type(source_types)
        if natural.equals(result_type):
            return True
        return self.result_follows_source and is_lossless_widening(natural, result_type)

    def check_result_type(
        self, field_id: str, source_types: Sequence[pa.DataType], result_type: pa.DataType
    ) -> None:
        """Raise SpecError naming field ``field_id`` unless it may declare ``result_type``."""
        if not self.fits_result_type(source_types, result_type):
            raise SpecError(
                f"partition field {field_id!r}: result_type {result_type} does not fit "
                f"{self} of {', '.join(map(str, source_types))} "
                f"(expected {self.result_type(source_types)})"
            )

    # -- values of literals ---------------------------------------------------

    def value_of(
        self,
        values: Sequence[Any],
        source_types: Sequence[pa.DataType],
        result_type: pa.DataType,
    ) -> Any:
        """The partition value (cast to ``result_type``) of one tuple of source values."""
        arrays = [pa.array([v], type=t) for v, t in zip(values, source_types, strict=True)]
        return self.apply(arrays).cast(result_type)[0].as_py()

    def _value(self, value: Any, source_type: pa.DataType, result_type: pa.DataType) -> Any:
        try:
            return self.value_of([value], [source_type], result_type)
        except Exception:
            return _NO_PARTITION_VALUE

    def _values(
        self, values: list[Any], source_type: pa.DataType, result_type: pa.DataType
    ) -> list | None:
        """Partition values of many literals in one transform call (None if any fails)."""
        if not values:
            return []
        try:
            arr = self.apply([pa.array(values, type=source_type)])
            return arr.cast(result_type).to_pylist()
        except Exception:
            return None

    # -- pruning --------------------------------------------------------------

    def project(
        self, pred: Expr, column: str, source_type: pa.DataType, result_type: pa.DataType
    ) -> Expr | None:
        """Inclusive projection of ``pred`` (bound, on this field's one source) onto
        partition column ``column``: every partition holding a matching row satisfies
        the result. None when nothing prunes.

        ``=`` and ``IN`` map their literals; ranges project when the transform
        preserves order; ``IS [NOT] NULL`` stays itself when NULL in gives NULL
        out (not for an expression: ``coalesce(col0, 0)`` maps NULL to 0).
        """
        col = Ref(column)
        if isinstance(pred, IsNull):
            return IsNull(col, pred.negated) if self.null_in_null_out else None
        if isinstance(pred, Compare) and pred.literal.value is not None:
            if pred.op == "=":
                value = self._value(pred.literal.value, source_type, result_type)
                return None if value is _NO_PARTITION_VALUE else Compare("=", col, Literal(value))
            if pred.op in _RANGE_OPS and self.preserves_order:
                return self._project_range(
                    pred.op, pred.literal.value, col, source_type, result_type
                )
            return None
        if isinstance(pred, In) and not pred.negated and len(pred.values) <= MAX_IN_VALUES:
            literals = [v.value for v in pred.values if v.value is not None]
            values = self._values(literals, source_type, result_type)
            if values is None:
                return None
            return In(col, tuple(Literal(v) for v in sorted(set(values), key=sort_key)))
        return None

    def _project_range(
        self, op: str, bound: Any, col: Ref, source_type: pa.DataType, result_type: pa.DataType
    ) -> Expr | None:
        """``col op bound`` through an order-preserving transform."""
        op, bound, bound_type = self._range_bound(op, bound, source_type)
        value = self._value(bound, bound_type, result_type)
        if value is _NO_PARTITION_VALUE or value is None:
            return None
        if op in (">", ">="):
            return Compare(">=", col, Literal(value))
        # f(x) <= f(bound), or f(x) < f(bound) when the bound is the first value of its unit
        strict = op == "<" and self._starts_unit(bound)
        return Compare("<" if strict else "<=", col, Literal(value))

    def _range_bound(
        self, op: str, bound: Any, source_type: pa.DataType
    ) -> tuple[str, Any, pa.DataType]:
        """The range ``op bound`` restated on the values the transform reads."""
        return op, bound, source_type

    def _starts_unit(self, bound: Any) -> bool:
        """Whether no source value below ``bound`` has ``bound``'s partition value."""
        return False

    def strict_project(self, pred: Expr, value: Any, source_type: pa.DataType) -> bool | None:
        """Whether every row of a partition whose value here is ``value`` satisfies ``pred``.

        True: guaranteed; False: known not to be; None: this field alone cannot
        say (the calendar hierarchy may, across fields).
        """
        if isinstance(pred, IsNull) and pred.negated and value is not None:
            return True if self.null_in_null_out else None
        return None

    def strict_project_array(
        self, pred: Expr, values: pa.Array, source_type: pa.DataType
    ) -> pa.BooleanArray | None:
        """``strict_project`` of ``pred`` for every partition value in ``values`` at once.

        Per value: True, False, or null where ``strict_project`` gives None. Returns
        None when this transform has no vectorised form for ``pred``; callers then
        ask ``strict_project`` value by value. A subclass that overrides
        ``strict_project`` overrides this too, so both agree (until it does, the
        value-by-value answer is used).
        """
        if type(self).strict_project is not Transform.strict_project:
            return None
        return self._shared_strict_project_array(pred, values)

    def _shared_strict_project_array(self, pred: Expr, values: pa.Array) -> pa.BooleanArray:
        """The column-wise form of this class's ``strict_project`` (what every transform
        answers), for subclasses whose own rules fall back to it."""
        if isinstance(pred, IsNull) and pred.negated:
            if not self.null_in_null_out:
                return pa.nulls(len(values), pa.bool_())
            return pc.if_else(pc.is_valid(values), True, pa.scalar(None, pa.bool_()))
        return pa.nulls(len(values), pa.bool_())

    def may_strict_project(self, pred: Expr) -> bool:
        """False when ``strict_project(pred, value, t)`` is None for *every* value and type.

        Depends only on the transform and the predicate, so a scan asks it once per
        spec and filter conjunct and skips the per-leaf question when no field of
        the spec can answer it (a bucket never guarantees a range). Subclasses that
        widen ``strict_project`` widen this too.
        """
        return isinstance(pred, IsNull) and pred.negated and self.null_in_null_out

    # -- storage-partitioned joins ---------------------------------------------

    def coarsens_to(self, other: Transform, family: TypeFamily | None = None) -> bool:
        """True when ``other``'s value is a function of this transform's value, for
        key values of ``family`` (``format.types.join_key_family``)."""
        return self == other

    def shared_coarsening(
        self, other: Transform, family: TypeFamily | None = None
    ) -> Transform | None:
        """The finest transform both this one and ``other`` coarsen to, or None."""
        return self if self.coarsens_to(other, family) and other.coarsens_to(self, family) else None

    def derivation(
        self, other: Transform, family: TypeFamily | None, result_type: pa.DataType
    ) -> Callable[[Any], Any] | None:
        """How a partition value of this transform (of ``result_type``) gives ``other``'s
        value; None when it cannot (``coarsens_to`` is false)."""
        return unchanged if self.coarsens_to(other, family) else None

    def why_not_shared(self, other: Transform) -> str:
        """Why this transform and ``other`` share no coarsening (for explain output)."""
        if type(other) is not type(self):
            return f"{self} and {other} are different transforms"
        return f"{self} and {other} differ"

    def describe_on(self, names: str) -> str:
        """Text of this transform applied to the columns ``names``, e.g. ``bucket[8](id)``."""
        return f"{self}({names})"


def unchanged(v: Any) -> Any:
    """The derivation between equal transforms."""
    return v


def sort_key(v: Any) -> tuple[int, Any]:
    """Sort order of partition values: NULL first."""
    return (0, "") if v is None else (1, v)
