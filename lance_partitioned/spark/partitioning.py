"""Spark's partitioning of a write (``partitionBy``, ``PARTITIONED BY``) as a partition spec.

The extension's provider (``jvm/DefaultSource.java``) hands a write the partitioning
Spark gave its table as the internal option ``__partitionBy``: the transforms in
Spark's syntax, separated by ``;`` (``c``, ``bucket(16, id)``, ``years(ts)``).

Spark's time transforms count units since 1970 (``months(ts)`` is one value per
calendar month); seed 000's are fields of the calendar (``month`` is 1-12). So
``months(ts)`` becomes the two fields ``year(ts), month(ts)``, ``days(ts)`` three and
``hours(ts)`` four: the same partitions, named by their calendar fields.
"""

from __future__ import annotations

import re

from lance_partitioned.errors import SpecError

PARTITION_BY_OPTION = "__partitionBy"

# Spark's transform name -> the seed-000 transforms that name the same partitions
_CALENDAR = {
    "years": ("year",),
    "months": ("year", "month"),
    "days": ("year", "month", "day"),
    "hours": ("year", "month", "day", "hour"),
}
_PASS_THROUGH = ("identity", "bucket", "truncate")
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.S)


def spark_term_to_spec(term: str) -> str:
    """One Spark partition transform as seed-000 spec terms (``months(ts)`` -> ``year(ts), month(ts)``).

    Raises ``SpecError`` for a transform with no seed-000 equivalent (``sorted_bucket``,
    ``cluster_by``).
    """
    call = _CALL.match(term)
    if call is None:
        return term.strip()  # a column: identity
    name, args = call.group(1).lower(), call.group(2).strip()
    if name in _CALENDAR:
        return ", ".join(f"{t}({args})" for t in _CALENDAR[name])
    if name == "identity":
        return args
    if name in _PASS_THROUGH:
        return f"{name}({args})"
    raise SpecError(
        f"Spark partitioning {term.strip()!r} has no lance_partitioned equivalent; "
        "partition by columns, years/months/days/hours(col), bucket(n, col) or truncate(w, col)"
    )


def spark_partitioning_to_spec(terms: str) -> str:
    """``__partitionBy``'s text (terms separated by ``;``) as one seed-000 spec text."""
    return ", ".join(spark_term_to_spec(t) for t in terms.split(";") if t.strip())
