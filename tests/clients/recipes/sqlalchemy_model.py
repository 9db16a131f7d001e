# SQLAlchemy 2: a model keyed by snowflake_nextval().
from sqlalchemy import BigInteger, String, insert_sentinel, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "sa_orders"

    # BigInteger, and autoincrement=False: with autoincrement=True SQLAlchemy
    # emits BIGSERIAL and the snowflake default is silently dropped.
    id: Mapped[int] = mapped_column(
        BigInteger,
        primary_key=True,
        autoincrement=False,
        server_default=text("snowflake_nextval()"),
    )
    item: Mapped[str] = mapped_column(String)
    # A server-generated key cannot tell batched INSERT ... RETURNING rows
    # apart; a sentinel column lets session.add_all() insert many rows in
    # one statement instead of one statement per row.
    _sentinel: Mapped[int] = insert_sentinel()
