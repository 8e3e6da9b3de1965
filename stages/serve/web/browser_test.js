// The browser test of serve's page (run by tests/e2e/serve_e2e_test.cpp against a running
// service): headless chromium driven by puppeteer-core loads the page, opens a slide, clicks a
// point, checks that k hit thumbnails with scores appear and that a filter narrows them, turns the
// heatmap on, opens a hit, and fails on any console error. Keeps a screenshot.
//   NODE_PATH=.../web/npm/node_modules node browser_test.js URL CHROMIUM SCREENSHOT.png
'use strict';
const puppeteer = require('puppeteer-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [url, chromium, screenshot] = process.argv.slice(2);
if (!url || !chromium || !screenshot) {
  console.error('usage: browser_test.js URL CHROMIUM SCREENSHOT.png');
  process.exit(2);
}

function check(ok, what) {
  if (!ok) throw new Error('check failed: ' + what);
  console.log('ok: ' + what);
}

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: profile,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1600, height: 1000 });
    // Guards against a hang only (a loaded machine may take long): every step waits for a state.
    page.setDefaultTimeout(300000);
    page.setDefaultNavigationTimeout(300000);
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`); });

    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#slide-list li').length >= 4);
    check(true, 'the cohort list shows the slides');
    await page.waitForFunction(() => document.querySelectorAll('#slide-list img').length >= 4 &&
      [...document.querySelectorAll('#slide-list img')].every((i) => i.complete && i.naturalWidth > 0));
    check(true, 'every slide has a thumbnail');

    await page.click('#slide-list li[data-slide="c"]');
    await page.waitForFunction(() => document.getElementById('slide-title').textContent === 'c' &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'slide c opens in the viewer with its tiles loaded');

    const box = await (await page.$('#viewer')).boundingBox();
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 12 &&
      [...document.querySelectorAll('#hits .hit img')].every((i) => i.complete && i.naturalWidth > 0));
    const scores = await page.$$eval('#hits .hit .score', (els) => els.map((e) => Number(e.textContent)));
    check(scores.length === 12 && scores.every((s) => Number.isFinite(s)), '12 hit thumbnails with scores');
    check(scores.every((s, i) => i === 0 || s <= scores[i - 1] + 1e-6), 'scores in decreasing order');
    const sitesBefore = await page.$$eval('#hits .hit .sub', (els) => els.map((e) => e.textContent));

    await page.type('#filter', 'site = colon');
    await page.click('#rerun');
    await page.waitForFunction(() => {
      const subs = [...document.querySelectorAll('#hits .hit .sub:last-child')].map((e) => e.textContent);
      return subs.length === 12 && subs.every((t) => t.includes('site: colon'));
    });
    check(true, 'the filter narrows the hits to site = colon');
    check(sitesBefore.some((t) => t.includes('site: lung')), 'before the filter some hits were lung');

    await page.click('#heatmap');
    await page.waitForSelector('canvas.heat');
    check(true, 'the heatmap overlay appears');

    await page.click('#hits .hit:nth-child(2)');
    await page.waitForFunction(() => document.querySelectorAll('.outline:not(.query)').length >= 1 &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'a hit opens its slide at its place, outlined');
    await new Promise((r) => setTimeout(r, 500));
    await page.screenshot({ path: screenshot });
    check(fs.statSync(screenshot).size > 10000, 'screenshot ' + screenshot);
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (problems.length) {
    console.error('problems in the page:\n  ' + problems.join('\n  '));
    process.exit(1);
  }
  console.log('browser test passed');
})().catch((e) => { console.error(e); process.exit(1); });
