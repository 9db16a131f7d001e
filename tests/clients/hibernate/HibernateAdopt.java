// Hibernate 3.6 (Debian's libhibernate3-java) with JPA's SEQUENCE
// strategy against a database where snowflake_adopt_sequences() is on
// (issue 57; docs/clients.md shows this file). hbm2ddl creates the two
// sequences, INCREMENT BY 50, and the switch adopts them: each nextval()
// returns a Snowflake ID v whose 49 neighbours on each side are reserved
// for the caller, so Hibernate's enhanced SequenceStyleGenerator hands
// out 50 keys per call with the pooled optimizer (v-49 .. v) and the
// pooled-lo optimizer (v .. v+49). 8 threads insert 100,000 entities of
// each (the pooled entity: PooledOrder.java, the recipe docs/clients.md
// shows) with JDBC batching on (hibernate.jdbc.batch_size 50): the pooled
// ones through one SessionFactory, as an application does, the pooled-lo
// ones through a SessionFactory per thread, since Hibernate 3.6's
// PooledLoOptimizer.generate() is not synchronized (two threads of one
// factory hand out the same keys, whatever the database does; fixed in
// later Hibernate): eight optimizers then call nextval() at once, each
// relying on its own range alone. Checked: no
// duplicate key, every key decodes to this server's worker id (21), and
// the inserts went out in JDBC batches of 50 (counted by the batcher);
// then hbm2ddl.auto=validate finds the schema as it made it (issue 63).
// Run by tests/clients/run.sh with SNOWFLAKE_HOST, SNOWFLAKE_PORT and
// SNOWFLAKE_ADOPT_DB set.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.Id;
import javax.persistence.Table;
import org.hibernate.Interceptor;
import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.Transaction;
import org.hibernate.annotations.GenericGenerator;
import org.hibernate.annotations.Parameter;
import org.hibernate.cfg.Configuration;
import org.hibernate.jdbc.Batcher;
import org.hibernate.jdbc.BatcherFactory;
import org.hibernate.jdbc.BatchingBatcher;
import org.hibernate.jdbc.ConnectionManager;
import org.hibernate.jdbc.Expectation;

public class HibernateAdopt {
    static final int WORKER = 21, THREADS = 8, PER_KIND = 100_000, PER_TX = 500, BATCH = 50;

    /** The same generator with the pooled-lo optimizer. */
    @Entity
    @Table(name = "hib_pooled_lo")
    public static class PooledLo {
        @Id
        @GeneratedValue(generator = "pooled_lo_gen")
        @GenericGenerator(name = "pooled_lo_gen", strategy = "org.hibernate.id.enhanced.SequenceStyleGenerator",
            parameters = {@Parameter(name = "sequence_name", value = "hib_pooled_lo_seq"),
                          @Parameter(name = "increment_size", value = "50"),
                          @Parameter(name = "optimizer", value = "pooled-lo")})
        public Long id;
        public String item;
    }

    /** Counts what goes to the server in JDBC batches. */
    public static class CountingBatcherFactory implements BatcherFactory {
        static final AtomicLong added = new AtomicLong(), batches = new AtomicLong();
        public Batcher createBatcher(ConnectionManager cm, Interceptor interceptor) {
            return new BatchingBatcher(cm, interceptor) {
                private int pending;
                @Override
                public void addToBatch(Expectation e) throws SQLException {
                    added.incrementAndGet();
                    pending++;
                    super.addToBatch(e);
                }
                @Override
                protected void doExecuteBatch(java.sql.PreparedStatement ps) throws SQLException {
                    if (pending > 0) batches.incrementAndGet();  // a flush also calls it on none
                    pending = 0;
                    super.doExecuteBatch(ps);
                }
            };
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("hibernate: FAILED: " + what);
            System.exit(1);
        }
    }

