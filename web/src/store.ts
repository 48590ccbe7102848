// Client state: conversations, messages, pending sends, live events. Components re-render on
// `changed()`.
import { Api, ApiError } from "./api";
import { ConnectionState, Frame, Socket } from "./socket";

export interface Participant {
  participant_type: string;
  did?: string | null;
  name?: string | null;
  role?: string | null;
  id?: string | null;
}
export interface Conversation {
  id: string;
  type: string;
  name?: string | null;
  participants: Participant[];
  archived_at?: string | null;
  updated_at: string;
  membership?: { unread: number; role?: string | null; participant_id: string; notification?: string | null } | null;
}
export interface Message {
  id: string;
  conversation_id: string;
  sender_type: string;
  sender_id: string;
  sender_did?: string | null;
  content_type: string;
  content?: string | null;
  content_json?: any;
  in_reply_to?: string | null;
  thread_root?: string | null;
  language?: string | null;
  citations?: { source: string; url?: string; trust_level: string; passage?: string }[] | null;
  created_at: string;
  /** The message's place in its conversation (a group replica shows the home's order). */
  position?: string | null;
  read_by?: { user_id: string; read_at?: string }[];
  /** The current version and last edit time, as the server lists a message (GET …/messages). */
  version?: number;
  edited_at?: string | null;
  /** Shown "(edited)": an edit time from the server, or a message.edited event seen live. */
  edited?: boolean;
  deleted?: boolean;
}
/** A message's delivery to one peer instance (``GET …/messages/{id}/deliveries``). */
export interface Delivery {
  id: string;
  message_id: string;
  destination: string;
  peer_did: string;
  state: "queued" | "retrying" | "delivered" | "failed";
  attempts: number;
  next_attempt_at?: string | null;
  reason?: string | null;
  parked?: boolean;
}
const STATE_RANK: Record<Delivery["state"], number> = { queued: 0, retrying: 1, delivered: 2, failed: 2 };

/** The later of two views of one delivery: more attempts, or at equal attempts the further
 * state (a claim counts its attempt before the outcome is recorded, so a page read during the
 * request says "queued" with the same count as the "delivered" event that follows it). */
export function newerDelivery(a: Delivery, b: Delivery): Delivery {
  if (a.attempts !== b.attempts) return a.attempts > b.attempts ? a : b;
  return STATE_RANK[a.state] >= STATE_RANK[b.state] ? a : b;
}
/** A stored translation of a message (``POST …/translation``, ``message.translated``). */
export interface Translated {
  to: string;
  text: string;
  provider?: string;
  model?: string;
}
export interface Pending {
  key: string; // the Idempotency-Key
  conversation_id: string;
  body: Record<string, unknown>;
  failed?: string;
}

const PENDING = "confer.pending";

export class Store {
  api = new Api();
  me: any = null;
  conversations = new Map<string, Conversation>();
  last = new Map<string, Message>();
  messages = new Map<string, Message[]>();
  pending: Pending[] = JSON.parse(localStorage.getItem(PENDING) || "[]");
  streams = new Map<string, { conversation_id: string; text: string; seq: number }>();
  typing = new Map<string, { name: string; until: number }>();
  /** permission id → its decision (null while pending), from /v1/permissions and live events. */
  decisions = new Map<string, string | null>();
  /** conversation id → the cursor of its older messages (absent once all are loaded). */
  older = new Map<string, string>();
  /** user id → "online" | "offline" (presence events: transitions only, no snapshot). */
  presence = new Map<string, string>();
  /** user id → DID, learned from messages and typing events (participants carry no user id). */
  userDids = new Map<string, string>();
  /** message id → its deliveries to peer instances (my messages only; the sender's view). */
  deliveries = new Map<string, Delivery[]>();
  /** message id → the translation I asked for (or got from automatic translation). */
  translations = new Map<string, Translated>();
  connection: ConnectionState = "offline";
  openId: string | null = null;
  error: string | null = null;
  socket: Socket | null = null;
  private listeners = new Set<() => void>();
  /** Screens in their own modules that follow event types the store keeps no state for. */
  private frameListeners = new Set<(f: Frame) => void>();

