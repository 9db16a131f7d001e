# Django 5: a model keyed by snowflake_nextval().
from django.db import connection, models


class Order(models.Model):
    # The database computes the key (db_default); Django reads it back
    # after INSERT ... RETURNING.
    id = models.BigIntegerField(
        primary_key=True,
        db_default=models.Func(function="snowflake_nextval", output_field=models.BigIntegerField()),
        editable=False,
    )
    item = models.TextField()

    class Meta:
        app_label = "clientapp"


def bulk_create_orders(items):
    """bulk_create cannot read server defaults back (obj.pk would be a
    DatabaseDefault object): take the keys first, in one round trip."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT snowflake_nextval(%s)", [len(items)])
        ids = [row[0] for row in cursor.fetchall()]
    return Order.objects.bulk_create(Order(id=i, item=item) for i, item in zip(ids, items))
