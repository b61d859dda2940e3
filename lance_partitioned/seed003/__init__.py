"""Seed 003's earlier layout, all in one place: reading it (``layout``: properties,
table names and the mapping to seed 000; ``read``: scans by table name), the
read-only handle ``Seed003Namespace`` (``handle``) that ``lp.open`` returns for such
a root, and ``lp.convert`` (``convert``), which rewrites it in seed 000's layout.
The layout and its mapping: ``docs/FORMAT.md`` section 11."""

from lance_partitioned.seed003.handle import Seed003Namespace, detect

__all__ = ["Seed003Namespace", "detect"]
