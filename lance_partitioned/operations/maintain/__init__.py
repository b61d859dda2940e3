"""Maintenance (compaction, cleanup, vacuum) and the readable report (``describe``)."""
