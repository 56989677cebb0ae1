// client.mjs drives the TypeScript SDK 1.x MCP client (@modelcontextprotocol/sdk:
// Client + StreamableHTTPClientTransport) for mcpush's Go interop tests
// (internal/e2e/interop_ts_test.go).
//
//   node client.mjs URL
//
// The Go test sends one JSON command per line on stdin, {"id":N,"op":OP,...},
// and the script prints one JSON object per line on stdout, in the order it
// observed things:
//
//   {"kind":"ready","sdkVersion":V}                   once, at start
//   {"kind":"result","id":N,"ok":true,"value":V}      a command finished
//   {"kind":"result","id":N,"ok":false,"error":E}     a command failed
//   {"kind":"notification","method":M,"params":P}     seen by the client's own handler
//                                                      (setNotificationHandler); with
//                                                      "unhandled":true if no handler was set
//   {"kind":"progress","call":N,"progress":...}        seen by callTool's onprogress
//   {"kind":"request","method":M,"params":P}          a request from the server, answered
//                                                      (sampling/createMessage)
//   {"kind":"http","method":M,"rpc":R,"lastEventId":L,"status":S}
//                                                      an HTTP exchange of the transport
//   {"kind":"error","message":E}                      the client's onerror
//
// Commands run concurrently (a callTool may be waiting while others run).
// The "gate" command closes or opens a gate that holds back the
// transport's GET requests (the standalone stream, and its resumption with
// Last-Event-ID), so the test decides when, and so on which process behind
// its round-robin proxy, the stream is opened.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

// The SDK comes from the npm dependencies in MCPUSH_NODE_DIR (the Go test
// sets it; see internal/testenv), or else from wherever Node finds it.
const nodeDir = process.env.MCPUSH_NODE_DIR;
const sdkRequire = createRequire(nodeDir ? join(nodeDir, 'package.json') : import.meta.url);

// loadSDK imports the ESM build of @modelcontextprotocol/sdk/<sub>.
async function loadSDK(sub) {
  const cjs = sdkRequire.resolve(`@modelcontextprotocol/sdk/${sub}`);
  return import(pathToFileURL(cjs.replace('/dist/cjs/', '/dist/esm/')).href);
}

const { Client } = await loadSDK('client/index.js');
const { StreamableHTTPClientTransport } = await loadSDK('client/streamableHttp.js');
const {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} = await loadSDK('types.js');

const url = process.argv[2];
if (!url) {
  process.stderr.write('usage: node client.mjs URL\n');
  process.exit(2);
}

// emit prints one observation. Writes to a pipe are synchronous on Linux,
// so lines appear in the order they were emitted.
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function sdkVersion() {
  const main = sdkRequire.resolve('@modelcontextprotocol/sdk/client/index.js');
  const pkg = main.slice(0, main.lastIndexOf('/dist/')) + '/package.json';
  return JSON.parse(readFileSync(pkg, 'utf8')).version;
}

// The gate: while closed, GET requests wait.
let gateOpen = true;
let openGate = () => {};
let gateOpened = Promise.resolve();

function setGate(open) {
  if (open) {
    gateOpen = true;
    openGate();
  } else if (gateOpen) {
    gateOpen = false;
    gateOpened = new Promise(resolve => {
      openGate = resolve;
    });
  }
}

// rpcName names the JSON-RPC message in a request body for the log.
function rpcName(body) {
  if (typeof body !== 'string') {
    return undefined;
  }
  try {
    const msg = JSON.parse(body);
    if (Array.isArray(msg)) {
      return 'batch';
    }
    return msg.method ?? 'response';
  } catch {
    return undefined;
  }
}

