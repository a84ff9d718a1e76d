/*
 * The curve words of clustering (airflow_lake/lake/clustering/keys.py) computed in the JVM, as a Java UDF:
 * the same words, bit for bit, as `CurveKeys.words` computes with numpy in Spark's Python workers, without
 * sending each row's sort columns to Python and back (that round trip cost 0.3-0.45 us a row).
 *
 * Built from this file by `python -m airflow_lake.jvm` (javac against pyspark's jars; never committed) and put on
 * Spark's class path by the job's session, the hook's spark-submit and the Connect server (airflow_lake/jvm).
 *
 * A call is `words(model, c1, ..., cN)`: `model` is a binary literal (`lake/clustering/jvm_words.py` writes it,
 * big-endian) that Spark passes as the same byte[] to every row of a task, so it is decoded once per task (per
 * thread) and kept while the same array comes back. The columns: bigints (DIRECT values; SAMPLE's order-keeping bigints),
 * doubles (SAMPLE floating point) and binaries (SAMPLE strings as their UTF-8 bytes). One class per number of
 * columns (`Of1` .. `Of8`; more columns: the Python workers compute the words): Spark takes a Java UDF's arity
 * from the one UDFn interface it implements.
 */
package airflowlake.jvm;

import java.nio.ByteBuffer;
import java.util.Arrays;

import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.*;

public final class CurveWords {
  static final int MAGIC = 0x4C4B4301; // "LKC" + format 1
  static final int WORD_BITS = 63;
  static final int DIRECT = 0, LONGS = 1, DOUBLES = 2, BYTES = 3;

  /** One sort column: DIRECT keeps the low `bits` bits; the others rank among sorted bounds. */
  static final class Column {
    int kind;
    long[] longBounds;      // LONGS and DOUBLES (doubles as their order-keeping bigints), padded with
                            // Long.MAX_VALUE to a power of two above their number (a branch-free search)
    byte[][] byteBounds;    // BYTES, in unsigned lexicographic order
    long[] spread;          // the coordinate of each rank (bounds + 1 of them)
  }

  final boolean hilbert;
  final int bits;
  final int slotBits;
  final int[] widths;
  final Column[] columns;
  final long[][] cuts;      // increasing keys (one row of words each) where the next file starts
  final long top;           // the largest coordinate (NULL's)
  final long[] spread;      // one word: a byte's bits set `columns` apart (bit j at j * columns), by byte; else null
  final long[] oneWordCuts; // one word: the cuts' words, padded with Long.MAX_VALUE to a power of two; else null

  CurveWords(byte[] encoded) {
    ByteBuffer in = ByteBuffer.wrap(encoded);
    if (in.getInt() != MAGIC) {
      throw new IllegalArgumentException("not a curve model of this airflow-lake version");
    }
    hilbert = in.get() == 1;
    bits = in.get();
    slotBits = in.get();
    widths = new int[in.get()];
    for (int i = 0; i < widths.length; i++) {
      widths[i] = in.get();
    }
    columns = new Column[in.getInt()];
    for (int i = 0; i < columns.length; i++) {
      Column c = new Column();
      c.kind = in.get();
      if (c.kind != DIRECT) {
        int count = in.getInt();
        if (c.kind == BYTES) {
          c.byteBounds = new byte[count][];
          for (int j = 0; j < count; j++) {
            c.byteBounds[j] = new byte[in.getInt()];
            in.get(c.byteBounds[j]);
          }
        } else {
          c.longBounds = new long[Integer.highestOneBit(count) << 1];
          Arrays.fill(c.longBounds, Long.MAX_VALUE);  // never below a value
          for (int j = 0; j < count; j++) {
            c.longBounds[j] = in.getLong();
          }
        }
        c.spread = new long[count + 1];
        for (int j = 0; j <= count; j++) {
          c.spread[j] = in.getLong();
        }
      }
      columns[i] = c;
    }
    cuts = new long[in.getInt()][widths.length];
    for (long[] cut : cuts) {
      for (int j = 0; j < cut.length; j++) {
        cut[j] = in.getLong();
      }
    }
    top = bits == 64 ? -1L : (1L << bits) - 1;
    x = new long[columns.length];
    out = new long[widths.length];
    int total = 0;
    for (int width : widths) {
      total += width;
    }
    bitDim = new int[total];
    bitLevel = new int[total];
    for (int p = 0; p < total; p++) {  // the interleave's p-th bit: level bits-1-p/dims of coordinate p%dims
      bitDim[p] = p % columns.length;
      bitLevel[p] = bits - 1 - p / columns.length;
    }
    if (widths.length == 1) {  // the whole index in one word (total <= 63 bits): spread each coordinate by bytes
      spread = new long[256];
      for (int v = 0; v < 256; v++) {
        for (int j = 0; j < 8; j++) {
          spread[v] |= ((v >>> j) & 1L) << (j * columns.length);
        }
      }
      oneWordCuts = new long[Integer.highestOneBit(Math.max(cuts.length, 1)) << 1];
      Arrays.fill(oneWordCuts, Long.MAX_VALUE);
      for (int j = 0; j < cuts.length; j++) {
        oneWordCuts[j] = cuts[j][0];
      }
    } else {
      spread = null;
      oneWordCuts = null;
    }
  }

