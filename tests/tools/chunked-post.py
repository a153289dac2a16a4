#!/usr/bin/env python3
# chunked-post.py: POSTs a body of TOTAL bytes in chunks of CHUNK bytes
# (Transfer-Encoding: chunked, no Content-Length), as a streaming client
# does, where curl sends one chunk of the whole file; prints the answer's
# status code and its body's first line (t0990, t0991: max_body).
#   chunked-post.py PORT PATH TOTAL CHUNK
import socket
import sys

port, path, total, chunk = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"POST %s HTTP/1.1\r\nHost: chunked.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
          % path.encode())
sent = 0
try:
    while sent < total:
        n = min(chunk, total - sent)
        s.sendall(b"%x\r\n" % n + b"a" * n + b"\r\n")
        sent += n
    s.sendall(b"0\r\n\r\n")
except OSError:
    pass   # a proxy that refused the body early may close on us: read its answer
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError:
    pass
head, _, body = data.partition(b"\r\n\r\n")
status = head.split(b" ")[1].decode() if head.count(b" ") else "000"
print(status, body.split(b"\n")[0].decode(errors="replace"))
