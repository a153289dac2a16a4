#!/usr/bin/env python3
# notify-recv.py SOCKET OUT: stands in for systemd's notify socket in the
# tests: binds an AF_UNIX datagram socket at SOCKET and appends every
# message to OUT, one line per assignment, each prefixed by the arrival
# time in ms ("1234 READY=1"), until killed.
import os
import socket
import sys
import time

path, out = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("%d LISTENING=1\n" % int(time.monotonic() * 1000))
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        now = int(time.monotonic() * 1000)
        for line in msg.split("\n"):
            f.write("%d %s\n" % (now, line))
