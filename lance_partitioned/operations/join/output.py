"""The columns a storage-partitioned join outputs: names, origins, types, nullability.

Split from ``planning``: the layout depends only on the join type, the key pairs
and each side's columns, never on partitions. It follows Spark's ``df.join`` so
that an engine's partition-wise join and its plain join agree column for column.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lance_partitioned.errors import SchemaError
from lance_partitioned.operations.join.execution import OutputColumn


def output_columns(
    how: str,
    on: Sequence[tuple[str, str]],
    left: tuple[pa.Schema, Sequence[str]],
    right: tuple[pa.Schema, Sequence[str]],
    key_types: Sequence[pa.DataType | None],
    suffixes: tuple[str, str] | None,
) -> tuple[OutputColumn, ...]:
    """The output columns of a ``how`` join on the key pairs ``on``, in Spark's ``df.join``
    layout: same-named keys once and first (USING), then the left columns, then the
    right ones (none for semi/anti).

    ``left``/``right``: each side's read schema (its columns and join keys, typed as
    its namespace) and its output columns; ``key_types``: the common type of each key
    pair (None: incompatible). Raises SchemaError when a name would appear twice.
    """
    (left_schema, left_output), (right_schema, right_output) = left, right
    left_fields = {f.name: f for f in left_schema}
    right_fields = {f.name: f for f in right_schema}
    left_null = how in ("right", "full")
    right_null = how in ("left", "full")
    using = [(a, b, t) for (a, b), t in zip(on, key_types, strict=True) if a == b]
    using_names = {a for a, _, _ in using}
    out: list[OutputColumn] = []
    for a, _, t in using:
        if how == "right":
            out.append(
                OutputColumn(a, "right", None, a, right_fields[a].type, right_fields[a].nullable)
            )
        elif how == "full":
            typ = t if t is not None else left_fields[a].type
            out.append(
                OutputColumn(
                    a, "coalesce", a, a, typ, left_fields[a].nullable or right_fields[a].nullable
                )
            )
        else:
            out.append(
                OutputColumn(a, "left", a, None, left_fields[a].type, left_fields[a].nullable)
            )
    left_columns = [c for c in left_output if c not in using_names]
    right_columns = (
        [] if how in ("semi", "anti") else [c for c in right_output if c not in using_names]
    )
    clash = set(left_columns) & set(right_columns) | (set(right_columns) & using_names)
    if clash and not suffixes:
        raise SchemaError(
            f"columns {sorted(clash)} exist on both sides; project them away with "
            "Side(columns=...) or pass suffixes=('_l', '_r')"
        )
    left_suffix, right_suffix = suffixes or ("", "")
    for c in left_columns:
        name = c + left_suffix if c in clash else c
        out.append(
            OutputColumn(
                name, "left", c, None, left_fields[c].type, left_fields[c].nullable or left_null
            )
        )
    for c in right_columns:
        name = c + right_suffix if c in clash else c
        out.append(
            OutputColumn(
                name, "right", None, c, right_fields[c].type, right_fields[c].nullable or right_null
            )
        )
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SchemaError(f"output columns {dup} would appear twice; choose other suffixes")
    return tuple(out)
