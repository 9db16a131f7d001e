"""Python clients against a running server (worker_id 21, default layout):
psycopg 3, asyncpg, SQLAlchemy 2 (sync and async) and Django 5. Each checks
that the IDs it receives are unique, increase per connection, and decode,
in Python, to the fields the server reports. Run by tests/clients/run.sh with
SNOWFLAKE_DSN set; exits non-zero on the first failure."""
import asyncio
import datetime as dt
import os
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "recipes"))
DSN = os.environ["SNOWFLAKE_DSN"]            # libpq keyword form
URL = os.environ["SNOWFLAKE_URL"]            # postgresql://user@host:port/db, host quoted
WORKER = 21
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def decode(i):
    """The default layout, decoded client-side: 41/10/12 bits."""
    return EPOCH + dt.timedelta(milliseconds=i >> 22), (i >> 12) & 0x3FF, i & 0xFFF


def check_ids(name, per_connection, conn):
    """Unique overall, strictly increasing within each connection, and
    decoded here exactly as the server decodes them."""
    ids = [i for seq in per_connection for i in seq]
    assert len(ids) == len(set(ids)), f"{name}: duplicate IDs"
    for seq in per_connection:
        assert all(a < b for a, b in zip(seq, seq[1:])), f"{name}: IDs not increasing per connection"
    with conn.cursor() as cur:
        cur.execute("SELECT id, d.ts, d.worker_id, d.sequence FROM unnest(%s::bigint[]) id, snowflake_decode(id) d", (ids,))
        for i, ts, worker, seq in cur.fetchall():
            assert decode(i) == (ts, worker, seq), f"{name}: {i} decodes differently here and on the server"
            assert worker == WORKER
    print(f"  {name}: {len(ids)} IDs over {len(per_connection)} connection(s): unique, increasing, decode as on the server")


def psycopg_tests():
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("CREATE TABLE py_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)")
        returning = [conn.execute("INSERT INTO py_orders (item) VALUES (%s) RETURNING id", (f"r{i}",)).fetchone()[0]
                     for i in range(100)]
        assert all(isinstance(i, int) for i in returning)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO py_orders (item) VALUES (%s) RETURNING id",
                            [(f"m{i}",) for i in range(200)], returning=True)
            many = []
            while True:
                many.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
            with cur.copy("COPY py_orders (item) FROM STDIN") as copy:
                for i in range(500):
                    copy.write_row((f"c{i}",))
            cur.execute("SELECT id FROM py_orders WHERE item LIKE 'c%' ORDER BY id")
            copied = [r[0] for r in cur.fetchall()]
        assert len(copied) == 500 and min(copied) > max(many) > max(returning)

        per_thread = [[] for _ in range(4)]

        def worker(k):
            with psycopg.connect(DSN, autocommit=True) as c:
                for i in range(250):
                    per_thread[k].append(
                        c.execute("INSERT INTO py_orders (item) VALUES (%s) RETURNING id", (f"t{k}-{i}",)).fetchone()[0])

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check_ids("psycopg 3 (RETURNING, executemany, COPY, 4 threads)", [returning + many] + per_thread, conn)


def asyncpg_tests(conn):
    import asyncpg

    async def run():
        pool = await asyncpg.create_pool(URL, min_size=4, max_size=4)
        async with pool.acquire() as c:
            await c.execute("CREATE TABLE apg_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)")

        async def task(k):
            async with pool.acquire() as c:
                return [await c.fetchval("INSERT INTO apg_orders (item) VALUES ($1) RETURNING id", f"{k}-{i}")
                        for i in range(250)]

        res = await asyncio.gather(*(task(k) for k in range(4)))
        async with pool.acquire() as c:
            rows = await c.fetch("SELECT id FROM snowflake_nextval(100) id")
            bulk = [r["id"] for r in rows]
        await pool.close()
        return list(res) + [bulk]

    check_ids("asyncpg (4 concurrent tasks, snowflake_nextval(100))", asyncio.run(run()), conn)


