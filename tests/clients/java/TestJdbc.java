// pgjdbc 42.5 against a running server (worker_id 21): getGeneratedKeys
// after single inserts, executeBatch with generated keys with and without
// reWriteBatchedInserts, a bulk load from snowflake_nextval(count),
// getLong; IDs unique, increasing per connection, decoded in Java as on
// the server; the JSON pitfall. Run by run.sh with SNOWFLAKE_HOST,
// SNOWFLAKE_PORT and SNOWFLAKE_DB set.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;

public final class TestJdbc {
    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static List<Long> session(String url, String tag) throws Exception {
        List<Long> ids = new ArrayList<>();
        try (Connection c = DriverManager.getConnection(url, "postgres", "")) {
            for (int i = 0; i < 100; i++) {
                ids.add(SnowflakeJdbc.insertOrder(c, tag + " single " + i));
            }
            List<String> items = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                items.add(tag + " batch " + i);
            }
            List<Long> batch = SnowflakeJdbc.insertBatch(c, items);
            check(batch.size() == 200, tag + ": executeBatch returned " + batch.size() + " generated keys, not 200");
            ids.addAll(batch);
            List<Long> keys = SnowflakeJdbc.bulkKeys(c, 1000L);
            check(keys.size() == 1000, tag + ": snowflake_nextval(1000) returned " + keys.size());
            ids.addAll(keys);
            for (int i = 1; i < ids.size(); i++) {
                check(ids.get(i - 1) < ids.get(i), tag + ": IDs do not increase at " + i);
            }
            // Decoded in Java as on the server.
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.sequence"
                    + " FROM unnest(?::bigint[]) id, snowflake_decode(id) d")) {
                ps.setArray(1, c.createArrayOf("bigint", ids.toArray()));
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        long[] mine = SnowflakeJdbc.decode(rs.getLong(1));
                        long[] server = {rs.getLong(2), rs.getInt(3), rs.getInt(4)};
                        check(Arrays.equals(mine, server), "decode of " + rs.getLong(1));
                        check(mine[1] == 21, "worker id 21");
                    }
                }
            }
        }
        return ids;
    }

    public static void main(String[] args) throws Exception {
        String base = "jdbc:postgresql://" + System.getenv("SNOWFLAKE_HOST") + ":" + System.getenv("SNOWFLAKE_PORT")
                + "/" + System.getenv("SNOWFLAKE_DB");
        try (Connection c = DriverManager.getConnection(base, "postgres", "");
             Statement st = c.createStatement()) {
            st.execute("CREATE TABLE java_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)");
        }
        List<Long> plain = session(base, "plain");
        List<Long> rewritten = session(base + "?reWriteBatchedInserts=true", "rewritten");
        HashSet<Long> all = new HashSet<>(plain);
        all.addAll(rewritten);
        check(all.size() == plain.size() + rewritten.size(), "duplicate IDs across connections");
        // JSON: a JavaScript number is a double, which cannot hold the ID.
        // The first ID a double cannot hold (1 in 64 of them it can: multiples of its spacing).
        long id = plain.stream().filter(v -> (long) (double) v != v).findFirst()
                .orElseThrow(() -> new AssertionError("a double holds every ID exactly"));
        check((long) (double) id != id, "a double holds " + id + " exactly");
        check(SnowflakeJdbc.orderJson(id, "x").equals("{\"id\":\"" + id + "\",\"item\":\"x\"}"), "orderJson");
        System.out.printf("  pgjdbc: %d IDs over 2 connections (getGeneratedKeys after single inserts and executeBatch,"
                + " with and without reWriteBatchedInserts; a bulk load of 1000): unique, increasing, decoded in Java as"
                + " on the server; as a JSON number %d reads %d%n", all.size(), id, (long) (double) id);
    }
}
