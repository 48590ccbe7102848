// Threads: every reply carries its thread's root (`thread_root`); a root shows how many
// replies it has, and the thread view lists the root and its replies oldest first
// (`GET …/messages/{id}/thread`, followed by `next_after`) with a composer that answers in it.
import { useEffect, useState } from "preact/hooks";
import { Message } from "./store";
import { attempt, useStore } from "./ui";

/** How many loaded messages of the conversation answer in ``m``'s thread. */
export function replyCount(list: Message[], m: Message): number {
  return list.filter((x) => x.thread_root === m.id && !x.deleted).length;
}

/** "3 replies" under a thread's root, or "Thread" to start one; both open the thread view. */
export function ThreadLink({ m, list }: { m: Message; list: Message[] }) {
  if (m.deleted || m.thread_root) return null;
  const n = replyCount(list, m);
  if (!n) return null;
  return (
    <a class="thread-link" href={`#/c/${m.conversation_id}/t/${m.id}`} data-testid="thread-count">
      {n === 1 ? "1 reply" : `${n} replies`}
    </a>
  );
}

export function ThreadAction({ m }: { m: Message }) {
  return <a class="action" href={`#/c/${m.conversation_id}/t/${m.thread_root ?? m.id}`} aria-label="Open thread">Thread</a>;
}

async function loadThread(api: any, cid: string, root: string): Promise<Message[]> {
  const items: Message[] = [];
  let after: string | null = null;
  do {
    const page: { items: Message[]; next_after?: string | null } = await api.call(
      "GET", `/v1/conversations/${cid}/messages/${root}/thread?limit=200${after ? `&after=${after}` : ""}`);
    items.push(...page.items);
    after = page.next_after ?? null;
  } while (after && items.length < 2000);
  return items;
}

/** The thread of ``root`` in conversation ``id``; ``Body`` renders one message (passed in by
 * main.tsx, which owns the renderers, so this module does not import the entry point). */
export function ThreadView({ id, root, Body }: { id: string; root: string; Body: (p: { m: Message }) => any }) {
  const s = useStore();
  const conv = s.conversations.get(id);
  const [fetched, setFetched] = useState<Message[]>([]);
  const [text, setText] = useState("");
  const [error, setError] = useState("");
  useEffect(() => {
    void s.open(id);
    void attempt(setError, async () => setFetched(await loadThread(s.api, id, root)));
  }, [id, root]);
  // Live replies arrive in the conversation's list; the fetched page covers older ones.
  const byId = new Map(fetched.map((m) => [m.id, m]));
  for (const m of s.messages.get(id) ?? []) if (m.id === root || m.thread_root === root) byId.set(m.id, m);
  const items = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  const replies = items.slice(1);
  const inThread = new Set(items.map((m) => m.id));
  const pending = s.pending.filter((p) => p.conversation_id === id && inThread.has(String(p.body.in_reply_to)));
  async function submit(ev?: Event) {
    ev?.preventDefault();
    const content = text.trim();
    if (!content) return;
    setText("");
    const parent = replies.length ? replies[replies.length - 1].id : root;
    await attempt(setError, () => s.send(id, { content_type: "text", content, in_reply_to: parent }));
  }
  const shown = replies.filter((m) => !m.deleted).length;
  return (
    <section class="chat thread" aria-label="Thread">
      <header class="chat-head">
        <a href={`#/c/${id}`} class="back-link">← Back to the conversation</a>
        <h2>Thread</h2>
        <span class="muted" data-testid="thread-replies">{shown === 1 ? "1 reply" : `${shown} replies`}</span>
      </header>
      <ol class="messages" aria-label="Thread messages">
        {items.map((m) => (
          <li key={m.id} class={`${s.isMine(m) ? "msg mine" : "msg"}${m.id === root ? " root" : ""}`} data-testid="thread-message">
            <div class="meta"><span class="who">{s.isMine(m) ? "You" : s.senderName(m, conv)}</span>
              <time dateTime={m.created_at}>{new Date(m.created_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}</time></div>
            <Body m={m} />
          </li>
        ))}
        {pending.map((p) => (
          <li key={p.key} class="msg mine pending" data-testid="pending"><p class="text">{String(p.body.content ?? "")}</p></li>
        ))}
      </ol>
      {error && <p role="alert" class="error">{error}</p>}
      {conv && !conv.archived_at && conv.membership?.role !== "observer" && (
        <form class="composer" onSubmit={submit}>
          <div class="row">
            <textarea aria-label="Reply in thread" placeholder="Reply in thread" rows={1} value={text}
              onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
              onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); void submit(); } }} />
            <button type="submit">Reply</button>
          </div>
        </form>
      )}
    </section>
  );
}
