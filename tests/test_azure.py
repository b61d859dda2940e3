"""The library on Azure Blob Storage (``az://``), against Azurite on 127.0.0.1.

Same code path as every other store (``catalog.storage``): Lance's Azure object
store for the datasets, ``pyarrow.fs.AzureFileSystem`` for listing and small
files. A core subset runs here: create, append, scan with a filter, time travel,
delete, dynamic overwrite, compact, vacuum, validate. Expected answers come from
pyarrow on the input; what is in the container is read with pyarrow directly.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp


def _ids(t: pa.Table) -> list[int]:
    return sorted(t["id"].to_pylist())


def test_core_operations_on_az(azurite):
    container = azurite.new_container()
    root = f"az://{container}/ns"
    opts = azurite.options()
    first, second = make_events(60), make_events(40, start_id=1000)
    ns = lp.create(root, EVENTS_SCHEMA, "country, year(event_date)", storage_options=opts)
    ns.append(first)
    v1 = ns.version
    ns.append(second)
    both = pa.concat_tables([first, second])

    ns = lp.open(root, storage_options=opts)
    assert ns.count() == both.num_rows
    got = ns.scan("country = 'US'", columns=["id", "country"]).to_arrow()
    assert _ids(got) == _ids(both.filter(pc.equal(both["country"], "US")))
    assert _ids(lp.open(root, storage_options=opts, version=v1).to_arrow()) == _ids(first)

    ns.delete("amount > 10")
    kept = both.filter(pc.invert(pc.fill_null(pc.greater(both["amount"], 10), False)))
    assert _ids(ns.to_arrow()) == _ids(kept)

    fr = make_events(10, start_id=5000).filter(
        pc.equal(make_events(10, start_id=5000)["country"], "FR")
    )
    ns.overwrite(fr, dynamic=True)
    # dynamic overwrite replaces exactly the partitions the new rows fall in
    keys = {(r["country"], r["event_date"].year) for r in fr.to_pylist()}
    rest = [r for r in kept.to_pylist() if (r["country"], r["event_date"].year) not in keys]
    want = sorted([r["id"] for r in rest] + fr["id"].to_pylist())
    assert _ids(ns.to_arrow()) == want

    ns.compact()
    report = ns.vacuum(older_than=dt.timedelta(0))
    assert report is not None
    assert ns.validate() == []
    assert _ids(lp.open(root, storage_options=opts).to_arrow()) == want

    # what is in the container, seen without the code under test
    fs = azurite.filesystem()
    names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{container}/ns"))}
    assert "__manifest" in names and any(n.endswith("$dataset") for n in names)
    assert not any(n.startswith("_lp_leases") for n in names)
    leases = fs.get_file_info(
        pafs.FileSelector(f"{container}/ns/__manifest/_lp_leases", allow_not_found=True)
    )
    assert leases == []  # every transaction released its lease
