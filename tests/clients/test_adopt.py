"""Adopted sequences with the Python ORMs (issue 57): in a database where
snowflake_adopt_sequences() is on (recipes/adopt_sequences.sql), each
tool creates its own tables with its own migration command, then inserts
from the ORM; every key of a bigint column is a Snowflake ID of this
server (worker 21), unique, and the tools notice nothing.

  python test_adopt.py django WORKDIR   Django 5: migrate (contrib.auth,
      admin, contenttypes, sessions and an app of BigAutoField models),
      create users, a group, admin log entries and app rows
  python test_adopt.py sqlalchemy      SQLAlchemy 2: create_all of a table
      with Identity() and one with Sequence(), inserts through the ORM
"""
import os
import sys
from pathlib import Path

WORKER = 21
DB = os.environ["SNOWFLAKE_ADOPT_DB"]


def check(ok, what):
    if not ok:
        print(f"adopt: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def worker_of(cur, ids):
    cur.execute("SELECT array_agg(DISTINCT snowflake_worker_id(i)) FROM unnest(%s::bigint[]) i", [list(ids)])
    return cur.fetchone()[0]


APP_MODELS = '''
from django.db import models


class Customer(models.Model):
    name = models.TextField()


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    item = models.TextField()
'''


def django_stage(work):
    import django
    from django.conf import settings

    work = Path(work)
    app = work / "shop"
    app.mkdir(parents=True, exist_ok=True)
    (app / "__init__.py").write_text("")
    (app / "models.py").write_text(APP_MODELS)
    (app / "migrations").mkdir(exist_ok=True)
    (app / "migrations" / "__init__.py").write_text("")
    sys.path.insert(0, str(work))
    settings.configure(
        INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                        "django.contrib.sessions", "django.contrib.messages", "shop"],
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": DB, "USER": "postgres",
                               "HOST": os.environ["SNOWFLAKE_HOST"], "PORT": os.environ["SNOWFLAKE_PORT"]}},
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        SECRET_KEY="test", USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    from django.contrib.admin.models import ADDITION, LogEntry
    from django.contrib.auth.models import Group, User
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import call_command
    from django.db import connection

    call_command("makemigrations", "shop", verbosity=0)
    call_command("migrate", verbosity=0)
    from shop.models import Customer, Order

    customers = [Customer.objects.create(name=f"c{i}") for i in range(50)]
    orders = Order.objects.bulk_create([Order(customer=c, item=f"o{i}") for i, c in enumerate(customers * 4)])
    ids = [c.pk for c in customers] + [o.pk for o in orders]
    check(all(i is not None for i in ids), "bulk_create returned every key")
    user = User.objects.create_user("ada", password="pw")
    group = Group.objects.create(name="staff")
    user.groups.add(group)
    entry = LogEntry.objects.create(user=user, content_type=ContentType.objects.get_for_model(Customer),
                                    object_id=str(customers[0].pk), object_repr="c0", action_flag=ADDITION)
    with connection.cursor() as cur:
        check(worker_of(cur, ids) == [WORKER], f"the app's keys decode to worker {WORKER}")
        check(len(set(ids)) == len(ids), "the app's keys are unique")
        # Django's own apps declare AutoField (integer) keys: they keep
        # their sequences (the switch says so with a NOTICE) and work.
        cur.execute("""SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                        WHERE attrelid = 'auth_user'::regclass AND attname = 'id'""")
        check(cur.fetchone()[0] == "integer", "auth_user.id is Django's integer")
        check(user.pk < 2**31 and group.pk < 2**31, "contrib.auth rows keep their sequences")
        cur.execute("""SELECT count(*) FROM snowflake_id_internal.snowflake_adopted
                        WHERE seq IN ('shop_customer_id_seq'::regclass, 'shop_order_id_seq'::regclass)""")
        check(cur.fetchone()[0] == 2, "the app's two key sequences are adopted")
        cur.execute("SELECT pg_get_serial_sequence('shop_order', 'id')")
        check(cur.fetchone()[0] == "public.shop_order_id_seq", "pg_get_serial_sequence still names the sequence")
    check(Order.objects.filter(customer=customers[0]).count() == 4, "joins on Snowflake keys")
    check(LogEntry.objects.get(pk=entry.pk).object_id == str(customers[0].pk), "an admin log entry names the row")
    call_command("makemigrations", "shop", check=True, dry_run=True, verbosity=0)
    print(f"adopt: Django migrate and {len(ids)} rows ok")


def sqlalchemy_stage():
    from sqlalchemy import BigInteger, Column, Identity, Sequence, Text, create_engine, text
    from sqlalchemy.orm import DeclarativeBase, Session

    class Base(DeclarativeBase):
        pass

    class Invoice(Base):
        __tablename__ = "sa_invoice"
        id = Column(BigInteger, Identity(), primary_key=True)
        item = Column(Text)

    class Ticket(Base):
        __tablename__ = "sa_ticket"
        id = Column(BigInteger, Sequence("sa_ticket_seq"), primary_key=True)
        item = Column(Text)

    engine = create_engine(f"postgresql+psycopg://postgres@{os.environ['SNOWFLAKE_HOST']}:"
                           f"{os.environ['SNOWFLAKE_PORT']}/{DB}")
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        rows = [Invoice(item=f"i{i}") for i in range(300)] + [Ticket(item=f"t{i}") for i in range(300)]
        s.add_all(rows)
        s.commit()
        inv = [r.id for r in rows[:300]]
        tic = [r.id for r in rows[300:]]
        one = Ticket(item="alone")
        s.add(one)
        s.flush()
        nxt = s.execute(Sequence("sa_ticket_seq").next_value()).scalar()
        s.commit()
        with engine.connect() as c:
            raw = c.connection.dbapi_connection.cursor()
            check(worker_of(raw, inv) == [WORKER], "Identity() keys decode to this server's worker")
            check(worker_of(raw, tic + [one.id, nxt]) == [WORKER], "Sequence() keys decode to this server's worker")
        check(len(set(inv + tic + [one.id, nxt])) == 602, "keys are unique")
        check(s.get(Ticket, tic[7]).item == "t7", "get by a Snowflake key")
        check(s.execute(text("SELECT count(*) FROM sa_invoice")).scalar() == 300, "every row stored")
    print("adopt: SQLAlchemy Identity() and Sequence() ok")


if __name__ == "__main__":
    if sys.argv[1] == "django":
        django_stage(sys.argv[2])
    else:
        sqlalchemy_stage()
