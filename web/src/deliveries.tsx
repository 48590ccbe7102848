// Per-destination delivery status of my messages in a conversation with members on other
// instances (docs/conversations.md "Delivery status"): loaded once per message, then kept
// current by `message.delivery_updated` events (store.apply).
import { Conversation, Delivery, Message, newerDelivery } from "./store";
import { didHost, store, useStore } from "./ui";

const asked = new Set<string>();
const RECENT = 30; // only my most recent messages are looked up when a conversation opens

/** Whether anyone in ``conv`` lives on another instance (only then are there deliveries). */
export function hasRemote(conv: Conversation): boolean {
  const here = didHost(store.me?.did);
  return conv.participants.some((p) => p.did && didHost(p.did) !== here);
}

/** Fetch the deliveries of my recent messages in ``conv`` not looked up yet, one at a time. */
export async function loadDeliveries(conv: Conversation, list: Message[]): Promise<void> {
  if (!hasRemote(conv)) return;
  const mine = list.filter((m) => store.isMine(m) && !m.deleted && !asked.has(m.id)).slice(-RECENT);
  for (const m of mine) {
    asked.add(m.id);
    try {
      const page = await store.api.call("GET", `/v1/conversations/${conv.id}/messages/${m.id}/deliveries`);
      // An event may have arrived while asking: keep whichever view of each is newer.
      const live = new Map((store.deliveries.get(m.id) ?? []).map((d) => [d.id, d]));
      const merged = (page.items as Delivery[]).map((d) => {
        const seen = live.get(d.id);
        return seen ? newerDelivery(seen, d) : d;
      });
      store.deliveries.set(m.id, merged);
      store.changed();
    } catch {
      asked.delete(m.id); // asked again next time the conversation changes
    }
  }
}

/** A failure reason for people: a peer's problem+json answer (RFC 9457) shown by its title. */
export function readableReason(reason: string | null | undefined): string {
  if (!reason) return "";
  const m = reason.match(/^(HTTP \d{3}):\s*(\{.*\})\s*$/s);
  if (!m) return reason;
  try {
    const problem = JSON.parse(m[2]);
    const text = problem.title || problem.detail;
    return typeof text === "string" && text ? `${m[1]} — ${text}` : m[1];
  } catch {
    return m[1];
  }
}

function describe(d: Delivery): string {
  switch (d.state) {
    case "delivered":
      return "delivered";
    case "failed":
      return `failed${d.reason ? `: ${readableReason(d.reason)}` : ""}`;
    case "retrying": {
      const next = d.parked ? "the instance is unreachable; retried when it answers again"
        : d.next_attempt_at ? `next try ${new Date(d.next_attempt_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })}` : "";
      return `retrying (${d.attempts} ${d.attempts === 1 ? "attempt" : "attempts"}${d.reason ? `, ${readableReason(d.reason)}` : ""})${next ? ` · ${next}` : ""}`;
    }
    default:
      return "queued";
  }
}

const ICON: Record<string, string> = { delivered: "✓", failed: "✕", retrying: "↻", queued: "…" };

/** One line per peer instance under my message: where its delivery stands. */
export function DeliveryStatus({ m }: { m: Message }) {
  const s = useStore();
  const items = s.deliveries.get(m.id);
  if (!items?.length) return null;
  return (
    <ul class="deliveries" aria-label="Delivery status">
      {items.map((d) => (
        <li key={d.id} data-testid="delivery" data-state={d.state} class={`delivery delivery-${d.state}`}
          title={`${d.peer_did}${d.reason ? `\n${d.reason}` : ""}`}>
          <span aria-hidden="true">{ICON[d.state]}</span> {d.destination}: {describe(d)}
        </li>
      ))}
    </ul>
  );
}
