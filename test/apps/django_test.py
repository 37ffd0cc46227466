#!/usr/bin/python3
# Reservable columns from an ORM: Django (Debian's python3-django), standalone
# (settings.configure, the postgresql backend, connection from PGHOST, PGPORT,
# PGUSER, PGPASSWORD and PGDATABASE), with a model Stock (managed=False,
# db_table='stock') over a table made in SQL.  Checks that
#   - Stock.objects.filter(pk=1).update(qty=F('qty') - 3) returns 1 (Django
#     sends UPDATE "stock" SET "qty" = ("stock"."qty" - 3) WHERE "stock"."id"
#     = 1, which reserves), F('qty') + 2 too, and a missing pk returns 0;
#     occ.reserved_value moves by exactly the deltas;
#   - in transaction.atomic(), an update(qty=F('qty') - n) past the CHECK
#     bound raises django.db.IntegrityError (23514) and the block rolls back;
#   - the fold applies the reservations: Stock.objects.get(pk=1).qty shows
#     the value within seconds;
#   - then obj.save() of a whole row loaded before the value moved (it
#     writes qty = the loaded value) is refused: OperationalError, a
#     django.db.utils.Error, whose cause has SQLSTATE 55000 and a hint that
#     names update_fields; nothing changes;
#   - obj.save(update_fields=['name']) works, and leaves qty as reserved.
#
# Run with /usr/bin/python3 against a database where pg_occ is installed
# (test/apps.sh makes it).  Exits non-zero on the first failed check.
import os
import sys
import time

import django
from django.conf import settings

checks = 0
sys.stdout.reconfigure(line_buffering=True)  # in order with the failures on stderr


def check(what, cond, got=None):
    """One check: print it, or fail with what was found."""
    global checks
    if not cond:
        print(f"django: FAIL: {what}" + ("" if got is None else f" (got {got!r})"), file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"django: ok: {what}")


settings.configure(
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "postgres"),
        "USER": os.environ.get("PGUSER", ""),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
    }},
    INSTALLED_APPS=[],
    USE_TZ=True,
)
django.setup()

from django.db import IntegrityError, connection, models, transaction  # noqa: E402 (after setup)
from django.db.models import F  # noqa: E402
from django.db.utils import Error, OperationalError  # noqa: E402


class Stock(models.Model):
    id = models.IntegerField(primary_key=True)
    name = models.TextField()
    qty = models.IntegerField()

    class Meta:
        app_label = "occ_apps"
        managed = False
        db_table = "stock"


with connection.cursor() as cur:
    cur.execute("""
        DROP TABLE IF EXISTS stock;
        CREATE TABLE stock (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL CHECK (qty >= 0));
        INSERT INTO stock VALUES (1, 'widget', 1000), (2, 'gadget', 1);
        SELECT occ.make_reservable('stock', 'qty');
    """)
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_occ'")
    version = cur.fetchone()[0]
print(f"Django {django.get_version()} ({connection.vendor}, {type(connection.connection).__module__}), "
      f"pg_occ {version}")


def reserved(key):
    with connection.cursor() as cur:
        cur.execute("SELECT occ.reserved_value('stock', 'qty', %s::int)", [key])
        return cur.fetchone()[0]


loaded = Stock.objects.get(pk=1)   # for the whole-row save below, before the value moves
expected = 1000
n = Stock.objects.filter(pk=1).update(qty=F("qty") - 3)
expected -= 3
check("Stock.objects.filter(pk=1).update(qty=F('qty') - 3) returns 1", n == 1, n)
n = Stock.objects.filter(pk=1).update(qty=F("qty") + 2)
expected += 2
check("update(qty=F('qty') + 2) returns 1", n == 1, n)
n = Stock.objects.filter(pk=99).update(qty=F("qty") - 3)
check("the same update of a missing pk returns 0", n == 0, n)
got = reserved(1)
check(f"occ.reserved_value is {expected}", got == expected, got)

# past the bound, in transaction.atomic(): IntegrityError, the block rolls back
try:
    with transaction.atomic():
        n = Stock.objects.filter(pk=2).update(qty=F("qty") - 1)   # the gadget's only unit
        Stock.objects.filter(pk=2).update(qty=F("qty") - 1)
    check("an update past the CHECK bound is refused", False)
except IntegrityError as e:
    code = getattr(e.__cause__, "sqlstate", None) or getattr(e.__cause__, "pgcode", None)
    check("in atomic(), update(qty=F('qty') - 1) past the bound: IntegrityError, 23514 naming stock_qty_check",
          n == 1 and code == "23514" and "stock_qty_check" in str(e), (n, code, str(e)))
got = reserved(2)
check("the rolled back block reserved nothing: the gadget is still 1", got == 1, got)

# the fold applies the committed reservations to the column (~100 ms)
deadline = time.monotonic() + 10
while (plain := Stock.objects.get(pk=1).qty) != expected and time.monotonic() < deadline:
    time.sleep(0.05)
check(f"Stock.objects.get(pk=1).qty shows {expected} once folded", plain == expected, plain)

# a whole-row save writes qty = the value loaded before the fold moved it:
# the guard refuses it (it refuses a change of the column's stored value)
loaded.name = "sprocket"
try:
    loaded.save()
    check("obj.save() of the whole row is refused", False)
except Error as e:
    cause = e.__cause__
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    diag = getattr(cause, "diag", None)
    hint = (diag.message_hint if diag is not None else None) or ""
    check(f"obj.save() of the whole row: {type(e).__module__}.{type(e).__name__} (a django.db.utils.Error), "
          "SQLSTATE 55000, the hint names update_fields",
          isinstance(e, OperationalError) and code == "55000" and "update_fields" in hint,
          (type(e), code, hint))
got = (Stock.objects.get(pk=1).name, reserved(1))
check(f"the refused save changed nothing: ('widget', {expected})", got == ("widget", expected), got)

loaded.save(update_fields=["name"])
got = Stock.objects.get(pk=1).name
check("obj.save(update_fields=['name']) works: the name is 'sprocket'", got == "sprocket", got)
got = reserved(1)
check(f"obj.save(update_fields=['name']) left qty as reserved: {expected}", got == expected, got)

print(f"django: {checks} passed, 0 failed")
