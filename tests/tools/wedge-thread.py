#!/usr/bin/env python3
"""wedge-thread.py TID: stops one thread of another process (not the
process: its other threads go on), as a thread stuck in a loop or on a
lock would look from outside, until this tool is stopped (SIGTERM or
SIGINT); then the thread goes on. It ptrace-seizes the thread and
interrupts it (PTRACE_SEIZE, PTRACE_INTERRUPT), prints WEDGED once the
thread has stopped, and detaches at the end (the kernel detaches too if
this tool dies). Needs the right to ptrace the thread (root, or
kernel.yama.ptrace_scope 0 and the same user). For the plane's watchdog
tests (t0640, tests/system/boot.sh)."""
import ctypes
import os
import signal
import sys

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def ptrace(req, tid):
    if libc.ptrace(req, tid, None, None) != 0:
        err = ctypes.get_errno()
        sys.exit("wedge-thread: ptrace(%d, %d): %s" % (req, tid, os.strerror(err)))


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.exit("usage: wedge-thread.py TID")
    tid = int(sys.argv[1])
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)   # taken by sigwait below, never lost
    ptrace(PTRACE_SEIZE, tid)
    ptrace(PTRACE_INTERRUPT, tid)
    os.waitpid(tid, WALL)   # the thread has stopped
    print("WEDGED %d" % tid, flush=True)
    signal.sigwait(stop)
    libc.ptrace(PTRACE_DETACH, tid, None, None)
    print("RELEASED %d" % tid, flush=True)


if __name__ == "__main__":
    main()
