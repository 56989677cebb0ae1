// A Standard Webhooks receiver verified by a third party: the npm
// `standardwebhooks` package (not mcpush's code). mcpush's Go tests run it
// to check that every delivery verifies with an off-the-shelf verifier.
//
// Environment:
//   WEBHOOK_SECRETS  comma-separated whsec_ secrets
//   WEBHOOK_MODE     "any" (default): a request is accepted when one secret
//                    verifies it; "all": only when every secret does (a
//                    dual-signed rotation message must verify under each)
//
// It listens on 127.0.0.1 (an ephemeral port), prints {"port":N} as its
// first stdout line, then one JSON line per request:
//   {"id","subscriptionId","verified":[bool per secret],"accepted",
//    "type" (control envelopes),"eventId","body"}
// It answers 401 to a request not accepted, echoes the challenge of an
// accepted verification envelope, and answers 204 to other accepted ones.
import http from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";

// The package comes from MCPUSH_NODE_DIR's node_modules when it is set
// (the tests may use another checkout's), else from beside this script.
const nodeDir = process.env.MCPUSH_NODE_DIR;
const require = createRequire(nodeDir ? join(nodeDir, "package.json") : import.meta.url);
const { Webhook } = require("standardwebhooks");

const secrets = (process.env.WEBHOOK_SECRETS ?? "").split(",").filter(Boolean);
if (secrets.length === 0) {
  console.error("WEBHOOK_SECRETS is empty");
  process.exit(2);
}
const hooks = secrets.map((s) => new Webhook(s));
const all = process.env.WEBHOOK_MODE === "all";

const server = http.createServer((req, res) => {
  if (req.method !== "POST") {
    // Not a delivery: e.g. the sender looking for a receiver document
    // (/.well-known/mcp-webhook-receiver.json), which this receiver has
    // not. Not recorded.
    req.resume();
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    const verified = hooks.map((wh) => {
      try {
        wh.verify(raw, req.headers);
        return true;
      } catch {
        return false;
      }
    });
    const accepted = req.method === "POST" && (all ? verified.every(Boolean) : verified.some(Boolean));
    let body = null;
    try {
      body = JSON.parse(raw);
    } catch {}
    console.log(JSON.stringify({
      id: req.headers["webhook-id"] ?? null,
      subscriptionId: req.headers["x-mcp-subscription-id"] ?? null,
      contentType: req.headers["content-type"] ?? null,
      verified,
      accepted,
      type: body?.type ?? null,
      eventId: body?.eventId ?? null,
      body,
    }));
    if (!accepted) {
      res.writeHead(401).end();
    } else if (body?.type === "verification") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ challenge: body.challenge }));
    } else {
      res.writeHead(204).end();
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