  constructor() {
    this.api.onSignedOut = () => this.signedOut();
  }

  subscribe(fn: () => void) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  changed() {
    this.listeners.forEach((fn) => fn());
  }
  /** Call ``fn`` with every live event, before the store applies it. */
  onFrame(fn: (f: Frame) => void) {
    this.frameListeners.add(fn);
    return () => this.frameListeners.delete(fn);
  }

  /** After login/register or on load with stored tokens. */
  async start() {
    try {
      this.me = await this.api.call("GET", "/v1/me");
    } catch (err) {
      if (err instanceof ApiError && err.problem.status === 401) return this.signedOut();
      throw err;
    }
    this.socket = new Socket(
      () => this.api.accessToken(),
      () => this.api.refresh(),
      {
        onState: (s) => {
          this.connection = s;
          this.changed();
        },
        onReady: async (fresh) => {
          if (fresh) await this.reload();
          void this.flushPending();
        },
        onEvent: (f) => this.apply(f),
        onResync: () => this.reload(),
      },
    );
    this.changed();
    await this.socket.connect();
  }

  signedOut() {
    this.socket?.stop();
    this.socket = null;
    this.me = null;
    this.openId = null;
    this.older.clear();
    this.presence.clear();
    this.deliveries.clear();
    this.translations.clear();
    this.conversations.clear();
    this.messages.clear();
    this.last.clear();
    this.changed();
  }

  async logout() {
    this.socket?.stop();
    try {
      await this.api.logout();
    } finally {
      this.signedOut();
    }
  }

  /** Load everything over REST (fresh start, or after resync_required). */
  async reload() {
    const list = await this.api.call("GET", "/v1/conversations?limit=100");
    const items: Conversation[] = list.items ?? list;
    this.conversations = new Map(items.map((c) => [c.id, c]));
    await Promise.all(
      items.map(async (c) => {
        const page = await this.api.call("GET", `/v1/conversations/${c.id}/messages?limit=1`);
        if (page.items[0]) this.last.set(c.id, page.items[0]);
      }),
    );
    const permissions = await this.api.call("GET", "/v1/permissions?limit=200");
    this.decisions = new Map((permissions as any[]).map((p) => [p.id, settled(p.decision)]));
    this.messages.clear();
    if (this.openId) await this.loadMessages(this.openId);
    this.changed();
  }

  async loadMessages(id: string) {
    const page = await this.api.call("GET", `/v1/conversations/${id}/messages?limit=50`);
    this.addPage(id, page, true);
  }

  /** The page before the oldest loaded message (GET …/messages?before=). */
  async loadOlder(id: string) {
    const before = this.older.get(id);
    if (!before) return;
    const page = await this.api.call("GET", `/v1/conversations/${id}/messages?limit=50&before=${before}`);
    this.addPage(id, page, false);
  }

  private addPage(id: string, page: { items: Message[]; next_before?: string | null }, newest: boolean) {
    const items: Message[] = page.items.slice().reverse();
    items.forEach((m) => this.learn(m));
    const known = this.messages.get(id) ?? [];
    this.messages.set(id, merge(known, items));
    if (page.next_before) this.older.set(id, page.next_before);
    else if (!newest || !this.older.has(id)) this.older.delete(id);
    this.changed();
  }

  private learn(m: Message) {
    if (m.sender_type === "user" && m.sender_did) this.userDids.set(m.sender_id, m.sender_did);
  }

  /** "online" / "offline" for a DID when a presence event told us, else undefined. */
  presenceOf(did: string | null | undefined): string | undefined {
    for (const [user, d] of this.userDids) if (d === did) return this.presence.get(user);
    return undefined;
  }

  /** Whether someone other than me has read my message ``m`` (read_by / receipt events). */
  readByOthers(m: Message): boolean {
    return (m.read_by ?? []).some((r) => r.user_id !== this.me?.id);
  }

