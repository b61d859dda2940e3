"""Our specs and schemas as the ``lance_namespace`` models, and back, exactly or not at all.

``lance_namespace`` 0.13 ships pydantic models for seed 000's JSON:
``PartitionSpec`` / ``PartitionField`` / ``PartitionTransform`` and
``JsonArrowSchema`` / ``JsonArrowField`` / ``JsonArrowDataType``. They keep
only the upstream keys of a type (``type``, ``fields``, ``length``), so a
timestamp's unit and time zone, a dictionary, ``keys_sorted`` and view types
are lost (``docs/FORMAT.md`` section 8). Every conversion here checks that
the model says exactly what our JSON says and raises ``SpecError`` /
``SchemaError`` naming what the model would drop otherwise; nothing is lost
silently.
"""

from __future__ import annotations

import json
from typing import Any

from lance_namespace_urllib3_client.models import JsonArrowSchema as JsonArrowSchemaModel
from lance_namespace_urllib3_client.models import PartitionSpec as PartitionSpecModel

from lance_partitioned.errors import SchemaError, SpecError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionSpec


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Paths where ``theirs`` (the model's JSON) drops or changes what ``ours`` says."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for k, v in ours.items():
            if k not in theirs:
                out.append(f"{path}.{k}" if path else k)
            else:
                out += _differences(v, theirs[k], f"{path}.{k}" if path else k)
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [path]


def spec_to_model(spec: PartitionSpec) -> PartitionSpecModel:
    """``spec`` as a ``lance_namespace`` ``PartitionSpec``; SpecError if it cannot say it exactly.

    Example::

        spec_to_model(ns.spec).to_json()
    """
    ours = spec.to_json()
    model = PartitionSpecModel.from_dict(ours)
    lost = _differences(ours, model.to_dict())
    if lost:
        raise SpecError(
            f"{spec.key} cannot be expressed exactly by lance_namespace.PartitionSpec: it would "
            f"drop {lost} (the model's JsonArrowDataType keeps only type, fields and length); "
            "use PartitionSpec.to_json() instead"
        )
    return model


def spec_from_model(model: PartitionSpecModel) -> PartitionSpec:
    """A ``lance_namespace`` ``PartitionSpec`` as ours (validated as any spec JSON is).

    Example::

        spec_from_model(PartitionSpecModel.from_json(text))
    """
    return PartitionSpec.from_json(model.to_dict())


def schema_to_model(schema: Schema, exact: bool = True) -> JsonArrowSchemaModel:
    """``schema`` as a ``lance_namespace`` ``JsonArrowSchema``.

    With ``exact`` (the default) SchemaError is raised when the model would drop
    something (a timestamp's unit or zone, ...); ``exact=False`` gives upstream's
    lossy form, as a ``DescribeTableResponse`` must carry it.

    Example::

        schema_to_model(ns.schema).to_json()
    """
    ours = schema.to_json()
    model = JsonArrowSchemaModel.from_dict(ours)
    if exact:
        lost = _differences(ours, model.to_dict())
        if lost:
            raise SchemaError(
                f"the schema cannot be expressed exactly by lance_namespace.JsonArrowSchema: it "
                f"would drop {lost}; use Schema.to_json() instead"
            )
    return model


def schema_from_model(model: JsonArrowSchemaModel) -> Schema:
    """A ``lance_namespace`` ``JsonArrowSchema`` as a Schema (it must carry ``lance:field_id``).

    Example::

        schema_from_model(JsonArrowSchemaModel.from_json(text))
    """
    return Schema.from_json(json.dumps(model.to_dict()))
