#!/usr/bin/env python3
"""nemesis-check.py: the history checker of bench/nemesis.sh (python3 stdlib).

    nemesis-check.py WORKDIR      check the records of a run
    nemesis-check.py --self-test  check doctored histories are caught

What it reads in WORKDIR (bench/nemesis.sh writes them):
  writes.jsonl        every write's request and answer (nemesis-load.py)
  history.jsonl       etcd's events under /tether/ from revision 1
                      (etcdctl watch --rev=1 -w json), history.rev the
                      revision read before the dump (it must reach it)
  records/NODE.applied  tetherd's --reload hook, one line per call:
                      "@ INC KIND VERSION TIME_NS {PATH MODE FIRST_LINE}"
                      (tab separated; KIND apply: a push went live; back: a
                      boot or a revert put files back), final/NODE.applied
                      the same listing taken at the end
  agents/NODE.incs    "INC start|kill9|term MS PID": the agent's lives;
  agents/NODE.INC.log its log in each ("files: output matches version V"
                      at boot, "applied version V" once V is committed to
                      last-good); agents/NODE.sub its --sub prefixes
  converge.txt        final=V, converged=0|1, ms=, limit_ms=
  final/rR.json       each replica's GET /v1/resources at the end (qR.json:
                      a relay's)
  params.txt          lease_ttl_s, heartbeat_s, backoff_max_s (the planes'
                      and agents' settings), planes=r1,...,q1 and
                      relay.Q=UPSTREAM,... (a relay's upstreams, in order)
  agents/NODE.planes  the planes the node lists (--plane), by name
  faults.log          "MS TEXT": what the nemesis did and undid, when
  PLANE.log           each plane's log ("stale:" and "stale no more:")

The plane's authoritative state at each version is rebuilt from etcd's
events: a commit is one revision that puts the `version` key (value V)
and res/NAME keys ("L V\\nBODY" or "T V DELETED_AT\\n"; a deleted res key
is a pruned tombstone). Every body's content is "WID NAME\\n", WID the
request that wrote it, so each commit is attributed to a request (a commit
of tombstones only, to the DELETE of that name answered with that version,
else to one in flight when the tombstone's DELETED_AT was taken).

Checks (each violation is printed as "violation [CHECK] ..."):
  history   the history is whole and well formed (versions +1 per commit,
            every res value at its commit's version, bodies as written)
  acked     1. every acknowledged (2xx) write is in etcd's history at the
            version it was answered with, with exactly its changes; no two
            share a version; a write acknowledged before another started
            has the lower version (real-time order); every commit comes
            from a request that was sent and not answered with a refusal
            (a 4xx, a refused connection, a 5xx saying nothing was stored;
            a DELETE answered 404 after its own first attempt deleted the
            name is a note). Since the history is linear and
            every commit is attributed, an acknowledged write is in the
            final state unless a later commit (an acknowledged or
            indeterminate request's) changed its name again; the final
            state itself is checked against each replica's (replicas).
  once      a write takes effect once: a request committed twice (its first
            attempt's answer lost, the replica retrying on the newer state)
            is a violation when another write changed one of its names in
            between (readers saw that change undone), a note otherwise
  replicas  every replica's and relay's final GET /v1/resources is the
            history's final state (names, bodies, each resource's version)
  monotonic 2. every node's versions only go up: what it committed (its boot
            version from last-good, then each "applied version") never goes
            down, across restarts too; what its hook saw go live goes down
            only by a revert to the version it committed, or when the agent
            was killed -9 after the swap and before the commit of that
            version (counted as "retracted": tetherd reloads before it
            persists last-good, by design)
  content   3. every state a node made live (every hook call) is the plane's
            state at that version, filtered by the node's subscription:
            the same files, paths, modes and contents
  converge  4. after healing, every node and replica reached the final
            version within the limit, and each node's output is that
            version's state
  staleness 5. no node with a healthy path goes without a write for longer
            than the bound: lease TTL + 3 heartbeats + the agents'
            --backoff-max (10 + 3 + 2 = 15 s in the nemesis), plus the
            back-off tetherd itself puts on moves off stale planes (2 s a
            move in the minute before, 10 s at most) when it moved off one.
            For every acknowledged write and node: the time from the answer,
            or from the end of the node's last outage before it applied,
            until it applied a version >= the write's (hook call, boot or
            "applied version" line). Outages: below, at check_staleness.
Other anomalies (not violations) are printed as "note ...".
Ends with "check NAME N" lines, "result KEY=VALUE" lines and a summary;
exit 0 when there is no violation, 1 otherwise, 2 on a harness error.
"""
import base64
import bisect
import collections
import datetime
import json
import os
import re
import shutil
import sys
import tempfile

PREFIX = '/tether/'
CHECKS = ('history', 'acked', 'once', 'replicas', 'monotonic', 'content', 'converge', 'staleness')


class Report:
    def __init__(self, quiet=False):
        self.v = collections.defaultdict(list)
        self.notes = collections.Counter()
        self.note_lines = []
        self.results = collections.OrderedDict()
        self.quiet = quiet

    def violation(self, check, msg):
        self.v[check].append(msg)
        if not self.quiet:
            print('violation [%s] %s' % (check, msg))

    def note(self, kind, msg):
        self.notes[kind] += 1
        if self.notes[kind] <= 20 and not self.quiet:
            print('note [%s] %s' % (kind, msg))

    def count(self, check):
        return len(self.v[check])

    def total(self):
        return sum(len(x) for x in self.v.values())


# ---- reading ----------------------------------------------------------------------


def b64(s):
    return base64.b64decode(s or '').decode('utf-8', 'replace')


def read_history(work, rep):
    """Commits in order: dicts {version, rev, changes: {name: ('L', body, v) |
    ('T', v, deleted_at) | ('D',)}}."""
    path = os.path.join(work, 'history.jsonl')
    revs = collections.OrderedDict()
    seen = set()
    maxrev = 0
    with open(path) as f:
        lines = f.read().split('\n')
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if i >= len(lines) - 2:
                continue   # the dump was stopped in the middle of its last line
            rep.violation('history', 'history.jsonl line %d is not JSON' % (i + 1))
            continue
        for ev in obj.get('Events') or []:
            kv = ev.get('kv', {})
            key = b64(kv.get('key'))
            rev = int(kv.get('mod_revision', 0))
            if (rev, key) in seen:
                continue
            seen.add((rev, key))
            maxrev = max(maxrev, rev)
            deleted = ev.get('type') == 'DELETE'
            revs.setdefault(rev, []).append((key, None if deleted else b64(kv.get('value'))))
    want = 0
    try:
        with open(os.path.join(work, 'history.rev')) as f:
            want = int(f.read().strip() or 0)
    except (OSError, ValueError):
        pass
    if want and maxrev < want:
        rep.violation('history', 'the dump ends at revision %d, before revision %d read at the end' % (maxrev, want))
    commits = []
    last_version = 0
    for rev in sorted(revs):
        version = None
        changes = {}
        for key, value in revs[rev]:
            if not key.startswith(PREFIX):
                continue
            k = key[len(PREFIX):]
            if k == 'version':
                if value is None:
                    rep.violation('history', 'revision %d deletes the version key' % rev)
                    continue
                version = int(value)
            elif k.startswith('res/'):
                name = k[4:]
                if value is None:
                    changes[name] = ('D',)
                elif value.startswith('L '):
                    head, _, body = value.partition('\n')
                    try:
                        changes[name] = ('L', json.loads(body), int(head[2:]))
                    except ValueError:
                        rep.violation('history', 'revision %d: res/%s holds no JSON body' % (rev, name))
                elif value.startswith('T '):
                    parts = value.split()
                    changes[name] = ('T', int(parts[1]), int(parts[2]) if len(parts) > 2 else 0)
                else:
                    rep.violation('history', 'revision %d: res/%s: unknown value %.40r' % (rev, name, value))
        if version is None:
            if changes:
                rep.violation('history', 'revision %d changes %s without a version' % (rev, sorted(changes)))
            continue
        if version != last_version + 1:
            rep.violation('history', 'revision %d sets version %d after version %d' % (rev, version, last_version))
        last_version = version
        for name, ch in changes.items():
            if ch[0] in 'LT' and ch[2 if ch[0] == 'L' else 1] != version:
                rep.violation('history', 'revision %d (version %d): res/%s says version %d' %
                              (rev, version, name, ch[2 if ch[0] == 'L' else 1]))
        commits.append({'version': version, 'rev': rev, 'changes': changes})
    return commits


