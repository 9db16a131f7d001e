// pgjdbc: let the database make the key and read it back as a long.
// prepareStatement(sql, new String[] {"id"}) makes pgjdbc append
// RETURNING id, for single inserts and for batches (also with
// reWriteBatchedInserts=true). Map the key as Long / GenerationType.IDENTITY
// in JPA, never SEQUENCE with an allocationSize. For JSON to JavaScript,
// write IDs as strings (Jackson: @JsonSerialize(using = ToStringSerializer.class)).
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

public final class SnowflakeJdbc {
    public static final long EPOCH_MS = 1704067200000L; // snowflake_id.epoch, 2024-01-01 00:00:00+00

    private SnowflakeJdbc() {}

    public static long insertOrder(Connection c, String item) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO java_orders (item) VALUES (?)", new String[] {"id"})) {
            ps.setString(1, item);
            ps.executeUpdate();
            try (ResultSet keys = ps.getGeneratedKeys()) {
                keys.next();
                return keys.getLong(1);
            }
        }
    }

    public static List<Long> insertBatch(Connection c, List<String> items) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO java_orders (item) VALUES (?)", new String[] {"id"})) {
            for (String item : items) {
                ps.setString(1, item);
                ps.addBatch();
            }
            ps.executeBatch();
            List<Long> ids = new ArrayList<>();
            try (ResultSet keys = ps.getGeneratedKeys()) {
                while (keys.next()) {
                    ids.add(keys.getLong(1));
                }
            }
            return ids;
        }
    }

    /** Keys for a bulk load, in one round trip. */
    public static List<Long> bulkKeys(Connection c, long n) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT snowflake_nextval(?)")) {
            ps.setLong(1, n);
            List<Long> ids = new ArrayList<>();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    ids.add(rs.getLong(1));
                }
            }
            return ids;
        }
    }

    /** {Unix ms, worker id, sequence}. */
    public static long[] decode(long id) {
        return new long[] {EPOCH_MS + (id >> 22), (id >> 12) & 1023, id & 4095};
    }

    /** A JSON object whose id JavaScript reads exactly: a string. */
    public static String orderJson(long id, String item) {
        return "{\"id\":\"" + id + "\",\"item\":\"" + item.replace("\\", "\\\\").replace("\"", "\\\"") + "\"}";
    }
}
