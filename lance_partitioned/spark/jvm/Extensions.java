package lance_partitioned.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * Gives every scan of a {@code lance_partitioned} relation with {@code pushFilters}
 * on its own read plan ({@code spark.sql.extensions=lance_partitioned.spark.Extensions}).
 *
 * <p>PySpark 4.3 keeps a Python source's read plan in one slot of the relation's
 * {@code PythonDataSourceV2}: {@code PythonScanBuilder.pushFilters} stores the plan it
 * gets from Python there, and every {@code PythonBatch} of that relation later reads
 * the slot. When one query scans a relation twice (a self-join, a subquery, a view
 * named twice), the last scan's plan, pruned and filtered for its own filters, is
 * read by every scan. This rule runs just before Spark pushes filters into scans
 * ("Pre CBO Rules" precedes "Early Filter and Projection Push-Down", in the
 * optimizer run of the main query and in that of each subquery) and replaces each
 * such relation by a copy with a new {@code PythonDataSourceV2}, so each scan builder
 * fills a slot of its own. The copy carries the option {@code __isolatedScan=true}:
 * the Python reader accepts pushed filters only then, so a session without this
 * extension stays exact (Spark applies every filter itself).
 */
public final class Extensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    static final String SOURCE = "lance_partitioned";
    static final String PUSH_FILTERS = "pushFilters";
    static final String MARKER = "__isolatedScan";
    private static final Logger LOG = LoggerFactory.getLogger(Extensions.class);

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectPreCBORule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new IsolateScans();
            }
        });
        return BoxedUnit.UNIT;
    }

    /** The optimizer rule: one fresh read-plan slot per relation node. */
    public static final class IsolateScans extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                @Override
                public boolean isDefinedAt(LogicalPlan node) {
                    return pushesFilters(node);
                }

                @Override
                public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 node, Function1<A1, B1> otherwise) {
                    if (!pushesFilters(node)) {
                        return otherwise.apply(node);
                    }
                    @SuppressWarnings("unchecked")
                    B1 out = (B1) isolateOrKeep((DataSourceV2Relation) node);
                    return out;
                }
            });
        }
    }

    /** A relation of this source whose reader may accept Spark's filters. */
    static boolean pushesFilters(LogicalPlan node) {
        if (!(node instanceof DataSourceV2Relation)) {
            return false;
        }
        DataSourceV2Relation relation = (DataSourceV2Relation) node;
        Table table = relation.table();
        if (!(table instanceof PythonTable) || !SOURCE.equals(table.name())) {
            return false;
        }
        String value = relation.options().get(PUSH_FILTERS);
        return value != null && "true".equalsIgnoreCase(value.trim());
    }

    /**
     * {@code isolate(relation)}, or {@code relation} unchanged if this Spark's internals
     * differ: unmarked, its reader then leaves every filter to Spark (exact, unpruned).
     */
    static LogicalPlan isolateOrKeep(DataSourceV2Relation relation) {
        try {
            return isolate(relation);
        } catch (RuntimeException | LinkageError e) {
            LOG.warn("lance_partitioned: cannot give this scan its own read plan; "
                + "Spark applies its filters itself", e);
            return relation;
        }
    }

    /** {@code relation} over a new PythonDataSourceV2 (an empty read-plan slot), marked. */
    static DataSourceV2Relation isolate(DataSourceV2Relation relation) {
        PythonTable table = (PythonTable) relation.table();
        PythonDataSourceV2 provider = new PythonDataSourceV2();
        provider.setShortName(table.name());
        PythonTable fresh = new PythonTable(provider, table.name(), table.schema());
        Map<String, String> options = new HashMap<>(relation.options().asCaseSensitiveMap());
        options.put(MARKER, "true");
        return relation.copy(
            fresh,
            relation.output(),
            relation.catalog(),
            relation.identifier(),
            new CaseInsensitiveStringMap(options),
            relation.timeTravelSpec());
    }
}
