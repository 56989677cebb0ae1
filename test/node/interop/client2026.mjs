// client2026.mjs drives the TypeScript SDK 2.x client
// (@modelcontextprotocol/client: Client + StreamableHTTPClientTransport),
// pinned to protocol version 2026-07-28, for mcpush's Go interop tests
// (internal/e2e/interop2026_test.go).
//
//   node client2026.mjs URL
//
// Same line protocol as client.mjs: one JSON command per line on stdin,
// {"id":N,"op":OP,...}; one JSON object per line on stdout:
//
//   {"kind":"ready","sdkVersion":V}                   once, at start
//   {"kind":"result","id":N,"ok":true,"value":V}      a command finished
//   {"kind":"result","id":N,"ok":false,"error":E}     a command failed
//   {"kind":"notification","method":M,"params":P}     seen by the client's handler
//   {"kind":"progress","call":N,"progress":...}        seen by callTool's onprogress
//   {"kind":"request","method":M,"params":P}          an input request the client
//                                                      fulfilled (elicitation/create)
//   {"kind":"error","message":E}                      the client's onerror
//
// Ops: connect, listTools, callTool {name, arguments, progress},
// listen {filter}, closeListen.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const nodeDir = process.env.MCPUSH_NODE_DIR;
const req = createRequire(nodeDir ? join(nodeDir, 'package.json') : import.meta.url);
// The package exports no package.json: find it next to the CommonJS entry
// (dist/index.cjs), and import the ESM one beside it.
const cjsEntry = req.resolve('@modelcontextprotocol/client');
const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(cjsEntry.replace(/index\.cjs$/, 'index.mjs')).href
);
const sdkVersion = JSON.parse(readFileSync(join(dirname(cjsEntry), '..', 'package.json'), 'utf8')).version;

const url = process.argv[2];
if (!url) {
  process.stderr.write('usage: node client2026.mjs URL\n');
  process.exit(2);
}

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const client = new Client(
  { name: 'interop-ts-2026', version: '1.0.0' },
  {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  },
);
client.onerror = (e) => out({ kind: 'error', message: String(e?.message ?? e) });
for (const method of [
  'notifications/tools/list_changed',
  'notifications/prompts/list_changed',
  'notifications/resources/list_changed',
  'notifications/resources/updated',
]) {
  client.setNotificationHandler(method, (n) => out({ kind: 'notification', method, params: n.params ?? {} }));
}
client.setRequestHandler('elicitation/create', async (r) => {
  out({ kind: 'request', method: 'elicitation/create', params: r.params });
  return { action: 'accept', content: { name: 'Ada' } };
});

let subscription;
const ops = {
  async connect() {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return {
      serverInfo: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
    };
  },
  async listTools() {
    const r = await client.listTools();
    return { tools: r.tools.map((t) => t.name) };
  },
  async callTool(cmd) {
    const opts = cmd.progress ? { onprogress: (p) => out({ kind: 'progress', call: cmd.id, ...p }) } : {};
    return client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, opts);
  },
  async listen(cmd) {
    subscription = await client.listen(cmd.filter);
    subscription.closed.then((how) => out({ kind: 'notification', method: 'mcpush/listen-closed', params: { how } }));
    return { honoredFilter: subscription.honoredFilter };
  },
  async closeListen() {
    await subscription?.close();
    return {};
  },
};

out({ kind: 'ready', sdkVersion, node: process.version });
const rl = createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  let cmd;
  try {
    cmd = JSON.parse(line);
    const value = await ops[cmd.op](cmd);
    out({ kind: 'result', id: cmd.id, ok: true, value: value ?? null });
  } catch (e) {
    out({ kind: 'result', id: cmd?.id, ok: false, error: String(e?.stack ?? e) });
  }
});
rl.on('close', async () => {
  try {
    await subscription?.close();
    await client.close();
  } finally {
    process.exit(0);
  }
});