  async open(id: string | null) {
    this.openId = id;
    if (!id) return this.changed();
    if (!this.conversations.has(id)) {
      try {
        this.conversations.set(id, await this.api.call("GET", `/v1/conversations/${id}`));
      } catch {
        return;
      }
    }
    if (!this.messages.has(id)) await this.loadMessages(id);
    await this.markRead(id);
  }

  async markRead(id: string) {
    const list = this.messages.get(id);
    const conv = this.conversations.get(id);
    if (!list?.length || !conv?.membership?.unread) return;
    const membership = await this.api.call("POST", `/v1/conversations/${id}/read`, {
      message_id: list[list.length - 1].id,
    });
    conv.membership = membership;
    this.changed();
  }

  isMine(m: Message) {
    return m.sender_type === "user" && m.sender_id === this.me?.id;
  }

  nameOf(did: string | null | undefined, conv?: Conversation): string {
    if (!did) return "unknown";
    if (did === this.me?.did) return "you";
    if (did === this.me?.agent_did) return "My agent";
    const p = conv?.participants.find((x) => x.did === did);
    if (p?.name) return p.name;
    const parts = did.split(":");
    const tail = parts.pop() || did;
    // did:web:host:agents:<id> names no person: say whose instance it is on instead.
    if (parts[parts.length - 1] === "agents") return `Agent on ${decodeURIComponent(parts[2] ?? "")}`;
    return decodeURIComponent(tail);
  }

  /** Who a message is from, as the list shows it. */
  senderName(m: Message, conv?: Conversation): string {
    if (m.sender_did) return m.sender_did === this.me?.agent_did ? "Your agent" : this.nameOf(m.sender_did, conv);
    if (m.sender_type === "own_agent") return "Your agent";
    if (m.sender_type === "system") return "Confer";
    return "unknown";
  }

  decided(row: { id: string; decision?: string | null }) {
    this.decisions.set(row.id, settled(row.decision));
    this.changed();
  }

  title(c: Conversation): string {
    if (c.name) return c.name;
    const others = c.participants.filter((p) => p.did !== this.me?.did && p.did !== this.me?.agent_did);
    if (!others.length && c.participants.some((p) => p.did === this.me?.agent_did)) return "My agent";
    return others.map((p) => p.name || this.nameOf(p.did)).join(", ") || "(just you)";
  }

  private upsert(m: Message) {
    this.learn(m);
    const list = this.messages.get(m.conversation_id);
    if (list) this.messages.set(m.conversation_id, merge(list, [m]));
    const last = this.last.get(m.conversation_id);
    if (!last || last.id <= m.id) this.last.set(m.conversation_id, m);
  }

