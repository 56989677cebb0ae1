// Opens a page on each of several origins in headless Chromium (through
// puppeteer-core) and has it call an mcpush server directly with fetch
// (callMCP in cors-page.html), to check CORS: a page on an allowed origin
// gets through, a page on any other origin is refused by the browser.
// Run by TestBrowserCORS (internal/e2e/browser_test.go).
//
// Environment:
//   CHROMIUM         the Chromium binary (Debian's chromium)
//   MCP_URL          the server's /mcp URL
//   PAGES            JSON: [{"name", "url", "allowed": true|false}]
//   MCPUSH_NODE_DIR  where puppeteer-core is installed
//
// It prints one JSON object on its last line of output, by page name what
// callMCP returned; it exits 1 with the reason when a page did not get the
// outcome it should.

import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const nodeDir = process.env.MCPUSH_NODE_DIR;
const req = createRequire(nodeDir ? path.join(nodeDir, "package.json") : import.meta.url);
const puppeteer = (await import(pathToFileURL(req.resolve("puppeteer-core")).href)).default;

const pages = JSON.parse(process.env.PAGES);
const mcpURL = process.env.MCP_URL;
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const results = {};
const problems = [];
try {
  for (const p of pages) {
    const page = await browser.newPage();
    const consoleErrors = [];
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
    await page.goto(p.url, { waitUntil: "load", timeout: 20000 });
    const r = await page.evaluate((u) => callMCP(u), mcpURL);
    r.origin = await page.evaluate(() => location.origin);
    r.consoleErrors = consoleErrors;
    results[p.name] = r;
    console.log(`${p.name} (${r.origin}): ${JSON.stringify(r)}`);
    if (p.allowed && r.error) problems.push(`${p.name}: refused: ${r.error}`);
    if (!p.allowed && !r.error) problems.push(`${p.name}: got through: ${JSON.stringify(r)}`);
    if (!p.allowed && !/Failed to fetch/.test(r.error)) problems.push(`${p.name}: want fetch's CORS failure, got ${r.error}`);
    await page.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(results));
if (problems.length) {
  console.error(`cors.mjs: ${problems.join("; ")}`);
  process.exit(1);
}
