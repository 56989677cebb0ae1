// client.mjs connects the TypeScript SDK 1.x MCP client
// (@modelcontextprotocol/sdk: Client + StreamableHTTPClientTransport) to
// an OAuth-protected mcpush with the SDK's client-credentials provider
// (ClientCredentialsProvider), for internal/e2e/oauth_test.go:
//
//   node client.mjs URL CLIENT_ID CLIENT_SECRET SCOPE ISSUER
//
// SCOPE is the scope the client asks for (the SDK's client-credentials
// provider sends its configured scope, not the challenge's); ISSUER is
// the authorization server the client trusts with its secret (the SDK's
// expectedIssuer): discovery must lead there.
//
// The SDK runs the whole discovery flow itself: the 401's
// WWW-Authenticate challenge, the protected resource metadata, the
// authorization server metadata, the token request with the resource
// parameter, then the MCP requests with the token. The script prints one
// JSON line per HTTP exchange, {"kind":"http","method":M,"url":U,
// "status":S}, then {"kind":"result","tools":[names]} or
// {"kind":"error","message":E}.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const nodeDir = process.env.MCPUSH_NODE_DIR;
const sdkRequire = createRequire(nodeDir ? join(nodeDir, 'package.json') : import.meta.url);

async function loadSDK(sub) {
  const cjs = sdkRequire.resolve(`@modelcontextprotocol/sdk/${sub}`);
  return import(pathToFileURL(cjs.replace('/dist/cjs/', '/dist/esm/')).href);
}

const { Client } = await loadSDK('client/index.js');
const { StreamableHTTPClientTransport } = await loadSDK('client/streamableHttp.js');
const { ClientCredentialsProvider } = await loadSDK('client/auth-extensions.js');

const [url, clientId, clientSecret, scope, expectedIssuer] = process.argv.slice(2);
if (!expectedIssuer) {
  process.stderr.write('usage: node client.mjs URL CLIENT_ID CLIENT_SECRET SCOPE ISSUER\n');
  process.exit(2);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function tracingFetch(input, init) {
  const res = await fetch(input, init);
  emit({ kind: 'http', method: init?.method ?? 'GET', url: String(input instanceof Request ? input.url : input), status: res.status });
  return res;
}

const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope, expectedIssuer });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: tracingFetch });
const client = new Client({ name: 'oauth-ts', version: '1.0.0' });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  emit({ kind: 'result', tools: tools.map((t) => t.name), sessionId: transport.sessionId ?? null });
  await client.close();
} catch (err) {
  emit({ kind: 'error', message: String(err?.stack ?? err) });
  process.exitCode = 1;
}
