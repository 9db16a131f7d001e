# Django 5: public IDs in URLs, internal IDs in the database. The URL
# carries snowflake_to_public(id, 'orders'); the view turns it back into
# the key in the query (a primary-key index scan); a mistyped or foreign
# public ID is a 404 (the server refuses it with SQLSTATE 22P02).
from django.db import DataError, models
from django.http import Http404, JsonResponse
from django.urls import path

from clientapp.models import Order


class ToPublic(models.Func):
    function = "snowflake_to_public"
    output_field = models.CharField()


class FromPublic(models.Func):
    function = "snowflake_from_public"
    output_field = models.BigIntegerField()


def public_orders():
    return Order.objects.annotate(public_id=ToPublic("id", models.Value("orders")))


def order_detail(request, public_id):
    try:
        order = public_orders().get(id=FromPublic(models.Value(public_id), models.Value("orders")))
    except (Order.DoesNotExist, DataError):
        raise Http404("no such order")
    return JsonResponse({"id": order.public_id, "item": order.item})


urlpatterns = [path("orders/<str:public_id>", order_detail)]
