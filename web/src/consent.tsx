// MCP sign-in consent (docs/agents.md, "Signing in with OAuth"): Confer's /oauth/authorize sends
// the browser to #/oauth/consent/<request id>; the logged-in user sees which client asks for
// access to their MCP tools and where the answer goes, then approves or denies. The server
// answers with the client's redirect URI (code + state + iss, or error=access_denied).
import { useEffect, useState } from "preact/hooks";
import { Api } from "./api";

interface OAuthRequest {
  id: string;
  client_id: string;
  client_name: string | null;
  redirect_uri: string;
  resource: string;
  scope: string;
  expires_at: string;
}

/** The request id of a consent route (`/oauth/consent/<id>`), else null. */
export function consentRoute(route: string): string | null {
  return route.match(/^\/oauth\/consent\/([A-Za-z0-9_-]+)$/)?.[1] ?? null;
}

const hostOf = (uri: string) => {
  try {
    return new URL(uri).host || uri;
  } catch {
    return uri;
  }
};

export function Consent({ api, id }: { api: Api; id: string }) {
  const [request, setRequest] = useState<OAuthRequest | null>(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api.call<OAuthRequest>("GET", `/v1/oauth/requests/${id}`).then(setRequest, (err) =>
      setError(err instanceof Error ? err.message : String(err)));
  }, [id]);
  async function decide(approve: boolean) {
    setBusy(true);
    setError("");
    try {
      const decision = await api.call<{ redirect_to: string }>("POST", `/v1/oauth/requests/${id}/${approve ? "approve" : "deny"}`);
      location.assign(decision.redirect_to);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
      setBusy(false);
    }
  }
  if (!request) {
    return <section class="panel" aria-label="Sign-in request">{error ? <p role="alert" class="error">{error}</p> : <p class="muted">Loading…</p>}</section>;
  }
  const documented = /^https?:\/\//.test(request.client_id);
  return (
    <section class="panel" aria-label="Sign-in request">
      <h2>Allow {request.client_name || "an MCP client"} to use your Confer?</h2>
      <p>
        It will read and write your conversations, memories and project memory through Confer's MCP
        tools ({request.scope}) as you, until you revoke it under Sessions.
      </p>
      <dl>
        <dt>Client</dt>
        <dd>{documented ? <>described by <code>{request.client_id}</code></> : <>registered itself as <code>{request.client_id}</code> (its name is not verified)</>}</dd>
        <dt>Answer goes to</dt>
        <dd><code>{hostOf(request.redirect_uri)}</code></dd>
        <dt>Access to</dt>
        <dd><code>{request.resource}</code></dd>
      </dl>
      {error && <p role="alert" class="error">{error}</p>}
      <button onClick={() => decide(true)} disabled={busy}>Allow</button>{" "}
      <button class="link" onClick={() => decide(false)} disabled={busy}>Deny</button>
    </section>
  );
}