    static SessionFactory factory(String url, String ddl) {
        return new Configuration()
            .addAnnotatedClass(PooledOrder.class).addAnnotatedClass(PooledLo.class)
            .setProperty("hibernate.dialect", "org.hibernate.dialect.PostgreSQLDialect")
            .setProperty("hibernate.connection.driver_class", "org.postgresql.Driver")
            .setProperty("hibernate.connection.url", url)
            .setProperty("hibernate.connection.username", "postgres")
            .setProperty("hibernate.connection.pool_size", String.valueOf(THREADS + 1))
            .setProperty("hibernate.hbm2ddl.auto", ddl)
            .setProperty("hibernate.id.new_generator_mappings", "true")
            .setProperty("hibernate.jdbc.batch_size", String.valueOf(BATCH))
            .setProperty("hibernate.order_inserts", "true")
            .setProperty("hibernate.jdbc.factory_class", CountingBatcherFactory.class.getName())
            .buildSessionFactory();
    }

    /** One transaction of PER_TX entities of one kind, flushed every BATCH. */
    static void insert(SessionFactory sf, int me, int done, boolean lo) {
        Session s = sf.openSession();
        Transaction tx = s.beginTransaction();
        for (int i = 0; i < PER_TX; i++) {
            if (lo) {
                PooledLo p = new PooledLo();
                p.item = me + "/" + (done + i);
                s.save(p);
            } else {
                PooledOrder p = new PooledOrder();
                p.item = me + "/" + (done + i);
                s.save(p);
            }
            if (i % BATCH == BATCH - 1) {
                s.flush();
                s.clear();
            }
        }
        tx.commit();
        s.close();
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + System.getenv("SNOWFLAKE_HOST") + ":" + System.getenv("SNOWFLAKE_PORT")
            + "/" + System.getenv("SNOWFLAKE_ADOPT_DB");
        SessionFactory shared = factory(url, "create");
        SessionFactory[] own = new SessionFactory[THREADS];
        for (int t = 0; t < THREADS; t++) own[t] = factory(url, "none");
        long t0 = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < THREADS; t++) {
            final int me = t;
            Thread th = new Thread(() -> {
                try {
                    for (int done = 0; done < PER_KIND / THREADS; done += PER_TX) {
                        insert(shared, me, done, false);
                        insert(own[me], me, done, true);
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) th.join();
        long ms = (System.nanoTime() - t0) / 1_000_000;
        if (!errors.isEmpty()) errors.get(0).printStackTrace();
        check(errors.isEmpty(), errors.size() + " thread(s) failed");
        shared.close();
        for (SessionFactory f : own) f.close();

        try (Connection c = DriverManager.getConnection(url, "postgres", null)) {
            for (String table : new String[] {"hib_pooled", "hib_pooled_lo"}) {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE snowflake_worker_id(id) = ?),"
                        + " (SELECT adopted_by FROM snowflake_id_internal.snowflake_adopted"
                        + "   WHERE seq = to_regclass(?))"
                        + " FROM " + table)) {
                    ps.setInt(1, WORKER);
                    ps.setString(2, table + "_seq");
                    ResultSet r = ps.executeQuery();
                    r.next();
                    check(r.getLong(1) == PER_KIND, table + ": " + r.getLong(1) + " rows, expected " + PER_KIND);
                    check(r.getLong(2) == PER_KIND, table + ": " + (PER_KIND - r.getLong(2)) + " duplicate keys");
                    check(r.getLong(3) == PER_KIND, table + ": " + (PER_KIND - r.getLong(3)) + " keys of another worker");
                    check("switch".equals(r.getString(4)), table + "_seq was not adopted by the switch: " + r.getString(4));
                }
            }
        }
        // Issue 63: the schema Hibernate made is the one it validates, the
        // sequences adopted (hbm2ddl.auto=validate throws on any drift).
        try {
            factory(url, "validate").close();
        } catch (org.hibernate.HibernateException e) {
            check(false, "hbm2ddl.auto=validate: " + e.getMessage());
        }
        long added = CountingBatcherFactory.added.get(), batches = CountingBatcherFactory.batches.get();
        check(added == 2L * PER_KIND, added + " statements batched, expected " + 2 * PER_KIND);
        check(batches > 0 && added / batches >= BATCH - 1,
              "JDBC batching is off: " + added + " statements in " + batches + " batches");
        System.out.println("hibernate: " + 2 * PER_KIND + " entities (pooled and pooled-lo, allocationSize 50) in "
            + ms + " ms by " + THREADS + " threads, " + batches + " JDBC batches of " + (added / batches)
            + " on average; keys unique, all of worker " + WORKER);
    }
}
