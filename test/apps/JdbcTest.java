// Reservable columns from a real client: pgjdbc (Debian's
// libpostgresql-jdbc-java), as a Java application would call it.  Checks that
// on a reservable stock table
//   - Statement.executeUpdate("UPDATE stock SET qty = qty - 3 WHERE id = 1")
//     returns 1, and 0 for a missing key;
//   - a PreparedStatement "UPDATE stock SET qty = qty - ? WHERE id = ?"
//     executed 12 times returns 1 each time: pgjdbc switches to a named
//     server-side prepared statement at its prepareThreshold (5), and the
//     server to a generic plan after 5 custom plans of it (both checked:
//     PGStatement.isUseServerPrepare, pg_prepared_statements); with a missing
//     key it returns 0; with setLong (an int8 delta, as Hibernate binds a
//     Long) it returns 1; occ.reserved_value moves by exactly the deltas;
//   - with autocommit off, a reservation past the CHECK bound is an
//     SQLException with SQLState 23514 naming the constraint, and the
//     transaction is aborted (25P02 next);
//   - occ.try_reserve returns false when sold out and the transaction goes on;
//   - SET qty = ? is refused with 55000 and a hint that names update_fields.
//
// Run (single-file source launch, Java 11+):
//   java -cp /usr/share/java/postgresql.jar test/apps/JdbcTest.java
// against a database where pg_occ is installed, connection from PGHOST,
// PGPORT, PGUSER, PGPASSWORD and PGDATABASE (TCP: pgjdbc has no Unix
// sockets; test/apps.sh makes the database).  Exits non-zero on the first
// failed check.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

import org.postgresql.PGStatement;
import org.postgresql.util.PSQLException;

public class JdbcTest {
    static int checks = 0;

    static void check(String what, boolean cond, Object got) {
        if (!cond) {
            System.err.println("jdbc: FAIL: " + what + (got == null ? "" : " (got " + got + ")"));
            System.exit(1);
        }
        checks++;
        System.out.println("jdbc: ok: " + what);
    }

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static Connection connect() throws SQLException {
        String url = "jdbc:postgresql://" + env("PGHOST", "localhost") + ":" + env("PGPORT", "5432") + "/"
            + env("PGDATABASE", "postgres");
        Properties p = new Properties();
        p.setProperty("user", env("PGUSER", "postgres"));
        p.setProperty("password", env("PGPASSWORD", ""));
        return DriverManager.getConnection(url, p);
    }

    static long reserved(Connection c, int key) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT occ.reserved_value('stock', 'qty', ?)")) {
            ps.setInt(1, key);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    // the SQLState of what r throws, or null if it throws nothing
    interface Sql { void run() throws SQLException; }
    static SQLException errorOf(Sql r) {
        try {
            r.run();
            return null;
        } catch (SQLException e) {
            return e;
        }
    }