def read_writes(work, rep):
    writes = collections.OrderedDict()
    with open(os.path.join(work, 'writes.jsonl')) as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                w = json.loads(line)
            except ValueError:
                rep.violation('acked', 'writes.jsonl line %d is not JSON' % (i + 1))
                continue
            writes[w['wid']] = w
    return writes


def read_records(path, rep, node):
    """Hook lines: [(inc, kind, version, ts, {path: (mode, first_line)})]."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for i, line in enumerate(f):
            line = line.rstrip('\n')
            fields = line.split('\t')
            if len(fields) < 5 or fields[0] != '@' or (len(fields) - 5) % 3:
                rep.violation('content', '%s: %s line %d is not a record' % (node, os.path.basename(path), i + 1))
                continue
            try:
                version = int(fields[3])
                ts = int(fields[4])
            except ValueError:
                rep.violation('content', '%s: %s line %d: no version' % (node, os.path.basename(path), i + 1))
                continue
            files = {}
            for k in range(5, len(fields), 3):
                files[fields[k]] = (fields[k + 1], fields[k + 2])
            out.append((fields[1], fields[2], version, ts, files))
    return out


RE_BOOT = re.compile(r'files: output matches version (\d+)')
RE_APPLIED = re.compile(r'applied version (\d+) ')


def log_ns(line):
    """A tether log line's time (UTC, ms) in ns, at the end of its ms (the
    hook's record of the same apply is always before it)."""
    try:
        t = datetime.datetime.strptime(line[:23], '%Y-%m-%dT%H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return 0
    return int(t.timestamp()) * 10**9 + t.microsecond * 1000 + 999999


def read_agent(work, node):
    incs = collections.OrderedDict()
    with open(os.path.join(work, 'agents', node + '.incs')) as f:
        for line in f:
            p = line.split()
            if len(p) < 3:
                continue
            inc = int(p[0])
            d = incs.setdefault(inc, {'end': None, 'boot': None, 'applied': [], 'applied_t': []})
            if p[1] != 'start':
                d['end'] = p[1]
    for inc, d in incs.items():
        try:
            with open(os.path.join(work, 'agents', '%s.%d.log' % (node, inc))) as f:
                for line in f:
                    m = RE_BOOT.search(line)
                    if m and d['boot'] is None:
                        d['boot'] = int(m.group(1))
                    m = RE_APPLIED.search(line)
                    if m:
                        d['applied'].append(int(m.group(1)))
                        d['applied_t'].append((log_ns(line), int(m.group(1))))
        except OSError:
            pass
    sub = []
    try:
        with open(os.path.join(work, 'agents', node + '.sub')) as f:
            sub = [x for x in f.read().strip().split(',') if x]
    except OSError:
        pass
    return incs, sub


def read_kv(path):
    d = {}
    try:
        with open(path) as f:
            for line in f:
                k, sep, v = line.strip().partition('=')
                if sep:
                    d[k] = v
    except OSError:
        pass
    return d


# ---- state at a version ------------------------------------------------------------


class States:
    """The plane's state (name -> body) at the versions asked for."""

    def __init__(self, commits, wanted):
        self.at = {0: {}}
        state = {}
        for c in commits:
            for name, ch in c['changes'].items():
                if ch[0] == 'L':
                    state[name] = ch[1]
                else:
                    state.pop(name, None)
            if c['version'] in wanted:
                self.at[c['version']] = dict(state)
        self.final = dict(state)
        self.final_version = commits[-1]['version'] if commits else 0
        self.at[self.final_version] = dict(state)

    def files(self, version, sub):
        """{path: (mode, first line)} a node subscribed to sub shows."""
        st = self.at.get(version)
        if st is None:
            return None
        out = {}
        for name, body in st.items():
            if not name.startswith('file/') or not isinstance(body, dict) or 'path' not in body:
                continue
            if sub and not any(name.startswith(p) for p in sub):
                continue
            mode = '%o' % int(body.get('mode', '0644'), 8)
            out[body['path']] = (mode, (body.get('content') or '').split('\n')[0])
        return out


def same_body(stored, sent):
    """A stored body is the one sent (fields compared, the default mode too)."""
    if not isinstance(stored, dict):
        return False
    a = dict(stored)
    b = dict(sent)
    a.setdefault('mode', '0644')
    b.setdefault('mode', '0644')
    return a == b


# ---- the checks ------------------------------------------------------------------------


def check_acked(commits, writes, states, rep):
    deletes = collections.defaultdict(list)   # name -> the DELETE requests of it
    for w in writes.values():
        if not w['puts'] and len(w['dels']) == 1:
            deletes[w['dels'][0]].append(w)
    attributed = {}            # version -> wid
    commits_of = collections.defaultdict(list)
    live = set()
    cur = {}                   # name -> body, before the commit at hand
    touched = collections.defaultdict(list)   # name -> versions that changed it
    for c in commits:
        v = c['version']
        sem = {n: ch for n, ch in c['changes'].items() if ch[0] in 'LT'}
        wids = set()
        for n, ch in sem.items():
            if ch[0] != 'L':
                continue
            content = ch[1].get('content', '') if isinstance(ch[1], dict) else ''
            wid = content.split(' ')[0]
            if content != '%s %s\n' % (wid, n):
                rep.violation('history', 'version %d: %s holds %.60r, not a body the load wrote' % (v, n, content))
            wids.add(wid)
        wid = None
        if len(wids) > 1:
            rep.violation('acked', 'version %d mixes the changes of %s' % (v, ', '.join(sorted(wids))))
        elif wids:
            wid = wids.pop()
            w = writes.get(wid)
            if w is None:
                rep.violation('acked', 'version %d comes from %s, a request never sent (or not recorded)' % (v, wid))
                wid = None
            else:
                again = wid in commits_of   # a second commit of it (a retry)
                for n, body in w['puts'].items():
                    ch = sem.get(n)
                    if ch is None and again and same_body(cur.get(n), body):
                        continue   # a retry changes only what differs since its first commit
                    if not ch or ch[0] != 'L' or not same_body(ch[1], body):
                        rep.violation('acked', 'version %d (from %s) lacks its upsert of %s' % (v, wid, n))
                for n, ch in sem.items():
                    if n in w['puts']:
                        continue
                    if n not in w['dels'] or ch[0] != 'T':
                        rep.violation('acked', 'version %d (from %s) changes %s, which it did not ask' % (v, wid, n))
                for n in w['dels']:
                    if n not in sem and n in live:
                        rep.violation('acked', 'version %d (from %s) lacks its removal of %s' % (v, wid, n))
        elif sem:
            names = set(sem)
            dels = deletes[next(iter(names))] if len(names) == 1 else []
            deleted_at = max(ch[2] for ch in sem.values())
            pick = [w for w in dels if w['result'] == 'ok' and w.get('version') == v]
            if not pick:
                pick = [w for w in dels if w['result'] == 'indeterminate' and w['wid'] not in commits_of and
                        w['t0'] / 1000.0 - 2 <= deleted_at <= w['t1'] / 1000.0 + 2]
            if not pick:
                pick = [w for w in dels if w['result'] == 'failed' and w['wid'] not in commits_of and
                        w['t0'] / 1000.0 - 2 <= deleted_at <= w['t1'] / 1000.0 + 2]
            if pick:
                wid = pick[0]['wid']
            else:
                rep.violation('acked', 'version %d deletes %s, and no request sent asked it then' %
                              (v, ', '.join(sorted(names))))
        for n, ch in c['changes'].items():
            if ch[0] == 'L':
                live.add(n)
                cur[n] = ch[1]
            else:
                live.discard(n)
                cur.pop(n, None)
            touched[n].append(v)
        if wid:
            attributed[v] = wid
            commits_of[wid].append(v)

    # a write takes effect once: a retry that commits it again after another
    # write changed one of its names undoes that write for every reader
    for wid, vs in commits_of.items():
        if len(vs) < 2:
            continue
        w = writes[wid]
        names = set(w['puts']) | set(w['dels'])
        bad = []
        for v1, v2 in zip(vs, vs[1:]):
            for n in sorted(names):
                for x in touched.get(n, []):
                    if v1 < x < v2 and attributed.get(x) != wid:
                        other = writes.get(attributed.get(x), {})
                        bad.append('%s at %d by %s (%s%s)' % (
                            n, x, attributed.get(x), other.get('result', '?'),
                            ', acknowledged at %s' % other.get('version') if other.get('result') == 'ok' else ''))
        if bad:
            rep.violation('once', '%s (%s, answered %s%s) took effect at versions %s; in between, %s: every reader '
                          'saw that change undone by the retry' % (
                              wid, w['op'], w.get('status') or w['result'],
                              ' at %s' % w['version'] if w.get('version') else '', vs, '; '.join(bad[:4])))
        else:
            rep.note('duplicate-commit', '%s (%s) was committed %d times: versions %s (nothing in between '
                     'touched its names)' % (wid, w['result'], len(vs), vs))
    versions = collections.defaultdict(list)
    for w in writes.values():
        got = commits_of.get(w['wid'], [])
        if w['result'] == 'failed':
            if got:
                if w['op'] == 'delete' and w.get('status') == 404:
                    rep.note('delete-404-committed', '%s (DELETE %s) was answered 404, yet version %s deleted it '
                             '(an earlier attempt of the same request committed; its answer was lost)' %
                             (w['wid'], w['dels'][0], got))
                else:
                    rep.violation('acked', '%s was answered %s (%s) but is in the history at version(s) %s' %
                                  (w['wid'], w.get('status') or 'not sent', w.get('why', '')[:80], got))
            continue
        if w['result'] == 'indeterminate':
            if got and 'nothing was stored' in w.get('why', ''):
                # indeterminate for the checks, but the answer said more than the plane knew
                rep.violation('acked', '%s was answered %s saying nothing was stored, yet it is in the history at '
                              'version(s) %s: %s' % (w['wid'], w.get('status'), got, w['why'][:160]))
            elif got and w.get('status'):
                rep.note('5xx-but-stored', '%s was answered %d, yet it is in the history at version(s) %s: %s' %
                         (w['wid'], w['status'], got, w['why'][:120]))
            continue
        # acknowledged
        v = w.get('version')
        if not isinstance(v, int):
            rep.violation('acked', '%s: a 2xx answer without a version' % w['wid'])
            continue
        if w.get('changed') is False:
            # a no-op answer: the write's changes were already in place at v
            # (a retry after a conflict found its own earlier attempt
            # committed: the follower applied it as another replica's)
            st = states.at.get(v)
            if st is None:
                rep.violation('acked', '%s was acknowledged (unchanged) at version %d, which etcd\'s history lacks' %
                              (w['wid'], v))
                continue
            miss = [n for n, b in w['puts'].items() if not same_body(st.get(n), b)] + \
                [n for n in w['dels'] if n in st]
            if miss:
                rep.violation('acked', '%s was acknowledged unchanged at version %d, but its %s not in place there' %
                              (w['wid'], v, ', '.join(sorted(miss))))
            elif not got or min(got) > v:
                rep.violation('acked', '%s was acknowledged unchanged at version %d, but no commit of it precedes it' %
                              (w['wid'], v))
            else:
                rep.note('acked-unchanged', '%s was answered {"version":%d,"changed":false}: its changes went in at '
                         'version(s) %s (its first attempt\'s answer was lost)' % (w['wid'], v, got))
            continue
        versions[v].append(w['wid'])
        if attributed.get(v) != w['wid']:
            other = attributed.get(v)
            rep.violation('acked', '%s (%s %s) was acknowledged at version %d, but %s' % (
                w['wid'], w['op'], ', '.join(sorted(list(w['puts']) + w['dels'])), v,
                'etcd\'s history has no version %d' % v if v > len(commits) or v < 1 and other is None
                else 'version %d holds %s' % (v, ('the changes of %s' % other) if other else 'no change of it')))
    for v, wids in versions.items():
        if len(wids) > 1:
            rep.violation('acked', 'version %d was acknowledged to several writes: %s' % (v, ', '.join(wids)))
    # real-time order: a write acknowledged before another was sent has the lower version
    acked = [w for w in writes.values() if w['result'] == 'ok' and isinstance(w.get('version'), int)]
    by_end = sorted(acked, key=lambda w: w['t1'])
    best = None   # the acknowledged write with the highest version among those ended so far
    i = 0
    for w in sorted(acked, key=lambda w: w['t0']):
        while i < len(by_end) and by_end[i]['t1'] < w['t0']:
            if best is None or by_end[i]['version'] > best['version']:
                best = by_end[i]
            i += 1
        if best is not None and (best['version'] > w['version'] or
                                 (best['version'] == w['version'] and w.get('changed') is not False)):
            rep.violation('acked', '%s was acknowledged at version %d before %s was sent, which got version %d' %
                          (best['wid'], best['version'], w['wid'], w['version']))
    return attributed, commits_of


def check_replicas(work, states, rep):
    n = 0
    for fn in sorted(os.listdir(os.path.join(work, 'final'))):
        if not re.match(r'[rq]\d+\.json$', fn):
            continue
        n += 1
        r = fn[:-5]
        try:
            with open(os.path.join(work, 'final', fn)) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            rep.violation('replicas', '%s: no final listing (it did not answer)' % r)
            continue
        if doc.get('version') != states.final_version:
            rep.violation('replicas', '%s: at version %s, etcd at %d' % (r, doc.get('version'), states.final_version))
        got = {x['name']: x for x in doc.get('resources', [])}
        for name in sorted(set(got) | set(states.final)):
            if name not in got:
                rep.violation('replicas', '%s lacks %s' % (r, name))
            elif name not in states.final:
                rep.violation('replicas', '%s holds %s, deleted in etcd' % (r, name))
            elif got[name].get('body') != states.final[name]:
                rep.violation('replicas', '%s: %s differs from etcd\'s' % (r, name))
    if n == 0:
        rep.violation('replicas', 'no replica listing in final/')


def describe_diff(got, want):
    out = []
    for p in sorted(set(got) | set(want)):
        if p not in got:
            out.append('missing %s' % p)
        elif p not in want:
            out.append('extra %s (%s)' % (p, got[p][1]))
        elif got[p] != want[p]:
            out.append('%s is %s %r, not %s %r' % (p, got[p][0], got[p][1], want[p][0], want[p][1]))
    return '; '.join(out[:4]) + (' ...' if len(out) > 4 else '')


def check_node(work, node, states, rep, stats):
    incs, sub = read_agent(work, node)
    recs = read_records(os.path.join(work, 'records', node + '.applied'), rep, node)
    by_inc = collections.defaultdict(list)
    for r in recs:
        try:
            by_inc[int(r[0])].append(r)
        except ValueError:
            rep.violation('content', '%s: a record of incarnation %r' % (node, r[0]))
    applied_versions = set()
    # 2. versions only go up. Per incarnation, in time order: its boot
    # (last-good), each hook call (apply: a swap went live; back: files
    # put back, at boot or after a failed swap) and each "applied version"
    # log line (committed to last-good; with no file changed there is no
    # hook call). A commit never goes below the last one; a swap never
    # below what is live; a put-back is to the committed version; a boot
    # never below the last commit, and below what was live only when the
    # previous life was killed -9 between a swap and its commit.
    live = committed = None
    retracted = reverts = 0
    prev_inc = None
    for inc, d in incs.items():
        evs = [(t, 1, 'commit', v) for t, v in d['applied_t']]
        evs += [(r[3], 0, r[1], r[2]) for r in by_inc.get(inc, [])]
        evs.sort()
        boot = d['boot']
        if boot is None and evs and evs[0][2] == 'back':
            boot = evs[0][3]
        if boot is not None:
            if committed is not None and boot < committed:
                rep.violation('monotonic', '%s: incarnation %d boots at version %d, below the %d it committed before' %
                              (node, inc, boot, committed))
            elif live is not None and boot < live:
                if incs_end(incs, prev_inc) == 'kill9':
                    retracted += 1
                    rep.note('retracted', '%s: version %d went live in incarnation %d, which was killed -9 before '
                             'it committed it; incarnation %d booted at %d' % (node, live, prev_inc, inc, boot))
                else:
                    rep.violation('monotonic', '%s: version %d was live, then incarnation %d booted at %d' %
                                  (node, live, inc, boot))
            live = committed = boot
        first = True
        for _, _, kind, v in evs:
            if kind == 'commit':
                applied_versions.add(v)
                if committed is not None and v < committed:
                    rep.violation('monotonic', '%s: incarnation %d committed version %d after %d' %
                                  (node, inc, v, committed))
                committed = v
                if live is None or v > live:
                    live = v
            elif kind == 'apply':
                if live is not None and v < live:
                    rep.violation('monotonic', '%s: incarnation %d made version %d live after %d' % (node, inc, v, live))
                live = v
            elif kind == 'back':
                if v != committed:
                    rep.violation('monotonic', '%s: incarnation %d put back version %d, not the committed %s' %
                                  (node, inc, v, committed))
                if not first:
                    reverts += 1
                live = v
            first = False
        prev_inc = inc
    stats['retracted'] += retracted
    stats['reverts'] += reverts
    # 3. every state made live is the plane's at that version
    for r in recs:
        want = states.files(r[2], sub)
        if want is None:
            rep.violation('content', '%s: version %d went live, a version etcd\'s history lacks' % (node, r[2]))
            continue
        if r[4] != want:
            rep.violation('content', '%s: incarnation %s, %s of version %d: %s' %
                          (node, r[0], r[1], r[2], describe_diff(r[4], want)))
    # 4. the end
    fin = read_records(os.path.join(work, 'final', node + '.applied'), rep, node)
    if not fin:
        rep.violation('converge', '%s: no final listing' % node)
    else:
        v = fin[-1][2]
        if v != states.final_version:
            rep.violation('converge', '%s ends at version %d, the plane at %d' % (node, v, states.final_version))
        want = states.files(states.final_version, sub)
        if fin[-1][4] != want:
            rep.violation('converge', '%s: its output at the end is not version %d\'s state: %s' %
                          (node, states.final_version, describe_diff(fin[-1][4], want)))
    stats['nodes'][node] = {'applied': len(applied_versions), 'records': len(recs), 'lives': len(incs),
                            'sub': ','.join(sub) or '-'}


def incs_end(incs, inc):
    d = incs.get(inc)
    return d['end'] if d else None


# ---- staleness: how long a node with a healthy path went without a write -------------
#
# For every acknowledged write and every node: the time from the write's
# answer until the node applied a version at or above it, counted from the
# end of the last outage of that node's path that began before it applied.
# The outages come from what the nemesis did (faults.log, agents/NODE.incs),
# never from what the product says, except for one thing: a plane healed
# (restarted, reconnected) is counted out until it says it is current
# again ("stale no more" in its log), at most TAIL_TTLS lease TTLs after
# its heal, so a plane that never comes back excuses nobody for long.
# A node's path is down while: its agent is not running (killed, until its
# next start); a full disk is under its output or state; etcd has no quorum;
# or every plane it lists is down or cut off from it. A replica is down
# while killed (until it answered /healthz after its restart), cut off
# from every etcd member (the black hole on all of r1's endpoints, once new
# requests are swallowed too; a partition of r2 from etcd, either way), or
# without quorum; a relay while none of its upstreams is up and reachable
# from it, or while it follows one that is down (stale: cut from etcd, no
# quorum) and moved off a stale upstream less than 30 s before (a relay
# moves so at most once in 30 s: plane/persist/relay/relay.c). A fault that
# leaves a path (one etcd endpoint black-holed, one member killed, one of
# the relay's upstreams cut, one of n1's planes cut) is the product's to
# route around within the bound.

INF = float('inf')
TAIL_TTLS = 1   # a healed plane counts as down until it says current, at most this many lease TTLs
RE_STALE_ON = re.compile(r'stale: this plane cannot vouch that it is current')
RE_STALE_OFF = re.compile(r'stale no more: ')
RE_LISTENING = re.compile(r' listening on ')
RE_MOVE_STALE = re.compile(r'plane: moving from \S+ to \S+: \S+ is stale since')
RE_SPELL = re.compile(r'plane \S+ is stale since .*; looking for a fresh plane')
RE_FOLLOWING = re.compile(r'relay: following (\S+)')
RE_PID = re.compile(r'Z \S+\[(\d+)\] ')
RE_RELAY_MOVE = re.compile(r'relay: moving to the next upstream: this one is stale')
RELAY_MOVE_HOLD_MS = 30000
RE_FAULT = [
    ('down+', re.compile(r'replica-kill (r\d+)$')),
    ('down-', re.compile(r'replica-restart (r\d+)$')),
    ('bh+', re.compile(r'blackhole (r\d+) -> etcd member\(s\) 1 2 3: every new request too$')),
    ('bh-', re.compile(r'blackhole (r\d+) healed$')),
    ('quorum+', re.compile(r'etcd-kill (m\d+) \(quorum lost\)$')),
    ('etcd-', re.compile(r'etcd-restart (m\d+)$')),
    ('disk+', re.compile(r'diskfull (n\d+)\.(?:out|state)$')),
    ('disk-', re.compile(r'diskfull (n\d+)\.(?:out|state) healed$')),
    ('cut+', re.compile(r'partition-cut (\w+)-(\w+) (?:both|out|back)\b')),
    ('cut-', re.compile(r'partition-heal (\w+)-(\w+)$')),
    ('healed', re.compile(r'healed$')),
]


def ivl_merge(xs):
    out = []
    for s, e in sorted(x for x in xs if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def ivl_and(a, b):
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def read_faults(work):
    """{key: [(start, end)]} in ms; keys ('down', P), ('quorum',), ('disk', N), ('cut', A, B)."""
    windows = collections.defaultdict(list)
    opened = {}
    quorum_member = None
    with open(os.path.join(work, 'faults.log')) as f:
        for line in f:
            t, _, text = line.rstrip('\n').partition(' ')
            try:
                t = int(t)
            except ValueError:
                continue
            for kind, rx in RE_FAULT:
                m = rx.match(text)
                if not m:
                    continue
                g = m.groups()
                if kind in ('down+', 'bh+'):
                    opened[('down', g[0], kind)] = t
                elif kind in ('down-', 'bh-'):
                    k = ('down', g[0], kind[:-1] + '+')
                    if k in opened:
                        windows[('down', g[0])].append((opened.pop(k), t))
                elif kind == 'quorum+':
                    opened[('quorum',)] = t
                    quorum_member = g[0]
                elif kind == 'etcd-' and g[0] == quorum_member and ('quorum',) in opened:
                    windows[('quorum',)].append((opened.pop(('quorum',)), t))
                elif kind == 'disk+':
                    opened[('disk', g[0])] = t
                elif kind == 'disk-' and ('disk', g[0]) in opened:
                    windows[('disk', g[0])].append((opened.pop(('disk', g[0])), t))
                elif kind == 'cut+':
                    opened[('cut',) + g] = t
                elif kind == 'cut-' and ('cut',) + g in opened:
                    windows[('cut',) + g].append((opened.pop(('cut',) + g), t))
                elif kind == 'healed':
                    for k, s in opened.items():
                        windows[k[:2] if k[0] == 'down' else k].append((s, t))
                    opened.clear()
                break
    for k, s in opened.items():   # the log ends inside a fault
        windows[k[:2] if k[0] == 'down' else k].append((s, INF))
    return windows


def clock(ms):
    """ms (wall clock) as the logs show it: HH:MM:SS.mmm UTC."""
    return datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc).strftime('%H:%M:%S.%f')[:12]


def log_ms(line):
    ns = log_ns(line)
    return ns // 10**6 if ns else None


def plane_spells(work, plane):
    """The spells a plane said it was stale: [(start, end)] (ms; a new
    process ends its predecessor's spell: it starts out current)."""
    spells = []
    start = None
    try:
        with open(os.path.join(work, plane + '.log'), errors='replace') as f:
            for line in f:
                on, off = RE_STALE_ON.search(line), RE_STALE_OFF.search(line) or RE_LISTENING.search(line)
                if not on and not off:
                    continue
                t = log_ms(line)
                if t is None:
                    continue
                if on and start is None:
                    start = t
                elif off and start is not None:
                    spells.append((start, t))
                    start = None
    except OSError:
        pass
    if start is not None:
        spells.append((start, INF))
    return spells


def relay_holds(work, relay, ups, urls, stale_down):
    """When the relay was held on a stale upstream: [(start, end)] (ms).
    It follows an upstream from a "following" line to the next (or to the
    end of its process); an upstream down while stale_down (its cuts from
    etcd, no quorum: it serves, saying it is stale) holds it until 30 s
    after its last move off a stale upstream, in the same process."""
    follows, moves, starts = [], [], []
    pid = None
    try:
        with open(os.path.join(work, relay + '.log'), errors='replace') as f:
            for line in f:
                m = RE_PID.search(line[:60])
                t = log_ms(line)
                if not m or t is None:
                    continue
                if m.group(1) != pid:
                    pid = m.group(1)
                    starts.append(t)   # a new process: it follows nothing, and has not moved
                    follows.append((t, None))
                m = RE_FOLLOWING.search(line)
                if m:
                    url = m.group(1)
                    follows.append((t, ups[urls.index(url)] if url in urls else None))
                elif RE_RELAY_MOVE.search(line):
                    moves.append(t)
    except OSError:
        return []
    out = []
    for i, (f0, u) in enumerate(follows):
        f1 = follows[i + 1][0] if i + 1 < len(follows) else INF
        if u is None:
            continue
        for s, e in stale_down.get(u, []):
            s, e = max(s, f0), min(e, f1)
            if s >= e:
                continue
            born = max([x for x in starts if x <= s] or [0])
            before = [m for m in moves if born <= m <= s]
            if before and before[-1] + RELAY_MOVE_HOLD_MS > s:
                out.append((s, min(e, before[-1] + RELAY_MOVE_HOLD_MS)))
    return ivl_merge(out)


def with_tails(windows, spells, cap):
    """Each window ends when the plane says it is current again, if it was
    stale at the window's end, and at most cap ms later."""
    out = []
    for s, e in windows:
        end = e
        for ss, se in spells:
            if ss <= e < se:
                end = min(se, e + cap)
        out.append((s, end))
    return ivl_merge(out)


def node_events(work, node):
    """The node's agent: its lives' [(start, end)] (ms) and what it applied:
    [(ms, version)] (boot, hook, commit), its stale-driven moves and the
    starts of its stale spells: [(ms, inc)]."""
    lives = []
    start = None
    incs = []
    with open(os.path.join(work, 'agents', node + '.incs')) as f:
        for line in f:
            p = line.split()
            if len(p) < 3:
                continue
            if p[1] == 'start':
                start = int(p[2])
                incs.append(int(p[0]))
            elif start is not None:
                lives.append((start, int(p[2])))
                start = None
    if start is not None:
        lives.append((start, INF))
    applied, moves, spells = [], [], []
    for inc in incs:
        try:
            with open(os.path.join(work, 'agents', '%s.%d.log' % (node, inc)), errors='replace') as f:
                for line in f:
                    m = RE_APPLIED.search(line) or RE_BOOT.search(line)
                    if m:
                        t = log_ms(line)
                        if t is not None:
                            applied.append((t, int(m.group(1))))
                    elif RE_MOVE_STALE.search(line):
                        moves.append((log_ms(line) or 0, inc))
                    elif RE_SPELL.search(line):
                        spells.append((log_ms(line) or 0, inc))
        except OSError:
            pass
    for r in read_records(os.path.join(work, 'records', node + '.applied'), Report(True), node):
        if r[1] == 'apply':
            applied.append((r[3] // 10**6, r[2]))
    applied.sort()
    return lives, applied, moves, spells


def move_backoff(moves, spells, t0, t1):
    """tetherd's back-off of moves off stale planes (agent/fresh.h: 2 s per
    such move in the minute before a round is scheduled, 10 s at most) that
    delayed a node between t0 and t1: that of the last move between them,
    counted from the start of its spell; 0 when it did not move off a stale
    plane then."""
    inside = [m for m in moves if t0 < m[0] <= t1]
    if not inside:
        return 0
    tm, inc = inside[-1]
    starts = [s for s, i in spells if i == inc and s <= tm]
    ts = starts[-1] if starts else tm
    k = sum(1 for m, i in moves if i == inc and ts - 60000 < m < ts)
    return min(10000, 2000 * k)


def check_staleness(work, writes, nodes, rep):
    params = read_kv(os.path.join(work, 'params.txt'))
    res = rep.results
    if not params:
        rep.note('staleness-skipped', 'no params.txt: a run from before the staleness check')
        res['staleness'] = 'skipped'
        return
    ttl = float(params.get('lease_ttl_s', 10))
    hb = float(params.get('heartbeat_s', 1))
    bmax = float(params.get('backoff_max_s', 2))
    bound = int((ttl + 3 * hb + bmax) * 1000)
    cap = int(TAIL_TTLS * ttl * 1000)
    fw = read_faults(work)
    quorum = ivl_merge(fw.get(('quorum',), []))
    planes = [p for p in params.get('planes', '').split(',') if p]
    relays = {p: [u for u in params.get('relay.' + p, '').split(',') if u] for p in planes}
    spells = {p: plane_spells(work, p) for p in planes}
    down, stale_down = {}, {}
    for p in planes:
        if relays[p]:
            continue
        own = fw.get(('down', p), []) + fw.get(('cut', p, 'etcd'), []) + quorum
        down[p] = with_tails(own, spells[p], cap)
        stale_down[p] = with_tails(fw.get(('cut', p, 'etcd'), []) + quorum, spells[p], cap)
    holds = {}
    for p in planes:
        if not relays[p]:
            continue
        gone = [(0, INF)]
        for u in relays[p]:
            gone = ivl_and(gone, ivl_merge(down.get(u, []) + fw.get(('cut', p, u), [])))
        urls = [x for x in params.get('relay.%s.urls' % p, '').split(',') if x]
        holds[p] = relay_holds(work, p, relays[p], urls, stale_down)
        down[p] = with_tails(ivl_merge(gone + holds[p]), spells[p], cap)
    acked = sorted((w for w in writes.values() if w['result'] == 'ok' and isinstance(w.get('version'), int)),
                   key=lambda w: w['t1'])
    worst = None
    counted = excused = backoff_used = 0
    for node in nodes:
        try:
            with open(os.path.join(work, 'agents', node + '.planes')) as f:
                listed = [p for p in f.read().strip().split(',') if p]
        except OSError:
            listed = []
        if not listed:
            rep.violation('staleness', '%s: no agents/%s.planes (which planes it lists)' % (node, node))
            continue
        lives, applied, moves, nspells = node_events(work, node)
        off = [(0, INF)]
        for p in listed:
            off = ivl_and(off, ivl_merge(down.get(p, []) + fw.get(('cut', node, p), [])))
        agent_down = []   # before its first life, between two, after its last
        prev = None
        for s, e in lives:
            agent_down.append((prev if prev is not None else 0, s))
            prev = e
        if prev is not None and prev != INF:
            agent_down.append((prev, INF))
        outages = ivl_merge(off + agent_down + fw.get(('disk', node), []) + quorum)
        ostarts = [s for s, _ in outages]
        times, best, run = [], [], 0
        for t, v in applied:
            run = max(run, v)
            times.append(t)
            best.append(run)
        nmax = 0
        episodes = {}   # the apply that ended it -> the worst write over the bound
        never = None
        for w in acked:
            v, t1 = w['version'], w['t1']
            k = bisect.bisect_left(best, v)
            if k == len(best):
                never = never or w
                continue
            ta = times[k]
            i = bisect.bisect_left(ostarts, ta) - 1   # the last outage that began before the apply
            t0 = t1
            if i >= 0 and outages[i][1] > t0:
                t0 = outages[i][1]
            if t0 >= ta and t1 < ta:
                excused += 1   # it came while the node had no path, or at its end
                continue
            counted += 1
            lag = max(0, ta - t0)
            back = move_backoff(moves, nspells, t0, ta)
            allow = bound + back
            nmax = max(nmax, lag)
            if worst is None or lag > worst[0]:
                worst = (lag, node, w['wid'], v, t0 != t1)
            if back and lag > bound:
                backoff_used = max(backoff_used, back)
            if lag > allow:
                e = episodes.get(ta)
                if e is None or lag > e[0]:
                    episodes[ta] = (lag, w, t0, allow)
        for ta, (lag, w, t0, allow) in sorted(episodes.items()):
            rep.violation('staleness', '%s had no version >= %d (%s, answered at %s) until %s: %d ms after %s, '
                          'with a path all along, over the bound of %d ms%s' % (
                              node, w['version'], w['wid'], clock(w['t1']), clock(ta), lag,
                              'the answer' if t0 == w['t1'] else 'the end of its last outage (%s)' % clock(t0),
                              allow, ' (%d ms of it tetherd\'s back-off of moves off stale planes)' % (allow - bound)
                              if allow > bound else ''))
        if never is not None:
            rep.violation('staleness', '%s never applied version %d (%s) or above' % (node, never['version'],
                                                                                   never['wid']))
        res['node.%s.staleness_max_ms' % node] = nmax
        res['node.%s.stale_moves' % node] = len(moves)
        if acked:
            a, b = acked[0]['t0'], acked[-1]['t1']
            res['node.%s.outage_ms' % node] = int(sum(max(0, min(e, b) - max(s, a)) for s, e in outages))
    for p in planes:
        res['plane.%s.stale_spells' % p] = len(spells[p])
        if p in holds:
            res['plane.%s.held_ms' % p] = int(sum(e - s for s, e in holds[p] if e != INF))
    res['staleness.bound_ms'] = bound
    res['staleness.counted'] = counted
    res['staleness.excused'] = excused
    res['staleness.max_ms'] = worst[0] if worst else 0
    res['staleness.max_at'] = ('%s:%s:v%d%s' % (worst[1], worst[2], worst[3], ':after-outage' if worst[4] else '')
                               if worst else '-')
    res['staleness.move_backoff_used_ms'] = backoff_used


def check(work, quiet=False):
    rep = Report(quiet)
    stats = {'retracted': 0, 'reverts': 0, 'nodes': collections.OrderedDict()}
    commits = read_history(work, rep)
    writes = read_writes(work, rep)
    nodes = sorted(fn[:-5] for fn in os.listdir(os.path.join(work, 'agents')) if fn.endswith('.incs'))
    wanted = set()
    for node in nodes:
        for r in read_records(os.path.join(work, 'records', node + '.applied'), Report(True), node):
            wanted.add(r[2])
    for w in writes.values():
        if w['result'] == 'ok' and isinstance(w.get('version'), int):
            wanted.add(w['version'])
    states = States(commits, wanted)
    _, commits_of = check_acked(commits, writes, states, rep)
    check_replicas(work, states, rep)
    for node in nodes:
        check_node(work, node, states, rep, stats)
    check_staleness(work, writes, nodes, rep)
    conv = read_kv(os.path.join(work, 'converge.txt'))
    if conv.get('converged') != '1':
        rep.violation('converge', 'not every node reached version %s within %s ms of healing (%s)' % (
            conv.get('final'), conv.get('limit_ms'),
            ', '.join('%s=%s' % (k, v) for k, v in conv.items() if k.startswith(('node.', 'replica.')))))
    if conv.get('final') and conv.get('final') != str(states.final_version):
        rep.violation('converge', 'the final version read from etcd (%s) is not the history\'s last (%d)' %
                      (conv.get('final'), states.final_version))

    res = rep.results
    by = collections.Counter(w['result'] for w in writes.values())
    res['writes'] = len(writes)
    res['writes.ok'] = by['ok']
    res['writes.indeterminate'] = by['indeterminate']
    res['writes.failed'] = by['failed']
    res['writes.failed.refused'] = sum(1 for w in writes.values() if w['result'] == 'failed' and not w['status'])
    res['writes.indeterminate.committed'] = sum(
        1 for w in writes.values() if w['result'] == 'indeterminate' and commits_of.get(w['wid']))
    res['versions'] = states.final_version
    res['etcd.revisions'] = commits[-1]['rev'] if commits else 0
    for node, s in stats['nodes'].items():
        res['node.%s.applied_versions' % node] = s['applied']
        res['node.%s.live_records' % node] = s['records']
        res['node.%s.lives' % node] = s['lives']
    res['reverts'] = stats['reverts']
    res['retracted'] = stats['retracted']
    for k in sorted(rep.notes):
        res['notes.%s' % k] = rep.notes[k]
    res['violations'] = rep.total()
    if quiet:
        return rep
    for c in CHECKS:
        print('check %s %d' % (c, rep.count(c)))
    for k, v in res.items():
        print('result %s=%s' % (k, v))
    print('summary: %d violations (%s); %d writes: %d ok, %d indeterminate, %d failed; %d versions' % (
        rep.total(), ', '.join('%s %d' % (c, rep.count(c)) for c in CHECKS), len(writes), by['ok'],
        by['indeterminate'], by['failed'], states.final_version))
    return rep


# ---- self-test ---------------------------------------------------------------------------


def b64e(s):
    return base64.b64encode(s.encode()).decode()


class Fake:
    """A small run written the way nemesis.sh writes one, to doctor. Times
    are ms after BASE (the writes' t0 and t1, the agents' lives, the
    faults); the agents' log lines and hook calls come at the times in
    'at' ((inc, kind, version) -> ms), else 5 ms after the one before."""

    BASE = 1796000000000

    def __init__(self):
        # writes: w1-1 PUT k01 (ok, v1); w1-2 batch k02+k13 (ok, v2);
        # w2-1 DELETE k01 (ok, v3); w2-2 PUT k02 (indeterminate, v4);
        # w2-3 PUT k05 (refused: 422)
        B = self.BASE

        def put(wid, name, path, mode=None):
            b = {'path': path, 'content': '%s %s\n' % (wid, name)}
            if mode:
                b['mode'] = mode
            return b
        self.writes = [
            {'wid': 'w1-1', 'op': 'put', 'puts': {'file/k01': put('w1-1', 'file/k01', 'd1/k01.txt')}, 'dels': [],
             't0': B + 1000, 't1': B + 1010, 'status': 200, 'result': 'ok', 'version': 1, 'changed': True,
             'why': ''},
            {'wid': 'w1-2', 'op': 'batch', 'puts': {'file/k02': put('w1-2', 'file/k02', 'd2/k02.txt', '0600'),
                                                    'file/k13': put('w1-2', 'file/k13', 'd3/k13.txt')},
             'dels': [], 't0': B + 1020, 't1': B + 1030, 'status': 200, 'result': 'ok', 'version': 2,
             'changed': True, 'why': ''},
            {'wid': 'w2-1', 'op': 'delete', 'puts': {}, 'dels': ['file/k01'], 't0': B + 2000, 't1': B + 2010,
             'status': 200, 'result': 'ok', 'version': 3, 'changed': True, 'why': ''},
            {'wid': 'w2-2', 'op': 'put', 'puts': {'file/k02': put('w2-2', 'file/k02', 'alt/k02.txt')}, 'dels': [],
             't0': B + 3000, 't1': B + 23000, 'status': None, 'result': 'indeterminate', 'version': None,
             'changed': None, 'why': 'timeout'},
            {'wid': 'w2-3', 'op': 'put', 'puts': {'file/k05': put('w2-3', 'file/k05', 'd5/k05.txt')}, 'dels': [],
             't0': B + 24000, 't1': B + 24010, 'status': 422, 'result': 'failed', 'version': None,
             'changed': None, 'why': 'no'},
        ]
        # commits: version -> [(name, value or None)]
        self.commits = [
            (1, [('file/k01', 'L', self.writes[0]['puts']['file/k01'])]),
            (2, [('file/k02', 'L', self.writes[1]['puts']['file/k02']),
                 ('file/k13', 'L', self.writes[1]['puts']['file/k13'])]),
            (3, [('file/k01', 'T', B // 1000 + 2)]),
            (4, [('file/k02', 'L', self.writes[3]['puts']['file/k02'])]),
        ]
        f1 = ('d1/k01.txt', '644', 'w1-1 file/k01')
        f2 = ('d2/k02.txt', '600', 'w1-2 file/k02')
        f13 = ('d3/k13.txt', '644', 'w1-2 file/k13')
        f2b = ('alt/k02.txt', '644', 'w2-2 file/k02')
        self.f1, self.f2, self.f13, self.f2b = f1, f2, f13, f2b
        # nodes: n1 everything, killed -9 once; n4 subscribed to file/k1;
        # n6 everything, behind the relay q1 (then r3). incs: (inc, how it
        # ended, start, end); lives: {inc: [events in time order]}:
        # ('boot', V), ('apply', V, files) (a hook call), ('commit', V)
        # (an "applied version" line), ('back', V, files), ('spell', MS)
        # (tetherd hears its plane is stale), ('move', MS) (it moves off it)
        self.nodes = {
            'n1': {'sub': '', 'planes': 'r1,r2,r3', 'incs': [(1, 'kill9', 500, 1500), (2, 'term', 1600, 60000)],
                   'lives': {1: [('boot', 0), ('apply', 1, [f1]), ('commit', 1), ('apply', 2, [f1, f2, f13]),
                                 ('commit', 2)],
                             2: [('boot', 2), ('apply', 3, [f2, f13]), ('commit', 3), ('apply', 4, [f2b, f13]),
                                 ('commit', 4)]},
                   'at': {(1, 'apply', 1): 1100, (2, 'apply', 3): 2100, (2, 'apply', 4): 3100},
                   'final': (4, [f2b, f13])},
            'n4': {'sub': 'file/k1', 'planes': 'r1,r2', 'incs': [(1, 'term', 500, 60000)],
                   'lives': {1: [('boot', 0), ('apply', 2, [f13]), ('commit', 2), ('commit', 4)]},
                   'at': {(1, 'apply', 2): 1200, (1, 'commit', 4): 3200},
                   'final': (4, [f13])},
            'n6': {'sub': '', 'planes': 'q1,r3', 'incs': [(1, 'term', 500, 60000)],
                   'lives': {1: [('boot', 0), ('apply', 1, [f1]), ('commit', 1), ('apply', 2, [f1, f2, f13]),
                                 ('commit', 2), ('apply', 3, [f2, f13]), ('commit', 3), ('apply', 4, [f2b, f13]),
                                 ('commit', 4)]},
                   'at': {(1, 'apply', 1): 1150, (1, 'apply', 3): 2150, (1, 'apply', 4): 3150},
                   'final': (4, [f2b, f13])},
        }
        self.faults = []   # [(ms, text)]
        self.plane_logs = {}   # plane -> [(ms, text)]
        self.params = {'lease_ttl_s': 10, 'heartbeat_s': 1, 'backoff_max_s': 2, 'planes': 'r1,r2,r3,q1',
                       'relay.q1': 'r3,r2'}
        self.converge = {'final': 4, 'converged': 1, 'ms': 800, 'limit_ms': 30000}
        self.replica_drop = None
        self.relay_drop = None

    def value(self, version, kind, x):
        if kind == 'L':
            return 'L %d\n%s' % (version, json.dumps(x, sort_keys=True))
        return 'T %d %d\n' % (version, x)

    @staticmethod
    def stamp(ms, who):
        return datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc).strftime(
            '%Y-%m-%dT%H:%M:%S.%f')[:23] + 'Z %s[1] ' % who

    def write(self, d):
        B = self.BASE
        rev = 1
        hist = []
        state = {}
        for version, changes in self.commits:
            rev += 1
            evs = [{'kv': {'key': b64e(PREFIX + 'version'), 'mod_revision': rev, 'value': b64e(str(version))}}]
            for name, kind, x in changes:
                evs.append({'kv': {'key': b64e(PREFIX + 'res/' + name), 'mod_revision': rev,
                                   'value': b64e(self.value(version, kind, x))}})
                if kind == 'L':
                    state[name] = (x, version)
                else:
                    state.pop(name, None)
            rev += 1   # a node record between two commits
            evs.append({'kv': {'key': b64e(PREFIX + 'nodes/n1'), 'mod_revision': rev, 'value': b64e('{}')}})
            hist.append(json.dumps({'Header': {'revision': rev}, 'Events': evs}))
        with open(os.path.join(d, 'history.jsonl'), 'w') as f:
            f.write('\n'.join(hist) + '\n')
        with open(os.path.join(d, 'history.rev'), 'w') as f:
            f.write('%d\n' % rev)
        with open(os.path.join(d, 'writes.jsonl'), 'w') as f:
            for w in self.writes:
                f.write(json.dumps(w) + '\n')
        for sub in ('records', 'agents', 'final'):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(os.path.join(d, 'params.txt'), 'w') as f:
            for k, v in self.params.items():
                f.write('%s=%s\n' % (k, v))
        with open(os.path.join(d, 'faults.log'), 'w') as f:
            for ms, text in self.faults:
                f.write('%d %s\n' % (B + ms, text))
        for plane, lines in self.plane_logs.items():
            with open(os.path.join(d, plane + '.log'), 'w') as f:
                for ms, text in lines:
                    f.write(self.stamp(B + ms, 'tether-plane') + text + '\n')
        for node, nd in self.nodes.items():
            with open(os.path.join(d, 'agents', node + '.sub'), 'w') as f:
                f.write(nd['sub'] + '\n')
            with open(os.path.join(d, 'agents', node + '.planes'), 'w') as f:
                f.write(nd['planes'] + '\n')
            with open(os.path.join(d, 'agents', node + '.incs'), 'w') as f:
                for inc, end, t0, t1 in nd['incs']:
                    f.write('%d start %d 1\n%d %s %d 1\n' % (inc, B + t0, inc, end, B + t1))
            starts = {inc: t0 for inc, _, t0, _ in nd['incs']}

            def line(inc, kind, v, files, ts):
                return '@\t%s\t%s\t%d\t%d%s\n' % (inc, kind, v, ts, ''.join('\t%s\t%s\t%s' % x for x in files))
            with open(os.path.join(d, 'records', node + '.applied'), 'w') as rf:
                for inc, evs in nd['lives'].items():
                    clock = starts.get(inc, 0)
                    with open(os.path.join(d, 'agents', '%s.%d.log' % (node, inc)), 'w') as f:
                        for ev in evs:
                            if ev[0] in ('spell', 'move'):
                                t = ev[1]
                            else:
                                t = nd.get('at', {}).get((inc, ev[0], ev[1]), clock + 5)
                            clock = t
                            stamp = self.stamp(B + t, 'tetherd') + 'info: '
                            if ev[0] == 'boot':
                                f.write(stamp + 'files: output matches version %d (0 files written)\n' % ev[1])
                            elif ev[0] == 'commit':
                                f.write(stamp + 'applied version %d (delta, 1 changes)\n' % ev[1])
                            elif ev[0] == 'spell':
                                f.write(stamp + 'plane http://127.0.0.1:1 is stale since 2026-12-04T20:29:12Z '
                                        '(cut); looking for a fresh plane\n')
                            elif ev[0] == 'move':
                                f.write(stamp + 'plane: moving from http://127.0.0.1:1 to http://127.0.0.1:2: '
                                        'http://127.0.0.1:1 is stale since 2026-12-04T20:29:12Z (cut)\n')
                            else:
                                rf.write(line(inc, ev[0], ev[1], ev[2], (B + t) * 10**6))
            with open(os.path.join(d, 'final', node + '.applied'), 'w') as f:
                f.write(line('final', 'final', nd['final'][0], nd['final'][1], 99999))
        for plane, drop in (('r1', self.replica_drop), ('q1', self.relay_drop)):
            res = [{'name': n, 'version': v, 'body': b} for n, (b, v) in sorted(state.items()) if n != drop]
            with open(os.path.join(d, 'final', plane + '.json'), 'w') as f:
                json.dump({'version': self.commits[-1][0], 'resources': res}, f)
        with open(os.path.join(d, 'converge.txt'), 'w') as f:
            for k, v in self.converge.items():
                f.write('%s=%s\n' % (k, v))


def self_test():
    cases = []

    def case(desc, want, doctor):
        cases.append((desc, want, doctor))

    case('the undoctored run passes', None, lambda f: None)

    def lost(f):   # the batch acknowledged at 2 is not in etcd: its version holds another write
        f.commits[1] = (2, [('file/k07', 'L', {'path': 'd7/k07.txt', 'content': 'w2-2 file/k07\n'})])
    case('an acknowledged write missing from the history', 'acked', lost)

    def refused(f):   # the refused write is committed
        f.commits.append((5, [('file/k05', 'L', f.writes[4]['puts']['file/k05'])]))
        f.converge['final'] = 5
        f.nodes['n1']['final'] = (5, f.nodes['n1']['final'][1] + [('d5/k05.txt', '644', 'w2-3 file/k05')])
        f.nodes['n4']['final'] = (5, f.nodes['n4']['final'][1])
    case('a write answered 422 in the history', 'acked', refused)

    def reorder(f):   # acknowledged before w1-2 was sent, with a higher version
        f.writes[0]['version'], f.writes[1]['version'] = 2, 1
        f.commits[0], f.commits[1] = (1, f.commits[1][1]), (2, f.commits[0][1])
    case('acknowledged versions against real time', 'acked', reorder)

    def down(f):    # n1's second life boots from an older last-good than it committed
        f.nodes['n1']['lives'][2][0] = ('boot', 1)
    case('a node committed version going down across a restart', 'monotonic', down)

    def back(f):    # a swap to an older version
        f.nodes['n1']['lives'][2].insert(3, ('apply', 1, [f.f1]))
    case('a node making an older version live', 'monotonic', back)

    def content(f):  # n4 shows a file of a name it does not subscribe to
        f.nodes['n4']['lives'][1][1] = ('apply', 2, [f.f2, f.f13])
    case('a node state that is not the plane\'s at its version', 'content', content)

    def content2(f):  # a mode differs
        f.nodes['n1']['lives'][1][3] = ('apply', 2, [f.f1, ('d2/k02.txt', '644', 'w1-2 file/k02'), f.f13])
    case('a node file with the wrong mode', 'content', content2)

    def retracted(f):  # killed -9 between the swap of 3 and its commit: tolerated
        f.nodes['n1']['lives'][1] += [('apply', 3, [f.f2, f.f13])]
    case('a swap retracted by a kill -9 before its commit is tolerated', None, retracted)

    def retracted_term(f):  # the same after a clean stop: not tolerated
        f.nodes['n1']['lives'][1] += [('apply', 3, [f.f2, f.f13])]
        f.nodes['n1']['incs'][0] = (1, 'term', 500, 1500)
    case('a swap forgotten across a clean stop', 'monotonic', retracted_term)

    def revert_wrong(f):  # a failed swap puts back a version it never committed
        f.nodes['n1']['lives'][2] += [('back', 3, [f.f2, f.f13])]
    case('a revert to another version than the committed one', 'monotonic', revert_wrong)

    def claim(f):  # a 503 that says nothing was stored, for a write in the history
        f.writes[3].update(status=503, why='{"error":"etcd unavailable; nothing was stored, try again"}')
    case('a 5xx saying nothing was stored for a stored write', 'acked', claim)

    def twice(f):  # w1-2 commits at 2 (answer lost), w2-2 changes k02 at 4, w1-2's retry puts it back at 5
        f.commits.append((5, [('file/k02', 'L', f.writes[1]['puts']['file/k02'])]))
        f.writes[1].update(version=5, t1=f.BASE + 30000)
        f.converge['final'] = 5
        f.nodes['n1']['lives'][2] += [('apply', 5, [f.f2, f.f13]), ('commit', 5)]
        f.nodes['n1']['final'] = (5, [f.f2, f.f13])
        f.nodes['n4']['lives'][1].append(('commit', 5))
        f.nodes['n4']['final'] = (5, [f.f13])
    case('a write that takes effect twice around another', 'once', twice)

    def stuck(f):
        f.nodes['n4']['final'] = (2, [f.f13])
        f.converge['converged'] = 0
    case('a node that does not converge', 'converge', stuck)

    def stuck_relay(f):   # behind the relay, the node's output stays at version 3
        f.nodes['n6']['final'] = (3, [f.f2, f.f13])
    case('a node behind the relay that does not end at the final version', 'converge', stuck_relay)

    def replica(f):
        f.replica_drop = 'file/k13'
    case('a replica missing a resource', 'replicas', replica)

    def relay(f):
        f.relay_drop = 'file/k02'
    case('the relay missing a resource', 'replicas', relay)

    def hole(f):
        del f.commits[2]
    case('a hole in the history\'s versions', 'history', hole)

    # staleness: w2-1 (version 3) is answered at 2010; n4 holds 3 only
    # with its commit of 4, at 3200 in the undoctored run
    def late(f, at=25000):
        f.nodes['n4']['at'][(1, 'commit', 4)] = at

    def agent_down(f):   # n4 killed from 1900 to 24000; its next life has 4 at 25000
        f.nodes['n4']['incs'] = [(1, 'kill9', 500, 1900), (2, 'term', 24000, 60000)]
        f.nodes['n4']['lives'] = {1: [('boot', 0), ('apply', 2, [f.f13]), ('commit', 2)],
                                  2: [('boot', 2), ('commit', 4)]}
        f.nodes['n4']['at'][(2, 'commit', 4)] = 25000

    def planes_down(f, at=25000):   # both of n4's planes down from 1950 to 24000
        late(f, at)
        f.faults += [(1900, 'replica-kill r1'), (1950, 'partition-cut r2-etcd back: r2 <-> etcd'),
                     (23000, 'partition-heal r2-etcd'), (24000, 'replica-restart r1')]
    case('a node 23 s late with a healthy path', 'staleness', late)
    case('the same delay while its agent was down is tolerated', None, agent_down)
    case('the same delay while every plane it lists was down is tolerated', None, planes_down)
    case('late 16 s after the end of that outage', 'staleness', lambda f: planes_down(f, 40000))

    def tail(f, at=39000):   # r2 says current again 10.5 s after its heal: the tail is one lease TTL
        planes_down(f, at)
        f.faults[-1] = (22000, 'replica-restart r1')
        f.faults.append((22500, 'replica-kill r1'))
        f.faults.append((40000, 'replica-restart r1'))
        f.plane_logs['r2'] = [(6000, 'warn: stale: this plane cannot vouch that it is current: etcd'),
                              (33500, 'info: stale no more: this plane is current again (it was stale for 27s)')]
    case('a plane healed counts down until it says current (at most a lease TTL)', None, tail)
    case('... and no longer', 'staleness', lambda f: tail(f, 48200))

    def relay_path(f, cut_both=True):   # r3 killed; q1 cut from r2 too, or not
        f.nodes['n6']['at'][(1, 'apply', 3)] = 25000
        f.nodes['n6']['at'][(1, 'apply', 4)] = 25100
        f.faults += [(1900, 'replica-kill r3'), (24000, 'replica-restart r3')]
        if cut_both:
            f.faults += [(1950, 'partition-cut q1-r2 both: q1 <-> r2'), (23000, 'partition-heal q1-r2')]
    case('behind a relay cut from every upstream, with its other plane down: tolerated', None, relay_path)
    case('the relay with an upstream left is a path: the delay is caught', 'staleness',
         lambda f: relay_path(f, False))

    def hold(f, move=1000, heal=23000, at=25000):   # n6 lists q1, r2; q1 on r2 since its move off r3
        f.nodes['n6']['planes'] = 'q1,r2'
        f.nodes['n6']['at'][(1, 'apply', 3)] = at
        f.nodes['n6']['at'][(1, 'apply', 4)] = at + 100
        f.params['relay.q1.urls'] = 'http://127.0.0.1:3,http://127.0.0.1:2'
        f.plane_logs['q1'] = [(move - 900, 'info: relay: following http://127.0.0.1:3'),
                              (move, 'warn: relay: moving to the next upstream: this one is stale'),
                              (move + 100, 'info: relay: following http://127.0.0.1:2')]
        f.faults += [(1950, 'partition-cut r2-etcd both: r2 <-> etcd'), (heal, 'partition-heal r2-etcd')]
    case('a relay held on a stale upstream (30 s after its last move off one): tolerated', None, hold)
    case('... not when that move was over 30 s before', 'staleness', lambda f: hold(f, move=-30000))
    case('... and for 30 s only', 'staleness', lambda f: hold(f, heal=40000, at=47000))

    def moves(f, at=20010):   # n4 moved off stale planes twice in the minute before: 19 s allowed
        late(f, at)
        f.nodes['n4']['lives'][1][1:1] = [('spell', 600), ('move', 700), ('spell', 800), ('move', 900)]
        f.nodes['n4']['lives'][1][-1:-1] = [('spell', 2020), ('move', at - 10)]
    case('tetherd\'s back-off of moves off stale planes is allowed', None, moves)
    case('... and no more', 'staleness', lambda f: moves(f, 22010))

    def never(f):   # n4 never holds 3 or above
        f.nodes['n4']['lives'][1].pop()
    case('a node that never applies an acknowledged version', 'staleness', never)

    failed = 0
    for i, (desc, want, doctor) in enumerate(cases, 1):
        d = tempfile.mkdtemp(prefix='nemesis-selftest.')
        try:
            f = Fake()
            doctor(f)
            f.write(d)
            rep = check(d, quiet=True)
            if want is None:
                good = rep.total() == 0
                detail = '; '.join('%s: %s' % (k, v[0]) for k, v in rep.v.items() if v)
            else:
                good = rep.count(want) > 0
                detail = '; '.join(rep.v[want][:1]) or 'not caught (%s)' % dict((k, len(v)) for k, v in rep.v.items())
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print('%s %d - self-test: %s%s%s' % ('ok' if good else 'not ok', i, desc,
                                              ' is caught' if want else '', ('  # ' + detail) if detail else ''))
        failed += not good
    print('1..%d' % len(cases))
    return 1 if failed else 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == '--self-test':
        sys.stdout.reconfigure(line_buffering=True)
        return self_test()
    if len(sys.argv) != 2 or sys.argv[1].startswith('-'):
        print(__doc__.split('\n')[2].strip() + '\n       ' + __doc__.split('\n')[3].strip(), file=sys.stderr)
        return 2
    try:
        rep = check(sys.argv[1])
    except (OSError, KeyError) as e:
        print('error: cannot read the records: %s' % e)
        return 2
    return 1 if rep.total() else 0


if __name__ == '__main__':
    sys.exit(main())
