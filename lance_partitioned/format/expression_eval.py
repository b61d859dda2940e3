"""Custom partition ``expression`` fields, evaluated with DataFusion SQL.

``col0..colN`` are bound to the source columns in ``source_ids`` order, and
``murmur3`` / ``murmur3_multi`` are registered with the canonical semantics of
``hashing``. The result is cast to the field's ``result_type``.

``ExpressionTransform`` gives an expression field the ``Transform`` interface
(``PartitionField.function``), so pruning, residuals, joins and spec
validation treat it like a well-known transform.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

from lance_partitioned.errors import SpecError
from lance_partitioned.format import hashing
from lance_partitioned.format.filters.evaluate import one_batch_context
from lance_partitioned.format.transform_base import Transform
from lance_partitioned.format.types import expression_kind

_COL_RE = re.compile(r"\bcol(\d+)\b", re.IGNORECASE)


def _context(src_types: Sequence[pa.DataType], arrays: Sequence[pa.Array] | None):
    from datafusion import udf

    n = len(src_types)
    if arrays is None:
        arrays = [pa.array([], type=t) for t in src_types]
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    # one partition, so partition values come back aligned with their rows
    ctx = one_batch_context(
        pa.RecordBatch.from_arrays(list(arrays), names=[f"col{i}" for i in range(n)])
    )
    ctx.register_udf(
        udf(lambda a: hashing.murmur3(a), [src_types[0]], pa.int32(), "immutable", name="murmur3")
    )
    ctx.register_udf(
        udf(
            lambda *arrs: hashing.murmur3_multi(list(arrs)),
            list(src_types),
            pa.int32(),
            "immutable",
            name="murmur3_multi",
        )
    )
    return ctx


def validate_expression(
    field_id: str, expression: str, result_type: pa.DataType, src_types: Sequence[pa.DataType]
) -> None:
    """Reject expressions that reference unknown colK, are not deterministic, or don't fit
    ``result_type``; the SpecError names partition field ``field_id``."""
    expr = expression or ""
    n = len(src_types)
    for m in _COL_RE.finditer(expr):
        k = int(m.group(1))
        if k >= n:
            raise SpecError(
                f"partition field {field_id!r}: expression {expr!r} references col{k} "
                f"but the field has only {n} source column(s) (col0..col{n - 1})"
            )
    try:
        df = _context(src_types, None).sql(f"SELECT {expr} AS v FROM t")
        plan_text = repr(df.logical_plan()) + str(df.optimized_logical_plan())
        out_type = df.schema().field("v").type
    except Exception as exc:
        raise SpecError(
            f"partition field {field_id!r}: invalid expression {expr!r}: {exc}"
        ) from exc
    if re.search(r"volatility:\s*(Volatile|Stable)", plan_text):
        raise SpecError(
            f"partition field {field_id!r}: expression {expr!r} is not deterministic "
            "(it uses a volatile or stateful function such as now() or random())"
        )
    if expression_kind(out_type) != expression_kind(result_type):
        raise SpecError(
            f"partition field {field_id!r}: expression {expr!r} returns {out_type}, "
            f"which does not fit result_type {result_type}"
        )


def evaluate_expression(
    expression: str, result_type: pa.DataType, arrays: Sequence[pa.Array]
) -> pa.Array:
    """Evaluate a partition ``expression`` over source arrays, cast to ``result_type``."""
    src_types = [a.type for a in arrays]
    length = len(arrays[0]) if arrays else 0
    if length == 0:
        return pa.array([], type=result_type)
    ctx = _context(src_types, arrays)
    out = ctx.sql(f"SELECT {expression} AS v FROM t").to_arrow_table().column("v")
    out = out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
    return out.cast(result_type)


@dataclass(frozen=True)
class ExpressionTransform(Transform):
    """A seed-000 ``expression`` field as a transform of its ``col0..colN`` sources.

    Two are equal when their expression text is (seed 000 reuses a field_id for
    the same text); ``declared_type`` is the field's ``result_type``, which the
    expression's value is cast to. Only ``=`` and ``IN`` project, by evaluating
    the expression on the literals (seed 000 Appendix D); for joins an expression
    only matches the same text over sources of the same types.
    """

    expression: str = ""
    declared_type: pa.DataType = field(default_factory=pa.null, compare=False)
    type: ClassVar[str] = "expression"
    arity: ClassVar[int | None] = None
    null_in_null_out: ClassVar[bool] = False
    depends_on_source_type: ClassVar[bool] = True

    def to_json(self):
        return {"expression": self.expression}

    def result_type(self, source_types):
        return self.declared_type

    def apply(self, arrays):
        return evaluate_expression(self.expression, self.declared_type, arrays)

    @property
    def parameter(self):
        return self.expression

    def check_result_type(self, field_id, source_types, result_type):
        validate_expression(field_id, self.expression, result_type, source_types)

    def describe_on(self, names):
        return f"expression({self.expression!r} of {names})"
