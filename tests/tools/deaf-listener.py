# deaf-listener.py: a TCP port that never completes a connection, for the
# connect timeout's tests (t0990, t0991): it listens with a backlog of 0,
# fills its accept queue with connections of its own and never accepts, so
# the kernel drops every further SYN and a connect() waits until its own
# timeout. Prints "listening PORT" once the queue is full (for start_tool's
# python twin in lib-opts.sh); runs until killed.
import socket
import time

s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(0)
port = s.getsockname()[1]
held = []
for _ in range(2):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    held.append(c)
time.sleep(0.2)
print("listening %d" % port, flush=True)
while True:
    time.sleep(3600)
