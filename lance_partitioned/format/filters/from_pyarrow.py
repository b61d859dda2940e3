"""``pyarrow.compute.Expression`` -> filter AST.

:func:`from_pyarrow` decodes the expression from Arrow's own lossless
serialization (``str(expr)`` loses types: binary prints as a string, decimals as
floats, zones are dropped) and translates it. :func:`scalar_to_py` turns a
pyarrow scalar into the Python value a filter literal holds.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from lance_partitioned.format.arrow_c import CArrowSchema, read_metadata
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.render import escape_like, quote_identifier, render_literal


def scalar_to_py(scalar: Any) -> Any:
    """A pyarrow scalar as a Python value render_literal understands."""
    import pyarrow as pa
    import pyarrow.types as pat

    t = scalar.type
    if not scalar.is_valid:
        return None
    if pat.is_dictionary(t):
        return scalar_to_py(scalar.value)
    if pat.is_timestamp(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond timestamp literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.timestamp("us", t.tz))
    if pat.is_time(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond time literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.time64("us"))
    if pat.is_duration(t) or pat.is_interval(t) or pat.is_nested(t):
        raise ValueError(f"unsupported literal type {t}: {scalar}")
    if pat.is_float16(t):
        return float(scalar.as_py())
    return scalar.as_py()


def arrow_type_to_sql(t: Any) -> str:
    import pyarrow.types as pat

    simple = [
        (pat.is_int8, "TINYINT"),
        (pat.is_int16, "SMALLINT"),
        (pat.is_int32, "INT"),
        (pat.is_int64, "BIGINT"),
        (pat.is_uint8, "TINYINT UNSIGNED"),
        (pat.is_uint16, "SMALLINT UNSIGNED"),
        (pat.is_uint32, "INT UNSIGNED"),
        (pat.is_uint64, "BIGINT UNSIGNED"),
        (pat.is_float32, "FLOAT"),
        (pat.is_float64, "DOUBLE"),
        (pat.is_boolean, "BOOLEAN"),
        (pat.is_date, "DATE"),
        (pat.is_timestamp, "TIMESTAMP"),
        (pat.is_time, "TIME"),
    ]
    for pred, name in simple:
        if pred(t):
            return name
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return "STRING"
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t):
        return "BINARY"
    if pat.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    raise ValueError(f"no SQL spelling for a cast to {t}")


def _ordered_metadata(schema: Any) -> list[tuple[str, str]]:
    """Schema metadata as an ordered list with duplicates (``Schema.metadata``
    is a dict, which loses both), read through the Arrow C data interface."""
    c_schema = CArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        return [(k.decode(), v.decode()) for k, v in read_metadata(c_schema.metadata)]
    finally:
        if c_schema.release:
            c_schema.release(ctypes.addressof(c_schema))


@dataclass
class _PaNode:
    kind: str  # literal | field | call
    value: Any = None  # pa.Scalar for literal, name for field, function name for call
    args: list[_PaNode] | None = None
    options: Any = None  # StructScalar


def _pa_tree(expr: Any) -> _PaNode:
    """Decode a pc.Expression from Arrow's own lossless serialization (the
    ``__reduce__`` payload: an IPC file whose schema metadata lists the nodes in
    prefix order and whose columns hold the literals and function options)."""
    import pyarrow as pa

    _fn, (buf,) = expr.__reduce__()
    reader = pa.ipc.open_file(buf)
    columns = reader.get_batch(0).columns if reader.num_record_batches else []
    items = _ordered_metadata(reader.schema)
    pos = 0

    def node() -> _PaNode:
        nonlocal pos
        key, val = items[pos]
        pos += 1
        if key == "literal":
            return _PaNode("literal", columns[int(val)][0])
        if key == "field_ref":
            return _PaNode("field", val)
        if key == "nested_field_ref":
            raise ValueError("nested field references are not supported in filters")
        if key == "call":
            args: list[_PaNode] = []
            options = None
            while items[pos][0] != "end":
                if items[pos][0] == "options":
                    options = columns[int(items[pos][1])][0]
                    pos += 1
                else:
                    args.append(node())
            pos += 1  # end
            return _PaNode("call", val, args, options)
        raise ValueError(f"unexpected entry {key!r} in a serialized pyarrow expression")

    return node()


_PA_COMPARE = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_PA_ARITH = {
    "add": "+",
    "add_checked": "+",
    "subtract": "-",
    "subtract_checked": "-",
    "multiply": "*",
    "multiply_checked": "*",
    "divide": "/",
    "divide_checked": "/",
}
_PA_FUNCTIONS = {
    "utf8_lower": "lower",
    "ascii_lower": "lower",
    "utf8_upper": "upper",
    "ascii_upper": "upper",
    "utf8_length": "character_length",
    "abs": "abs",
    "abs_checked": "abs",
    "is_nan": "isnan",
}
_PA_LOGICAL = {
    "and_kleene": ("AND", True),
    "or_kleene": ("OR", True),
    "and_not_kleene": ("AND NOT", True),
    "and": ("AND", False),
    "and_": ("AND", False),
    "or": ("OR", False),
    "or_": ("OR", False),
    "and_not": ("AND NOT", False),
}
_BOOL_CALLS = {"invert", "is_null", "is_valid", "is_in"} | set(_PA_COMPARE) | set(_PA_LOGICAL)


def _pa_value_sql(n: _PaNode) -> str:
    if n.kind == "field":
        return quote_identifier(n.value)
    if n.kind == "literal":
        return render_literal(scalar_to_py(n.value))
    name = n.value
    args = n.args or []
    if name in _PA_ARITH and len(args) == 2:
        return f"({_pa_value_sql(args[0])} {_PA_ARITH[name]} {_pa_value_sql(args[1])})"
    if name in ("negate", "negate_checked") and len(args) == 1:
        return f"(-{_pa_value_sql(args[0])})"
    if name in _PA_FUNCTIONS:
        return f"{_PA_FUNCTIONS[name]}({', '.join(_pa_value_sql(a) for a in args)})"
    if name == "cast" and len(args) == 1 and n.options is not None:
        to_type = n.options.type.field("to_type").type
        return f"CAST({_pa_value_sql(args[0])} AS {arrow_type_to_sql(to_type)})"
    if name in _BOOL_CALLS or name in ("match_like", "starts_with", "ends_with", "match_substring"):
        return f"({_pa_bool_sql(n, positive=False)})"
    raise ValueError(f"cannot translate pyarrow function {name!r} to SQL")


def _pa_bool_sql(n: _PaNode, positive: bool) -> str:
    """SQL for a boolean pyarrow node. In a ``positive`` context (under no NOT)
    NULL and FALSE filter alike, so pyarrow's never-null is_in may become a
    plain SQL IN; under a NOT the exact three-valued translation is used."""
    if n.kind != "call":
        return _pa_value_sql(n)
    name = n.value
    args = n.args or []
    opts = n.options.as_py() if n.options is not None else {}
    if name in _PA_COMPARE:
        return f"{_pa_value_sql(args[0])} {_PA_COMPARE[name]} {_pa_value_sql(args[1])}"
    if name in _PA_LOGICAL:
        op, kleene = _PA_LOGICAL[name]
        if not kleene and not positive:
            # and(NULL, FALSE) is NULL where SQL says FALSE: only equivalent
            # while NULL and FALSE both mean "filtered out"
            raise ValueError(
                f"pyarrow's non-Kleene {name!r} under a negation has no SQL equivalent; use & / |"
            )
        if op == "AND NOT":
            right = f"NOT ({_pa_bool_sql(args[1], not positive)})"
            op = "AND"
        else:
            right = _pa_bool_sql(args[1], positive)
        return f"({_pa_bool_sql(args[0], positive)} {op} {right})"
    if name == "invert":
        return f"NOT ({_pa_bool_sql(args[0], not positive)})"
    if name == "is_null":
        target = _pa_value_sql(args[0])
        if opts.get("nan_is_null"):
            return f"({target} IS NULL OR isnan({target}))"
        return f"{target} IS NULL"
    if name == "is_valid":
        return f"{_pa_value_sql(args[0])} IS NOT NULL"
    if name == "is_in":
        return _pa_is_in_sql(args[0], n.options, positive)
    if name in ("match_like", "starts_with", "ends_with", "match_substring"):
        pattern = opts["pattern"]
        if name == "starts_with":
            pattern = escape_like(pattern) + "%"
        elif name == "ends_with":
            pattern = "%" + escape_like(pattern)
        elif name == "match_substring":
            pattern = "%" + escape_like(pattern) + "%"
        op = "ILIKE" if opts.get("ignore_case") else "LIKE"
        return f"{_pa_value_sql(args[0])} {op} {render_literal(pattern)}"
    return _pa_value_sql(n)


def _pa_is_in_sql(target: _PaNode, options: Any, positive: bool) -> str:
    value_set = options["value_set"].values
    values = [scalar_to_py(s) for s in value_set]
    present = [v for v in values if v is not None]
    has_null = len(present) != len(values)
    fields = {f.name for f in options.type}
    if "null_matching_behavior" in fields:
        behavior = ["MATCH", "SKIP", "EMIT_NULL", "INCONCLUSIVE"][
            options["null_matching_behavior"].as_py()
        ]
    else:
        behavior = "SKIP" if options["skip_nulls"].as_py() else "MATCH"
    x = _pa_value_sql(target)
    in_list = f"{x} IN ({', '.join(render_literal(v) for v in present)})" if present else "FALSE"
    if behavior == "INCONCLUSIVE":  # SQL semantics
        if has_null:
            return f"{x} IN ({', '.join(render_literal(v) for v in [*present, None])})"
        if present:
            return in_list
        return f"({x} IS NULL AND NULL)"
    if behavior == "MATCH":
        # never NULL: a null x matches iff the set holds a null
        if has_null:
            return f"({x} IS NULL OR {in_list})"
        return in_list if positive else f"({x} IS NOT NULL AND {in_list})"
    if behavior == "SKIP":  # never NULL, a null x never matches
        return in_list if positive else f"({x} IS NOT NULL AND {in_list})"
    # EMIT_NULL: null x -> NULL, nulls in the set ignored
    if present:
        return in_list
    return "FALSE" if positive else f"({x} IS NULL AND NULL)"


def from_pyarrow(expr: Any) -> Expr:
    """Translate a ``pyarrow.compute.Expression`` (best effort).

    Handles field references, scalars (int, float, decimal, string, binary,
    bool, date, timestamp, time, null), comparisons, and/or (Kleene),
    invert, is_null, is_valid, is_in (all null-matching behaviours, exactly),
    match_like / starts_with / ends_with / match_substring, and — as Opaque —
    arithmetic, cast and a few string functions. Anything else raises
    ValueError naming the function.

    Rather than parsing ``str(expr)`` (which loses types: binary prints as a
    string, decimals as floats, zones are dropped), this reads Arrow's own
    serialization of the expression, then goes through SQL text so the result
    is exactly what ``parse_filter`` would produce.
    """
    import pyarrow.compute as pc

    if not isinstance(expr, pc.Expression):
        raise TypeError(f"expected a pyarrow.compute.Expression, got {type(expr).__name__}")
    tree = _pa_tree(expr)
    return parse_filter(_pa_bool_sql(tree, positive=True))
