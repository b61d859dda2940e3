"""Names and locations in a partitioned namespace: object ids, partition namespace
names, table directories, and URIs.

- object ids join namespace levels with ``$`` (``v1$k7m2n9p4q8r5s3t6$dataset``);
- partition namespace names are 16 characters of ``[a-z0-9]``, uniformly
  distributed (seed 000 "Partition Namespace Naming");
- a leaf table lives in the directory ``<8 lowercase hex>_<object_id>``, and the
  manifest's ``location`` column holds that relative name;
- a root is a local path, a ``file://`` URI or an object-store URI; what is
  stored where is asked of ``catalog.storage``, never tested here.

Names are derived from a per-job secret (HMAC-SHA256), so every task of one
write job names a new partition alike without coordinating, while two jobs
never collide.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

SEPARATOR = "$"
TABLE_NAME = "dataset"
_BASE36 = "abcdefghijklmnopqrstuvwxyz0123456789"
_NAME_LENGTH = 16


def _derived_stream(secret: bytes, label: str) -> Iterable[int]:
    counter = 0
    while True:
        block = hmac.new(secret, f"{label}#{counter}".encode(), hashlib.sha256).digest()
        yield from block
        counter += 1


def derived_namespace_name(secret: bytes, label: str) -> str:
    """16 base36 characters from HMAC-SHA256 bytes, by rejection sampling (unbiased)."""
    out = []
    for b in _derived_stream(secret, label):
        if b < 252:  # 252 = 7 * 36: keep the distribution uniform
            out.append(_BASE36[b % 36])
            if len(out) == _NAME_LENGTH:
                return "".join(out)
    raise AssertionError("unreachable")


def derived_hex(secret: bytes, label: str) -> str:
    """8 lowercase hex characters: the prefix of a leaf's directory name."""
    return hmac.new(secret, f"dir:{label}".encode(), hashlib.sha256).hexdigest()[:8]


def join_uri(root: str, name: str) -> str:
    """``root/name`` for local paths and object-store URIs alike."""
    return root.rstrip("/") + "/" + name


def join_id(*parts: str) -> str:
    return SEPARATOR.join(parts)


def split_id(object_id: str) -> list[str]:
    return object_id.split(SEPARATOR)


# Spec version namespaces are named ``v<N>`` (seed 000). The helpers below are
# the only code that spells that name; everything else asks them.
_SPEC_NAMESPACE_PREFIX = "v"


def spec_namespace(spec_id: int) -> str:
    """The name of spec version ``spec_id``'s namespace, ``v<N>``."""
    return f"{_SPEC_NAMESPACE_PREFIX}{spec_id}"


def spec_id_of_namespace(name: str) -> int | None:
    """N when ``name`` is a spec version namespace name ``v<N>``; None for any other name."""
    digits = name[len(_SPEC_NAMESPACE_PREFIX) :]
    if name.startswith(_SPEC_NAMESPACE_PREFIX) and digits.isdigit():
        return int(digits)
    return None


def spec_members_like(spec_id: int) -> str:
    """The SQL ``LIKE`` pattern of object ids under spec version ``spec_id``: ``v<N>$%``.

    ``v<N>$`` holds no ``%``, ``_`` or ``\\``, so the pattern needs no escaping.
    """
    return spec_namespace(spec_id) + SEPARATOR + "%"


def spec_id_of(object_id: str) -> int:
    """The spec version an object belongs to, from its ``v<N>`` first level."""
    sid = spec_id_of_namespace(split_id(object_id)[0])
    if sid is None:
        raise ValueError(f"object id {object_id!r} is not under a spec version namespace")
    return sid
