package lance_partitioned;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import lance_partitioned.spark.Extensions;

/**
 * The provider Spark finds for {@code format("lance_partitioned")} / {@code USING
 * lance_partitioned} when the extension's jar is on the driver's class path: Spark's
 * {@code DataSource.lookupDataSource} tries the class {@code <name>.DefaultSource} before
 * the Python data source registry, and treats this subclass as the Python source it is
 * (it calls {@link #setShortName}, and the Python side runs unchanged).
 *
 * <p>It exists because PySpark 4.3's {@code PythonTable} drops what {@code getTable} is
 * given: the partitioning (so {@code partitionBy} fails Spark's check against an empty
 * {@code partitioning()}) and the properties (so a catalog table's {@code LOCATION} and
 * {@code OPTIONS} never reach Python). {@link Extensions.BoundTable} keeps both.
 */
public final class DefaultSource extends PythonDataSourceV2 {
    private String name;

    @Override
    public void setShortName(String shortName) {
        super.setShortName(shortName);
        this.name = shortName;
    }

    /** The schema of an existing namespace ({@code CREATE TABLE ... LOCATION} without columns). */
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return super.inferSchema(new CaseInsensitiveStringMap(
            Extensions.sourceOptions(options.asCaseSensitiveMap())));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return Extensions.bind(this, name, schema, partitioning, properties);
    }
}
