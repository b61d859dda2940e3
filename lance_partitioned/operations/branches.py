"""Where a write to a partition goes: main, a tag's version, or a Lance branch.

Seed 000 Read Behavior lets a ``__manifest`` row pin a leaf by ``read_version``
(main), ``read_tag``, or ``read_branch`` + ``read_version``. A namespace write
builds on exactly that published content; for a branch it writes on the branch
(``docs/TRANSACTIONS.md`` §10).
"""

from __future__ import annotations

from dataclasses import dataclass

import lance

from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.errors import ForeignChangeError

MAIN_BRANCH = "main"


def branch_uri(uri: str, branch: str | None) -> str:
    """Where a leaf's branch lives: Lance keeps branch ``b`` of ``uri`` at ``uri/tree/b``.

    Opening that directory gives the branch's own version history (shared with
    main up to the fork), so every integer-version operation used for main
    (open, Restore, strict commits) works on a branch unchanged.
    """
    if branch is None or branch == MAIN_BRANCH:
        return uri
    return uri.rstrip("/") + "/tree/" + branch


@dataclass(frozen=True)
class LeafTarget:
    """Where a write to a leaf goes, and the version whose content it builds on."""

    uri: str  # the leaf, or its branch directory
    published: int | None  # None: the row reads the latest version (of the branch)
    branch: str | None  # None: main


def leaf_target(uri: str, leaf: Leaf, storage_options: dict[str, str] | None) -> LeafTarget:
    """The published content of ``leaf`` per seed 000 Read Behavior, as a write target.

    ``read_tag``: the tag's version, on the branch the tag points into;
    ``read_branch`` + ``read_version``: that version of that branch (a write goes
    to the branch and moves its ``read_version``); ``read_version``: that main
    version; all NULL: the latest main version. Raises ForeignChangeError when the
    row names a tag the leaf no longer has: nobody can tell what is published.
    """
    if leaf.read_tag is not None:
        tags = lance.dataset(uri, storage_options=storage_options).tags.list()
        info = tags.get(leaf.read_tag)
        if info is None:
            raise ForeignChangeError(
                f"partition {leaf.object_id!r} is pinned to tag {leaf.read_tag!r}, which its "
                f"table {uri!r} no longer has (tags: {', '.join(sorted(tags)) or 'none'}); "
                "the published version is unknown, so nothing can be built on it. Point the "
                "row at a version (read_version) or recreate the tag"
            )
        branch = info.get("branch")
        branch = None if branch == MAIN_BRANCH else branch
        return LeafTarget(branch_uri(uri, branch), info["version"], branch)
    if leaf.read_branch is not None and leaf.read_branch != MAIN_BRANCH:
        return LeafTarget(branch_uri(uri, leaf.read_branch), leaf.read_version, leaf.read_branch)
    return LeafTarget(uri, leaf.read_version, None)
