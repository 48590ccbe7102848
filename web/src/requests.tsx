// Message requests (docs/federation.md "Message requests"): a stranger's first message is held
// apart from the conversation list until I accept it (the conversation joins the list and
// opens), decline it, or decline and block the sender. An invitation into a group homed on an
// instance I do not know (`kind: "group"`, "Consent to a group's home") is one too: it names the
// group and who added me; accepting joins the group, declining takes me out of it at its home,
// and blocking blocks that instance. The nav link carries the pending count;
// `message_request.created` and `.decided` events keep it live.
import { useEffect, useState } from "preact/hooks";
import { Message } from "./store";
import { attempt, go, store, useStore } from "./ui";

interface Request {
  conversation_id: string;
  sender_did: string;
  sender_name?: string | null; // as the sender's instance publishes it
  created_at: string;
  kind?: "direct" | "group";
  group_name?: string | null; // a group invitation: the group, and its home's instance DID
  group_home?: string | null;
  first?: Message; // the first message, for its preview
}

/** The host of a did:web DID, as a person reads it (`did:web:a.example%3A8443…` → `a.example:8443`). */
function hostOf(did: string | null | undefined): string {
  return decodeURIComponent(String(did ?? "").split(":")[2] ?? "");
}

/** The pending requests, newest first, shared by the nav badge and the screen. */
let pending: Request[] = [];
let loadedFor: string | null = null;

/** GET /v1/message-requests, each with its first message (…/messages?limit=1 is the newest, so
 *  the oldest of a small page). */
async function loadRequests() {
  const page = await store.api.call("GET", "/v1/message-requests?limit=200");
  const items: Request[] = page.items;
  await Promise.all(items.filter((r) => r.kind !== "group").map(async (r) => {
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
    pending = [{ conversation_id: d.conversation_id, sender_did: d.sender_did,
      created_at: d.message?.created_at ?? new Date().toISOString(), kind: d.kind ?? "direct",
      group_name: d.group_name, group_home: d.group_home, first: d.message ?? undefined },
      ...pending.filter((r) => r.conversation_id !== d.conversation_id)];
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
      <p class="muted">First messages from people you do not know yet, and groups on instances you do not know. Each stays out of your conversations until you accept it.</p>
      {error && <p role="alert" class="error">{error}</p>}
      <ul class="memories" aria-label="Message requests">{pending.map((r) => {
        const who = r.sender_name || s.nameOf(r.sender_did);
        const group = r.kind === "group";
        const blocked = group ? hostOf(r.group_home) : r.sender_did;
        return (
          <li data-testid="request" key={r.conversation_id}>
            {group ? (
              <>
                <p class="text" data-testid="invitation">
                  <strong>{who}</strong> added you to the group <strong>{r.group_name || "(no name)"}</strong>
                </p>
                <span class="muted small">
                  The group lives on {hostOf(r.group_home)}, where you know no one yet. Until you accept, nothing
                  of it reaches you; declining takes you out of it. Added by {r.sender_did}.
                </span>
              </>
            ) : (
              <>
                <strong>{who}</strong> <span class="muted small">{r.sender_did}</span>
                <p class="text">{r.first?.content ?? r.first?.content_type ?? ""}</p>
              </>
            )}
            <div class="row wrap">
              <button onClick={() => void decide(r, "accept")}>{group ? "Accept and join" : "Accept"}</button>
              <button onClick={() => void decide(r, "decline")}>Decline</button>
              <button class="danger" onClick={() => confirm(group
                ? `Decline and block ${blocked}? Nothing from anyone there will reach you.`
                : `Decline and block ${blocked}?`) && void decide(r, "block")}>
                {group ? `Decline & block ${blocked}` : "Decline & block"}
              </button>
            </div>
          </li>
        );
      })}</ul>
      {pending.length === 0 && <p class="muted">No requests.</p>}
    </section>
  );
}
