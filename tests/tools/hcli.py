#!/usr/bin/env python3
# hcli.py: one command on haproxy's CLI socket (the runtime API's admin
# socket), its whole answer on stdout (t0325, t0993).
#   hcli.py SOCKET COMMAND
import socket
import sys

s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
sys.stdout.write(out.decode("latin-1"))