  apply(f: Frame) {
    const d = f.data;
    this.frameListeners.forEach((fn) => fn(f));
    switch (f.type) {
      case "message.created": {
        const known = this.messages.get(d.conversation_id)?.some((m) => m.id === d.id);
        this.upsert(d);
        if (d.sender_type !== "user" || d.sender_id !== this.me?.id) {
          for (const [task, s] of this.streams) if (s.conversation_id === d.conversation_id) this.streams.delete(task);
        }
        const conv = this.conversations.get(d.conversation_id);
        if (!conv) {
          void this.api.call("GET", `/v1/conversations/${d.conversation_id}`).then((c) => {
            this.conversations.set(c.id, c);
            this.changed();
          });
        } else {
          conv.updated_at = d.created_at;
          if (!known && !this.isMine(d) && conv.membership) {
            conv.membership.unread += 1;
            if (this.openId === d.conversation_id && document.visibilityState === "visible")
              void this.markRead(d.conversation_id);
          }
        }
        break;
      }
      case "message.edited":
        this.upsert({ ...d, edited: true });
        break;
      case "message.ordered": {
        // The group's home placed our post: move it to the home's position.
        const list = this.messages.get(d.conversation_id);
        if (list)
          this.messages.set(
            d.conversation_id,
            merge(list, list.filter((m) => m.id === d.id).map((m) => ({ ...m, position: d.position }))),
          );
        break;
      }
      case "message.history": {
        // The group's home filled in history here (a member joined): read it again.
        const id: string = d.conversation_id;
        void this.api.call("GET", `/v1/conversations/${id}/messages?limit=1`).then((page) => {
          if (page.items[0]) this.last.set(id, page.items[0]);
          this.changed();
        });
        if (this.messages.has(id)) void this.loadMessages(id);
        if (this.conversations.has(id)) void this.refreshConversation(id);
        break;
      }
      case "message.deleted": {
        const list = this.messages.get(d.conversation_id);
        if (list)
          this.messages.set(
            d.conversation_id,
            list.map((m) => (m.id === d.id ? { ...m, deleted: true, content: null, content_json: null } : m)),
          );
        const last = this.last.get(d.conversation_id);
        if (last && last.id === d.id) this.last.set(d.conversation_id, { ...last, deleted: true, content: null });
        break;
      }
      case "conversation.changed":
        this.conversations.set(d.id, { ...this.conversations.get(d.id), ...d });
        break;
      case "participant.changed":
        void this.api.call("GET", `/v1/conversations/${d.conversation_id}`).then(
          (c) => {
            this.conversations.set(c.id, c);
            this.changed();
          },
          () => {
            this.conversations.delete(d.conversation_id); // we left or were removed
            this.changed();
          },
        );
        break;
      case "receipt":
        if (d.user_id !== this.me?.id) {
          // Everything up to message_id is read by d.user_id.
          const list = this.messages.get(d.conversation_id);
          // Read "up to" in the conversation's order (a group replica's positions).
          const upTo = list?.find((m) => m.id === d.message_id);
          if (list)
            this.messages.set(d.conversation_id, list.map((m) =>
              (upTo ? byPosition(m, upTo) <= 0 : m.id <= d.message_id) &&
              !(m.read_by ?? []).some((r) => r.user_id === d.user_id)
                ? { ...m, read_by: [...(m.read_by ?? []), { user_id: d.user_id, read_at: d.last_read_at }] }
                : m));
        } else {
          const conv = this.conversations.get(d.conversation_id);
          if (conv?.membership && this.openId !== d.conversation_id) void this.refreshConversation(d.conversation_id);
        }
        break;
      case "permission.requested":
      case "permission.decided":
        this.decisions.set(d.id, settled(d.decision));
        break;
      case "message.delta": {
        const s = this.streams.get(d.task_id) ?? { conversation_id: d.conversation_id, text: "", seq: 0 };
        if (d.seq > s.seq) {
          s.text += d.delta;
          s.seq = d.seq;
        }
        this.streams.set(d.task_id, s);
        break;
      }
      case "presence":
        this.presence.set(d.user_id, d.status);
        break;
      case "message.delivery_updated": {
        const list = this.deliveries.get(d.message_id) ?? [];
        const seen = list.find((x) => x.id === d.delivery.id);
        // A page read while this event was on its way may already hold a later state (on a
        // tie the event wins: it is the later word on the ordered stream).
        if (seen && newerDelivery(d.delivery, seen) === seen) break;
        this.deliveries.set(d.message_id, [...list.filter((x) => x.id !== d.delivery.id), d.delivery]);
        break;
      }
      case "message.translated":
        this.translations.set(d.message_id, { ...d.translation });
        break;
      case "typing": {
        if (d.user_id && d.did) this.userDids.set(d.user_id, d.did);
        const conv = this.conversations.get(d.conversation_id);
        this.typing.set(d.conversation_id, {
          name: this.nameOf(d.did, conv),
          until: Date.now() + (d.expires_in ?? 6) * 1000,
        });
        setTimeout(() => this.changed(), (d.expires_in ?? 6) * 1000 + 50);
        break;
      }
      default:
        return; // unknown types are ignored (docs/websocket.md)
    }
    this.changed();
  }

  async refreshConversation(id: string) {
    this.conversations.set(id, await this.api.call("GET", `/v1/conversations/${id}`));
    this.changed();
  }

  private savePending() {
    localStorage.setItem(PENDING, JSON.stringify(this.pending));
  }

  /** Queue a message; it shows as pending until the server acknowledges it. */
  async send(conversation_id: string, body: Record<string, unknown>) {
    const p: Pending = { key: crypto.randomUUID(), conversation_id, body: { via: "web", ...body } };
    this.pending.push(p);
    this.savePending();
    this.changed();
    await this.post(p);
  }

