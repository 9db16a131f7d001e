"""Issue 63: schema tools see no drift (the Python ones; test_schema_tools.js
has the Node.js ones and says how). Each tool runs against a stock database
(st_TOOL_stock) and one with the switch on (st_TOOL_switch), as the
non-superuser database owner `app`: its plan or output must be the same on
both, the second run must plan nothing, and rows inserted through it then
get Snowflake keys of worker 21 on the switch's database.
  alembic   SQLAlchemy metadata (bigserial and Identity()), Alembic's
            autogenerate compare with compare_server_default=True, before
            and after create_all
  django    makemigrations, migrate, makemigrations --check, inspectdb
  peewee    create_tables twice, and its introspection (pwiz's models)
Run by run.sh with SNOWFLAKE_HOST and SNOWFLAKE_PORT set:
  python test_schema_tools.py WORKDIR [TOOL...]
"""
import io
import os
import subprocess
import sys
import textwrap

HOST = os.environ["SNOWFLAKE_HOST"]
PORT = int(os.environ["SNOWFLAKE_PORT"])
WORKER = 21


def worker_of(i):
    return (int(i) >> 12) & 1023


def url(db):
    return f"postgresql+psycopg://app@{HOST}:{PORT}/{db}"


def alembic_run(db, _work):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import BigInteger, Column, Identity, MetaData, Table, Text, create_engine, insert

    md = MetaData()
    inc = Table("a_inc", md, Column("id", BigInteger, primary_key=True, autoincrement=True), Column("name", Text))
    ident = Table("a_ident", md, Column("id", BigInteger, Identity(), primary_key=True), Column("name", Text))
    engine = create_engine(url(db))
    plans = []
    with engine.begin() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_server_default": True, "compare_type": True})
        plans.append(sorted(repr(d) for d in compare_metadata(ctx, md)))
        md.create_all(conn)
    with engine.begin() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_server_default": True, "compare_type": True})
        plans.append(sorted(repr(d) for d in compare_metadata(ctx, md)))
        ids = [conn.execute(insert(t).values(name="x").returning(t.c.id)).scalar_one() for t in (inc, ident)]
    engine.dispose()
    return plans, ids


def django_run(db, work):
    """A project of one app, in WORKDIR/django_DB: its own migrations."""
    root = os.path.join(work, f"django_{db}")
    os.makedirs(os.path.join(root, "shop", "migrations"), exist_ok=True)
    for name, body in {
        "settings.py": f"""
            SECRET_KEY = "x"
            INSTALLED_APPS = ["shop"]
            DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": "{db}",
                                       "USER": "app", "HOST": "{HOST}", "PORT": {PORT}}}}}
            DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
            USE_TZ = True
            """,
        "shop/__init__.py": "",
        "shop/migrations/__init__.py": "",
        "shop/models.py": """
            from django.db import models

            class Order(models.Model):
                item = models.TextField()
            """,
    }.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(textwrap.dedent(body))
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings", "PYTHONPATH": root}

    def manage(*args, check=True):
        return subprocess.run([sys.executable, "-m", "django", *args], cwd=root, env=env,
                              capture_output=True, text=True, check=check)

    plans = [manage("makemigrations", "shop").stdout.splitlines()]
    manage("migrate", "-v", "0")
    again = manage("makemigrations", "--check", "--dry-run", check=False)
    plans.append([] if again.returncode == 0 else again.stdout.splitlines())
    inspect = [line for line in manage("inspectdb", "shop_order").stdout.splitlines() if line.strip()]
    sys.path.insert(0, root)
    os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
    out = subprocess.run([sys.executable, "-c", "import django; django.setup(); from shop.models import Order;"
                          "print(Order.objects.create(item='x').id)"],
                         cwd=root, env=env, capture_output=True, text=True, check=True)
    return plans + [inspect], [out.stdout.strip()]


def peewee_run(db, _work):
    import peewee
    from playhouse.reflection import Introspector, print_model

    pdb = peewee.PostgresqlDatabase(db, user="app", host=HOST, port=PORT)

    class Inc(peewee.Model):
        id = peewee.BigAutoField()
        name = peewee.TextField(null=True)

        class Meta:
            database = pdb
            table_name = "p_inc"

    pdb.connect()
    plans = []
    for _ in range(2):
        plans.append([] if pdb.table_exists("p_inc") else ["create p_inc"])
        pdb.create_tables([Inc], safe=True)
    # Its introspection, as pwiz prints the table's model.
    models = Introspector.from_database(pdb).generate_models(table_names=["p_inc"])
    buf = io.StringIO()
    stdout, sys.stdout = sys.stdout, buf
    try:
        print_model(models["p_inc"])
    finally:
        sys.stdout = stdout
    plans.append(buf.getvalue().splitlines())
    ids = [Inc.create(name="x").id]
    pdb.close()
    return plans, ids


TOOLS = {"alembic": alembic_run, "django": django_run, "peewee": peewee_run}


def main():
    work = sys.argv[1]
    for name in sys.argv[2:] or list(TOOLS):
        stock_plans, stock_ids = TOOLS[name](f"st_{name}_stock", work)
        plans, ids = TOOLS[name](f"st_{name}_switch", work)
        assert plans == [[line.replace(f"st_{name}_stock", f"st_{name}_switch") for line in p] for p in stock_plans], \
            f"{name}: its plans differ on the switch's database:\n{plans}\nstock:\n{stock_plans}"
        assert plans[1] == [], f"{name}: its second run plans changes: {plans[1]}"
        assert ids and all(worker_of(i) == WORKER and int(i) > 1 << 40 for i in ids), \
            f"{name}: keys on the switch's database are not Snowflake IDs of worker {WORKER}: {ids}"
        assert all(int(i) < 1000 for i in stock_ids), f"{name}: the stock database's keys: {stock_ids}"
        print(f"schema tools: {name}: the same plans and output on both "
              f"({len(plans[0])} then {len(plans[1])} changes); keys {', '.join(map(str, ids))}")


if __name__ == "__main__":
    main()
