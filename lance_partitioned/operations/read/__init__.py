"""The read side: a filter prepared and checked, scans over pruned leaves, and the
DuckDB and Polars views of a scan."""
