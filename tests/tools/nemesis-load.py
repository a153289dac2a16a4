#!/usr/bin/env python3
"""nemesis-load.py: the random writes of bench/nemesis.sh (python3 stdlib).

    nemesis-load.py --replicas URL[,URL...] --seconds N --out FILE
                    [--threads 3] [--names 40] [--seed S] [--timeout 20]

Each thread, until N seconds have passed, sends one write at a time to a
replica picked at random: a PUT of a file resource (55%), a batch of 2-4
upserts and 0-2 removes (20%), a DELETE (15%) or a PUT of a name no
subscribed agent receives (10%). Every body is unique: its content is
"WID NAME\\n", WID naming the request (wT-SEQ), so the checker can tell
which request produced a body found in the history.

One JSON line per request in FILE, written when it ends:
  wid, op (put|batch|delete), replica (index), t0/t1 (ms, wall clock),
  status (HTTP status or null), result (ok: 2xx; failed: a 4xx, or the
  connection was refused so nothing was sent; indeterminate: a 5xx, a
  timeout, a reset, no answer), why, version and changed (from a 2xx
  answer), puts {name: {path, mode, content}}, dels [name].
"""
import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time
import urllib.parse


def now_ms():
    return int(time.time() * 1000)


def file_body(rng, wid, name):
    """A file resource's body for name: its path is the name's own (two
    names never share one), now and then moved to alt/ or given mode 0600."""
    base = name.split('/', 1)[1]
    path = ('alt/%s.txt' % base) if rng.random() < 0.1 else ('d%s/%s.txt' % (base[-1], base))
    body = {'path': path, 'content': '%s %s\n' % (wid, name)}
    if rng.random() < 0.15:
        body['mode'] = '0600'
    return body


class Writer(threading.Thread):
    def __init__(self, idx, args, replicas, out, lock, deadline):
        super().__init__(daemon=True)
        self.idx, self.args, self.replicas, self.out, self.lock = idx, args, replicas, out, lock
        self.deadline = deadline
        self.rng = random.Random((args.seed or 0) * 1000 + idx if args.seed is not None else None)
        self.seq = 0

    def name(self, kind='k'):
        if kind == 'x':
            return 'file/x%d' % self.rng.randrange(5)
        return 'file/k%02d' % self.rng.randrange(self.args.names)

    def one(self):
        self.seq += 1
        wid = 'w%d-%d' % (self.idx, self.seq)
        rng = self.rng
        r = rng.random()
        puts, dels = {}, []
        if r < 0.55:
            op = 'put'
            n = self.name()
            puts[n] = file_body(rng, wid, n)
            method, path, body = 'PUT', '/v1/resources/' + n, puts[n]
        elif r < 0.75:
            op = 'batch'
            for _ in range(rng.randint(2, 4)):
                n = self.name()
                puts[n] = file_body(rng, wid, n)
            for _ in range(rng.randint(0, 2)):
                n = self.name()
                if n not in puts and n not in dels:
                    dels.append(n)
            method, path = 'POST', '/v1/batch'
            body = {'upserts': [{'name': n, 'body': b} for n, b in puts.items()]}
            if dels:
                body['removes'] = dels
        elif r < 0.90:
            op = 'delete'
            n = self.name()
            dels.append(n)
            method, path, body = 'DELETE', '/v1/resources/' + n, None
        else:
            op = 'put'
            n = self.name('x')
            puts[n] = file_body(rng, wid, n)
            method, path, body = 'PUT', '/v1/resources/' + n, puts[n]
        ri = rng.randrange(len(self.replicas))
        u = self.replicas[ri]
        rec = {'wid': wid, 'op': op, 'replica': ri, 'puts': puts, 'dels': dels, 'status': None,
               'version': None, 'changed': None, 'why': ''}
        data = json.dumps(body).encode() if body is not None else None
        rec['t0'] = now_ms()
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=self.args.timeout)
        try:
            try:
                conn.connect()
            except ConnectionRefusedError as e:
                rec['result'], rec['why'] = 'failed', 'refused: %s' % e   # nothing was sent
                return rec
            conn.request(method, path, body=data, headers={'Content-Type': 'application/json',
                                                            'Connection': 'close'})
            resp = conn.getresponse()
            text = resp.read().decode('utf-8', 'replace')
            rec['status'] = resp.status
            if 200 <= resp.status < 300:
                rec['result'] = 'ok'
                try:
                    j = json.loads(text)
                    rec['version'] = j.get('version')
                    rec['changed'] = j.get('changed')
                except ValueError:
                    rec['result'], rec['why'] = 'indeterminate', '2xx without JSON: %.200s' % text
            elif 400 <= resp.status < 500:
                rec['result'], rec['why'] = 'failed', text[:300]
            else:
                rec['result'], rec['why'] = 'indeterminate', text[:300]
        except (socket.timeout, TimeoutError) as e:
            rec['result'], rec['why'] = 'indeterminate', 'timeout: %s' % e
        except (OSError, http.client.HTTPException) as e:
            rec['result'], rec['why'] = 'indeterminate', '%s: %s' % (type(e).__name__, e)
        finally:
            conn.close()
            rec['t1'] = now_ms()
        return rec

    def run(self):
        while time.time() < self.deadline:
            rec = self.one()
            if 't1' not in rec:
                rec['t1'] = now_ms()
            with self.lock:
                self.out.write(json.dumps(rec, sort_keys=True) + '\n')
                self.out.flush()
            time.sleep(self.rng.uniform(0, self.args.pause))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--replicas', required=True)
    ap.add_argument('--seconds', type=float, required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--threads', type=int, default=3)
    ap.add_argument('--names', type=int, default=40)
    ap.add_argument('--seed', type=int)
    ap.add_argument('--timeout', type=float, default=20)
    ap.add_argument('--pause', type=float, default=0.5, help='longest pause between two writes of a thread (s)')
    args = ap.parse_args()
    replicas = [urllib.parse.urlsplit(x) for x in args.replicas.split(',')]
    deadline = time.time() + args.seconds
    lock = threading.Lock()
    with open(args.out, 'a') as out:
        ws = [Writer(i + 1, args, replicas, out, lock, deadline) for i in range(args.threads)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
    print('load: done', file=sys.stderr)


if __name__ == '__main__':
    main()
