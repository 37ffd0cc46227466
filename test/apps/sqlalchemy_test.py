#!/usr/bin/python3
# Reservable columns from SQLAlchemy Core (Debian's python3-sqlalchemy: 1.4
# on Debian 12, run in 2.0 style with future=True; 2.x on later releases),
# connection from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE (an empty
# URL: libpq reads them).  With each driver the dialect has here, psycopg2
# (client-side binding) and, on SQLAlchemy 2, psycopg 3 (server-side
# binding), checks that on a reservable stock table made in SQL
#   - conn.execute(update(stock).where(stock.c.id == 1)
#     .values(qty=stock.c.qty - 3)).rowcount is 1, qty + 2 too, and 0 for a
#     missing key; occ.reserved_value moves by exactly the deltas;
#   - .values(qty=5) is refused: sqlalchemy.exc.OperationalError whose
#     driver error has SQLSTATE 55000 and a hint that names update_fields;
#   - past the CHECK bound: sqlalchemy.exc.IntegrityError, SQLSTATE 23514,
#     and engine.begin()'s transaction rolls back.
#
# Run with /usr/bin/python3 against a database where pg_occ is installed
# (test/apps.sh makes it).  Exits non-zero on the first failed check.
import sys

import sqlalchemy
from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine, exc, text, update

checks = 0
sys.stdout.reconfigure(line_buffering=True)  # in order with the failures on stderr


def check(what, cond, got=None):
    """One check: print it, or fail with what was found."""
    global checks
    if not cond:
        print(f"sqlalchemy: FAIL: {what}" + ("" if got is None else f" (got {got!r})"), file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"sqlalchemy: ok: {what}")


major = int(sqlalchemy.__version__.split(".")[0])
minor = int(sqlalchemy.__version__.split(".")[1])
check(f"SQLAlchemy {sqlalchemy.__version__} is 1.4 or later (2.0 style)", (major, minor) >= (1, 4))
drivers = ["psycopg2"] + (["psycopg"] if major >= 2 else [])

metadata = MetaData()
stock = Table("stock", metadata,
              Column("id", Integer, primary_key=True),
              Column("name", Text, nullable=False),
              Column("qty", Integer, nullable=False))


def sqlstate(e):
    orig = e.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


for driver in drivers:
    kw = {"future": True} if major < 2 else {}
    engine = create_engine(f"postgresql+{driver}://", **kw)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS stock"))
        conn.execute(text("CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL,"
                          " qty int NOT NULL CHECK (qty >= 0))"))
        conn.execute(text("INSERT INTO stock VALUES (1, 'widget', 1000), (2, 'gadget', 1)"))
        conn.execute(text("SELECT occ.make_reservable('stock', 'qty')"))
        version = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")).scalar()
    print(f"SQLAlchemy {sqlalchemy.__version__}, driver {driver}, pg_occ {version}")

    def reserved(conn, key):
        return conn.execute(text("SELECT occ.reserved_value('stock', 'qty', CAST(:key AS int))"),
                            {"key": key}).scalar()

    expected = 1000
    with engine.begin() as conn:
        r = conn.execute(update(stock).where(stock.c.id == 1).values(qty=stock.c.qty - 3))
        expected -= 3
        check(f"{driver}: update(stock).where(stock.c.id == 1).values(qty=stock.c.qty - 3): rowcount 1",
              r.rowcount == 1, r.rowcount)
        r = conn.execute(update(stock).where(stock.c.id == 1).values(qty=stock.c.qty + 2))
        expected += 2
        check(f"{driver}: .values(qty=stock.c.qty + 2): rowcount 1", r.rowcount == 1, r.rowcount)
        r = conn.execute(update(stock).where(stock.c.id == 99).values(qty=stock.c.qty - 3))
        check(f"{driver}: the same update of a missing key: rowcount 0", r.rowcount == 0, r.rowcount)
        got = reserved(conn, 1)
        check(f"{driver}: in the transaction occ.reserved_value is {expected}", got == expected, got)
    with engine.connect() as conn:
        got = reserved(conn, 1)
        check(f"{driver}: committed: {expected}", got == expected, got)

    try:
        with engine.begin() as conn:
            conn.execute(update(stock).where(stock.c.id == 1).values(qty=5))
        check(f"{driver}: .values(qty=5) is refused", False)
    except exc.OperationalError as e:
        diag = getattr(e.orig, "diag", None)
        hint = (diag.message_hint if diag is not None else None) or ""
        check(f"{driver}: .values(qty=5): OperationalError, SQLSTATE 55000, the hint names update_fields",
              sqlstate(e) == "55000" and "update_fields" in hint, (sqlstate(e), hint))

    try:
        with engine.begin() as conn:
            r = conn.execute(update(stock).where(stock.c.id == 2).values(qty=stock.c.qty - 1))
            conn.execute(update(stock).where(stock.c.id == 2).values(qty=stock.c.qty - 1))
        check(f"{driver}: an update past the CHECK bound is refused", False)
    except exc.IntegrityError as e:
        check(f"{driver}: past the bound: IntegrityError, SQLSTATE 23514 naming stock_qty_check",
              r.rowcount == 1 and sqlstate(e) == "23514" and "stock_qty_check" in str(e),
              (r.rowcount, sqlstate(e), str(e)))
    with engine.connect() as conn:
        got = (reserved(conn, 1), reserved(conn, 2))
        check(f"{driver}: the refused statements changed nothing, the block rolled back: ({expected}, 1)",
              got == (expected, 1), got)
    engine.dispose()

print(f"sqlalchemy: {checks} passed, 0 failed")
