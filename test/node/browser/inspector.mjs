// Drives the MCP Inspector's web UI (npm @modelcontextprotocol/inspector,
// already running, connected to an mcpush server) in headless Chromium
// through puppeteer-core, as a person would: connect, list the tools, call
// session_info, read and subscribe to events://orders, publish an event
// with the sns-ingest binary and wait for the Inspector to show it.
// Run by TestBrowserInspector (internal/e2e/browser_test.go).
//
// Environment:
//   CHROMIUM       the Chromium binary (Debian's chromium)
//   INSPECTOR_URL  the Inspector's page, with its API token
//   ERA            legacy (2025-11-25) or modern (2026-07-28): the era the
//                  Inspector was started with (--protocol-era)
//   SNS_INGEST     the sns-ingest binary; MCPUSH_STORE is the server's store
//   MAX_DELAY_MS   the bound of the time from sns-ingest's exit to the event
//                  shown (default 2000): an event over it is followed by one
//                  more (a machine shared with other work may stall once);
//                  delaysMs lists both
//   SHOT_DIR       optional: where to save a screenshot of each step
//   IDLE_MS        optional: stay connected and idle until this long after
//                  connecting (connectedAt, idleEndedAt: epoch ms)
//   MCPUSH_NODE_DIR  where puppeteer-core is installed
//
// It prints one JSON object on its last line of output: what it saw and
// how long the event took; it exits 1 with the reason on the first failure.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

// puppeteer-core comes from the npm dependencies in MCPUSH_NODE_DIR (the Go
// test sets it; default: this checkout's test/node).
const nodeDir = process.env.MCPUSH_NODE_DIR;
const req = createRequire(nodeDir ? path.join(nodeDir, "package.json") : import.meta.url);
const puppeteer = (await import(pathToFileURL(req.resolve("puppeteer-core")).href)).default;

const env = (name) => {
  const v = process.env[name];
  if (!v) fail(`${name} is not set`);
  return v;
};
function fail(msg) {
  console.error(`inspector.mjs: ${msg}`);
  process.exit(1);
}

const era = env("ERA");
const version = { legacy: "2025-11-25", modern: "2026-07-28" }[era] ?? fail(`ERA=${era}: want legacy or modern`);
const maxDelayMs = Number(process.env.MAX_DELAY_MS || 2000);
let order = "";
const result = { era, protocolVersion: version, delaysMs: [] };
const t0 = Date.now();
const log = (msg) => console.log(`${((Date.now() - t0) / 1000).toFixed(1)}s ${msg}`);