  // which coordinate and level each bit of the words takes, in order (a division per bit cost more than the rest)
  private final int[] bitDim;
  private final int[] bitLevel;
  // scratch of one row: a model is decoded per thread (`of`), so only its thread uses them; the `OfN` classes set
  // `x[i]` to each column's coordinate (`set`), then take the words (`words`)
  final long[] x;
  private final long[] out;

  /** The model of `encoded`: decoded once while the same array comes back (a literal is one array per task). */
  private static final class Cached {
    final byte[] encoded;
    final CurveWords model;

    Cached(byte[] encoded, CurveWords model) {
      this.encoded = encoded;
      this.model = model;
    }
  }

  // per thread: a task runs in one thread, and tasks running side by side each hold their own copy of the literal
  private static final ThreadLocal<Cached> LAST = new ThreadLocal<>();

  static CurveWords of(byte[] encoded) {
    Cached cached = LAST.get();
    if (cached == null || cached.encoded != encoded) {
      cached = new Cached(encoded, new CurveWords(encoded));
      LAST.set(cached);
    }
    return cached.model;
  }

  /** `coordinates.sortable_doubles`: -0.0 as 0.0, every NaN as one (the largest), negatives flipped. */
  static long sortableDouble(double d) {
    long b = d == 0.0 ? 0L : Double.doubleToLongBits(d);
    return b < 0 ? b ^ Long.MAX_VALUE : b;
  }

  /** The number of bounds below `value` (`sample.rank`): `padded` holds them, then Long.MAX_VALUE up to a power
   *  of two; one compare per halving and no branch on it (a conditional move), as `sample.rank` does in numpy. */
  static int rankLong(long[] padded, long value) {
    int position = 0;
    for (int step = padded.length >>> 1; step > 0; step >>>= 1) {
      position += padded[position + step - 1] < value ? step : 0;
    }
    return position;
  }