// observedFetch is the transport's fetch: it logs every exchange and holds
// GET requests at the gate.
async function observedFetch(input, init = {}) {
  const method = init.method ?? 'GET';
  const headers = new Headers(init.headers);
  const lastEventId = headers.get('last-event-id') ?? undefined;
  const entry = { kind: 'http', method, rpc: rpcName(init.body), lastEventId, sessionId: headers.get('mcp-session-id') ?? undefined };
  if (method === 'GET' && !gateOpen) {
    emit({ ...entry, gated: true });
    await gateOpened;
  }
  try {
    const res = await fetch(input, init);
    emit({ ...entry, status: res.status, contentType: res.headers.get('content-type') ?? undefined });
    return res;
  } catch (err) {
    emit({ ...entry, error: String(err) });
    throw err;
  }
}

let client;
let transport;

function newClient() {
  const c = new Client({ name: 'interop-ts', version: '1.0.0' }, { capabilities: { sampling: {} } });
  // sampling/createMessage from a tool: answer with the prompt echoed.
  c.setRequestHandler(CreateMessageRequestSchema, req => {
    emit({ kind: 'request', method: req.method, params: req.params });
    const prompt = req.params.messages.map(m => m.content?.text ?? '').join(' ');
    return { role: 'assistant', content: { type: 'text', text: `interop says ${prompt}` }, model: 'interop-model', stopReason: 'endTurn' };
  });
  const schemas = [
    ResourceUpdatedNotificationSchema,
    LoggingMessageNotificationSchema,
    ToolListChangedNotificationSchema,
    PromptListChangedNotificationSchema,
    ResourceListChangedNotificationSchema,
  ];
  for (const schema of schemas) {
    c.setNotificationHandler(schema, n => emit({ kind: 'notification', method: n.method, params: n.params ?? null }));
  }
  c.fallbackNotificationHandler = async n => emit({ kind: 'notification', method: n.method, params: n.params ?? null, unhandled: true });
  c.onerror = err => emit({ kind: 'error', message: String(err?.message ?? err) });
  return c;
}

const ops = {
  async connect() {
    transport = new StreamableHTTPClientTransport(new URL(url), { fetch: observedFetch });
    client = newClient();
    await client.connect(transport);
    return {
      serverInfo: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      protocolVersion: transport.protocolVersion,
      sessionId: transport.sessionId,
    };
  },
  listTools: () => client.listTools(),
  listResources: () => client.listResources(),
  listResourceTemplates: () => client.listResourceTemplates(),
  listPrompts: () => client.listPrompts(),
  getPrompt: cmd => client.getPrompt({ name: cmd.name, arguments: cmd.arguments }),
  readResource: cmd => client.readResource({ uri: cmd.uri }),
  callTool(cmd) {
    const options = {};
    if (cmd.progress) {
      options.onprogress = p => emit({ kind: 'progress', call: cmd.id, ...p });
    }
    return client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, options);
  },
  setLoggingLevel: cmd => client.setLoggingLevel(cmd.level),
  subscribe: cmd => client.subscribeResource({ uri: cmd.uri }),
  async gate(cmd) {
    setGate(cmd.open);
    return {};
  },
  async terminate() {
    const sessionId = transport.sessionId;
    await transport.terminateSession();
    return { sessionId, after: transport.sessionId ?? null };
  },
  async close() {
    await client.close();
    return {};
  },
};

emit({ kind: 'ready', sdkVersion: sdkVersion(), node: process.version });

const rl = createInterface({ input: process.stdin });
rl.on('line', async line => {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    emit({ kind: 'error', message: `bad command ${line}: ${err}` });
    return;
  }
  const op = ops[cmd.op];
  if (!op) {
    emit({ kind: 'result', id: cmd.id, ok: false, error: `unknown op ${cmd.op}` });
    return;
  }
  try {
    const value = await op(cmd);
    emit({ kind: 'result', id: cmd.id, ok: true, value: value ?? null });
  } catch (err) {
    emit({ kind: 'result', id: cmd.id, ok: false, error: String(err?.message ?? err), code: err?.code });
  }
});
// The test closes stdin to end the script.
rl.on('close', () => process.exit(0));