def sqlalchemy_tests(conn):
    from sqlalchemy import create_engine, event, func, select, text
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.orm import Session
    from sqlalchemy_model import Base, Order

    engine = create_engine(URL.replace("postgresql://", "postgresql+psycopg://"))
    ddl = str(__import__("sqlalchemy.schema", fromlist=["CreateTable"]).CreateTable(Order.__table__)
              .compile(engine))
    assert "BIGSERIAL" not in ddl.upper() and "snowflake_nextval()" in ddl, ddl
    Base.metadata.create_all(engine)
    inserts = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(conn_, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(statement)

    with Session(engine) as s:
        orders = [Order(item=f"o{i}") for i in range(200)]
        s.add_all(orders)
        s.flush()
        ids = [o.id for o in orders]
        s.commit()
    assert len(inserts) <= 2, f"add_all of 200 objects took {len(inserts)} INSERT statements"
    with Session(engine) as s:
        # Older rows, so that a time range is a small part of the table.
        s.execute(text("INSERT INTO sa_orders (id, item) SELECT snowflake_compose("
                       "timestamptz '2025-01-01+00' + g * interval '1 second', 1, 0), 'old' "
                       "FROM generate_series(1, 20000) g"))
        s.commit()
        s.execute(text("ANALYZE sa_orders"))
        t0, t1 = decode(min(ids))[0], decode(max(ids))[0]
        q = select(func.count()).select_from(Order).where(
            Order.id.between(func.snowflake_min_id(t0), func.snowflake_max_id(t1)))
        assert s.execute(q).scalar() == 200
        plan = "\n".join(r[0] for r in s.execute(text(
            "EXPLAIN " + str(q.compile(engine, compile_kwargs={"literal_binds": True})))))
        assert "sa_orders_pkey" in plan, plan

    async def run_async():
        aengine = create_async_engine(URL.replace("postgresql://", "postgresql+asyncpg://"))
        from sqlalchemy.ext.asyncio import AsyncSession
        async with AsyncSession(aengine) as s:
            objs = [Order(item=f"a{i}") for i in range(50)]
            s.add_all(objs)
            await s.flush()
            out = [o.id for o in objs]
            await s.commit()
        await aengine.dispose()
        return out

    async_ids = asyncio.run(run_async())
    check_ids(f"SQLAlchemy 2 (add_all of 200 in {len(inserts)} INSERT; range query on the key; async)",
              [ids, async_ids], conn)


def django_tests(conn):
    import django
    from django.conf import settings

    migrations = Path(tempfile.mkdtemp()) / "clientapp_migrations"
    migrations.mkdir()
    (migrations / "__init__.py").write_text("")
    sys.path.insert(0, str(migrations.parent))
    appdir = Path(tempfile.mkdtemp()) / "clientapp"
    appdir.mkdir()
    (appdir / "__init__.py").write_text("")
    (appdir / "models.py").write_text((HERE / "recipes" / "django_models.py").read_text())
    (appdir / "public_ids.py").write_text((HERE / "recipes" / "django_public_ids.py").read_text())
    sys.path.insert(0, str(appdir.parent))
    host = os.environ["SNOWFLAKE_HOST"]
    settings.configure(
        INSTALLED_APPS=["clientapp"],
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["SNOWFLAKE_DB"],
                               "USER": "postgres", "HOST": host, "PORT": os.environ["SNOWFLAKE_PORT"]}},
        MIGRATION_MODULES={"clientapp": "clientapp_migrations"},
        USE_TZ=True,
        ROOT_URLCONF="clientapp.public_ids",
        ALLOWED_HOSTS=["testserver"],
    )
    django.setup()
    from django.core.management import call_command

    call_command("makemigrations", "clientapp", verbosity=0)
    call_command("migrate", verbosity=0)
    from clientapp.models import Order, bulk_create_orders

    saved = []
    for i in range(100):
        o = Order(item=f"d{i}")
        o.save()
        assert isinstance(o.pk, int), f"pk after save() is {o.pk!r}"
        saved.append(o.pk)
    assert Order.objects.get(pk=saved[-1]).item == "d99"
    o = Order.objects.get(pk=saved[0])
    o.item = "changed"
    o.save()                                   # an UPDATE, not a second INSERT
    assert Order.objects.count() == 100
    bulk = bulk_create_orders([f"b{i}" for i in range(300)])
    assert all(isinstance(b.pk, int) for b in bulk)
    assert Order.objects.filter(pk__in=[b.pk for b in bulk]).count() == 300
    check_ids("Django 5 (db_default, migrations, save, get, bulk_create with keys from snowflake_nextval(n))",
              [saved, [b.pk for b in bulk]], conn)
    public_ids_tests(Order)


def public_ids_tests(Order):
    """recipes/django_public_ids.py: every order is found through its public
    form in the URL, in either case; the response holds no internal ID; a
    mistyped public ID and one of another domain are 404s."""
    from django.test import Client
    from clientapp.public_ids import public_orders

    client = Client()
    orders = list(public_orders().order_by("id")[:50])
    for i, o in enumerate(orders):
        url = f"/orders/{o.public_id.lower() if i % 2 else o.public_id}"
        res = client.get(url)
        assert res.status_code == 200, (url, res.status_code)
        assert res.json() == {"id": o.public_id, "item": o.item}, res.json()
        assert str(o.id) not in res.content.decode(), "the response holds the internal ID"
    one = orders[0].public_id
    typo = one[:5] + ("Y" if one[5] == "X" else "X") + one[6:]
    assert client.get(f"/orders/{typo}").status_code == 404, "a mistyped public ID"
    with connection_cursor() as cur:
        cur.execute("SELECT snowflake_to_public(%s, 'users')", [orders[0].id])
        other = cur.fetchone()[0]
    assert client.get(f"/orders/{other}").status_code == 404, "another domain's public ID"
    print(f"  Django 5 public IDs: {len(orders)} orders found by the public ID in the URL (either case), "
          "no internal ID in a response; a mistyped public ID and one of another domain are 404s")


def connection_cursor():
    from django.db import connection

    return connection.cursor()


def main():
    import psycopg

    psycopg_tests()
    with psycopg.connect(DSN, autocommit=True) as conn:
        asyncpg_tests(conn)
        sqlalchemy_tests(conn)
        django_tests(conn)
    print("python clients: ok")


if __name__ == "__main__":
    main()