  static int rankBytes(byte[][] bounds, byte[] value) {
    int low = 0, high = bounds.length;
    while (low < high) {
      int mid = (low + high) >>> 1;
      if (Arrays.compareUnsigned(bounds[mid], value) < 0) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low;
  }

  /** Column `i`'s coordinate of `value` into the row's scratch; returns this, for `words`. */
  CurveWords set(int i, Object value) {
    x[i] = coordinate(columns[i], value);
    return this;
  }

  long coordinate(Column c, Object value) {
    if (value == null) {
      return top;
    }
    switch (c.kind) {
      case DIRECT:
        return ((Number) value).longValue() & top;
      case LONGS:
        return c.spread[rankLong(c.longBounds, ((Number) value).longValue())];
      case DOUBLES:
        return c.spread[rankLong(c.longBounds, sortableDouble(((Number) value).doubleValue()))];
      default:
        return c.spread[rankBytes(c.byteBounds, (byte[]) value)];
    }
  }

  /** Skilling's AxestoTranspose (`curves.hilbert_transpose`), in place; masks instead of a branch on each bit
   *  (the bits are the data's: a branch on them is mispredicted half the time). */
  static void hilbertTranspose(long[] x, int bits) {
    int n = x.length;
    long x0 = x[0];  // a local: every step changes it (through the array, each step waited for the last store;
                     // two columns in one word take `hilbert2Word` instead)
    for (int q = bits - 1; q > 0; q--) {
      long low = (1L << q) - 1;
      x0 ^= low & -((x0 >>> q) & 1L);             // i = 0: bit q set: invert the low bits of x[0] (no swap)
      for (int i = 1; i < n; i++) {
        long xi = x[i];
        long set = -((xi >>> q) & 1L);            // all ones where bit q of x[i] is set
        long t = (x0 ^ xi) & low & ~set;          // not set: swap the low bits of x[0] and x[i]
        x0 ^= (low & set) | t;                    // set: invert the low bits of x[0]
        x[i] = xi ^ t;
      }
    }
    x[0] = x0;
    for (int i = 1; i < n; i++) {
      x[i] ^= x[i - 1];
    }
    long t = gray(x[n - 1], bits);
    for (int i = 0; i < n; i++) {
      x[i] ^= t;
    }
  }

  /** The last step's mask: the low bits below every set bit q > 0 of `last`, XORed together. */
  private static long gray(long last, int bits) {
    long t = 0;
    for (int q = bits - 1; q > 0; q--) {
      t ^= ((1L << q) - 1) & -((last >>> q) & 1L);
    }
    return t;
  }

  /** The words of one row (`CurveKeys.words`) whose coordinates are in `x` (`set`): interleaved coordinates,
   *  the file slot in the first's top bits. */
  Object words() {
    if (spread != null && hilbert && x.length == 2) {  // two coordinates in one word: by table, levels at a time
      return slotted(hilbert2Word(x[0], x[1], bits));
    }
    if (hilbert) {
      hilbertTranspose(x, bits);
    }
    if (spread != null) {  // one word: coordinate i's bit at level l is the index's bit l * dims + (dims - 1 - i)
      int dims = x.length;
      long word = 0;
      for (int i = 0; i < dims; i++) {
        long c = x[i];
        long spreadBits = 0;
        for (int k = 0; k * 8 < bits; k++) {
          spreadBits |= spread[(int) (c >>> (8 * k)) & 255] << (8 * k * dims);
        }
        word |= spreadBits << (dims - 1 - i);
      }
      return slotted(word);
    }
    int p = 0;
    for (int w = 0; w < widths.length; w++) {
      long word = 0;
      for (int end = p + widths[w]; p < end; p++) {  // the first bit of a word is its top one
        word = (word << 1) | ((x[bitDim[p]] >>> bitLevel[p]) & 1L);
      }
      out[w] = word;
    }
    if (slotBits > 0 && cuts.length > 0) {
      out[0] |= (long) cutsAtOrBelow(out) << (WORD_BITS - slotBits);
    }
    if (out.length == 1) {
      return out[0];
    }
    Object[] fields = new Object[out.length];
    for (int i = 0; i < out.length; i++) {
      fields[i] = out[i];
    }
    return RowFactory.create(fields);
  }

  /** A one-word key with its file slot in the top bits. */
  private long slotted(long word) {
    return slotBits > 0 && cuts.length > 0 ? word | (long) cutsAtOrBelow(word) << (WORD_BITS - slotBits) : word;
  }

  /** `hilbertTranspose` + the interleave of two coordinates of `bits` <= 31 bits, by `HILBERT2`: up to four
   *  levels per lookup, from the top. */
  static long hilbert2Word(long x0, long x1, int bits) {
    long word = 0;
    int state = 0;
    int level = bits;
    for (int k = bits % 4 == 0 ? 4 : bits % 4; level > 0; k = 4) {
      level -= k;
      int mask = (1 << k) - 1;
      int in = (int) ((x0 >>> level) & mask) << k | (int) ((x1 >>> level) & mask);
      int entry = HILBERT2[k][state << (2 * k) | in];
      word = (word << (2 * k)) | (entry & 0xFF);
      state = entry >>> 8;
    }
    return word;
  }

  /*
   * Skilling's transform of two coordinates and the interleave, as a state machine over the levels from the top
   * (the same words as `hilbertTranspose` + the interleave; test_jvm_words). At level q, with (a, b) the bits of
   * x[0], x[1] there after the higher levels' steps: a set inverts the lower bits of x[0]; then b set inverts
   * them again, b clear swaps the lower bits of x[0] and x[1]. So the lower levels' bits are the raw ones,
   * swapped or not (`s`), XORed with one mask bit per coordinate (`m0`, `m1`). The Gray step after it
   * (x[1] ^= x[0], then both ^= the XOR of x[1]'s higher bits) needs one more bit: the parity `p` of a ^ b over
   * the levels above. A state is s | m0 << 1 | m1 << 2 | p << 3. HILBERT2[k] maps (state, k levels of x[0] then
   * k of x[1]) to the 2k interleaved bits and the next state (<< 8).
   */
  static final int[][] HILBERT2 = hilbert2Tables();

  private static int[][] hilbert2Tables() {
    int[][] tables = new int[5][];
    for (int k = 1; k <= 4; k++) {
      int[] table = new int[16 << (2 * k)];
      for (int start = 0; start < 16; start++) {
        for (int in = 0; in < 1 << (2 * k); in++) {
          int state = start;
          int out = 0;
          for (int level = k - 1; level >= 0; level--) {
            int r0 = (in >>> (k + level)) & 1;
            int r1 = (in >>> level) & 1;
            int s = state & 1, m0 = (state >>> 1) & 1, m1 = (state >>> 2) & 1, p = (state >>> 3) & 1;
            int a = (s == 1 ? r1 : r0) ^ m0;
            int b = (s == 1 ? r0 : r1) ^ m1;
            out = (out << 2) | ((a ^ p) << 1) | (a ^ b ^ p);
            p ^= a ^ b;
            m0 ^= a;
            if (b == 1) {
              m0 ^= 1;
            } else {
              s ^= 1;
              int swapped = m0;
              m0 = m1;
              m1 = swapped;
            }
            state = s | m0 << 1 | m1 << 2 | p << 3;
          }
          table[start << (2 * k) | in] = out | state << 8;
        }
      }
      tables[k] = table;
    }
    return tables;
  }

  /** How many cuts are at or below the one-word `key`: a branch-free search of the padded cuts (a padding
   *  Long.MAX_VALUE counts only for a key of Long.MAX_VALUE, which every cut is at or below). */
  int cutsAtOrBelow(long key) {
    int position = 0;
    for (int step = oneWordCuts.length >>> 1; step > 0; step >>>= 1) {
      position += oneWordCuts[position + step - 1] <= key ? step : 0;
    }
    position += oneWordCuts[position] <= key ? 1 : 0;
    return Math.min(position, cuts.length);
  }

  /** How many cuts are at or below `key` (`keys.cuts_at_or_below`): the row's file slot. */
  int cutsAtOrBelow(long[] key) {
    int low = 0, high = cuts.length;
    while (low < high) {
      int mid = (low + high) >>> 1;
      if (Arrays.compare(cuts[mid], key) <= 0) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low;
  }

  public static final class Of1 implements UDF2<byte[], Object, Object> {
    public Object call(byte[] m, Object a) {
      return of(m).set(0, a).words();
    }
  }

  public static final class Of2 implements UDF3<byte[], Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b) {
      return of(m).set(0, a).set(1, b).words();
    }
  }

