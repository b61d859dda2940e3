"""Bad input gets a clear error and changes nothing: same __manifest version, same files."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.write.partition_writer import PartitionWriter, new_job_secret
from lance_partitioned.operations.write.publish import commit_write


def _JSON_YEAR(field_id: str) -> dict:
    return {
        "field_id": field_id,
        "source_ids": [1],
        "transform": {"type": "year"},
        "result_type": {"type": "int32"},
    }


def _JSON_BUCKET(n: int) -> dict:
    return {
        "field_id": "b",
        "source_ids": [0],
        "transform": {"type": "bucket", "num_buckets": n},
        "result_type": {"type": "int32"},
    }


def files_under(root: str) -> set[str]:
    out = set()
    for d, _, names in os.walk(root):
        out.update(os.path.join(d, n) for n in names)
    return out


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(make_events(50))
    return ns


def unchanged(ns, action, error, match):
    """Run ``action``; it must raise ``error`` matching ``match`` and leave ``ns`` untouched."""
    version = lp.open(ns.root).version
    files = files_under(ns.root)
    rows = lp.open(ns.root).count()
    with pytest.raises(error, match=match):
        action()
    assert lp.open(ns.root).version == version
    assert files_under(ns.root) == files
    assert lp.open(ns.root).count() == rows


def with_column(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, array)


def test_type_mismatch_names_the_column(ns):
    bad = with_column(make_events(5), "id", pa.array(["a", "b", "c", "d", "e"]))
    unchanged(
        ns,
        lambda: ns.append(bad),
        lp.SchemaError,
        "column 'id': cannot write string into the namespace type int64",
    )


def test_impossible_date_cast(ns):
    bad = with_column(make_events(5), "event_date", pa.array([1.5] * 5))
    unchanged(ns, lambda: ns.append(bad), lp.SchemaError, "column 'event_date'")


def test_lossy_numeric_cast_is_refused(ns):
    bad = with_column(make_events(3), "amount", pa.array([1, 2, 2**60], pa.int64()))
    # int64 → float64 is castable in general; a value that loses precision is not
    unchanged(ns, lambda: ns.append(bad), lp.SchemaError, "column 'amount'")


def test_null_in_non_null_column(ns):
    bad = with_column(make_events(3), "id", pa.array([1, None, 3], pa.int64()))
    unchanged(
        ns,
        lambda: ns.append(bad),
        lp.SchemaError,
        "column 'id' is not nullable but the input has 1 NULL",
    )


def test_extra_column(ns):
    bad = make_events(3).append_column("surprise", pa.array([1, 2, 3]))
    unchanged(ns, lambda: ns.append(bad), lp.SchemaError, r"column\(s\) \['surprise'\]")


def test_missing_non_null_column(ns):
    bad = make_events(3).drop_columns(["id"])
    unchanged(ns, lambda: ns.append(bad), lp.SchemaError, "missing the non-nullable column 'id'")


def test_not_a_table(ns):
    unchanged(ns, lambda: ns.append({"id": [1]}), lp.SchemaError, "pass a pyarrow Table")


def test_failure_midway_reclaims_files(ns):
    def gen():
        yield from make_events(20, start_id=100).to_batches()
        # new partitions were already written to disk by now
        raise RuntimeError("upstream source failed")

    unchanged(
        ns, lambda: ns.append(gen(), max_buffer_bytes=1), RuntimeError, "upstream source failed"
    )


def test_later_batch_with_bad_schema_rolls_back_everything(ns):
    good = make_events(20, start_id=200).to_batches()
    bad = with_column(make_events(2), "id", pa.array([None, 1], pa.int64())).to_batches()
    unchanged(
        ns, lambda: ns.append(iter(good + bad), max_buffer_bytes=1), lp.SchemaError, "not nullable"
    )


def test_unknown_filter_column(ns):
    with pytest.raises(lp.FilterError, match="unknown column 'nope'"):
        ns.scan("nope = 3").to_arrow()


def test_garbage_filter(ns):
    with pytest.raises(lp.FilterError):
        ns.scan("id = = 3").to_arrow()


def test_unknown_projection_column(ns):
    # a projection is not a filter: its own error, a SchemaError and a KeyError
    with pytest.raises(lp.ColumnNotFoundError, match="unknown column 'x'") as info:
        ns.scan(columns=["id", "x"])
    assert not isinstance(info.value, lp.FilterError)
    assert isinstance(info.value, lp.SchemaError) and isinstance(info.value, KeyError)
    assert info.value.missing == ("x",)
    assert str(info.value).startswith("unknown column 'x' in the projection; columns are [")
    with pytest.raises(lp.ColumnNotFoundError, match="'nope'"):
        ns.scan(columns=["nope"])


def test_bad_version(ns):
    with pytest.raises(lp.VersionNotFoundError, match="version 999 .* does not exist"):
        lp.open(ns.root, version=999)


def test_pinned_handle_refuses_writes(ns):
    old = lp.open(ns.root, version=ns.version)
    unchanged(ns, lambda: old.append(make_events(2)), lp.PinnedSnapshotError, "pinned")


@pytest.mark.parametrize(
    "spec, match",
    [
        ('{"id": 1, "fields": [', "not valid JSON"),
        ("zorder(id)", "unknown transform 'zorder'"),
        ("bucket(0, id)", r"num_buckets must be an integer in \[1, 2147483647\], got 0"),
        ("year(nope)", "no column named 'nope'"),
        ("hour(event_date)", "hour needs a timestamp"),
        # accepted once, after which every write failed
        (
            "bucket(99999999999999999999, id)",
            r"num_buckets must be an integer in \[1, 2147483647\]",
        ),
        ("bucket(2147483648, id)", "num_buckets must be an integer in"),
        ("truncate(99999999999999999999, country)", "truncate width must be an integer in"),
        ("truncate(2147483648, id)", "truncate width must be an integer in"),
        # one definition twice breaks seed 000's field_id reuse rule
        ("id, id", r"repeats id \(fields 'id' and 'id_2'"),
        ("year(event_date), year(event_date)", r"repeats year\(event_date\)"),
        ("country, bucket(4, id), country AS c2", "fields 'country' and 'c2'"),
        (
            {"id": 1, "fields": [_JSON_YEAR("a"), _JSON_YEAR("b")]},
            "fields 'a' and 'b' have the same sources and transform",
        ),
        (
            {"id": 1, "fields": [_JSON_BUCKET(99999999999999999999)]},
            "num_buckets must be an integer in",
        ),
        ({"id": 1, "fields": [_JSON_BUCKET(-3)]}, "num_buckets must be an integer in"),
        # a new namespace starts at spec v1
        ({"id": 3, "fields": [_JSON_YEAR("a")]}, "must have id 1, got 3"),
    ],
)
def test_bad_spec_creates_nothing(tmp_path, spec, match):
    root = str(tmp_path / "never")
    with pytest.raises(lp.SpecError, match=match):
        lp.create(root, EVENTS_SCHEMA, spec)
    assert not os.path.exists(root)


@pytest.mark.parametrize(
    "spec, match",
    [
        ("bucket(99999999999999999999, id)", "num_buckets must be an integer in"),
        ("truncate(99999999999999999999, country)", "truncate width must be an integer in"),
        ("id, id", "repeats id"),
        ("year(event_date), country, year(event_date)", r"repeats year\(event_date\)"),
        # the first term reuses v1's field, the second would be a copy of it
        ("year(event_date), year(event_date) AS y2", "fields 'event_date_year' and 'y2'"),
        ({"id": 2, "fields": [_JSON_YEAR("a"), _JSON_YEAR("b")]}, "fields 'a' and 'b'"),
    ],
)
def test_bad_evolved_spec_changes_nothing(ns, spec, match):
    unchanged(ns, lambda: ns.evolve_spec(spec), lp.SpecError, match)
    assert lp.open(ns.root).specs.keys() == {1}


def test_special_characters_in_values_are_fine(ns):
    weird = ["$", "a/b", "x=y", "Zürich", "日本", "", "'quoted'", "%_"]
    t = make_events(len(weird), start_id=300)
    t = with_column(t, "country", pa.array(weird))
    ns.append(t)
    for w in weird:
        got = ns.scan(
            f"country = '{w.replace(chr(39), chr(39) * 2)}'", columns=["country"]
        ).to_arrow()
        assert got["country"].to_pylist() == [w], w
        assert len(ns.plan(f"country = '{w.replace(chr(39), chr(39) * 2)}'")) == 1


def test_conflicting_writers_on_a_new_partition(ns):
    new_rows = make_events(5, start_id=400)
    new_rows = with_column(new_rows, "country", pa.array(["NEW"] * 5))
    snap = Snapshot.load(ns.manifest, for_write=True)
    writer = PartitionWriter(snap, new_job_secret())
    writer.write(new_rows.to_batches()[0])
    written = writer.finish()
    # another writer creates the same partitions first
    lp.open(ns.root).append(new_rows)
    version, files = lp.open(ns.root).version, files_under(ns.root)
    with pytest.raises(lp.CommitConflictError, match="created concurrently"):
        commit_write(ns.manifest, snap, written)
    assert lp.open(ns.root).version == version
    assert lp.open(ns.root).count("country = 'NEW'") == 5
    # our uncommitted leaf directories are gone; nothing else changed
    assert files_under(ns.root) <= files


def test_conflicting_writers_on_an_existing_partition_rebase(ns):
    snap = Snapshot.load(ns.manifest, for_write=True)
    one = make_events(5, start_id=500)
    one = with_column(one, "event_date", pa.array([dt.date(2025, 1, 1)] * 5, pa.date32()))
    one = with_column(one, "country", pa.array(["US"] * 5))
    writer = PartitionWriter(snap, new_job_secret())
    writer.write(one.to_batches()[0])
    written = writer.finish()
    # a concurrent append to a *different* partition: disjoint, so we rebase and both land
    other = with_column(make_events(3, start_id=600), "country", pa.array(["FR"] * 3))
    lp.open(ns.root).append(other)
    commit_write(ns.manifest, snap, written)
    assert lp.open(ns.root).count() == 50 + 5 + 3


# -- issue 28 D11: input that used to reach Lance unchecked ---------------------------


@pytest.mark.parametrize(
    "options, match",
    [
        # Lance panicked (pyo3_runtime.PanicException, which `except Exception` misses)
        ({"max_rows_per_file": 0}, "max_rows_per_file must be a positive integer, got 0"),
        # Lance raised a bare OverflowError
        ({"max_rows_per_file": -1}, "max_rows_per_file must be a positive integer, got -1"),
        ({"max_rows_per_file": True}, "max_rows_per_file must be a positive integer"),
        ({"max_rows_per_file": 2.5}, "max_rows_per_file must be a positive integer"),
        ({"max_rows_per_file": 2**64}, r"max_rows_per_file must be at most 2\*\*63 - 1"),
        ({"max_buffer_bytes": 0}, "max_buffer_bytes must be a positive integer, got 0"),
    ],
)
def test_write_sizes_must_be_positive_integers(ns, options, match):
    writes = [
        lambda: ns.append(make_events(5), **options),
        lambda: ns.overwrite(make_events(5), **options),
        lambda: ns.overwrite(make_events(5), dynamic=True, **options),
    ]
    for write in writes:
        unchanged(ns, write, lp.InvalidArgumentError, match)


def test_spark_write_sizes_use_the_same_check(ns):
    pytest.importorskip("pyspark")
    from lance_partitioned.spark.options import SourceOptions

    with pytest.raises(lp.InvalidArgumentError, match="option 'maxRowsPerFile' must be a pos"):
        SourceOptions.parse({"path": ns.root, "maxRowsPerFile": "0"})
    with pytest.raises(lp.InvalidArgumentError, match="option 'maxBufferBytes' must be at most"):
        SourceOptions.parse({"path": ns.root, "maxBufferBytes": str(2**64)})


def test_a_small_max_rows_per_file_still_writes_every_row(ns):
    table = make_events(7, start_id=700)
    ns.append(table, max_rows_per_file=1)
    got = ns.scan("id >= 700", columns=["id"]).to_arrow()
    assert sorted(got["id"].to_pylist()) == sorted(table["id"].to_pylist())


def test_projection_naming_a_column_twice_is_refused(ns):
    # Lance raised "Duplicate column name: id, /…/projection.rs:76:24"
    for columns in (["id", "id"], ["country", "id", "country"]):
        with pytest.raises(lp.SchemaError, match="names column '(id|country)' more than once"):
            ns.scan(columns=columns).to_arrow()
        with pytest.raises(lp.SchemaError, match="more than once"):
            ns.to_arrow(columns=columns)


@pytest.mark.parametrize("batch_size", [0, -1, True, 1.5])
def test_scan_batch_size_must_be_a_positive_integer(ns, batch_size):
    with pytest.raises(lp.InvalidArgumentError, match="batch_size must be a positive integer"):
        ns.scan(batch_size=batch_size)


def test_scan_batch_size_bounds_the_batches(ns):
    source = make_events(50)
    batches = list(ns.scan(batch_size=3).to_batches())
    assert max(b.num_rows for b in batches) <= 3
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert sorted(ids) == sorted(source["id"].to_pylist())


@pytest.mark.parametrize("target", [0, -5, False])
def test_compact_target_must_be_a_positive_integer(ns, target):
    ns.append(make_events(10, start_id=100))  # something to compact
    unchanged(
        ns,
        lambda: ns.compact(target_rows_per_fragment=target),
        lp.InvalidArgumentError,
        "target_rows_per_fragment must be a positive integer",
    )


def test_evolving_to_the_current_spec_writes_nothing(ns):
    before_version, before_files = lp.open(ns.root).version, files_under(ns.root)
    same_text = ns.evolve_spec("year(event_date), country")
    same_object = ns.evolve_spec(ns.spec)
    assert same_text.spec_id == same_object.spec_id == 1
    assert lp.open(ns.root).version == before_version
    assert files_under(ns.root) == before_files
    assert lp.open(ns.root).specs.keys() == {1}
    # another order is another spec: it is added as before
    assert ns.evolve_spec("country, year(event_date)").spec_id == 2
    assert lp.open(ns.root).specs.keys() == {1, 2}


def test_unknown_storage_option_warns_naming_it(ns):
    import uuid
    import warnings

    bogus = f"bogus_option_{uuid.uuid4().hex[:8]}"  # the store is built once per options
    with pytest.warns(lp.UnknownStorageOptionWarning, match=bogus):
        assert lp.open(ns.root, storage_options={bogus: "1"}).count() == 50
    known = {"allow_http": "true", "timeout": "30s", "AWS_REGION": "x", "Connect_Timeout": "5s"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", lp.UnknownStorageOptionWarning)
        assert lp.open(ns.root, storage_options=known).count() == 50
