// The TypeScript MCP SDK signs in to Confer with OAuth and uses its tools (driven by
// tests/agents/test_mcp_oauth.py). The browser step is headless: it follows the authorization
// URL to the consent page and approves on Confer's consent API as the logged-in user.
// Prints one JSON line: {"tools": [...], "call": {...}, "refreshed": true|false}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const base = process.env.CONFER_URL;
const userToken = process.env.CONFER_USER_TOKEN;
const redirectUri = process.env.REDIRECT_URI;
const metadataUrl = process.env.CLIENT_METADATA_URL || undefined;
const serverUrl = new URL(`${base}/mcp`);

async function consent(authorizationUrl) {
  const sent = await fetch(authorizationUrl, { redirect: "manual" });
  if (sent.status !== 302) throw new Error(`authorize answered ${sent.status}: ${await sent.text()}`);
  const requestId = sent.headers.get("location").split("/").pop();
  const decided = await fetch(`${base}/v1/oauth/requests/${requestId}/approve`, {
    method: "POST",
    headers: { Authorization: `Bearer ${userToken}` },
  });
  if (decided.status !== 200) throw new Error(`approve answered ${decided.status}`);
  const target = new URL((await decided.json()).redirect_to);
  if (target.searchParams.get("iss") !== base) throw new Error("no RFC 9207 iss");
  return target.searchParams.get("code");
}

class HeadlessProvider {
  constructor() {
    this.code = undefined;
    this.saved = undefined;
    this.client = undefined;
    this.verifier = undefined;
    if (metadataUrl) this.clientMetadataUrl = metadataUrl;
  }
  get redirectUrl() { return redirectUri; }
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK agent",
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  async redirectToAuthorization(url) { this.code = await consent(url); }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
}

async function connect(provider) {
  const client = new Client({ name: "confer-ts-test", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(serverUrl, { authProvider: provider }));
  return client;
}

const provider = new HeadlessProvider();
let client;
try {
  client = await connect(provider);
} catch (error) {
  if (!(error instanceof UnauthorizedError) || !provider.code) throw error;
  const transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  await transport.finishAuth(provider.code);
  client = await connect(provider);
}
const tools = (await client.listTools()).tools.map((t) => t.name);
const call = (await client.callTool({ name: "confer_list_conversations", arguments: { limit: 5 } })).structuredContent;
await client.close();

// An access token the server no longer accepts: the SDK refreshes with the rotating refresh token.
const before = provider.saved.refresh_token;
provider.saved = { ...provider.saved, access_token: "expired" };
const again = await connect(provider);
await again.listTools();
await again.close();
const refreshed = provider.saved.refresh_token !== before && provider.saved.access_token !== "expired";
console.log(JSON.stringify({ tools, call, refreshed }));
