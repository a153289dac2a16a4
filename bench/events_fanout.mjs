// bench/events_fanout.mjs URL N PLANE_PID: opens N GET /v1/events streams to
// a plane (an --insecure one: no token), prints the plane's RSS with them
// open, then PUTs one resource and prints how long until every stream saw
// its `version` event (the client, one node process, dominates that time).
// Not part of `make bench`; run by hand, e.g.
//   tether-plane --insecure --listen 127.0.0.1:17940 --data /tmp/d --max-connections 5000 &
//   node bench/events_fanout.mjs http://127.0.0.1:17940 1000 $!
const [url, n] = [process.argv[2], +process.argv[3]];
let opened = 0, got = 0, t0 = 0;
const done = new Promise((res) => {
	for (let i = 0; i < n; i++) {
		fetch(url + '/v1/events').then(async (r) => {
			opened++;
			const rd = r.body.getReader(); const dec = new TextDecoder(); let txt = '';
			for (;;) {
				const { value, done } = await rd.read(); if (done) break;
				txt += dec.decode(value);
				if (txt.includes('event: version')) { got++; if (got === n) res(performance.now() - t0); break; }
			}
		}).catch((e) => console.error('fail', e.message));
	}
});
while (opened < n) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 500));
const fs = await import('node:fs');
const pid = process.argv[4];
const rss = () => fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1];
console.log(`opened ${opened}, plane RSS ${rss()} kB`);
t0 = performance.now();
await fetch(url + '/v1/resources/file/x', { method: 'PUT', body: JSON.stringify({ path: 'x', content: String(Date.now()) }) });
const ms = await done;
console.log(`all ${n} streams saw the version event ${ms.toFixed(1)} ms after the write began`);
process.exit(0);