  public static final class Of3 implements UDF4<byte[], Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c) {
      return of(m).set(0, a).set(1, b).set(2, c).words();
    }
  }

  public static final class Of4 implements UDF5<byte[], Object, Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c, Object d) {
      return of(m).set(0, a).set(1, b).set(2, c).set(3, d).words();
    }
  }

  public static final class Of5 implements UDF6<byte[], Object, Object, Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c, Object d, Object e) {
      return of(m).set(0, a).set(1, b).set(2, c).set(3, d).set(4, e).words();
    }
  }

  public static final class Of6 implements UDF7<byte[], Object, Object, Object, Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c, Object d, Object e, Object f) {
      return of(m).set(0, a).set(1, b).set(2, c).set(3, d).set(4, e).set(5, f).words();
    }
  }

  public static final class Of7
      implements UDF8<byte[], Object, Object, Object, Object, Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c, Object d, Object e, Object f, Object g) {
      return of(m).set(0, a).set(1, b).set(2, c).set(3, d).set(4, e).set(5, f).set(6, g).words();
    }
  }

  public static final class Of8
      implements UDF9<byte[], Object, Object, Object, Object, Object, Object, Object, Object, Object> {
    public Object call(byte[] m, Object a, Object b, Object c, Object d, Object e, Object f, Object g, Object h) {
      return of(m).set(0, a).set(1, b).set(2, c).set(3, d).set(4, e).set(5, f).set(6, g).set(7, h).words();
    }
  }
}
