"""Row-level changes: merge (upsert), update, overwrite by predicate, each one transaction."""
