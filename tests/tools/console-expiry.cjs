// console-expiry.cjs LINK: opens the console from a 'tetherctl ui' link
// whose session ends soon, in headless chromium through puppeteer-core
// (NODE_PATH; the browser is $CHROMIUM), and waits, with no reload, for
// the page to bring its login bar back saying the session expired (the
// plane closes the session's event stream at its end; the page's next
// request is refused as expired). Prints one JSON object of what it saw;
// exits 1 on a failure to drive.
'use strict';
const ppPage = require('./pp-page.cjs');

const [link] = process.argv.slice(2);
const res = { page_errors: [] };

ppPage.run(res, async (page) => {
	await page.goto(link, { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#app:not([hidden])', { timeout: 15000 });
	res.opened = true;
	await page.evaluate(() => { window.__marker = 'same page'; });
	await page.waitForFunction(() => !document.getElementById('login').hidden, { timeout: 120000, polling: 200 });
	res.login_error = await page.$eval('#login-error', (e) => e.textContent);
	res.same_page = await page.evaluate(() => window.__marker === 'same page');
});