    public static void main(String[] args) throws Exception {
        try (Connection conn = connect(); Statement st = conn.createStatement()) {
            st.execute("DROP TABLE IF EXISTS stock;"
                + " CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL CHECK (qty >= 0));"
                + " INSERT INTO stock VALUES (1, 'widget', 1000), (2, 'gadget', 1);"
                + " SELECT occ.make_reservable('stock', 'qty')");
            try (ResultSet rs = st.executeQuery("SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")) {
                rs.next();
                System.out.println("java " + System.getProperty("java.version") + ", pgjdbc "
                    + conn.getMetaData().getDriverVersion() + ", pg_occ " + rs.getString(1));
            }
            long expected = 1000;

            int n = st.executeUpdate("UPDATE stock SET qty = qty - 3 WHERE id = 1");
            expected -= 3;
            check("reservable: executeUpdate(\"UPDATE stock SET qty = qty - 3 WHERE id = 1\") returns 1", n == 1, n);
            n = st.executeUpdate("UPDATE stock SET qty = qty - 3 WHERE id = 99");
            check("reservable: the same UPDATE of a missing key returns 0", n == 0, n);
            long got = reserved(conn, 1);
            check("reservable: occ.reserved_value is " + expected, got == expected, got);

            try (PreparedStatement ps = conn.prepareStatement("UPDATE stock SET qty = qty - ? WHERE id = ?")) {
                StringBuilder counts = new StringBuilder();
                boolean all = true;
                for (int i = 0; i < 12; i++) {
                    ps.setInt(1, 1);
                    ps.setInt(2, 1);
                    int c = ps.executeUpdate();
                    counts.append(c).append(' ');
                    all &= c == 1;
                }
                expected -= 12;
                check("reservable: a PreparedStatement executed 12 times returns 1 each time", all, counts);
                boolean server = ps.unwrap(PGStatement.class).isUseServerPrepare();
                check("reservable: past prepareThreshold (" + ps.unwrap(PGStatement.class).getPrepareThreshold()
                    + ") pgjdbc uses a server-side prepared statement", server, server);
                try (ResultSet rs = st.executeQuery("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
                        + " WHERE statement = 'UPDATE stock SET qty = qty - $1 WHERE id = $2'")) {
                    boolean one = rs.next();
                    String row = one ? rs.getString(1) + " " + rs.getLong(2) + " " + rs.getLong(3) : "none";
                    check("reservable: after 5 custom plans the server ran it with a generic plan (pg_prepared_statements "
                        + "name, generic_plans, custom_plans: " + row + ")", one && rs.getLong(2) >= 1, row);
                }
                ps.setInt(1, 1);
                ps.setInt(2, 99);
                n = ps.executeUpdate();
                check("reservable: the PreparedStatement with a missing key returns 0", n == 0, n);
                ps.setLong(1, 2L);
                ps.setInt(2, 1);
                n = ps.executeUpdate();
                expected -= 2;
                check("reservable: the PreparedStatement with setLong (an int8 delta) returns 1", n == 1, n);
            }
            got = reserved(conn, 1);
            check("reservable: after the PreparedStatement the value is " + expected, got == expected, got);

            // a refusal: 23514 naming the constraint, and the transaction is aborted
            conn.setAutoCommit(false);
            n = st.executeUpdate("UPDATE stock SET qty = qty - 1 WHERE id = 2");
            check("reservable: with autocommit off, UPDATE ... - 1 of a stock of 1 returns 1", n == 1, n);
            SQLException e = errorOf(() -> st.executeUpdate("UPDATE stock SET qty = qty - 1 WHERE id = 2"));
            check("reservable: past the CHECK bound: SQLState 23514 naming stock_qty_check",
                e != null && "23514".equals(e.getSQLState()) && e.getMessage().contains("stock_qty_check"),
                e == null ? null : e.getSQLState() + " " + e.getMessage());
            e = errorOf(() -> st.executeQuery("SELECT 1").close());
            check("reservable: after the refusal the transaction is aborted: 25P02",
                e != null && "25P02".equals(e.getSQLState()), e == null ? null : e.getSQLState());
            conn.rollback();
            got = reserved(conn, 2);
            check("reservable: the rolled back transaction reserved nothing: the gadget is still 1", got == 1, got);

            // occ.try_reserve: false when sold out, and the transaction goes on
            try (PreparedStatement ps = conn.prepareStatement("SELECT occ.try_reserve('stock', 'qty', ?, ?)")) {
                ps.setInt(1, 2);
                ps.setLong(2, -5);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    boolean taken = rs.getBoolean(1);
                    check("reservable: occ.try_reserve of 5 from a stock of 1 returns false", !taken, taken);
                }
            }
            n = st.executeUpdate("UPDATE stock SET qty = qty - 1 WHERE id = 2");
            check("reservable: the transaction goes on: UPDATE ... - 1 of the gadget returns 1", n == 1, n);
            conn.commit();
            conn.setAutoCommit(true);
            got = reserved(conn, 2);
            check("reservable: committed: the gadget is 0", got == 0, got);

            // an absolute value: refused by the column's guard, 55000 with a hint
            e = errorOf(() -> {
                try (PreparedStatement ps = conn.prepareStatement("UPDATE stock SET qty = ? WHERE id = ?")) {
                    ps.setInt(1, 5);
                    ps.setInt(2, 1);
                    ps.executeUpdate();
                }
            });
            String hint = e instanceof PSQLException && ((PSQLException) e).getServerErrorMessage() != null
                ? ((PSQLException) e).getServerErrorMessage().getHint() : null;
            check("reservable: SET qty = ?: SQLState 55000, the hint names update_fields",
                e != null && "55000".equals(e.getSQLState()) && hint != null && hint.contains("update_fields"),
                e == null ? null : e.getSQLState() + " " + hint);
            got = reserved(conn, 1);
            check("reservable: the refused statement changed nothing: " + expected, got == expected, got);
        }
        System.out.println("jdbc: " + checks + " passed, 0 failed");
    }
}
