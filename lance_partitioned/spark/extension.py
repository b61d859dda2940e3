"""The Spark extension that gives every scan its own read plan (``jvm/Extensions.java``).

PySpark 4.3 keeps a Python source's read plan in one slot per relation
(``PythonDataSourceV2.readInfo``): ``PythonScanBuilder.pushFilters`` stores there
the plan the Python reader made for *its* filters, and every ``PythonBatch`` of the
relation reads that slot when it plans its input partitions. A query that scans
one relation twice (a self-join, a scalar or ``EXISTS``/``IN`` subquery, a view
named twice, a ``UNION``) plans all its scans first, so every scan reads the plan
pushed last: partitions pruned and rows filtered for another scan's filters, which
Spark does not re-check. No Python code runs per scan at read time, so the reader
cannot tell the scans apart; only the JVM can give each scan its own slot.

``Extensions.java`` is an optimizer rule that does: just before Spark pushes
filters into scans it replaces every ``lance_partitioned`` relation that has
``pushFilters`` on (the default) by a copy over a new ``PythonDataSourceV2``, marked with the
option ``__isolatedScan``. The reader accepts pushed filters only from a marked
relation (``LancePartitionedReader.pushFilters``), so without the extension
``pushFilters`` is exact and does not prune.

The jar also holds ``jvm/DefaultSource.java``, the provider Spark finds for the name
``lance_partitioned`` when the jar is on the driver's class path: PySpark's own
Python-source provider, whose tables keep their location, options and partitioning, so
that catalog tables (``CREATE TABLE ... USING lance_partitioned``), ``partitionBy`` and
``PARTITIONED BY`` work (docs/SPARK.md, "SQL statements").

The jar is compiled here, once, with the JDK's ``javac`` against the installed
PySpark's jars, and cached (``make setup`` builds it; ``local_session`` builds
it on first use). ``extension_conf()`` gives the two settings a session needs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from lance_partitioned.errors import UnsupportedFeatureError

EXTENSION_CLASS = "lance_partitioned.spark.Extensions"
# The provider Spark finds for format("lance_partitioned") when the jar is on the class path
PROVIDER_CLASS = "lance_partitioned.DefaultSource"
EXTENSIONS_CONF = "spark.sql.extensions"
CLASSPATH_CONF = "spark.driver.extraClassPath"
_SOURCES = tuple(sorted((Path(__file__).with_name("jvm")).glob("*.java")))
_JAVA_RELEASE = "17"  # the oldest JVM Spark 4 runs on
_JAR_NAME = "lance-partitioned-spark-extension.jar"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "lance_partitioned" / "spark-extension"


def _javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "javac"), os.X_OK):
        return os.path.join(java_home, "bin", "javac")
    found = shutil.which("javac")
    if not found:
        raise UnsupportedFeatureError(
            "cannot build the lance_partitioned Spark extension: no javac (install a JDK 17+, "
            "or set JAVA_HOME); without it pushFilters leaves every filter to Spark"
        )
    return found


def extension_jar() -> Path:
    """The extension's jar, compiled for the installed PySpark on first call and cached.

    Raises ``UnsupportedFeatureError`` when no JDK is found or compiling fails.
    """
    source = b"".join(p.name.encode() + p.read_bytes() for p in _SOURCES)
    key = hashlib.sha256(source + pyspark.__version__.encode() + _JAVA_RELEASE.encode())
    jar = _cache_root() / key.hexdigest()[:16] / _JAR_NAME
    if jar.is_file():
        return jar
    javac = _javac()
    try:
        _build(javac, jar)
    except OSError as exc:
        raise UnsupportedFeatureError(
            f"cannot build the lance_partitioned Spark extension into {jar.parent}: {exc}"
        ) from exc
    return jar


def _build(javac: str, jar: Path) -> None:
    """Compile the extension with ``javac`` and publish it at ``jar`` in one rename."""
    jar.parent.mkdir(parents=True, exist_ok=True)
    classpath = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = os.path.join(tmp, "classes")
        proc = subprocess.run(
            [
                javac,
                "--release",
                _JAVA_RELEASE,
                "-nowarn",
                "-cp",
                classpath,
                "-d",
                classes,
                *(str(p) for p in _SOURCES),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise UnsupportedFeatureError(
                "cannot build the lance_partitioned Spark extension with "
                f"{javac}: {proc.stderr.strip()[-2000:]}"
            )
        built = os.path.join(tmp, _JAR_NAME)
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(Path(classes).rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        os.replace(built, jar)  # atomic: concurrent builders each publish a whole jar


def extension_conf(extra_classpath: str | None = None) -> dict[str, str]:
    """The settings that load the extension in a new session (builds the jar if needed).

    ``extra_classpath``: a ``spark.driver.extraClassPath`` to keep alongside the jar.
    The driver needs the jar (its rules run in Spark's optimizer); executors outside the
    driver's JVM read column batches only with the jar in ``spark.jars`` too.
    """
    jar = str(extension_jar())
    return {
        EXTENSIONS_CONF: EXTENSION_CLASS,
        CLASSPATH_CONF: os.pathsep.join(p for p in (jar, extra_classpath) if p),
    }


def extension_active(spark: SparkSession) -> bool:
    """Whether ``spark`` was started with the extension (listed and loadable)."""
    listed = spark.conf.get(EXTENSIONS_CONF, "") or ""
    if EXTENSION_CLASS not in [c.strip() for c in listed.split(",")]:
        return False
    return loadable(spark, EXTENSION_CLASS)


def loadable(spark: SparkSession, class_name: str) -> bool:
    """Whether the driver JVM of ``spark`` can load ``class_name``."""
    return bool(spark._jvm.org.apache.spark.util.Utils.classIsLoadable(class_name))


if __name__ == "__main__":  # `make setup`: build the jar at install time
    print(extension_jar())
