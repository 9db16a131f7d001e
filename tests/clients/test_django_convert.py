"""Converting a Django 5 project's keys to snowflake IDs, the way
docs/sharding.md recommends: an app model and a custom user model that
start with 32-bit AutoField keys and rows, are widened to BigAutoField by
Django's own AlterField migration, and then converted by a RunSQL migration
(recipes/django_convert_migration.py). Then, with IDs above 2**31 - 1:
get, save twice, login, many-to-many add and count, and makemigrations
sees nothing to do.

Each stage is its own process (Django models cannot be redefined in one):
  python test_django_convert.py legacy|widen|check WORKDIR
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEGACY_MODELS = (HERE / "recipes" / "django_convert_models.py").read_text().replace(
    "models.BigAutoField(primary_key=True)", "models.AutoField(primary_key=True)")


def setup(work):
    import django
    from django.conf import settings

    sys.path.insert(0, str(work))
    settings.configure(
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "convapp"],
        AUTH_USER_MODEL="convapp.Member",
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["SNOWFLAKE_CONVERT_DB"],
                               "USER": "postgres", "HOST": os.environ["SNOWFLAKE_HOST"],
                               "PORT": os.environ["SNOWFLAKE_PORT"]}},
        MIGRATION_MODULES={"convapp": "convapp_migrations"},
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        SECRET_KEY="test", USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def main(stage, work):
    work = Path(work)
    app, migs = work / "convapp", work / "convapp_migrations"
    if stage == "legacy":
        app.mkdir(parents=True)
        migs.mkdir()
        (app / "__init__.py").write_text("")
        (migs / "__init__.py").write_text("")
        (app / "models.py").write_text(LEGACY_MODELS)
    else:
        (app / "models.py").write_text((HERE / "recipes" / "django_convert_models.py").read_text())
    setup(work)
    from django.core.management import call_command
    from django.db import connection

    if stage == "legacy":
        call_command("makemigrations", "convapp", verbosity=0)
        call_command("migrate", verbosity=0)
        from convapp.models import Member, Project
        old = Member.objects.create_user("legacy", password="pw")
        p = Project.objects.create(owner=old, name="old")
        p.members.add(old)
        assert old.pk < 2**31
        print(f"django convert: legacy rows with 32-bit keys (member {old.pk})")
        return
    if stage == "widen":
        call_command("makemigrations", "convapp", name="bigint_keys", verbosity=0)
        (migs / "0003_snowflake_keys.py").write_text((HERE / "recipes" / "django_convert_migration.py").read_text())
        call_command("migrate", verbosity=0)
        with connection.cursor() as c:
            c.execute("""SELECT string_agg(format('%s.%s %s %s', table_name, column_name, data_type,
                                                  CASE WHEN is_identity = 'YES' THEN 'identity ' || identity_generation
                                                       ELSE coalesce(column_default, '-') END),
                                           '; ' ORDER BY table_name, column_name)
                           FROM information_schema.columns
                          WHERE table_name LIKE 'convapp%' AND (column_name = 'id' OR column_name LIKE '%\\_id')""")
            shape = c.fetchone()[0]
        # The keys stay Django's identities (issue 63: the catalog is the
        # application's), their sequences adopted; the M2M tables' keys are
        # Django's integer identities, left as they are.
        want = ("convapp_member.id bigint identity BY DEFAULT; "
                "convapp_member_groups.group_id integer -; "
                "convapp_member_groups.id integer identity BY DEFAULT; "
                "convapp_member_groups.member_id bigint -; "
                "convapp_member_user_permissions.id integer identity BY DEFAULT; "
                "convapp_member_user_permissions.member_id bigint -; "
                "convapp_member_user_permissions.permission_id integer -; "
                "convapp_project.id bigint identity BY DEFAULT; "
                "convapp_project.owner_id bigint -; "
                "convapp_project_members.id integer identity BY DEFAULT; "
                "convapp_project_members.member_id bigint -; "
                "convapp_project_members.project_id bigint -")
        assert shape == want, f"columns after the migrations:\n{shape}\nwanted:\n{want}"
        print("django convert: AlterField to BigAutoField, then the RunSQL migration: keys bigint with snowflake defaults")
        return
    # check
    from django.test import Client
    from convapp.models import Member, Project

    out = []
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)   # exits non-zero on changes
    u = Member.objects.create_user("alice", password="pw")
    assert u.pk > 2**31, f"new member key {u.pk} is not a snowflake ID"
    assert Member.objects.get(pk=u.pk).username == "alice"
    u.first_name = "Alice"
    u.save()
    u.save()                                                     # an UPDATE both times
    assert Member.objects.filter(username="alice").count() == 1
    assert Client().login(username="alice", password="pw"), "login failed"
    p = Project.objects.create(owner=u, name="new")
    assert p.pk > 2**31
    p.members.add(u, Member.objects.get(username="legacy"))
    assert p.members.count() == 2 and u.projects.count() == 1 and u.owned.get().pk == p.pk
    old = Project.objects.get(name="old")
    assert old.pk < 2**31 and old.members.get().username == "legacy"
    with connection.cursor() as c:
        c.execute("SELECT snowflake_worker_id(%s), snowflake_worker_id(%s), current_setting('snowflake_id.worker_id')",
                  [u.pk, p.pk])
        w1, w2, server = c.fetchone()
    assert str(w1) == server and str(w2) == server
    out.append(u.pk)
    print(f"django convert: get, save twice, login, M2M add and count with snowflake keys (member {u.pk}); "
          "legacy rows intact; makemigrations sees no change")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
