"""Partition specs and fields: the seed-000 ``partition_spec_v<N>`` JSON model.

A ``PartitionField`` derives one partition value per row from source columns
named by field id, through a well-known ``Transform`` or a DataFusion
``expression``. A ``PartitionSpec`` is the ordered list of fields of one spec
version. ``parse_spec`` also accepts Iceberg's string form, e.g.
``"year(event_date), bucket(16, id), truncate(4, name), country"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import SpecError
from lance_partitioned.format.expression_eval import ExpressionTransform
from lance_partitioned.format.filters.tokens import FilterParseError, tokenize
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.transforms import (
    Transform,
    parse_transform_call,
    transform_from_json,
)
from lance_partitioned.format.type_json import (
    TypeConversionError,
    arrow_type_to_json,
    json_to_arrow_type,
)

PARTITION_COLUMN_PREFIX = "partition_field_"
_FIELD_ID_RE = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class PartitionField:
    """One partition field: ``field_id``, ``source_ids``, a transform or an expression, ``result_type``."""

    field_id: str
    source_ids: tuple[int, ...]
    result_type: pa.DataType
    transform: Transform | None = None
    expression: str | None = None

    def __post_init__(self):
        if not isinstance(self.field_id, str) or not _FIELD_ID_RE.match(self.field_id):
            raise SpecError(
                f"partition field_id must be a non-empty string of letters, digits and '_', got {self.field_id!r}"
            )
        if (self.transform is None) == (self.expression is None):
            raise SpecError(
                f"partition field {self.field_id!r} must have exactly one of transform or expression"
            )
        if not self.source_ids:
            raise SpecError(f"partition field {self.field_id!r} needs at least one source id")
        for sid in self.source_ids:
            if isinstance(sid, bool) or not isinstance(sid, int) or sid < 0:
                raise SpecError(
                    f"partition field {self.field_id!r}: source_ids must be non-negative integers, got {list(self.source_ids)}"
                )
        if self.expression is not None and (
            not isinstance(self.expression, str) or not self.expression.strip()
        ):
            raise SpecError(
                f"partition field {self.field_id!r}: expression must be a non-empty string"
            )

    # -- JSON ---------------------------------------------------------------
    @classmethod
    def from_json(cls, obj: Any) -> PartitionField:
        if not isinstance(obj, dict):
            raise SpecError(f"partition field must be a JSON object, got {obj!r}")
        missing = [k for k in ("field_id", "source_ids", "result_type") if k not in obj]
        if missing:
            raise SpecError(f"partition field {obj} is missing {missing}")
        extra = set(obj) - {"field_id", "source_ids", "transform", "expression", "result_type"}
        if extra:
            raise SpecError(
                f"partition field {obj.get('field_id')!r} has unknown keys {sorted(extra)}"
            )
        if not isinstance(obj["source_ids"], list):
            raise SpecError(f"partition field {obj['field_id']!r}: source_ids must be a JSON array")
        has_t, has_e = obj.get("transform") is not None, obj.get("expression") is not None
        if has_t == has_e:
            raise SpecError(
                f"partition field {obj['field_id']!r} must have exactly one of transform or expression"
            )
        try:
            rtype = json_to_arrow_type(obj["result_type"])
        except (TypeConversionError, TypeError, AttributeError) as exc:
            raise SpecError(f"partition field {obj['field_id']!r}: bad result_type: {exc}") from exc
        return cls(
            field_id=obj["field_id"],
            source_ids=tuple(obj["source_ids"]),
            result_type=rtype,
            transform=transform_from_json(obj["transform"]) if has_t else None,
            expression=obj["expression"] if has_e else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field_id": self.field_id, "source_ids": list(self.source_ids)}
        if self.transform is not None:
            out["transform"] = self.transform.to_json()
        else:
            out["expression"] = self.expression
        out["result_type"] = arrow_type_to_json(self.result_type)
        return out

    # -- meaning ------------------------------------------------------------
    @property
    def column(self) -> str:
        """The ``__manifest`` column holding this field's values."""
        return PARTITION_COLUMN_PREFIX + self.field_id

    @cached_property
    def function(self) -> Transform:
        """The field's meaning as a ``Transform``: its transform, or an
        ``ExpressionTransform`` of its expression (cast to ``result_type``)."""
        if self.transform is not None:
            return self.transform
        return ExpressionTransform(self.expression or "", self.result_type)

    def same_definition(self, other: PartitionField) -> bool:
        """Same sources and same transform/expression: seed 000 says reuse the field_id."""
        return (
            self.source_ids == other.source_ids
            and self.transform == other.transform
            and self.expression == other.expression
        )

    def validate(self, schema: Schema) -> None:
        """Check sources exist and ``result_type`` fits the transform; raise SpecError otherwise."""
        for sid in self.source_ids:
            if not schema.has_id(sid):
                raise SpecError(
                    f"partition field {self.field_id!r}: source id {sid} is not a field id of the schema "
                    f"(ids: {sorted(_ids(schema))})"
                )
        src_types = [schema.field_by_id(sid).type for sid in self.source_ids]
        self.function.check_result_type(self.field_id, src_types, self.result_type)

    def values(self, data: pa.RecordBatch | pa.Table, schema: Schema) -> pa.Array:
        """This field's partition value for every row of ``data`` (columns named as in ``schema``).

        A source id missing from the schema reads as NULL (seed 000: column removal resistant).
        """
        arrays = []
        for sid in self.source_ids:
            if schema.has_id(sid):
                col = data.column(schema.field_by_id(sid).name)
                if isinstance(col, pa.ChunkedArray):
                    col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
                arrays.append(col)
            else:
                arrays.append(pa.nulls(data.num_rows))
        fn = self.function
        if fn.null_in_null_out and len(arrays) == 1 and pa.types.is_null(arrays[0].type):
            return pa.nulls(data.num_rows, type=self.result_type)
        out = fn.apply(arrays)
        return out if out.type.equals(self.result_type) else out.cast(self.result_type)

    def value_of(self, literals: Sequence[Any], source_types: Sequence[pa.DataType]) -> Any:
        """The partition value of one tuple of source values (Python objects)."""
        return self.function.value_of(literals, source_types, self.result_type)

    def describe(self, schema: Schema | None = None) -> str:
        """Iceberg-like text, e.g. ``bucket(16, id)``."""
        names = [_name(schema, s) for s in self.source_ids]
        if self.transform is None:
            return f"{self.field_id} = {self.expression}"
        t = self.transform.to_json()
        params = [str(v) for k, v in t.items() if k != "type"]
        inner = ", ".join(params + names)
        body = names[0] if t["type"] == "identity" else f"{t['type']}({inner})"
        return body if body == self.field_id else f"{body} AS {self.field_id}"


