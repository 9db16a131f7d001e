#!/usr/bin/env python3
"""A relay between two Unix sockets, for tests/integration/lease_promise.sh.

    relay.py LISTEN_SOCKET TARGET_SOCKET PIDFILE

Accepts connections on LISTEN_SOCKET (mode 0777, so that a server running
as another OS user may connect) and relays each, byte for byte, to a new
connection to TARGET_SOCKET (a PostgreSQL server's .s.PGSQL.<port>). One
process, one thread: SIGSTOP of the PID written to PIDFILE freezes every
relayed connection at once (a network partition that drops nothing),
SIGCONT lets them go on.
"""
import os
import selectors
import socket
import sys


def main():
    listen, target, pidfile = sys.argv[1:4]
    try:
        os.unlink(listen)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    os.chmod(listen, 0o777)
    srv.listen(64)
    srv.setblocking(False)
    with open(pidfile + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.replace(pidfile + ".tmp", pidfile)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    peer = {}

    def close(s):
        other = peer.pop(s, None)
        for x in (s, other):
            if x is None:
                continue
            peer.pop(x, None)
            try:
                sel.unregister(x)
            except (KeyError, ValueError):
                pass
            x.close()

    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is srv:
                try:
                    c, _ = srv.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                c.setblocking(True)
                t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    t.connect(target)
                except OSError:
                    c.close()
                    t.close()
                    continue
                peer[c] = t
                peer[t] = c
                sel.register(c, selectors.EVENT_READ)
                sel.register(t, selectors.EVENT_READ)
                continue
            if s not in peer:
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                close(s)
                continue
            try:
                peer[s].sendall(data)
            except (OSError, KeyError):
                close(s)


if __name__ == "__main__":
    main()
