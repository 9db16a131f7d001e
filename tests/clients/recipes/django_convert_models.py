# Django 5: models whose keys may hold snowflake IDs. Every key, the custom
# user model's included, is a 64-bit BigAutoField; a 32-bit AutoField
# (auth.User's own) makes Django skip lookups above 2**31 - 1.
from django.contrib.auth.models import AbstractUser
from django.db import models


class Member(AbstractUser):
    id = models.BigAutoField(primary_key=True)

    class Meta:
        app_label = "convapp"


class Project(models.Model):
    id = models.BigAutoField(primary_key=True)
    owner = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="owned")
    members = models.ManyToManyField(Member, related_name="projects")
    name = models.TextField()

    class Meta:
        app_label = "convapp"
