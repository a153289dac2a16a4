// console-gate.cjs PLANE_URL: opens the plane's console (GET /ui/, an
// --insecure plane: no token) in headless chromium through puppeteer-core
// (NODE_PATH; the browser is $CHROMIUM, default /usr/bin/chromium), waits
// for the rollout panel to show the traffic gates' stages, and prints one
// JSON object of what it saw: the options line, each stage's verdict and
// text, the routes of its table, and any script error.
'use strict';
const puppeteer = require('puppeteer-core');

const [base] = process.argv.slice(2);
const res = { page_errors: [] };
(async () => {
	const browser = await puppeteer.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
	});
	try {
		const page = await browser.newPage();
		page.on('pageerror', (e) => res.page_errors.push(String(e.message || e)));
		await page.goto(base + '/ui/', { waitUntil: 'domcontentloaded' });
		await page.waitForSelector('#rollout .gate [data-gate-stage]', { timeout: 15000 });
		res.limits = await page.$eval('#rollout .gate-limits', (e) => e.textContent);
		res.stages = await page.$$eval('#rollout [data-gate-stage]', (ss) => ss.map((s) => ({
			stage: s.dataset.gateStage, verdict: s.dataset.verdict,
			text: s.querySelector('.gate-stage').textContent,
			routes: [...s.querySelectorAll('tr[data-route]')].map((r) => r.dataset.route),
		})));
	} catch (e) {
		res.failure = String(e && e.message || e);
	} finally {
		await browser.close();
	}
	process.stdout.write(JSON.stringify(res) + '\n');
	process.exit(res.failure ? 1 : 0);
})();