const browser = await puppeteer.launch({
  executablePath: env("CHROMIUM"),
  headless: true,
  // Root (CI) needs --no-sandbox; no GPU here.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
let page;
try {
  page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  page.setDefaultTimeout(20000);
  await run();
} catch (e) {
  if (page && process.env.SHOT_DIR) {
    await page.screenshot({ path: path.join(process.env.SHOT_DIR, `${era}-failure.png`) }).catch(() => {});
  }
  const text = page ? await page.evaluate(() => document.body.innerText).catch(() => "") : "";
  fail(`${e.stack || e}\n--- page text ---\n${text.slice(0, 3000)}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));

async function shot(name) {
  if (process.env.SHOT_DIR) await page.screenshot({ path: path.join(process.env.SHOT_DIR, `${era}-${name}.png`) });
}

// bodyText is the page's text, lower-cased (the UI upper-cases some of it
// with CSS).
function bodyText() {
  return page.evaluate(() => document.body.textContent.toLowerCase());
}

function waitText(s, timeout) {
  return page.waitForFunction((s) => document.body.textContent.toLowerCase().includes(s), { timeout, polling: 50 }, s.toLowerCase());
}

// show clicks a navigation label until its screen is there (a click while
// the app re-renders after connecting may be lost).
async function show(label, screen) {
  for (let i = 0; i < 20; i++) {
    await page.click(`label[for$='-${label}']`).catch(() => {});
    if (await page.waitForSelector(`[data-testid=${screen}]`, { timeout: 1000 }).catch(() => null)) return;
  }
  throw new Error(`the ${label} screen never showed`);
}

function ingest() {
  return new Promise((resolve, reject) => {
    const p = spawn(env("SNS_INGEST"), ["-topic", "orders", "-message", JSON.stringify({ order, total: 42 })], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", () => {});
    p.on("error", reject);
    p.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`sns-ingest exited ${code}: ${out}`))));
  });
}

function count(text, s) {
  return text.split(s).length - 1;
}

async function run() {
  await page.goto(env("INSPECTOR_URL"), { waitUntil: "load" });
  log("page loaded");

  // Connect.
  await page.click("input[role=switch][aria-label^='Connect or disconnect']");
  await waitText(`MCP ${version}`);
  log(`connected: MCP ${version}`);
  result.connectedAt = Date.now();
  await shot("connected");

  // List the tools.
  await show("Tools", "tools-screen");
  await page.waitForSelector("[data-testid=tools-screen] button.list-item ::-p-text(session_info)");
  result.tools = await page.$$eval("[data-testid=tools-screen] button.list-item", (bs) =>
    bs.map((b) => b.innerText.trim().split("\n").pop().trim()),
  );
  log(`tools: ${result.tools.join(", ")}`);

  // Call one.
  await page.click("[data-testid=tools-screen] button.list-item ::-p-text(session_info)");
  await page.click("button ::-p-text(Execute Tool)");
  const out = await page.waitForSelector("[data-testid=structured-output]");
  await page.waitForFunction((el, v) => el.textContent.includes(v), { polling: 50 }, out, version);
  const text = await out.evaluate((e) => e.textContent); // "Structured Output", line numbers, the JSON
  result.toolResult = JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1));
  log(`session_info: ${JSON.stringify(result.toolResult)}`);
  await shot("tool");

  // Read and subscribe to events://orders.
  await show("Resources", "resources-screen");
  await page.click("[data-testid=resources-screen] button.list-item ::-p-text(Topic events)");
  await page.type("input[placeholder='Enter topic']", "orders");
  await page.click("button ::-p-text(Read Resource)");
  await page.waitForSelector("[data-testid=resource-preview] ::-p-text(events://orders)");
  await page.click("[data-testid=resource-preview] button ::-p-text(Subscribe)");
  await page.waitForSelector("[data-testid=resource-preview] button ::-p-text(Unsubscribe)");
  log("subscribed to events://orders");

  // The notifications: the monitoring sidebar's Protocol screen lists
  // every message; in the 2025 era its Logs screen shows the event itself
  // (notifications/message, logger events/orders).
  const updated = "notifications/resources/updated";
  if (era === "modern") {
    await page.click("label[for$='-Protocol']");
    await waitText("notifications/subscriptions/acknowledged");
  }
  await shot("subscribed");
  for (let attempt = 1; ; attempt++) {
    order = `A-${process.pid}-${attempt}-${Date.now() % 100000}`;
    const before = count(await bodyText(), updated);
    const start = Date.now();
    result.ingest = JSON.parse(await ingest());
    const stored = Date.now();
    if (era === "legacy") {
      await waitText(order, 5000); // the Log Stream
    } else {
      await page.waitForFunction(
        (s, n) => document.body.textContent.toLowerCase().split(s).length - 1 > n,
        { timeout: 5000, polling: 50 },
        updated,
        before,
      );
    }
    const delay = Date.now() - stored;
    result.delaysMs.push(delay);
    result.ingestMs = stored - start;
    log(`event ${order} shown ${delay} ms after sns-ingest exited (its run: ${stored - start} ms)`);
    if (delay <= maxDelayMs || attempt === 2) break;
    log(`over ${maxDelayMs} ms: one more event`);
  }
  result.order = order;
  result.shownAfterIngestMs = result.delaysMs[result.delaysMs.length - 1];
  await shot("event");

  // The rest of what the Inspector shows of it.
  if (era === "legacy") {
    await page.click("label[for$='-Protocol']");
    await waitText(updated);
    result.sawUpdated = true;
  } else {
    result.sawUpdated = true;
    await page.click("[data-testid=resource-preview] button ::-p-text(Refresh)");
    await page.waitForSelector(`[data-testid=resource-preview] ::-p-text(${order})`, { timeout: 5000 });
    result.sawEventInResource = true;
  }
  await shot("done");

  // IDLE_MS: leave the connected page alone that long after connecting
  // (the Go test counts the Inspector's requests to the server meanwhile).
  const idleMs = Number(process.env.IDLE_MS || 0);
  if (idleMs > 0) {
    const until = result.connectedAt + idleMs;
    log(`idle until ${((until - t0) / 1000).toFixed(1)}s`);
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())));
    result.idleEndedAt = Date.now();
  }
}
