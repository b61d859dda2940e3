package lance_partitioned.spark;

import java.lang.reflect.Constructor;
import java.util.HashMap;
import java.util.Map;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.spark.PartitionEvaluator;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.python.PythonCustomMetric$;
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition;
import org.apache.spark.sql.execution.datasources.v2.python.PythonPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.python.ArrowPythonRunner;
import org.apache.spark.sql.execution.python.MapInBatchEvaluatorFactory;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Hands the Arrow batches a {@code lance_partitioned} scan's Python reader yields to
 * Spark as column batches, where PySpark 4.3 turns them into rows.
 *
 * <p>PySpark's reader ({@code PythonPartitionReaderFactory}) runs the Python source
 * through an {@code ArrowPythonRunner} and gets {@code ColumnarBatch}es of Arrow
 * vectors; it then copies every row of every batch into an {@code UnsafeRow}, and
 * reads each decimal through a {@code java.math.BigDecimal}. This factory runs the
 * same runner, with the same Python function and input, and returns the batches
 * themselves ({@code supportColumnarReads}), so Spark's generated code reads the
 * columns in place, as it reads Parquet's vectorized batches. Decimals of precision
 * 18 or less (every TPC-H money column) are read as the 64-bit unscaled value Spark's
 * {@code Decimal} holds anyway ({@link LongDecimals}).
 *
 * <p>The rows are the same: same Python function, same Arrow data, only who copies
 * them changes. The runner is PySpark's own anonymous subclass (its batching input
 * trait cannot be mixed in from Java), found by name; if PySpark changes, the
 * factory falls back to PySpark's row reader ({@link #wrap}). On where the
 * executors can load this jar ({@link #enabled}); {@code
 * spark.lance_partitioned.columnarReads=false} turns it off.
 */
final class ColumnarHandoff {
    static final String CONF = "spark.lance_partitioned.columnarReads";
    private static final String EVALUATOR =
        "org.apache.spark.sql.execution.python.MapInBatchEvaluatorFactory$MapInBatchEvaluator";
    private static final String RUNNER =
        "org.apache.spark.sql.execution.python.MapInBatchEvaluatorFactory$MapInBatchEvaluator$$anon$1";

    private ColumnarHandoff() {
    }

    /**
     * Whether the readers of {@code session}'s scans may be this jar's: the executors
     * must load its classes. {@code true}/{@code false} from {@link #CONF}; unset, when
     * the executors run in the driver's JVM ({@code local} masters) or the jar is listed
     * in {@code spark.jars} or {@code spark.executor.extraClassPath}.
     */
    static boolean enabled(org.apache.spark.sql.SparkSession session) {
        String chosen = session.conf().get(CONF, "auto").trim().toLowerCase(java.util.Locale.ROOT);
        if (chosen.equals("true") || chosen.equals("false")) {
            return chosen.equals("true");
        }
        org.apache.spark.SparkConf conf = session.sparkContext().conf();
        if (conf.get("spark.master", "").startsWith("local")) {
            return true;
        }
        String shipped = conf.get("spark.jars", "") + "," + conf.get("spark.executor.extraClassPath", "");
        return shipped.contains(JAR_NAME);
    }

    /** The jar's file name ({@code lance_partitioned/spark/extension.py}). */
    static final String JAR_NAME = "lance-partitioned-spark-extension.jar";

    /** {@code batch} reading column batches where it can, else {@code batch} unchanged. */
    static Batch wrap(Batch batch, boolean enabled) {
        if (!enabled || runnerConstructor() == null) {
            return batch;
        }
        return new Batch() {
            @Override
            public InputPartition[] planInputPartitions() {
                return batch.planInputPartitions();
            }

            @Override
            public PartitionReaderFactory createReaderFactory() {
                PartitionReaderFactory inner = batch.createReaderFactory();
                if (inner instanceof PythonPartitionReaderFactory) {
                    return new Factory((PythonPartitionReaderFactory) inner);
                }
                return inner;
            }
        };
    }

    /** PySpark's runner class with its batching input, or null when this PySpark has none. */
    static Constructor<?> runnerConstructor() {
        try {
            return Class.forName(RUNNER).getConstructor(
                Class.forName(EVALUATOR), int[][].class);
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }

    /** PySpark's reader factory whose readers return PySpark's batches, not rows. */
    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PythonPartitionReaderFactory inner;

        Factory(PythonPartitionReaderFactory inner) {
            this.inner = inner;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return inner.createReader(partition);
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return partition instanceof PythonInputPartition;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new Reader(inner, (PythonInputPartition) partition);
        }
    }

    /** One input partition's batches, as PySpark's runner returns them. */
    static final class Reader implements PartitionReader<ColumnarBatch> {
        private final UserDefinedPythonDataSource source;
        private final scala.collection.immutable.Map<String, SQLMetric> metrics;
        private final scala.collection.Iterator<?> batches;
        private final int width;
        private ColumnarBatch current;

        Reader(PythonPartitionReaderFactory factory, PythonInputPartition partition) {
            // The same calls PySpark's row reader makes (PythonPartitionReaderFactory and
            // MapInBatchEvaluator.eval in Spark 4.3), minus the copy into rows.
            source = factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$source;
            metrics = PythonCustomMetric$.MODULE$.pythonMetrics();
            MapInBatchEvaluatorFactory evaluators = source.createMapInBatchEvaluatorFactory(
                factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$pickledReadFunc,
                "read_from_data_source",
                UserDefinedPythonDataSource$.MODULE$.readInputSchema(),
                factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$outputSchema,
                metrics,
                factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$jobArtifactUUID,
                factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$sessionUUID);
            width = factory.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$outputSchema.size();
            PartitionEvaluator<InternalRow, InternalRow> evaluator = evaluators.createEvaluator();
            ArrowPythonRunner runner;
            try {
                runner = (ArrowPythonRunner) runnerConstructor().newInstance(evaluator, new int[][] {{0}});
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("lance_partitioned: cannot start PySpark's Arrow runner", e);
            }
            // The runner's input: one row holding a struct of the pickled partition.
            InternalRow pickled = new GenericInternalRow(new Object[] {partition.pickedPartition()});
            InternalRow input = new GenericInternalRow(new Object[] {pickled});
            scala.collection.Iterator<InternalRow> rows = scala.collection.Iterator$.MODULE$.single(input);
            TaskContext context = TaskContext.get();
            batches = runner.compute(
                scala.collection.Iterator$.MODULE$.single(rows), context.partitionId(), context);
        }

        @Override
        public boolean next() {
            if (!batches.hasNext()) {
                return false;
            }
            ColumnarBatch batch = (ColumnarBatch) batches.next();
            // The Python function returns one struct column; its fields are the scan's.
            ArrowColumnVector struct = (ArrowColumnVector) batch.column(0);
            ColumnVector[] columns = new ColumnVector[width];
            for (int i = 0; i < width; i++) {
                columns[i] = LongDecimals.wrap(struct.getChild(i));
            }
            current = new ColumnarBatch(columns, batch.numRows());
            return true;
        }

        @Override
        public ColumnarBatch get() {
            return current;
        }

        @Override
        public void close() {
            // The runner frees its Arrow buffers when the task completes.
        }

        @Override
        public CustomTaskMetric[] currentMetricsValues() {
            Map<String, Object> values = new HashMap<>();
            for (Map.Entry<String, SQLMetric> metric : CollectionConverters.asJava(metrics).entrySet()) {
                values.put(metric.getKey(), metric.getValue().value());
            }
            return source.createPythonTaskMetrics(
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(values)));
        }
    }

    /**
     * An Arrow decimal column of precision 18 or less, read as the unscaled 64-bit value.
     *
     * <p>Arrow stores each decimal as a 16-byte little-endian two's complement integer;
     * when the precision is 18 or less the value fits the low 8 bytes, which is what
     * Spark's {@code Decimal} keeps for such precisions. Spark's own Arrow accessor
     * builds a {@code BigDecimal} per value first. Everything else is the Arrow vector's.
     */
    static final class LongDecimals extends ColumnVector {
        private final ArrowColumnVector arrow;
        private final ArrowBuf data;
        private final int precision;
        private final int scale;

        private LongDecimals(ArrowColumnVector arrow, DecimalVector vector) {
            super(arrow.dataType());
            this.arrow = arrow;
            this.data = vector.getDataBuffer();
            this.precision = vector.getPrecision();
            this.scale = vector.getScale();
        }

        /** {@code column} as long decimals when it is a decimal of precision 18 or less. */
        static ColumnVector wrap(ArrowColumnVector column) {
            DataType type = column.dataType();
            ValueVector vector = column.getValueVector();
            if (type instanceof DecimalType && vector instanceof DecimalVector
                    && ((DecimalVector) vector).getPrecision() <= Decimal.MAX_LONG_DIGITS()) {
                return new LongDecimals(column, (DecimalVector) vector);
            }
            return column;
        }

        @Override
        public Decimal getDecimal(int rowId, int precision, int scale) {
            if (precision != this.precision || scale != this.scale) {
                return arrow.getDecimal(rowId, precision, scale);
            }
            if (arrow.isNullAt(rowId)) {
                return null;
            }
            return Decimal.createUnsafe(data.getLong((long) rowId * DecimalVector.TYPE_WIDTH), precision, scale);
        }

        @Override
        public void close() {
            arrow.close();
        }

        @Override
        public boolean hasNull() {
            return arrow.hasNull();
        }

        @Override
        public int numNulls() {
            return arrow.numNulls();
        }

        @Override
        public boolean isNullAt(int rowId) {
            return arrow.isNullAt(rowId);
        }

        @Override
        public boolean getBoolean(int rowId) {
            return arrow.getBoolean(rowId);
        }

        @Override
        public byte getByte(int rowId) {
            return arrow.getByte(rowId);
        }

        @Override
        public short getShort(int rowId) {
            return arrow.getShort(rowId);
        }

        @Override
        public int getInt(int rowId) {
            return arrow.getInt(rowId);
        }

        @Override
        public long getLong(int rowId) {
            return arrow.getLong(rowId);
        }

        @Override
        public float getFloat(int rowId) {
            return arrow.getFloat(rowId);
        }

        @Override
        public double getDouble(int rowId) {
            return arrow.getDouble(rowId);
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            return arrow.getArray(rowId);
        }

        @Override
        public ColumnarMap getMap(int ordinal) {
            return arrow.getMap(ordinal);
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            return arrow.getUTF8String(rowId);
        }

        @Override
        public byte[] getBinary(int rowId) {
            return arrow.getBinary(rowId);
        }

        @Override
        public ColumnVector getChild(int ordinal) {
            return arrow.getChild(ordinal);
        }
    }
}
