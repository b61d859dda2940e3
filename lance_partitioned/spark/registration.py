"""Registering the ``lance_partitioned`` source with a Spark session.

``register`` is what ``local_session`` and users' own sessions call: the data
source, Python filter pushdown, the view refresh hook and the redaction of
storage secrets from py4j's log.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from lance_partitioned.spark.datasource import LancePartitionedDataSource
from lance_partitioned.spark.extension import (
    EXTENSION_CLASS,
    PROVIDER_CLASS,
    extension_active,
    loadable,
)
from lance_partitioned.spark.options import install_log_redaction
from lance_partitioned.spark.refresh import install as install_refresh_hook

log = logging.getLogger(__name__)

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Register the ``lance_partitioned`` source and turn on Python filter pushdown.

    Also makes this session's temporary views see the writes made through Spark
    (``lance_partitioned.spark.refresh``), and keeps storage secrets passed as
    ``storage.<key>`` options out of py4j's DEBUG log of driver-JVM commands.
    Warns when the session lacks the extension ``pushFilters`` needs
    (``extension_conf()``): its filters then all stay with Spark.
    """
    install_log_redaction()
    _register_source(spark)
    if not extension_active(spark):
        log.warning(
            "this Spark session was started without %s, so pushFilters cannot prune: "
            "Spark applies every filter itself. Start sessions with "
            "lance_partitioned.spark.extension_conf() (spark.sql.extensions and "
            "spark.driver.extraClassPath), as local_session() does",
            EXTENSION_CLASS,
        )
    try:
        install_refresh_hook(spark)
    except Exception as exc:  # e.g. no writable temp dir: reads and writes still work
        log.warning(
            "could not install the view refresh hook (%s): after a write, re-create "
            "temporary views or call lance_partitioned.spark.refresh(spark)",
            exc,
        )
    try:
        spark.conf.set(PUSHDOWN_CONF, "true")
    except Exception as exc:  # e.g. a locked-down session; reads still work, unpruned
        log.warning(
            "could not set %s=true (%s): filters will not be pushed down", PUSHDOWN_CONF, exc
        )


def _register_source(spark: SparkSession) -> None:
    """``spark.dataSource.register(LancePartitionedDataSource)``, also when the extension's
    provider (``jvm/DefaultSource.java``) is on the class path.

    Spark finds that class for the name ``lance_partitioned`` and then refuses to
    register a Python source of the same name (``DATA_SOURCE_ALREADY_EXISTS``), although
    the class is the Python source's own provider; so the Python source is then handed to
    the session's data source manager directly, as ``register`` does after its check.
    """
    if not loadable(spark, PROVIDER_CLASS):
        spark.dataSource.register(LancePartitionedDataSource)
        return
    from pyspark.sql.udf import _wrap_function

    jvm = spark.sparkContext._jvm
    wrapped = _wrap_function(spark.sparkContext, LancePartitionedDataSource)
    source = getattr(
        jvm, "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource"
    )(wrapped)
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    manager.registerDataSource(LancePartitionedDataSource.name(), source)
