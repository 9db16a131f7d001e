# Django 5: the migration that switches the widened keys to snowflake IDs.
# It comes after the AlterField migration that made them BigAutoField.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("convapp", "0002_bigint_keys")]

    operations = [
        migrations.RunSQL(
            "SELECT snowflake_convert_column('convapp_member', 'id');"
            "SELECT snowflake_convert_column('convapp_project', 'id');",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
