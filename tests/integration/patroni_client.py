"""A client of the Patroni cluster (tests/integration/patroni.sh): inserts
rows keyed by snowflake_nextval() through a multi-host connection string
that follows the primary, and appends every ID it receives (an
acknowledged commit) to a file, until a stop file appears. Reconnects
after errors. Debian's python3 with python3-psycopg2 (Patroni's own)."""
import sys
import time
from pathlib import Path

import psycopg2

dsn, out, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
conn = None
with out.open("a") as f:
    while not stop.exists():
        try:
            if conn is None:
                conn = psycopg2.connect(dsn, connect_timeout=2)
            with conn.cursor() as cur:
                cur.execute("INSERT INTO ids (via) VALUES (current_setting('port')::int) RETURNING id")
                (new_id,) = cur.fetchone()
            conn.commit()
            f.write(f"{new_id}\n")
            f.flush()
            # About 100 commits a second per client: a steady load whose
            # WAL stays well within Patroni's maximum_lag_on_failover
            # (1 MB) between its loops, so that a replica may be promoted.
            time.sleep(0.01)
        except psycopg2.Error:
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
            conn = None
            time.sleep(0.1)
