// Message requests (docs/federation.md "Message requests"): a stranger's first message is held
// apart from the conversation list until I accept it (the conversation joins the list and
// opens), decline it, or decline and block the sender. The nav link carries the pending count;
// `message_request.created` and `.decided` events keep it live.
import { useEffect, useState } from "preact/hooks";
import { Message } from "./store";
import { attempt, go, store, useStore } from "./ui";

interface Request {
  conversation_id: string;
  sender_did: string;
  created_at: string;
  first?: Message; // the first message, for its preview
}

/** The pending requests, newest first, shared by the nav badge and the screen. */
let pending: Request[] = [];
let loadedFor: string | null = null;

/** GET /v1/message-requests, each with its first message (…/messages?limit=1 is the newest, so
 *  the oldest of a small page). */
async function loadRequests() {
  const page = await store.api.call("GET", "/v1/message-requests?limit=200");
  const items: Request[] = page.items;
  await Promise.all(items.map(async (r) => {
    const msgs = await store.api.call("GET", `/v1/conversations/${r.conversation_id}/messages?limit=50`)
      .catch(() => ({ items: [] }));
    r.first = msgs.items[msgs.items.length - 1];
  }));
  pending = items;
  store.changed();
}

store.onFrame((f) => {
  if (f.type === "message_request.created") {
    const d = f.data;
    pending = [{ conversation_id: d.conversation_id, sender_did: d.sender_did, created_at: d.message?.created_at,
      first: d.message }, ...pending.filter((r) => r.conversation_id !== d.conversation_id)];
  } else if (f.type === "message_request.decided") {
    pending = pending.filter((r) => r.conversation_id !== f.data.conversation_id);
  } else return;
  store.changed(); // the store keeps no state of these, so it re-renders nothing itself
});

/** The "Requests" nav link with the number of pending requests. */
export function RequestsLink() {
  const s = useStore();
  useEffect(() => {
    if (s.me && loadedFor !== s.me.id) {
      loadedFor = s.me.id;
      void loadRequests().catch(() => (loadedFor = null));
    }
  }, [s.me?.id]);
  const n = pending.length;
  return (
    <a href="#/requests" aria-label={n ? `Requests, ${n} pending` : "Requests"}>
      Requests{n > 0 && <span class="badge" data-testid="requests-count">{n}</span>}
    </a>
  );
}

export function Requests() {
  const s = useStore();
  const [error, setError] = useState("");
  useEffect(() => void loadRequests().catch(() => undefined), []);
  const decide = (r: Request, how: "accept" | "decline" | "block") => attempt(setError, async () => {
    const path = `/v1/message-requests/${r.conversation_id}/${how === "accept" ? "accept" : "decline"}`;
    await s.api.call("POST", how === "block" ? `${path}?block=true` : path);
    pending = pending.filter((x) => x.conversation_id !== r.conversation_id);
    if (how !== "accept") return s.changed();
    await s.refreshConversation(r.conversation_id);
    if (r.first) s.last.set(r.conversation_id, r.first);
    go(`/c/${r.conversation_id}`);
  });
  return (
    <section class="panel">
      <h2>Message requests</h2>
      <p class="muted">First messages from people you do not know yet. Each stays out of your conversations until you accept it.</p>
      {error && <p role="alert" class="error">{error}</p>}
      <ul class="memories" aria-label="Message requests">{pending.map((r) => (
        <li data-testid="request" key={r.conversation_id}>
          <strong>{s.nameOf(r.sender_did)}</strong> <span class="muted small">{r.sender_did}</span>
          <p class="text">{r.first?.content ?? r.first?.content_type ?? ""}</p>
          <div class="row wrap">
            <button onClick={() => void decide(r, "accept")}>Accept</button>
            <button onClick={() => void decide(r, "decline")}>Decline</button>
            <button class="danger" onClick={() => confirm(`Decline and block ${r.sender_did}?`) && void decide(r, "block")}>
              Decline &amp; block
            </button>
          </div>
        </li>
      ))}</ul>
      {pending.length === 0 && <p class="muted">No requests.</p>}
    </section>
  );
}
