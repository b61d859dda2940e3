package lance_partitioned.spark;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.analysis.AsOfTimestamp;
import org.apache.spark.sql.catalyst.analysis.AsOfVersion;
import org.apache.spark.sql.catalyst.analysis.RelationTimeTravel;
import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.analysis.TimeTravelSpec;
import org.apache.spark.sql.catalyst.analysis.TimeTravelSpec$;
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView;
import org.apache.spark.sql.catalyst.plans.logical.AlterTableCommand;
import org.apache.spark.sql.catalyst.plans.logical.CreateTable;
import org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable;
import org.apache.spark.sql.catalyst.plans.logical.DescribeColumn;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTable;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.ShowPartitions;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias$;
import org.apache.spark.sql.catalyst.plans.logical.TableSpec;
import org.apache.spark.sql.catalyst.plans.logical.TableSpecBase;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedTableSpec;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.plans.logical.V2CreateTablePlan;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.catalog.CatalogManager;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.TruncatableTable;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonWriteBuilder;
import org.apache.spark.sql.internal.connector.SupportsMetadata;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation$;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Gives every scan of a {@code lance_partitioned} relation with {@code pushFilters}
 * on (the default) its own read plan ({@code spark.sql.extensions=lance_partitioned.spark.Extensions}).
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
        extensions.injectPreCBORule(rule(IsolateScans::new));
        extensions.injectPreCBORule(rule(PruneColumns::new));
        extensions.injectResolutionRule(rule(session -> new PartitioningAsProperty()));
        extensions.injectCheckRule(new AbstractFunction1<SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
            @Override
            public Function1<LogicalPlan, BoxedUnit> apply(SparkSession session) {
                return new RefuseColumnChanges();
            }
        });
        // A resolution rule, not a check rule: Spark's own checks (SHOW PARTITIONS, an
        // unknown table HISTORY) fail before the extension's check rules run.
        extensions.injectResolutionRule(rule(RefuseStatements::new));
        // The hints batch runs before ResolveRelations, which fails every time travel
        // on the session catalog.
        extensions.injectHintResolutionRule(rule(TimeTravel::new));
        return BoxedUnit.UNIT;
    }

    /** {@code make} as the Scala function of a session that Spark's inject methods take. */
    static AbstractFunction1<SparkSession, Rule<LogicalPlan>> rule(
            java.util.function.Function<SparkSession, Rule<LogicalPlan>> make) {
        return new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return make.apply(session);
            }
        };
    }

    /**
     * {@code plan.transformUp} with {@code rewrite}, which returns a node's replacement, or
     * null to leave it (Scala's partial function, for Java). {@code rewrite} runs once per
     * node: defined everywhere, the function leaves a node itself when rewrite gives null.
     */
    static LogicalPlan rewriteUp(LogicalPlan plan, java.util.function.Function<LogicalPlan, LogicalPlan> rewrite) {
        return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan node) {
                return true;
            }

            @Override
            public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 node, Function1<A1, B1> otherwise) {
                LogicalPlan out = rewrite.apply(node);
                if (out == null) {
                    return otherwise.apply(node);
                }
                @SuppressWarnings("unchecked")
                B1 result = (B1) out;
                return result;
            }
        });
    }

    /** The optimizer rule: one fresh read-plan slot per relation node. */
    public static final class IsolateScans extends Rule<LogicalPlan> {
        private final SparkSession session;

        public IsolateScans(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            return rewriteUp(plan, node -> pushesFilters(node)
                ? isolateOrKeep((DataSourceV2Relation) node, session) : null);
        }
    }

    /**
     * Column pruning, which PySpark 4.3's Python sources lack: a relation of this source
     * read under a {@code Project} (through any {@code Filter}s), as Spark's own column
     * pruning leaves every scan that does not need all columns, is replaced by a copy
     * that declares only the columns the project list and filters reference, over a new
     * {@code PythonDataSourceV2} (the read plan Spark caches per provider is built for
     * one schema). The Python reader reads exactly the columns of the schema it is given.
     * A relation met anywhere else (under a join, a union, at the root) keeps every
     * column: Spark reads all of them there anyway.
     */
    public static final class PruneColumns extends Rule<LogicalPlan> {
        private final SparkSession session;

        public PruneColumns(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            Map<LogicalPlan, Set<Long>> needs = new IdentityHashMap<>();
            visit(plan, null, needs);
            if (needs.isEmpty()) {
                return plan;
            }
            return rewriteUp(plan, node -> {
                Set<Long> need = needs.get(node);
                return need == null ? null : pruneOrKeep((DataSourceV2Relation) node, need, session);
            });
        }
    }

    /** The sentinel for "every column" in the needs map (a relation read whole). */
    static final Set<Long> ALL = new HashSet<>();

    /**
     * Record what each relation of this source must read: {@code need} is the set of
     * expression ids its parent reads from it, or null when the parent may read all.
     */
    static void visit(LogicalPlan node, Set<Long> need, Map<LogicalPlan, Set<Long>> needs) {
        if (isOurs(node)) {
            Set<Long> known = needs.get(node);
            if (need == null || known == ALL) {
                needs.put(node, ALL);
            } else if (known == null) {
                needs.put(node, new HashSet<>(need));
            } else {
                known.addAll(need);
            }
            return;
        }
        if (node instanceof Project) {
            visit(((Project) node).child(), ids(node), needs);
            return;
        }
        if (node instanceof Filter && need != null) {
            Set<Long> more = new HashSet<>(need);
            more.addAll(ids(node));
            visit(((Filter) node).child(), more, needs);
            return;
        }
        for (LogicalPlan child : CollectionConverters.asJava(node.children())) {
            visit(child, null, needs);
        }
    }

    /** The expression ids of the attributes {@code node}'s own expressions reference. */
    static Set<Long> ids(LogicalPlan node) {
        Set<Long> out = new HashSet<>();
        for (Attribute a : CollectionConverters.asJava(node.references().toSeq())) {
            out.add(a.exprId().id());
        }
        return out;
    }

    /** A relation of this source (any options). */
    static boolean isOurs(LogicalPlan node) {
        if (!(node instanceof DataSourceV2Relation)) {
            return false;
        }
        Table table = ((DataSourceV2Relation) node).table();
        return table instanceof PythonTable && SOURCE.equals(table.name());
    }

    /** {@code prune(relation, need)}, or the relation unchanged if this Spark's internals differ. */
    static LogicalPlan pruneOrKeep(DataSourceV2Relation relation, Set<Long> need, SparkSession session) {
        if (need == ALL) {
            return relation;
        }
        try {
            return prune(relation, need, session);
        } catch (RuntimeException | LinkageError e) {
            LOG.warn("lance_partitioned: cannot prune this scan's columns; it reads them all", e);
            return relation;
        }
    }

    /**
     * {@code relation} declaring only the needed columns (at least one), over a fresh
     * provider whose scans report their size ({@link SizedTable}). A relation that needs
     * every column gets the fresh provider too, for the size.
     */
    static LogicalPlan prune(DataSourceV2Relation relation, Set<Long> need, SparkSession session) {
        List<AttributeReference> output = CollectionConverters.asJava(relation.output());
        List<AttributeReference> kept = new ArrayList<>();
        for (AttributeReference a : output) {
            if (need.contains(a.exprId().id())) {
                kept.add(a);
            }
        }
        if (kept.isEmpty()) {
            kept.add(output.get(0)); // a count still needs rows: the first column
        }
        PythonTable table = (PythonTable) relation.table();
        StructType full = table.schema();
        List<StructField> fields = new ArrayList<>();
        for (AttributeReference a : kept) {
            fields.add(full.apply(a.name()));
        }
        return marked(
            relation,
            new StructType(fields.toArray(new StructField[0])),
            CollectionConverters.asScala(kept).toSeq(),
            session);
    }

    /**
     * {@code relation} declaring {@code schema} ({@code output} its attributes) over a
     * fresh provider (an empty read-plan slot; its scans report a size), and marked with
     * the option the Python reader checks before it accepts pushed filters.
     */
    static DataSourceV2Relation marked(
            DataSourceV2Relation relation,
            StructType schema,
            scala.collection.immutable.Seq<AttributeReference> output,
            SparkSession session) {
        PythonTable table = (PythonTable) relation.table();
        PythonTable fresh = SizedTable.of(table, schema, relation.options(), session);
        Map<String, String> options = new HashMap<>(relation.options().asCaseSensitiveMap());
        options.put(MARKER, "true");
        return relation.copy(
            fresh,
            output,
            relation.catalog(),
            relation.identifier(),
            new CaseInsensitiveStringMap(options),
            relation.timeTravelSpec());
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
        // on unless the relation says "false": the option's default (spark/options.py)
        String value = relation.options().get(PUSH_FILTERS);
        return value == null || !"false".equalsIgnoreCase(value.trim());
    }

    /**
     * {@code isolate(relation)}, or {@code relation} unchanged if this Spark's internals
     * differ: unmarked, its reader then leaves every filter to Spark (exact, unpruned).
     */
    static LogicalPlan isolateOrKeep(DataSourceV2Relation relation, SparkSession session) {
        try {
            return isolate(relation, session);
        } catch (RuntimeException | LinkageError e) {
            LOG.warn("lance_partitioned: cannot give this scan its own read plan; "
                + "Spark applies its filters itself", e);
            return relation;
        }
    }

    /** {@code relation} over a new PythonDataSourceV2 (an empty read-plan slot), marked. */
    static DataSourceV2Relation isolate(DataSourceV2Relation relation, SparkSession session) {
        return marked(relation, relation.table().schema(), relation.output(), session);
    }

    /**
     * A table of this source over a fresh provider whose scans report a size, which
     * PySpark 4.3's {@code PythonScan} does not: without one Spark takes every scan for
     * {@code spark.sql.defaultSizeInBytes} (unbounded) and plans each join as a shuffle,
     * where on Parquet it broadcasts the small side. The size is Spark's own estimate for
     * files: the bytes under the namespace root, scaled by the declared columns' share
     * of the row ({@code DataType.defaultSize}), as {@code FileScan} does. Every file
     * counts, older versions' too, so it errs high (fewer broadcasts, never a wrong
     * answer: a size only chooses the plan). Unknown (Spark's default, as without this)
     * when the root cannot be listed with the session's Hadoop configuration (object
     * stores Hadoop is not set up for) or holds more than {@link #MAX_LISTED} entries.
     */
    public static final class SizedTable extends BoundTable {
        static final int MAX_LISTED = 20000;
        private final OptionalLong bytes; // under the root
        private final int rowWidth; // defaultSize of every column of the namespace
        private final OptionalLong size;

        SizedTable(PythonDataSourceV2 provider, String name, StructType schema, OptionalLong bytes,
                int rowWidth, BoundTable bound) {
            super(provider, name, schema, bound == null ? new Transform[0] : bound.partitioning(),
                bound == null ? new HashMap<>() : bound.bound);
            this.bytes = bytes;
            this.rowWidth = Math.max(1, rowWidth);
            OptionalLong scaled = OptionalLong.empty();
            if (bytes.isPresent()) {
                double share = Math.min(1.0, (double) schema.defaultSize() / this.rowWidth);
                scaled = OptionalLong.of(Math.max(1L, (long) (bytes.getAsLong() * share)));
            }
            this.size = scaled;
        }

        /**
         * {@code table} declaring {@code schema}, over a fresh provider, sized (the root is
         * listed once: a table this rule made already knows its bytes).
         */
        static SizedTable of(PythonTable table, StructType schema,
                CaseInsensitiveStringMap options, SparkSession session) {
            PythonDataSourceV2 provider = new PythonDataSourceV2();
            provider.setShortName(table.name());
            BoundTable bound = table instanceof BoundTable ? (BoundTable) table : null;
            if (table instanceof SizedTable) {
                SizedTable sized = (SizedTable) table;
                return new SizedTable(provider, table.name(), schema, sized.bytes, sized.rowWidth, bound);
            }
            CaseInsensitiveStringMap all = bound == null ? options : bound.withBound(options);
            return new SizedTable(provider, table.name(), schema, rootBytes(all, session),
                table.schema().defaultSize(), bound);
        }

        @Override
        OptionalLong size() {
            return size;
        }
    }

    /** The bytes of every file under the relation's root, or empty (see {@link SizedTable}). */
    static OptionalLong rootBytes(CaseInsensitiveStringMap options, SparkSession session) {
        String root = options.get("root");
        if (root == null || root.isEmpty()) {
            root = options.get("path");
        }
        if (root == null || root.isEmpty()) {
            return OptionalLong.empty();
        }
        try {
            Configuration conf = session.sessionState().newHadoopConf();
            Path top = new Path(root);
            FileSystem fs = top.getFileSystem(conf);
            Deque<Path> todo = new ArrayDeque<>();
            todo.push(top);
            long bytes = 0;
            int listed = 0;
            while (!todo.isEmpty()) {
                for (FileStatus status : fs.listStatus(todo.pop())) {
                    if (++listed > SizedTable.MAX_LISTED) {
                        return OptionalLong.empty();
                    }
                    if (status.isDirectory()) {
                        todo.push(status.getPath());
                    } else {
                        bytes += status.getLen();
                    }
                }
            }
            return OptionalLong.of(bytes);
        } catch (Exception | LinkageError e) {
            LOG.debug("lance_partitioned: no size for {}: {}", root, e.toString());
            return OptionalLong.empty();
        }
    }

    // ---- catalog tables, partitionBy, overwrite modes (the provider jvm/DefaultSource.java) ----

    /** Write option naming the partitioning Spark gave the table ({@code partitionBy}, the catalog's). */
    static final String PARTITION_BY = "__partitionBy";
    /** Catalog property holding PARTITIONED BY transforms the session catalog cannot store. */
    static final String PARTITIONING_PROPERTY = "lance_partitioned.partitioning";
    static final String OVERWRITE_MODE = "partitionOverwriteMode";
    static final String OPTION_PREFIX = "option.";
    /** Option telling Python the relation is a catalog table's (it reads empty before its first write). */
    static final String CATALOG_TABLE = "__catalogTable";
    static final String CONDITIONAL_OVERWRITE =
        "lance_partitioned cannot overwrite only the rows matching this condition (INSERT OVERWRITE "
        + "... PARTITION (...), writeTo(...).overwrite(...)); it can when the condition is "
        + "equalities of identity partition columns to values (c = 9 AND s = 'a'), or replace "
        + "the partitions the new rows touch with SET spark.sql.sources.partitionOverwriteMode="
        + "dynamic and INSERT OVERWRITE without PARTITION (or the option partitionOverwriteMode "
        + "'dynamic')";
    /** Write option: the SQL condition (equalities of identity partition columns) whose rows the write replaces. */
    static final String OVERWRITE_WHERE = "__overwriteWhere";

    /** A {@link BoundTable} of {@code provider}: what {@code DefaultSource.getTable} returns. */
    public static Table bind(PythonDataSourceV2 provider, String name, StructType schema,
            Transform[] partitioning, Map<String, String> properties) {
        for (Transform t : partitioning) {
            String kind = t.name();
            if (!"identity".equals(kind) && !"bucket".equals(kind)) {
                throw new IllegalArgumentException(
                    "lance_partitioned: partitioning " + term(t) + " cannot be given here (Spark's "
                    + "session catalog stores only columns and bucket(n, col)); give the partition "
                    + "spec as an option instead: OPTIONS (spec '...') in SQL, .option(\"spec\", "
                    + "\"...\") in a DataFrame write (docs/SPARK.md, \"SQL statements\")");
            }
        }
        return new BoundTable(provider, name, schema, partitioning, properties);
    }

    /** Spark's partition transform as the text Python maps to a spec term: {@code c}, {@code bucket(16, id)}. */
    static String term(Transform t) {
        List<String> args = new ArrayList<>();
        for (Expression e : t.arguments()) {
            if (e instanceof NamedReference) {
                args.add(String.join(".", ((NamedReference) e).fieldNames()));
            } else if (e instanceof Literal) {
                args.add(String.valueOf(((Literal<?>) e).value()));
            } else {
                args.add(e.describe());
            }
        }
        if ("identity".equals(t.name()) && args.size() == 1) {
            return args.get(0);
        }
        return t.name() + "(" + String.join(", ", args) + ")";
    }

    /**
     * PySpark's {@code PythonTable} that keeps what {@code getTable} was given: the
     * partitioning (reported to Spark, and handed to Python as the write option
     * {@code __partitionBy}) and the properties, the options of a {@code load()} or a
     * catalog table's (its {@code LOCATION} as {@code path}, its {@code OPTIONS} as
     * {@code option.<key>}), merged under the options of every scan and write. Its writes
     * also support dynamic partition overwrite ({@code partitionOverwriteMode 'dynamic'}).
     */
    public static class BoundTable extends PythonTable implements TruncatableTable {
        final PythonDataSourceV2 provider;
        final String shortName;
        private final Transform[] partitioning;
        final Map<String, String> bound;

        BoundTable(PythonDataSourceV2 provider, String name, StructType schema,
                Transform[] partitioning, Map<String, String> properties) {
            super(provider, name, schema);
            this.provider = provider;
            this.shortName = name;
            this.partitioning = partitioning.clone();
            this.bound = sourceOptions(properties);
        }

        @Override
        public Transform[] partitioning() {
            return partitioning.clone();
        }

        @Override
        public Set<TableCapability> capabilities() {
            Set<TableCapability> out = new HashSet<>(super.capabilities());
            out.add(TableCapability.OVERWRITE_DYNAMIC);
            out.add(TableCapability.OVERWRITE_BY_FILTER); // refused with our own message
            return out;
        }

        /** The table's options overlaid by {@code given} (a scan's or a write's). */
        CaseInsensitiveStringMap withBound(CaseInsensitiveStringMap given) {
            Map<String, String> all = new HashMap<>();
            for (Map.Entry<String, String> e : bound.entrySet()) {
                if (!given.containsKey(e.getKey())) {
                    all.put(e.getKey(), e.getValue());
                }
            }
            all.putAll(given.asCaseSensitiveMap());
            return new CaseInsensitiveStringMap(all);
        }

        /** PySpark's scan builder, its scans reporting {@link #size} and read as columns. */
        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            CaseInsensitiveStringMap all = withBound(options);
            return new SizedScanBuilder(
                (SupportsPushDownFilters) super.newScanBuilder(all), size(), all);
        }

        /** The bytes Spark plans this table's scans with: unknown (Spark's default). */
        OptionalLong size() {
            return OptionalLong.empty();
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return new BoundWriteBuilder(this, info);
        }

        /** {@code TRUNCATE TABLE}: an overwrite with no rows, through this source. */
        @Override
        public boolean truncateTable() {
            SparkSession session = SparkSession.active();
            Map<String, String> options = new HashMap<>(bound);
            options.remove(PARTITION_BY);
            session.createDataFrame(new ArrayList<Row>(), schema()).write().format(shortName)
                .options(options).mode("overwrite").save();
            return true;
        }
    }

    /**
     * The options Python gets from a table's properties: a catalog table's {@code OPTIONS}
     * are stored as {@code option.<key>} (and win), its location as {@code path}; a catalog
     * table is marked {@link #CATALOG_TABLE}.
     */
    public static Map<String, String> sourceOptions(Map<String, String> properties) {
        Map<String, String> out = new HashMap<>();
        if (properties.containsKey(TableCatalog.PROP_PROVIDER)) {
            // only the session catalog's tables carry their provider among their properties
            out.put(CATALOG_TABLE, "true");
        }
        for (Map.Entry<String, String> e : properties.entrySet()) {
            if (!e.getKey().startsWith(OPTION_PREFIX)) {
                out.put(e.getKey(), "path".equalsIgnoreCase(e.getKey()) ? localPath(e.getValue()) : e.getValue());
            }
        }
        for (Map.Entry<String, String> e : properties.entrySet()) {
            if (e.getKey().startsWith(OPTION_PREFIX)) {
                out.put(e.getKey().substring(OPTION_PREFIX.length()), e.getValue());
            }
        }
        return out;
    }

    /**
     * A catalog table's location as the root Lance opens: Spark stores a local one as
     * the URI {@code file:/dir} (percent-encoded), which is a relative path to Lance.
     */
    static String localPath(String location) {
        if (location == null || !location.startsWith("file:")) {
            return location;
        }
        try {
            return new java.io.File(new java.net.URI(location)).getPath();
        } catch (Exception e) {
            return location;
        }
    }

    /** PySpark's write builder over the bound options, plus dynamic overwrite. */
    static final class BoundWriteBuilder implements SupportsDynamicOverwrite, SupportsOverwriteV2 {
        private final BoundTable table;
        private final LogicalWriteInfo info;
        private boolean truncate;
        private boolean dynamic;
        private String where; // OVERWRITE_WHERE, or null

        BoundWriteBuilder(BoundTable table, LogicalWriteInfo info) {
            this.table = table;
            this.info = info;
        }

        @Override
        public WriteBuilder truncate() {
            truncate = true;
            return this;
        }

        @Override
        public WriteBuilder overwriteDynamicPartitions() {
            truncate = true;
            dynamic = true;
            return this;
        }

        /** True: {@link #overwrite} refuses what it cannot do with a message of our own. */
        @Override
        public boolean canOverwrite(Predicate[] predicates) {
            return true;
        }

        /**
         * A static {@code INSERT OVERWRITE t PARTITION (c = 9)} (Spark gives {@code c = 9}),
         * or {@code writeTo(t).overwrite(cond)}: Python replaces the rows matching the
         * condition, given as SQL, when it is equalities of identity partition columns.
         */
        @Override
        public WriteBuilder overwrite(Predicate[] predicates) {
            where = overwriteWhere(predicates, table);
            truncate = true;
            return this;
        }

        @Override
        public Write build() {
            Map<String, String> options = new HashMap<>(table.withBound(info.options()).asCaseSensitiveMap());
            List<String> terms = new ArrayList<>();
            for (Transform t : table.partitioning()) {
                terms.add(term(t));
            }
            String stored = options.remove(PARTITIONING_PROPERTY);
            if (stored != null && terms.isEmpty()) {
                terms.add(stored);
            }
            if (!terms.isEmpty()) {
                options.put(PARTITION_BY, String.join("; ", terms));
            }
            if (dynamic) {
                options.put(OVERWRITE_MODE, "dynamic");
            }
            if (where != null) {
                options.put(OVERWRITE_WHERE, where);
            }
            WriteBuilder inner = new PythonWriteBuilder(table.provider, table.shortName,
                new WriteInfo(info, new CaseInsensitiveStringMap(options)));
            if (truncate) {
                inner = ((SupportsTruncate) inner).truncate();
            }
            return inner.build();
        }
    }

    /**
     * {@code predicates} (ANDed) as SQL, each {@code column = value} on an identity partition
     * column of {@code table} (a number, a string, a boolean, a date); anything else is refused.
     */
    static String overwriteWhere(Predicate[] predicates, BoundTable table) {
        Set<String> identity = new HashSet<>();
        for (Transform t : table.partitioning()) {
            if ("identity".equals(t.name())) {
                identity.add(term(t).toLowerCase(java.util.Locale.ROOT));
            }
        }
        List<String> terms = new ArrayList<>();
        for (Predicate p : predicates) {
            Expression[] args = p.children();
            boolean equality = "=".equals(p.name()) || "<=>".equals(p.name());
            if (!equality || args.length != 2 || !(args[0] instanceof NamedReference)
                    || !(args[1] instanceof Literal)) {
                throw new IllegalArgumentException(CONDITIONAL_OVERWRITE);
            }
            String[] names = ((NamedReference) args[0]).fieldNames();
            String value = sqlLiteral((Literal<?>) args[1]);
            if (names.length != 1 || !names[0].matches("[A-Za-z_][A-Za-z0-9_]*")
                    || !identity.contains(names[0].toLowerCase(java.util.Locale.ROOT)) || value == null) {
                throw new IllegalArgumentException(CONDITIONAL_OVERWRITE);
            }
            terms.add(names[0] + " = " + value);
        }
        if (terms.isEmpty()) {
            throw new IllegalArgumentException(CONDITIONAL_OVERWRITE);
        }
        return String.join(" AND ", terms);
    }

    /** {@code literal} as SQL (Spark's internal value of its type), or null for other types and null. */
    static String sqlLiteral(Literal<?> literal) {
        Object value = literal.value();
        org.apache.spark.sql.types.DataType type = literal.dataType();
        if (value == null) {
            return null;
        } else if (type instanceof org.apache.spark.sql.types.IntegralType
                || type instanceof org.apache.spark.sql.types.BooleanType) {
            return String.valueOf(value);
        } else if (type instanceof org.apache.spark.sql.types.StringType) {
            return "'" + value.toString().replace("'", "''") + "'";
        } else if (type instanceof org.apache.spark.sql.types.DateType) {
            return "DATE '" + java.time.LocalDate.ofEpochDay(((Number) value).longValue()) + "'";
        }
        return null;
    }

    /** {@code info} with other options. */
    static final class WriteInfo implements LogicalWriteInfo {
        private final LogicalWriteInfo info;
        private final CaseInsensitiveStringMap options;

        WriteInfo(LogicalWriteInfo info, CaseInsensitiveStringMap options) {
            this.info = info;
            this.options = options;
        }

        @Override
        public CaseInsensitiveStringMap options() {
            return options;
        }

        @Override
        public String queryId() {
            return info.queryId();
        }

        @Override
        public StructType schema() {
            return info.schema();
        }
    }

    /**
     * {@code CREATE TABLE ... PARTITIONED BY (months(ts), ...)} (and CTAS, REPLACE): Spark's
     * session catalog stores only columns and {@code bucket}, and fails on any other
     * transform. This resolution rule moves the partitioning of a {@code lance_partitioned}
     * table that has such a transform into the table property {@link #PARTITIONING_PROPERTY};
     * {@link BoundWriteBuilder} hands it to Python as {@code __partitionBy}, which maps it to
     * the namespace's spec when the first write creates the namespace.
     */
    public static final class PartitioningAsProperty extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            if (!(plan instanceof V2CreateTablePlan)) {
                return plan;
            }
            List<Transform> transforms = CollectionConverters.asJava(((V2CreateTablePlan) plan).partitioning());
            TableSpecBase spec = tableSpec(plan);
            if (spec == null || transforms.isEmpty() || !isSource(spec.provider())) {
                return plan;
            }
            boolean stored = true;
            List<String> terms = new ArrayList<>();
            for (Transform t : transforms) {
                stored &= "identity".equals(t.name()) || "bucket".equals(t.name());
                terms.add(term(t));
            }
            if (stored) {
                return plan; // the catalog keeps it, and BoundTable reports it
            }
            return withoutPartitioning(plan, withProperty(spec, String.join("; ", terms)));
        }
    }

    static boolean isSource(scala.Option<String> provider) {
        return provider.isDefined() && SOURCE.equalsIgnoreCase(provider.get());
    }

    static TableSpecBase tableSpec(LogicalPlan plan) {
        if (plan instanceof CreateTable) {
            return ((CreateTable) plan).tableSpec();
        } else if (plan instanceof CreateTableAsSelect) {
            return ((CreateTableAsSelect) plan).tableSpec();
        } else if (plan instanceof ReplaceTable) {
            return ((ReplaceTable) plan).tableSpec();
        } else if (plan instanceof ReplaceTableAsSelect) {
            return ((ReplaceTableAsSelect) plan).tableSpec();
        }
        return null;
    }

    static TableSpecBase withProperty(TableSpecBase spec, String partitioning) {
        scala.collection.immutable.Map<String, String> props =
            spec.properties().updated(PARTITIONING_PROPERTY, partitioning);
        if (spec instanceof UnresolvedTableSpec) {
            UnresolvedTableSpec s = (UnresolvedTableSpec) spec;
            return s.copy(props, s.provider(), s.optionExpression(), s.location(), s.comment(),
                s.collation(), s.serde(), s.external(), s.constraints());
        }
        TableSpec s = (TableSpec) spec;
        return s.copy(props, s.provider(), s.options(), s.location(), s.comment(), s.collation(),
            s.serde(), s.external(), s.constraints());
    }

    static LogicalPlan withoutPartitioning(LogicalPlan plan, TableSpecBase spec) {
        scala.collection.immutable.Seq<Transform> none =
            CollectionConverters.asScala(new ArrayList<Transform>()).toSeq();
        if (plan instanceof CreateTable) {
            CreateTable p = (CreateTable) plan;
            return p.copy(p.name(), p.columns(), none, spec, p.ignoreIfExists());
        } else if (plan instanceof CreateTableAsSelect) {
            CreateTableAsSelect p = (CreateTableAsSelect) plan;
            return p.copy(p.name(), none, p.query(), spec, p.writeOptions(), p.ignoreIfExists(),
                p.isAnalyzed());
        } else if (plan instanceof ReplaceTable) {
            ReplaceTable p = (ReplaceTable) plan;
            return p.copy(p.name(), p.columns(), none, spec, p.orCreate());
        }
        ReplaceTableAsSelect p = (ReplaceTableAsSelect) plan;
        return p.copy(p.name(), none, p.query(), spec, p.writeOptions(), p.orCreate(), p.isAnalyzed());
    }

    /**
     * Refuses {@code ALTER TABLE} column changes on a {@code lance_partitioned} catalog
     * table: Spark's session catalog would change only its own copy of the schema, not the
     * namespace's (and fails inside the command).
     */
    static final class RefuseColumnChanges extends AbstractFunction1<LogicalPlan, BoxedUnit> {
        static final String MESSAGE = "lance_partitioned: ALTER TABLE cannot change the columns "
            + "of a lance_partitioned table (Spark's catalog would change only its own copy of "
            + "the schema): evolve the namespace with lance_partitioned (ns.add_column, "
            + "rename_column, drop_column, widen_column), then DROP TABLE and CREATE TABLE ... "
            + "USING lance_partitioned LOCATION '<root>' to read its new schema";

        @Override
        public BoxedUnit apply(LogicalPlan plan) {
            if (plan instanceof AlterTableCommand) {
                AlterTableCommand alter = (AlterTableCommand) plan;
                LogicalPlan table = alter.table();
                if (table instanceof ResolvedTable && ((ResolvedTable) table).table() instanceof BoundTable) {
                    for (TableChange change : CollectionConverters.asJava(alter.changes())) {
                        if (change instanceof TableChange.ColumnChange) {
                            throw new IllegalArgumentException(MESSAGE);
                        }
                    }
                }
            }
            return BoxedUnit.UNIT;
        }
    }

    /**
     * Refuses, at analysis, the statements on a {@code lance_partitioned} catalog table that
     * PySpark 4.3 cannot route to a Python source (row-level writes, partition management),
     * {@code DESCRIBE HISTORY} (which Spark parses as a column of a table named
     * {@code HISTORY}), each with the equivalent call on the table's root, and a REPLACE
     * that would drop the table. Nothing runs, so nothing on disk changes.
     */
    public static final class RefuseStatements extends Rule<LogicalPlan> {
        private final SparkSession session;

        public RefuseStatements(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            plan.foreach(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
                @Override
                public BoxedUnit apply(LogicalPlan node) {
                    String message = refusal(node, session);
                    if (message != null) {
                        throw new IllegalArgumentException(message);
                    }
                    return BoxedUnit.UNIT;
                }
            });
            return plan;
        }
    }

    /** The refusal of {@code node} (see {@link RefuseStatements}), or null. */
    static String refusal(LogicalPlan node, SparkSession session) {
        if (node instanceof DeleteFromTable) {
            return refusal("DELETE FROM", ((DeleteFromTable) node).table(), ".delete(filter)");
        } else if (node instanceof UpdateTable) {
            return refusal("UPDATE", ((UpdateTable) node).table(), ".update({\"col\": \"expr\"}, where)");
        } else if (node instanceof MergeIntoTable) {
            BoundTable table = boundTable(((MergeIntoTable) node).targetTable());
            return table == null ? null : "lance_partitioned: MERGE INTO cannot write a "
                + "lance_partitioned table (PySpark 4.3 has no row-level writes for Python sources): "
                + "upsert a DataFrame with lps.merge(spark, df, '" + rootOf(table) + "', on=[...])";
        } else if (node instanceof ShowPartitions) {
            BoundTable table = boundTable(((ShowPartitions) node).table());
            return table == null ? null : "lance_partitioned: SHOW PARTITIONS cannot list the "
                + "partitions of a lance_partitioned table (Spark's partition management does not "
                + "reach it): use lp.open('" + rootOf(table) + "').partitions()";
        } else if (node instanceof DescribeColumn) {
            return describeHistory((DescribeColumn) node, session);
        } else if (node instanceof ReplaceTable || node instanceof ReplaceTableAsSelect) {
            return replaceRefusal(node);
        }
        return null;
    }

    /**
     * {@code REPLACE TABLE} (and {@code writeTo(t).createOrReplace()} / {@code replace()},
     * {@code mode("overwrite").saveAsTable(t)}) of an existing table, when the old or the new
     * table is lance_partitioned: Spark would drop the table (a managed one's directory with
     * it) and then append to whatever namespace is left at the location. Refused before
     * anything runs; a REPLACE that only creates (no such table yet) goes on.
     */
    static String replaceRefusal(LogicalPlan node) {
        LogicalPlan name = node instanceof ReplaceTable
            ? ((ReplaceTable) node).name() : ((ReplaceTableAsSelect) node).name();
        TableSpecBase spec = tableSpec(node);
        if (!(name instanceof ResolvedIdentifier)
                || !(((ResolvedIdentifier) name).catalog() instanceof TableCatalog)) {
            return null;
        }
        TableCatalog catalog = (TableCatalog) ((ResolvedIdentifier) name).catalog();
        Identifier ident = ((ResolvedIdentifier) name).identifier();
        Table old;
        try {
            old = catalog.loadTable(ident);
        } catch (Exception e) {
            return null; // no such table: the REPLACE creates it
        }
        if (!(old instanceof BoundTable) && (spec == null || !isSource(spec.provider()))) {
            return null;
        }
        return "lance_partitioned: REPLACE TABLE (writeTo(...).createOrReplace() or replace(), "
            + "mode(\"overwrite\").saveAsTable) would drop the table " + ident + " before writing "
            + "(a managed table's namespace with it): replace its rows with INSERT OVERWRITE "
            + ident.name() + " SELECT ... (df.writeTo(\"" + ident.name() + "\").overwritePartitions() "
            + "replaces the partitions the rows touch); for a new schema or partition spec, "
            + "DROP TABLE and CREATE TABLE";
    }

    static String refusal(String statement, LogicalPlan target, String call) {
        BoundTable table = boundTable(target);
        return table == null ? null : "lance_partitioned: " + statement + " cannot write a "
            + "lance_partitioned table (PySpark 4.3 has no row-level writes for Python sources): "
            + "use lp.open('" + rootOf(table) + "')" + call;
    }

    /**
     * {@code DESCRIBE HISTORY t}: Spark parses it as {@code DESCRIBE HISTORY <column t>}; when
     * no table {@code HISTORY} resolved and {@code t} is a lance_partitioned table, name its
     * history call instead of Spark's "table HISTORY not found".
     */
    static String describeHistory(DescribeColumn node, SparkSession session) {
        if (!(node.relation() instanceof UnresolvedTableOrView)
                || !(node.column() instanceof UnresolvedAttribute)) {
            return null;
        }
        List<String> name = CollectionConverters.asJava(
            ((UnresolvedTableOrView) node.relation()).multipartIdentifier());
        if (name.size() != 1 || !"history".equalsIgnoreCase(name.get(0))) {
            return null;
        }
        BoundTable table = catalogTable(((UnresolvedAttribute) node.column()).nameParts(), session);
        return table == null ? null : "lance_partitioned: Spark has no DESCRIBE HISTORY; read the "
            + "history of a lance_partitioned table with lp.open('" + rootOf(table) + "').history()";
    }

    /** The BoundTable a resolved relation or table reference reads, or null. */
    static BoundTable boundTable(LogicalPlan plan) {
        // a temporary view's relation sits under its View node
        while (plan instanceof SubqueryAlias || plan instanceof View) {
            plan = plan instanceof View ? ((View) plan).child() : ((SubqueryAlias) plan).child();
        }
        Table table = null;
        if (plan instanceof DataSourceV2Relation) {
            table = ((DataSourceV2Relation) plan).table();
        } else if (plan instanceof ResolvedTable) {
            table = ((ResolvedTable) plan).table();
        }
        return table instanceof BoundTable ? (BoundTable) table : null;
    }

    /** The namespace root of {@code table}, as the Python source picks it ({@code root}, else {@code path}). */
    static String rootOf(BoundTable table) {
        CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(table.bound);
        String root = options.get("root");
        return root == null || root.isEmpty() ? options.get("path") : root;
    }

    /**
     * The lance_partitioned table that {@code nameParts} names: a temporary view of one
     * ({@code v}), or a table of Spark's session catalog ({@code t}, {@code db.t},
     * {@code spark_catalog.db.t}); else null (a global temporary view, another catalog,
     * another provider, no such table).
     */
    static BoundTable catalogTable(scala.collection.immutable.Seq<String> nameParts, SparkSession session) {
        CatalogManager manager = session.sessionState().catalogManager();
        List<String> parts = new ArrayList<>(CollectionConverters.asJava(nameParts));
        if (session.sessionState().catalog().isTempView(nameParts)) {
            scala.Option<View> view = parts.size() == 1
                ? session.sessionState().catalog().getTempView(parts.get(0)) : scala.Option.empty();
            return view.isDefined() ? boundTable(view.get()) : null;
        }
        String sessionCatalog = manager.v2SessionCatalog().name();
        if (parts.size() == 3 && sessionCatalog.equalsIgnoreCase(parts.get(0))) {
            parts.remove(0);
        } else if (parts.size() == 1 && sessionCatalog.equalsIgnoreCase(manager.currentCatalog().name())) {
            parts.addAll(0, java.util.Arrays.asList(manager.currentNamespace()));
        }
        if (parts.size() != 2) {
            return null;
        }
        try {
            Table table = ((TableCatalog) manager.v2SessionCatalog())
                .loadTable(Identifier.of(new String[] {parts.get(0)}, parts.get(1)));
            return table instanceof BoundTable ? (BoundTable) table : null;
        } catch (Exception e) {
            return null; // not found, or not loadable: Spark reports it as it would
        }
    }

    /**
     * {@code SELECT ... FROM t VERSION AS OF n} / {@code TIMESTAMP AS OF ts} on a
     * lance_partitioned catalog table, which Spark's session catalog refuses: this hints-batch
     * rule (it runs before ResolveRelations) resolves it to the table's relation with the read
     * option {@code version} (a number or a tag), or {@code timestampAsOf} (the instant, ISO 8601
     * in UTC; Python reads the newest version committed by then). The relation is built here,
     * not left to ResolveRelations, whose per-query relation cache would give one query's
     * {@code t} and {@code t VERSION AS OF n} the same relation.
     */
    public static final class TimeTravel extends Rule<LogicalPlan> {
        private final SparkSession session;

        public TimeTravel(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            return rewriteUp(plan, node -> node instanceof RelationTimeTravel
                && ((RelationTimeTravel) node).relation() instanceof UnresolvedRelation
                ? travel((RelationTimeTravel) node, session) : null);
        }
    }

    /** Option of the Python source: read the newest version committed at or before an instant. */
    static final String TIMESTAMP_AS_OF = "timestampAsOf";

    /** {@code node} as a relation of its lance_partitioned table at the version asked, or null. */
    static LogicalPlan travel(RelationTimeTravel node, SparkSession session) {
        UnresolvedRelation relation = (UnresolvedRelation) node.relation();
        if (node.timestamp().isDefined() && !node.timestamp().get().resolved()) {
            return null; // a timestamp expression Spark has yet to resolve: a later pass
        }
        BoundTable table = catalogTable(relation.multipartIdentifier(), session);
        if (table == null) {
            return null;
        }
        scala.Option<TimeTravelSpec> spec = TimeTravelSpec$.MODULE$.create(
            node.timestamp(), node.version(), session.sessionState().conf().sessionLocalTimeZone());
        Map<String, String> options = new HashMap<>(relation.options().asCaseSensitiveMap());
        if (spec.get() instanceof AsOfVersion) {
            options.put("version", ((AsOfVersion) spec.get()).version());
        } else {
            long micros = ((AsOfTimestamp) spec.get()).timestamp();
            java.time.Instant instant = java.time.Instant.EPOCH.plus(micros, java.time.temporal.ChronoUnit.MICROS);
            options.put(TIMESTAMP_AS_OF, instant.atOffset(java.time.ZoneOffset.UTC).toString());
        }
        CatalogManager manager = session.sessionState().catalogManager();
        List<String> parts = CollectionConverters.asJava(relation.multipartIdentifier());
        Identifier ident = Identifier.of(
            parts.size() == 1 ? manager.currentNamespace() : new String[] {parts.get(parts.size() - 2)},
            parts.get(parts.size() - 1));
        DataSourceV2Relation resolved = DataSourceV2Relation$.MODULE$.create(table,
            scala.Option.apply(manager.v2SessionCatalog()), scala.Option.apply(ident),
            new CaseInsensitiveStringMap(options), scala.Option.empty());
        List<String> alias = new ArrayList<>();
        alias.add(manager.v2SessionCatalog().name());
        alias.addAll(java.util.Arrays.asList(ident.namespace()));
        alias.add(ident.name());
        return SubqueryAlias$.MODULE$.apply(CollectionConverters.asScala(alias).toSeq(), resolved);
    }

    /** PySpark's scan builder, building scans that report {@code size}. */
    static final class SizedScanBuilder implements SupportsPushDownFilters {
        private final SupportsPushDownFilters inner;
        private final OptionalLong size;
        private final CaseInsensitiveStringMap options;

        SizedScanBuilder(SupportsPushDownFilters inner, OptionalLong size, CaseInsensitiveStringMap options) {
            this.inner = inner;
            this.size = size;
            this.options = options;
        }

        @Override
        public Scan build() {
            Scan scan = inner.build();
            return new SizedScan(scan, size, readKey(options, scan, inner.pushedFilters()));
        }

        @Override
        public org.apache.spark.sql.sources.Filter[] pushFilters(
                org.apache.spark.sql.sources.Filter[] filters) {
            return inner.pushFilters(filters);
        }

        @Override
        public org.apache.spark.sql.sources.Filter[] pushedFilters() {
            return inner.pushedFilters();
        }
    }

    /** Spark conf: {@code false} turns off exchange reuse between equal scans ({@link #readKey}). */
    static final String REUSE_CONF = "spark.lance_partitioned.reuseExchanges";

    /**
     * What an isolated scan reads, as a value: its options (the root, a version or
     * {@code filter}, ...), the columns it reads and the filters its reader accepted; null
     * for a scan the extension did not isolate, or with {@link #REUSE_CONF} {@code false}.
     *
     * <p>Spark reuses an exchange (a shuffle or broadcast) for a second scan only when the
     * scans' batches are equal, and PySpark's batches are equal only to themselves, so a
     * query that reads a relation twice the same way (TPC-H Q18's two lineitem scans, Q11's
     * repeated join) shuffled it twice where Parquet shuffles once. Two scans with one key
     * read the same rows: the reader's plan is made from exactly these (each scan pins the
     * newest {@code __manifest} version when it is planned, so sharing one scan's output
     * reads one snapshot, which a query should anyway).
     */
    static List<Object> readKey(CaseInsensitiveStringMap options, Scan scan,
            org.apache.spark.sql.sources.Filter[] pushed) {
        if (!"true".equals(options.get(MARKER))
                || "false".equalsIgnoreCase(SparkSession.active().conf().get(REUSE_CONF, "true").trim())) {
            return null;
        }
        return List.of(
            new HashMap<>(options.asCaseSensitiveMap()), scan.readSchema(), java.util.Arrays.asList(pushed));
    }

    /** {@code inner} with equality by {@code key}: Spark's exchange reuse compares batches. */
    static final class KeyedBatch implements Batch {
        private final Batch inner;
        private final List<Object> key;

        KeyedBatch(Batch inner, List<Object> key) {
            this.inner = inner;
            this.key = key;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            return inner.planInputPartitions();
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return inner.createReaderFactory();
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof KeyedBatch && key.equals(((KeyedBatch) other).key);
        }

        @Override
        public int hashCode() {
            return key.hashCode();
        }
    }

    /** PySpark's scan plus its size, its batches read as columns ({@link ColumnarHandoff}). */
    static final class SizedScan implements SupportsReportStatistics, SupportsMetadata {
        private final Scan inner;
        private final OptionalLong size;
        private final List<Object> key;

        SizedScan(Scan inner, OptionalLong size, List<Object> key) {
            this.inner = inner;
            this.size = size;
            this.key = key;
        }

        @Override
        public Statistics estimateStatistics() {
            return new Statistics() {
                @Override
                public OptionalLong sizeInBytes() {
                    return size;
                }

                @Override
                public OptionalLong numRows() {
                    return OptionalLong.empty();
                }
            };
        }

        @Override
        public StructType readSchema() {
            return inner.readSchema();
        }

        @Override
        public String description() {
            return inner.description();
        }

        @Override
        public Batch toBatch() {
            Batch batch = ColumnarHandoff.wrap(inner.toBatch(), ColumnarHandoff.enabled(SparkSession.active()));
            return key == null ? batch : new KeyedBatch(batch, key);
        }

        @Override
        public org.apache.spark.sql.connector.read.streaming.MicroBatchStream toMicroBatchStream(
                String checkpointLocation) {
            return inner.toMicroBatchStream(checkpointLocation);
        }

        @Override
        public org.apache.spark.sql.connector.read.streaming.ContinuousStream toContinuousStream(
                String checkpointLocation) {
            return inner.toContinuousStream(checkpointLocation);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return inner.supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return inner.reportDriverMetrics();
        }

        @Override
        public Scan.ColumnarSupportMode columnarSupportMode() {
            // PySpark's scan says UNSUPPORTED; whether a batch is read as columns is
            // then the reader factory's to say (ColumnarHandoff.Factory)
            return Scan.ColumnarSupportMode.PARTITION_DEFINED;
        }

        @Override
        public scala.collection.immutable.Map<String, String> getMetaData() {
            if (inner instanceof SupportsMetadata) {
                return ((SupportsMetadata) inner).getMetaData();
            }
            return scala.collection.immutable.Map$.MODULE$.empty();
        }
    }
}
