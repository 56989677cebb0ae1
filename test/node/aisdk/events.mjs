// The Vercel AI SDK (`@ai-sdk/mcp`, pinned in test/node/package.json) as a
// third-party Events client: its MCP client subscribes by webhook
// (experimental_events) and its own receiver (experimental_createMCPEventWebhook)
// answers the verification and verifies every delivery's signature. None of
// mcpush's code runs here. internal/e2e's TestAISDKWebhook drives it.
//
// Environment:
//   MCP_URL        the MCP endpoint
//   MCP_TOKEN      a bearer token (webhook subscriptions need a principal)
//   RECEIVER_PORT  the loopback port the receiver listens on
//
// Commands, one a line on stdin:
//   subscribe NAME ARGUMENTS_JSON   experimental_events.subscribe, the callback
//                                   http://127.0.0.1:RECEIVER_PORT/hooks
//   unsubscribe                     experimental_events.unsubscribe of the last one
//   exit
// Output, one JSON line each on stdout: {"kind":"ready"} once listening;
// {"kind":"request","status","type","webhookId","subscriptionId"} for every
// POST the receiver answered (type: the control envelope's, "" for an event);
// {"kind":"event","subscriptionId","event"} for every event the receiver
// handed to onEvent; {"kind":"subscribed","result","callback"} (the callback
// URL the SDK subscribed, its routing key in the query), {"kind":"unsubscribed"};
// {"kind":"error","command","message"} when a command failed.
import http from "node:http";
import readline from "node:readline";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// The package comes from MCPUSH_NODE_DIR's node_modules when it is set
// (the tests may use another checkout's), else from beside this script.
const nodeDir = process.env.MCPUSH_NODE_DIR;
const require = createRequire(nodeDir ? join(nodeDir, "package.json") : import.meta.url);
const aisdk = await import(pathToFileURL(require.resolve("@ai-sdk/mcp")).href);
const createMCPClient = aisdk.experimental_createMCPClient;
const createMCPEventWebhook = aisdk.experimental_createMCPEventWebhook;

const { MCP_URL, MCP_TOKEN, RECEIVER_PORT } = process.env;
if (!MCP_URL || !MCP_TOKEN || !RECEIVER_PORT) {
  console.error("MCP_URL, MCP_TOKEN and RECEIVER_PORT are required");
  process.exit(2);
}
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

// The private subscription store the SDK asks the application for (it
// holds the secrets): in memory, which is enough for one process.
const subs = new Map();
const store = {
  async get(key) {
    const s = subs.get(key);
    return s && structuredClone(s);
  },
  async getById(id) {
    for (const s of subs.values()) if (s.id === id) return structuredClone(s);
    return undefined;
  },
  async set(s) {
    subs.set(s.key, structuredClone(s));
  },
  async update(key, patch) {
    const s = subs.get(key);
    if (s) subs.set(key, { ...s, ...structuredClone(patch) });
  },
  async delete(key) {
    subs.delete(key);
  },
};

const handle = createMCPEventWebhook({
  store,
  onEvent: async ({ subscription, event }) => out({ kind: "event", subscriptionId: subscription.id, event }),
  onGap: async ({ subscription, gap }) => out({ kind: "gap", subscriptionId: subscription.id, gap }),
  onTerminated: async ({ subscription, termination }) => out({ kind: "terminated", subscriptionId: subscription.id, termination }),
  onError: (e) => out({ kind: "error", command: "receiver", message: String(e) }),
});

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    for (const one of [].concat(v)) headers.append(k, one);
  }
  const request = new Request(`http://127.0.0.1:${RECEIVER_PORT}${req.url}`, {
    method: req.method,
    headers,
    body: req.method === "POST" || req.method === "PUT" ? body : undefined,
  });
  const response = await handle(request);
  const answer = Buffer.from(await response.arrayBuffer());
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(answer);
  let type = "";
  try {
    type = JSON.parse(body.toString("utf8")).type ?? "";
  } catch {
    type = "unparsable";
  }
  out({
    kind: "request",
    status: response.status,
    type,
    webhookId: req.headers["webhook-id"] ?? "",
    subscriptionId: req.headers["x-mcp-subscription-id"] ?? "",
  });
});
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(Number(RECEIVER_PORT), "127.0.0.1", resolve);
});

const client = await createMCPClient({
  transport: { type: "http", url: MCP_URL, headers: { Authorization: `Bearer ${MCP_TOKEN}` } },
  experimental_events: { store },
  clientName: "mcpush-e2e-aisdk",
});
out({ kind: "ready" });

let last; // the id of the last subscription
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const [command, name, ...rest] = line.trim().split(" ");
  try {
    if (command === "subscribe") {
      const result = await client.experimental_events.subscribe({
        name,
        arguments: JSON.parse(rest.join(" ") || "{}"),
        delivery: { mode: "webhook", url: `http://127.0.0.1:${RECEIVER_PORT}/hooks`, allowInsecureLocalhost: true },
      });
      last = result.id;
      out({ kind: "subscribed", result, callback: (await store.getById(result.id))?.delivery.url });
    } else if (command === "unsubscribe") {
      await client.experimental_events.unsubscribe({ id: last });
      out({ kind: "unsubscribed" });
    } else if (command === "exit") {
      break;
    } else {
      out({ kind: "error", command, message: "unknown command" });
    }
  } catch (e) {
    out({ kind: "error", command, message: String(e?.message ?? e) });
  }
}
await client.close();
server.close();
process.exit(0);
