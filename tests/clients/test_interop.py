"""Interop: IDs made by PyPI sonyflake-py (the Go sony/sonyflake layout:
39 bits of 10 ms ticks since 2014-09-01, 8 bits of sequence, 16 of machine)
decoded by the server's `sonyflake` preset field by field as the library
decomposes them, and within the range bounds of their tick. Run by run.sh
with SNOWFLAKE_DSN set."""
import datetime
import os

import psycopg
from sonyflake import SonyFlake

EPOCH_MS = 1409529600000  # 2014-09-01 00:00:00 UTC


def main():
    sf = SonyFlake(machine_id=lambda: 0x2A7B)
    ids = [sf.next_id() for _ in range(2000)]
    with psycopg.connect(os.environ["SNOWFLAKE_DSN"]) as conn:
        rows = conn.execute(
            """SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.sequence,
                      id BETWEEN snowflake_min_id(d.ts, 'sonyflake') AND snowflake_max_id(d.ts, 'sonyflake')
                 FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(id, n), snowflake_decode(id, 'sonyflake') d
                ORDER BY n""",
            (ids,),
        ).fetchall()
    assert len(rows) == len(ids)
    for id_, ms, worker, seq, in_bounds in rows:
        parts = SonyFlake.decompose(id_)
        want = (EPOCH_MS + parts["time"] * 10, parts["machine_id"], parts["sequence"], True)
        assert (ms, worker, seq, in_bounds) == want, (id_, (ms, worker, seq, in_bounds), want)
    assert any(seq > 0 for _, _, _, seq, _ in rows), "no two IDs shared a tick: the sequence went untested"
    newest = datetime.datetime.fromtimestamp(rows[-1][1] / 1000, datetime.timezone.utc)
    print(f"  sonyflake-py: {len(rows)} IDs (newest {newest.isoformat(timespec='milliseconds')}):"
          " every field as the library decomposes it, each within its tick's bounds")


if __name__ == "__main__":
    main()
