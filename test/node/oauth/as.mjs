// as.mjs runs a real OAuth 2.1 / OpenID authorization server (panva's
// oidc-provider, a certified OpenID provider) for mcpush's Go tests
// (internal/oauthtest).
//
//   node as.mjs CONFIG.json
//
// CONFIG holds {"keys": [private JWKs], "clients": [client metadata],
// "scopes": [scopes of the MCP resource], "accessTokenTTL": seconds,
// "clientIdMetadataDocuments": bool}. With clientIdMetadataDocuments an
// https URL is accepted as client_id (OAuth Client ID Metadata Document,
// draft-02), fetched even from loopback (the tests serve it; Node trusts
// their certificate through NODE_EXTRA_CA_CERTS). The
// server listens on 127.0.0.1 on a free port and prints one line,
// {"issuer": URL}, once it accepts requests. Access tokens for a resource
// (RFC 8707 "resource" parameter) are JWTs (RFC 9068) whose "aud" is the
// resource, signed with the first key.
//
// Two endpoints exist for the tests only, outside the provider:
//   POST /test/rotate   body {"keys": [...]}: serve and sign with these keys
//                       from now on (key rotation)
//   GET  /test/stats    {"jwks": N}: how many times the JWKS was fetched
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const nodeDir = process.env.MCPUSH_NODE_DIR;
const req = createRequire(nodeDir ? join(nodeDir, 'package.json') : import.meta.url);
const { default: Provider } = await import(pathToFileURL(req.resolve('oidc-provider')).href);

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let jwksFetches = 0;
let provider;
let callback;

function makeProvider(issuer, keys) {
  const alg = keys[0].alg;
  const p = new Provider(issuer, {
    clients: config.clients,
    jwks: { keys },
    scopes: ['openid', 'offline_access', ...config.scopes],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      id_token_signed_response_alg: alg,
      token_endpoint_auth_method: 'client_secret_basic',
    },
    enabledJWA: { idTokenSigningAlgValues: [alg] },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      clientIdMetadataDocument: { enabled: !!config.clientIdMetadataDocuments, ack: 'draft-02' },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => oneOf ?? undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => ({
          scope: config.scopes.join(' '),
          audience: resource,
          accessTokenTTL: config.accessTokenTTL ?? 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg } },
        }),
      },
    },
    pkce: { required: () => true },
    // The tests' documents are on loopback, which oidc-provider's SSRF
    // protection (its fetch dispatcher) refuses: fetch without it.
    fetch: (url, options) => fetch(url, { ...options, dispatcher: undefined }),
    // A refresh token for every authorization code of a client allowed
    // the refresh_token grant (not only with offline_access).
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    // The login form's name becomes the subject.
    findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    ttl: { AccessToken: config.accessTokenTTL ?? 600, ClientCredentials: config.accessTokenTTL ?? 600 },
  });
  p.proxy = false;
  return p;
}

const server = createServer((req, res) => {
  if (req.url === '/test/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ jwks: jwksFetches }));
    return;
  }
  if (req.url === '/test/rotate' && req.method === 'POST') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      provider = makeProvider(provider.issuer, JSON.parse(body).keys);
      callback = provider.callback();
      res.end('{}');
    });
    return;
  }
  if (req.url.startsWith('/jwks')) {
    jwksFetches++;
  }
  callback(req, res);
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = makeProvider(issuer, config.keys);
  callback = provider.callback();
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});

// The Go test closes stdin (or dies): exit with it.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