  private async post(p: Pending) {
    try {
      const m: Message = await this.api.call("POST", `/v1/conversations/${p.conversation_id}/messages`, p.body, {
        "Idempotency-Key": p.key,
      });
      this.pending = this.pending.filter((x) => x.key !== p.key);
      this.savePending();
      this.upsert(m);
    } catch (err) {
      // A network failure keeps it pending (retried on reconnect with the same key); a refusal
      // from the server is shown and can be discarded.
      if (err instanceof ApiError) p.failed = err.message;
      this.savePending();
    }
    this.changed();
  }

  /** Retry every unacknowledged send, with its original Idempotency-Key: never a duplicate. */
  async flushPending() {
    for (const p of this.pending.filter((x) => !x.failed)) await this.post(p);
  }

  discard(key: string) {
    this.pending = this.pending.filter((x) => x.key !== key);
    this.savePending();
    this.changed();
  }

  async edit(m: Message, content: string) {
    const detail = await this.api.call("GET", `/v1/conversations/${m.conversation_id}/messages/${m.id}`);
    const updated = await this.api.call("PATCH", `/v1/conversations/${m.conversation_id}/messages/${m.id}`, {
      version: detail.version,
      content,
    });
    this.upsert({ ...(updated.message ?? updated), edited: true });
    this.changed();
  }

  async remove(m: Message) {
    await this.api.call("DELETE", `/v1/conversations/${m.conversation_id}/messages/${m.id}`);
    this.apply({ type: "message.deleted", data: { id: m.id, conversation_id: m.conversation_id } });
  }

  /** A username (this instance) or a DID (any instance) → the DID. */
  didFor(target: string): string {
    const t = target.trim();
    if (t.startsWith("did:")) return t;
    const base = String(this.me.did).split(":users:")[0];
    return `${base}:users:${t.replace(/^@/, "")}`;
  }

  async openDirect(target: string): Promise<string> {
    const did = this.didFor(target);
    const type = did.includes(":agents:") ? "direct_user_agent" : "direct_user_user";
    const conv: Conversation = await this.api.call("POST", "/v1/conversations", { type, participant_did: did });
    this.conversations.set(conv.id, conv);
    this.changed();
    return conv.id;
  }

  /** PATCH /v1/conversations/{id}: rename ({name}) or archive ({archived}); admins only. */
  async updateConversation(id: string, change: { name?: string; archived?: boolean }) {
    const conv: Conversation = await this.api.call("PATCH", `/v1/conversations/${id}`, change);
    this.conversations.set(id, { ...this.conversations.get(id), ...conv });
    this.changed();
  }

  async leave(id: string) {
    await this.api.call("POST", `/v1/conversations/${id}/leave`);
    this.conversations.delete(id);
    this.messages.delete(id);
    this.last.delete(id);
    this.changed();
  }

  async createGroup(name: string, members: string[]): Promise<string> {
    const conv: Conversation = await this.api.call("POST", "/v1/conversations", {
      type: "group",
      name,
      participant_dids: members.map((m) => this.didFor(m)),
    });
    this.conversations.set(conv.id, conv);
    this.changed();
    return conv.id;
  }
}

/** A permission's decision, or null while it is pending. */
function settled(decision: string | null | undefined): string | null {
  return decision && decision !== "pending" ? decision : null;
}

function merge(list: Message[], more: Message[]): Message[] {
  const byId = new Map(list.map((m) => [m.id, m]));
  for (const m of more) {
    const old = byId.get(m.id);
    if (old?.deleted) continue; // a tombstone wins over a late copy
    byId.set(m.id, { ...old, ...m, edited: m.edited || !!m.edited_at || old?.edited });
  }
  return [...byId.values()].sort(byPosition);
}

/** Conversation order: by ``position`` (the group home's order), the id breaking ties. */
function byPosition(a: Message, b: Message): number {
  const [pa, pb] = [a.position ?? a.id, b.position ?? b.id];
  if (pa !== pb) return pa < pb ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