def _ids(schema: Schema) -> list[int]:
    return [i for i in range(schema.max_field_id + 1) if schema.has_id(i)]


def _name(schema: Schema | None, sid: int) -> str:
    if schema is not None and schema.has_id(sid):
        try:
            return schema.field_by_id(sid).name
        except SpecError:
            pass
        except Exception:
            pass
    return f"#{sid}"


@dataclass(frozen=True)
class PartitionSpec:
    """One spec version: ``{"id": N, "fields": [...]}``."""

    spec_id: int
    fields: tuple[PartitionField, ...]

    def __post_init__(self):
        if isinstance(self.spec_id, bool) or not isinstance(self.spec_id, int) or self.spec_id < 1:
            raise SpecError(f"spec id must be a positive integer, got {self.spec_id!r}")
        seen: set[str] = set()
        for f in self.fields:
            if f.field_id in seen:
                raise SpecError(f"spec v{self.spec_id} lists field_id {f.field_id!r} twice")
            seen.add(f.field_id)

    @classmethod
    def from_json(cls, obj: Any) -> PartitionSpec:
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise SpecError(f"partition spec is not valid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise SpecError(f"partition spec must be a JSON object, got {obj!r}")
        if "id" not in obj or "fields" not in obj:
            raise SpecError(f"partition spec needs 'id' and 'fields': {obj}")
        extra = set(obj) - {"id", "fields"}
        if extra:
            raise SpecError(f"partition spec has unknown keys {sorted(extra)}")
        if not isinstance(obj["fields"], list):
            raise SpecError("partition spec 'fields' must be a JSON array")
        return cls(obj["id"], tuple(PartitionField.from_json(f) for f in obj["fields"]))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.spec_id, "fields": [f.to_json() for f in self.fields]}

    def to_json_str(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @property
    def key(self) -> str:
        """The root metadata key, ``partition_spec_v<N>``."""
        return f"partition_spec_v{self.spec_id}"

    def validate(self, schema: Schema) -> None:
        for f in self.fields:
            f.validate(schema)

    def with_widened_source(self, source_id: int, new_type: pa.DataType) -> PartitionSpec:
        """This spec after source ``source_id`` is widened to ``new_type``.

        identity and truncate produce the source type (``result_follows_source``),
        so their ``result_type`` widens with the source; every other transform's
        result type is fixed.
        """
        fields = []
        for f in self.fields:
            fn = f.function
            if (
                fn.result_follows_source
                and f.source_ids == (source_id,)
                and not fn.fits_result_type([new_type], f.result_type)
            ):
                f = replace(f, result_type=fn.result_type([new_type]))
            fields.append(f)
        return replace(self, fields=tuple(fields))

    def describe(self, schema: Schema | None = None) -> str:
        return ", ".join(f.describe(schema) for f in self.fields) or "(unpartitioned)"


# The one NaN object every partition key uses (``partition_key``).
_NAN = float("nan")


def partition_key(values: Iterable[Any]) -> tuple[Any, ...]:
    """Partition values as a dict key: equal partitions give equal keys.

    Python's ``nan != nan`` (and ``hash(nan)`` differs per object), so two NaN
    values read or computed separately would name two partitions: each append
    of a NaN row would create another one. Every float NaN is replaced by one
    shared object, which tuples compare equal by identity.

    >>> partition_key([float("nan"), 1]) == partition_key([float("nan"), 1])
    True
    """
    return tuple(_NAN if isinstance(v, float) and v != v else v for v in values)


def check_field_ids(specs: Iterable[PartitionSpec]) -> None:
    """A field_id means one definition across all versions, with one result_type."""
    seen: dict[str, tuple[int, PartitionField]] = {}
    for spec in specs:
        for f in spec.fields:
            prior = seen.get(f.field_id)
            if prior is None:
                seen[f.field_id] = (spec.spec_id, f)
                continue
            v, g = prior
            if not f.same_definition(g) or not f.result_type.equals(g.result_type):
                raise SpecError(
                    f"field_id {f.field_id!r} is reused with a different definition: "
                    f"v{v} has {g.to_json()}, v{spec.spec_id} has {f.to_json()}"
                )


# -- Iceberg-style string form --------------------------------------------------


def _tokenize(text: str) -> list[tuple[str, Any]]:
    """Spec text as ``(kind, value)`` tokens: ``num`` (int), ``ident``, ``quoted`` and
    ``punct`` (``(``, ``)``, ``,``). Identifiers are lexed as in filters
    (``filters.tokens``): bare, or double- or backtick-quoted with the quote doubled
    inside (``"q""t"``)."""
    try:
        tokens = tokenize(text)
    except FilterParseError as exc:
        raise SpecError(
            f"cannot parse partition spec {text!r} at position {exc.position}: {exc.reason}"
        ) from None
    out: list[tuple[str, Any]] = []
    for tok in tokens:
        negative = out and out[-1] == ("punct", "-")
        if tok.kind == "num" and tok.value.isdigit():
            if negative:
                out.pop()
            out.append(("num", -int(tok.value) if negative else int(tok.value)))
        elif tok.kind in ("ident", "qident") and not negative:
            out.append(("ident" if tok.kind == "ident" else "quoted", tok.value))
        elif tok.kind == "op" and tok.value in ("(", ")", ",", "-") and not negative:
            out.append(("punct", tok.value))
        elif tok.kind == "eof":
            break
        else:
            raise SpecError(
                f"cannot parse partition spec {text!r} at position {tok.start}: "
                f"{text[tok.start :]!r}"
            )
    if out and out[-1] == ("punct", "-"):
        raise SpecError(f"cannot parse partition spec {text!r}: it ends with '-'")
    return out


_DEFAULT_SUFFIX = {
    "year": "year",
    "month": "month",
    "day": "day",
    "hour": "hour",
    "bucket": "bucket",
    "multi_bucket": "bucket",
    "truncate": "trunc",
}


def _split_terms(tokens: list[tuple[str, Any]], text: str) -> list[list[tuple[str, Any]]]:
    terms, cur, depth = [], [], 0
    for tok in tokens:
        if tok == ("punct", "("):
            depth += 1
        elif tok == ("punct", ")"):
            depth -= 1
            if depth < 0:
                raise SpecError(f"unbalanced ')' in partition spec {text!r}")
        if tok == ("punct", ",") and depth == 0:
            terms.append(cur)
            cur = []
        else:
            cur.append(tok)
    if depth != 0:
        raise SpecError(f"unbalanced '(' in partition spec {text!r}")
    terms.append(cur)
    if any(not t for t in terms):
        raise SpecError(f"empty term in partition spec {text!r}")
    return terms


def _parse_term(term: list[tuple[str, Any]], text: str) -> tuple[Transform, list[str], str | None]:
    alias = None
    if len(term) >= 3 and term[-2][0] == "ident" and term[-2][1].lower() == "as":
        if term[-1][0] not in ("ident", "quoted"):
            raise SpecError(f"bad alias in partition spec {text!r}")
        alias = term[-1][1]
        term = term[:-2]
    if len(term) == 1 and term[0][0] in ("ident", "quoted"):
        return parse_transform_call("identity", []), [term[0][1]], alias
    if (
        len(term) < 3
        or term[0][0] != "ident"
        or term[1] != ("punct", "(")
        or term[-1] != ("punct", ")")
    ):
        raise SpecError(
            f"cannot parse partition term {' '.join(str(v) for _, v in term)!r} in {text!r}; "
            "expected a column, or transform(args) such as year(ts), bucket(16, id), truncate(4, name)"
        )
    name = term[0][1]
    args = [t for t in term[2:-1] if t != ("punct", ",")]
    nums = [v for k, v in args if k == "num"]
    cols = [v for k, v in args if k in ("ident", "quoted")]
    if len(nums) + len(cols) != len(args):
        raise SpecError(f"bad arguments to {name}(...) in partition spec {text!r}")
    if not cols:
        raise SpecError(f"{name}(...) needs a source column in partition spec {text!r}")
    transform = parse_transform_call(name, nums)
    if transform.arity == 1 and len(cols) != 1:
        raise SpecError(f"{name} takes one source column, got {cols} in {text!r}")
    return transform, cols, alias


def parse_spec(
    spec: str | dict[str, Any] | PartitionSpec | Sequence[PartitionField],
    schema: Schema,
    spec_id: int = 1,
    existing: Iterable[PartitionSpec] = (),
) -> PartitionSpec:
    """Build and validate a ``PartitionSpec`` from ``spec`` for ``schema``.

    ``spec`` is Iceberg-style text (``"year(d), bucket(16, id)"``), seed-000 JSON
    (text or dict), a ``PartitionSpec`` or a sequence of ``PartitionField``.
    ``spec_id`` is the version it gets (JSON must carry the same id). With
    ``existing`` specs, a field with the same sources and transform reuses its
    field_id, and a new field never takes an id already used for something else.
    Raises SpecError.

    Example::

        spec = lp.parse_spec("year(event_date), country", lp.Schema.from_arrow(schema))
    """
    existing = list(existing)
    if isinstance(spec, PartitionSpec):
        out = spec
    elif isinstance(spec, dict) or isinstance(spec, str) and spec.lstrip().startswith("{"):
        out = PartitionSpec.from_json(spec)
    elif isinstance(spec, str):
        out = PartitionSpec(spec_id, tuple(_fields_from_text(spec, schema, existing, spec_id)))
    else:
        out = PartitionSpec(spec_id, tuple(spec))
    if out.spec_id != spec_id:
        raise SpecError(f"this partition spec must have id {spec_id}, got {out.spec_id}")
    out.validate(schema)
    check_distinct_definitions(out, schema)
    check_field_ids([*existing, out])
    return out


def check_distinct_definitions(spec: PartitionSpec, schema: Schema | None = None) -> None:
    """Refuse two fields of one spec with the same sources and transform/expression.

    Seed 000 reuses a field_id for "the same source_ids and transform"; with two
    such fields in one spec that rule has two answers, and the second field only
    repeats the first one's partition value.
    """
    for i, f in enumerate(spec.fields):
        for g in spec.fields[:i]:
            if f.same_definition(g):
                raise _repeated(spec.spec_id, g, f, schema)


def _repeated(
    spec_id: int, first: PartitionField, second: PartitionField, schema: Schema | None
) -> SpecError:
    return SpecError(
        f"partition spec v{spec_id} repeats {first.describe(schema).split(' AS ')[0]} "
        f"(fields {first.field_id!r} and {second.field_id!r} have the same sources and "
        "transform); list each partition field once"
    )


def _fields_from_text(
    text: str, schema: Schema, existing: list[PartitionSpec], spec_id: int
) -> list[PartitionField]:
    if not text.strip():
        return []
    prior = [f for s in existing for f in s.fields]
    used = {f.field_id for f in prior}
    fields: list[PartitionField] = []
    for term in _split_terms(_tokenize(text), text):
        transform, cols, alias = _parse_term(term, text)
        try:
            sids = tuple(schema.field_id(c) for c in cols)
        except Exception as exc:
            raise SpecError(f"partition spec {text!r}: {exc}") from exc
        src_types = [schema.field_by_id(s).type for s in sids]
        rtype = transform.result_type(src_types)
        same = next(
            (
                f
                for f in prior
                if f.source_ids == sids and f.transform == transform and f.expression is None
            ),
            None,
        )
        if same is not None and (alias is None or alias == same.field_id):
            twice = next((f for f in fields if f.same_definition(same)), None)
            if twice is not None:
                raise _repeated(spec_id, twice, same, schema)
            fields.append(same)
            continue
        fid = alias
        if fid is None:
            base = "_".join(cols)
            suffix = _DEFAULT_SUFFIX.get(transform.type)
            fid = base if suffix is None else f"{base}_{suffix}"
            fid = re.sub(r"[^A-Za-z0-9_]", "_", fid)
            n, cand = 2, fid
            while cand in used or any(f.field_id == cand for f in fields):
                cand, n = f"{fid}_{n}", n + 1
            fid = cand
        elif fid in used:
            raise SpecError(
                f"field_id {fid!r} is already used by a different partition field; pick another name"
            )
        fields.append(PartitionField(fid, sids, rtype, transform=transform))
    return fields
