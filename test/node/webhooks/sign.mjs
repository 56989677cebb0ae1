// Signs webhook messages with the npm `standardwebhooks` package (a third
// party), so mcpush's Go tests can check that webhook.Receiver accepts what
// another implementation signs.
//
// stdin: JSON [{"secret","id","timestamp" (Unix seconds),"body"}]
// stdout: JSON [{"webhook-id","webhook-timestamp","webhook-signature"}], in order
import { createRequire } from "node:module";
import { join } from "node:path";

const nodeDir = process.env.MCPUSH_NODE_DIR;
const require = createRequire(nodeDir ? join(nodeDir, "package.json") : import.meta.url);
const { Webhook } = require("standardwebhooks");

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const messages = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = messages.map((m) => ({
  "webhook-id": m.id,
  "webhook-timestamp": String(m.timestamp),
  "webhook-signature": new Webhook(m.secret).sign(m.id, new Date(m.timestamp * 1000), m.body),
}));
console.log(JSON.stringify(out));
