"""Names in a partitioned namespace: object ids, partition namespace names, table directories.

- object ids join namespace levels with ``$`` (``v1$k7m2n9p4q8r5s3t6$dataset``);
- partition namespace names are 16 characters of ``[a-z0-9]`` from an unbiased
  secure random source (seed 000 "Partition Namespace Naming");
- a leaf table lives in the directory ``<8 random lowercase hex>_<object_id>``,
  and the manifest's ``location`` column holds that relative name.
"""

from __future__ import annotations

import secrets

SEPARATOR = "$"
TABLE_NAME = "dataset"
_BASE36 = "abcdefghijklmnopqrstuvwxyz0123456789"


def random_namespace_name() -> str:
    """16 characters of [a-z0-9]; ``secrets.choice`` is unbiased."""
    return "".join(secrets.choice(_BASE36) for _ in range(16))


def table_directory(object_id: str) -> str:
    """``<8 random hex>_<object_id>``: the leaf's directory, relative to the root."""
    return f"{secrets.token_hex(4)}_{object_id}"


def join_id(*parts: str) -> str:
    return SEPARATOR.join(parts)


def split_id(object_id: str) -> list[str]:
    return object_id.split(SEPARATOR)


def spec_namespace(spec_id: int) -> str:
    return f"v{spec_id}"


def spec_id_of(object_id: str) -> int:
    """The spec version an object belongs to, from its ``v<N>`` first level."""
    head = split_id(object_id)[0]
    if not head.startswith("v") or not head[1:].isdigit():
        raise ValueError(f"object id {object_id!r} is not under a spec version namespace")
    return int(head[1:])
