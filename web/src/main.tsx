import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import hljs from "highlight.js/lib/common";
import { ApiError } from "./api";
import { Consent, consentRoute } from "./consent";
import { Message } from "./store";
import { errorText, go, store, useStore, webUrl } from "./ui";
import { FileBody } from "./files";
import { DeliveryStatus, loadDeliveries } from "./deliveries";
import { ThreadAction, ThreadLink, ThreadView } from "./threads";
import { AutoTranslate, TranslateButton, TranslationView, canTranslate } from "./translate";
import { ContextInspector } from "./inspector";
import { Knowledge } from "./knowledge";
import { ProjectMemory } from "./projects";
import { Contacts } from "./contacts";
import { Members } from "./members";
import { Settings } from "./settings";
import { PolicyEditor } from "./policies";
import { SearchBox } from "./search";
import { Requests, RequestsLink } from "./requests";
import { Moderation, ModerationLink, ReportButton, ReportOutcomes } from "./reports";

function useRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return hash.replace(/^#/, "") || "/";
}

function Auth() {
  const [mode, setMode] = useState<"login" | "register">("login");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  async function submit(ev: Event) {
    ev.preventDefault();
    const form = new FormData(ev.target as HTMLFormElement);
    const username = String(form.get("username")), password = String(form.get("password"));
    setBusy(true);
    setError("");
    try {
      if (mode === "register") await store.api.register(username, password, String(form.get("display_name") || "") || undefined);
      else await store.api.login(username, password);
      await store.start();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <main class="auth">
      <h1>Confer</h1>
      <form onSubmit={submit} aria-label={mode === "login" ? "Log in" : "Create an account"}>
        <label>
          Username <input name="username" autocomplete="username" required autoFocus />
        </label>
        {mode === "register" && (
          <label>
            Display name <input name="display_name" autocomplete="name" />
          </label>
        )}
        <label>
          Password{" "}
          <input name="password" type="password" required minLength={8}
            autocomplete={mode === "login" ? "current-password" : "new-password"} />
        </label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit" disabled={busy}>{mode === "login" ? "Log in" : "Create account"}</button>
      </form>
      <button class="link" onClick={() => setMode(mode === "login" ? "register" : "login")}>
        {mode === "login" ? "No account? Create one" : "Have an account? Log in"}
      </button>
    </main>
  );
}

function ConnectionBadge() {
  const s = useStore();
  const label = { online: "Connected", connecting: "Connecting…", offline: "Offline — reconnecting" }[s.connection];
  return <span class={`conn conn-${s.connection}`} role="status" aria-live="polite" data-state={s.connection}>{label}</span>;
}

function preview(m: Message | undefined): string {
  if (!m) return "No messages yet";
  if (m.deleted) return "Message deleted";
  if (m.content_type === "file") return `File: ${m.content_json?.filename ?? "file"}`;
  if (m.content_type === "permission_request") return "Permission request";
  return (m.content ?? m.content_type).slice(0, 80);
}

function ConversationList() {
  const s = useStore();
  const items = [...s.conversations.values()].sort((a, b) =>
    (s.last.get(b.id)?.id ?? b.updated_at) > (s.last.get(a.id)?.id ?? a.updated_at) ? 1 : -1);
  return (
    <nav class="list" aria-label="Conversations">
      <div class="list-actions">
        <button onClick={() => go("/new")}>New chat</button>
        <button onClick={() => go("/group")}>New group</button>
      </div>
      {items.length === 0 && <p class="muted">No conversations yet. Start one with “New chat”.</p>}
      <ul>
        {items.map((c) => {
          const unread = c.membership?.unread ?? 0;
          return (
            <li key={c.id}>
              <a href={`#/c/${c.id}`} class={s.openId === c.id ? "active conv" : "conv"} data-testid="conversation"
                aria-label={`${s.title(c)}${unread ? `, ${unread} unread` : ""}`}>
                <span class="conv-title">{s.title(c)}{c.archived_at ? " (archived)" : ""}</span>
                {unread > 0 && <span class="badge" data-testid="unread">{unread}</span>}
                <span class="conv-last">{preview(s.last.get(c.id))}</span>
              </a>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

function NewChat() {
  const [error, setError] = useState("");
  async function submit(ev: Event) {
    ev.preventDefault();
    const target = String(new FormData(ev.target as HTMLFormElement).get("target"));
    try {
      go(`/c/${await store.openDirect(target)}`);
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <section class="panel">
      <h2>New chat</h2>
      <form onSubmit={submit}>
        <label>
          Username or DID
          <input name="target" required autoFocus placeholder="bob or did:web:other.example:users:bob" />
        </label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Open</button>
      </form>
      <p class="muted">Your DID: <code data-testid="my-did">{store.me?.did}</code></p>
      {store.me?.agent_did && (
        <p><button onClick={() => store.openDirect(store.me.agent_did).then((id) => go(`/c/${id}`), (err) => setError(errorText(err)))}>
          Chat with my agent</button></p>
      )}
    </section>
  );
}

function NewGroup() {
  const [error, setError] = useState("");
  async function submit(ev: Event) {
    ev.preventDefault();
    const form = new FormData(ev.target as HTMLFormElement);
    const members = String(form.get("members")).split(/[\s,]+/).filter(Boolean);
    try {
      go(`/c/${await store.createGroup(String(form.get("name")), members)}`);
    } catch (err) {
      setError(errorText(err));
    }
  }
  return (
    <section class="panel">
      <h2>New group</h2>
      <form onSubmit={submit}>
        <label>Name <input name="name" required autoFocus /></label>
        <label>Members (usernames or DIDs, separated by spaces or commas)
          <textarea name="members" rows={3} />
        </label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Create group</button>
      </form>
    </section>
  );
}

function Code({ source, language }: { source: string; language?: string }) {
  const html = language && hljs.getLanguage(language)
    ? hljs.highlight(source, { language }).value
    : hljs.highlightAuto(source).value;
  return <pre class="code"><code class="hljs" dangerouslySetInnerHTML={{ __html: html }} /></pre>;
}

function PermissionCard({ m }: { m: Message }) {
  const s = useStore();
  const j = m.content_json ?? {};
  const [scope, setScope] = useState("peer_action");
  const [failed, setFailed] = useState("");
  const decided = j.permission_id ? s.decisions.get(j.permission_id) : undefined;
  async function decide(decision: string) {
    setFailed("");
    try {
      const row = await s.api.call("POST", `/v1/permissions/${j.permission_id}/decision`, {
        decision, scope: decision === "allow_always" ? scope : undefined,
      });
      s.decided(row);
    } catch (err) {
      setFailed(errorText(err));
    }
  }
  const label: Record<string, string> = { allow_once: "approved once", allow_always: "approved always", deny: "denied" };
  return (
    <div class="permission" role="group" aria-label="Permission request">
      <p><strong>Permission request</strong> · level {j.level} · action <code>{j.action}</code></p>
      {m.content && <p class="text">{m.content}</p>}
      {j.scope && <pre class="json">{JSON.stringify(j.scope, null, 2)}</pre>}
      {failed && <p role="alert" class="error">{failed}</p>}
      {decided ? <p role="status">Decision: {label[decided] ?? decided} <span class="muted">({decided})</span></p> : j.permission_id && (
        <div class="row">
          <button onClick={() => decide("allow_once")}>Approve once</button>
          <span class="always">
            <button onClick={() => decide("allow_always")}>Approve always</button>
            <label>for <select aria-label="Approve always for" value={scope} onChange={(e) => setScope((e.target as HTMLSelectElement).value)}>
              <option value="peer_action">this action of this peer</option>
              <option value="peer">everything from this peer</option>
              <option value="global">this action, any peer</option>
            </select></label>
          </span>
          <button class="danger" onClick={() => decide("deny")}>Deny</button>
        </div>
      )}
    </div>
  );
}

function Body({ m }: { m: Message }) {
  if (m.deleted) return <p class="muted"><em>This message was deleted.</em></p>;
  const j = m.content_json;
  switch (m.content_type) {
    case "code":
      return <Code source={m.content ?? ""} language={j?.language} />;
    case "file":
      return <FileBody m={m} />;
    case "permission_request":
      return <PermissionCard m={m} />;
    case "tool_call":
      return <div><strong>Tool call</strong> <code>{j?.name}</code><pre class="json">{JSON.stringify(j?.arguments, null, 2)}</pre></div>;
    case "tool_result":
      return <div><strong>{j?.is_error ? "Tool error" : "Tool result"}</strong><pre class="json">{JSON.stringify(j?.result, null, 2)}</pre></div>;
    default:
      return (
        <div>
          <p class="text">{m.content}</p>
          {m.citations?.length ? (
            <ol class="citations" aria-label="Sources">
              {m.citations.map((c) => (
                <li>{webUrl(c.url) ? <a href={webUrl(c.url)!} rel="noreferrer noopener" target="_blank">{c.source}</a> : c.source}
                  {" "}<span class={`trust trust-${c.trust_level}`}>{c.trust_level}</span>
                  {c.passage && <q>{c.passage}</q>}</li>
              ))}
            </ol>
          ) : null}
        </div>
      );
  }
}

function Chat({ id }: { id: string }) {
  const s = useStore();
  const conv = s.conversations.get(id);
  const list = s.messages.get(id) ?? [];
  const pending = s.pending.filter((p) => p.conversation_id === id);
  const streams = [...s.streams.values()].filter((x) => x.conversation_id === id);
  const [replyTo, setReplyTo] = useState<Message | null>(null);
  const [editing, setEditing] = useState<Message | null>(null);
  const [text, setText] = useState("");
  const [error, setError] = useState("");
  const bottom = useRef<HTMLLIElement>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  const lastTyping = useRef(0);
  useEffect(() => void s.open(id), [id]);
  useEffect(() => void (conv && loadDeliveries(conv, list)), [list.length, conv?.participants.length]);
  // Follow the newest message; loading older ones (prepended) keeps the view where it is.
  const lastId = list[list.length - 1]?.id;
  useEffect(() => bottom.current?.scrollIntoView({ block: "end" }),
    [lastId, pending.length, streams.map((x) => x.text).join(), s.deliveries.get(lastId ?? "")?.map((d) => d.state).join()]);
  if (!conv) return <section class="chat"><p>Loading…</p></section>;
  const byId = new Map(list.map((m) => [m.id, m]));
  const typing = s.typing.get(id);
  const partner = conv.participants.find((p) => p.did !== s.me.did && p.did !== s.me.agent_did);
  const presence = s.presenceOf(partner?.did);

  async function submit(ev?: Event) {
    ev?.preventDefault();
    const content = text.trim();
    if (!content) return;
    setError("");
    try {
      if (editing) {
        await s.edit(editing, content);
        setEditing(null);
      } else {
        const body: Record<string, unknown> = { content_type: "text", content };
        if (replyTo) body.in_reply_to = replyTo.id;
        setReplyTo(null);
        setText("");
        await s.send(id, body);
        return;
      }
      setText("");
    } catch (err) {
      setError(errorText(err));
    }
  }
  async function upload(ev: Event) {
    const el = ev.target as HTMLInputElement;
    const file = el.files?.[0];
    if (!file) return;
    const form = new FormData();
    form.append("file", file);
    try {
      const a = await s.api.call("POST", "/v1/attachments", form);
      await s.send(id, { content_type: "file", content_json: {
        attachment_id: a.id, filename: a.filename ?? file.name, mime_type: file.type || undefined, size_bytes: file.size } });
    } catch (err) {
      setError(errorText(err));
    }
    el.value = "";
  }
  function onKey(ev: KeyboardEvent) {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      void submit();
    } else if (ev.key === "Escape") {
      setEditing(null);
      setReplyTo(null);
      setText("");
    } else if (Date.now() - lastTyping.current > 3000) {
      lastTyping.current = Date.now();
      s.socket?.typing(id);
    }
  }
  return (
    <section class="chat" aria-label={`Conversation with ${s.title(conv)}`}>
      <header class="chat-head">
        <a href="#/" class="back" aria-label="Back to conversations">←</a>
        <h2>{s.title(conv)}</h2>
        {conv.type !== "group" && presence && <span class={`presence presence-${presence}`} data-testid="presence">{presence}</span>}
        <span class="muted">{conv.type === "group" ? `${conv.participants.length} members` : partner?.did}</span>
        {conv.type === "group" && <a href={`#/c/${id}/members`}>Members and settings</a>}
        {conv.participants.some((p) => p.did === s.me.agent_did) && <a href={`#/c/${id}/context`}>Inspect context</a>}
        <AutoTranslate id={id} />
      </header>
      <ol class="messages" aria-label="Messages" aria-live="polite">
        {s.older.has(id) && (
          <li class="older"><button onClick={() => void s.loadOlder(id)}>Load older messages</button></li>
        )}
        {list.map((m) => {
          const mine = s.isMine(m);
          const parent = m.in_reply_to ? byId.get(m.in_reply_to) : undefined;
          if (m.content_type === "system_notice")
            return <li key={m.id} class="notice" data-testid="message">{m.content}</li>;
          return (
            <li key={m.id} class={mine ? "msg mine" : "msg"} data-testid="message" data-id={m.id}>
              <div class="meta">
                <span class="who">{mine ? "You" : s.senderName(m, conv)}</span>
                <time dateTime={m.created_at}>{new Date(m.created_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}</time>
                {m.edited && !m.deleted && <span class="muted"> (edited)</span>}
                {mine && !m.deleted && s.readByOthers(m) && <span class="read" data-testid="read" title="Read by the other side">✓ Read</span>}
              </div>
              {m.in_reply_to && <blockquote class="reply-to">↪ {parent ? preview(parent) : "an earlier message"}</blockquote>}
              <Body m={m} />
              <TranslationView m={m} />
              <ThreadLink m={m} list={list} />
              {mine && <DeliveryStatus m={m} />}
              {!m.deleted && (
                <div class="actions">
                  <button onClick={() => { setReplyTo(m); input.current?.focus(); }} aria-label="Reply">Reply</button>
                  <ThreadAction m={m} />
                  {canTranslate(m, mine) && <TranslateButton m={m} />}
                  {!mine && m.sender_did !== s.me.agent_did && <ReportButton m={m} />}
                  {mine && m.content_type === "text" && (
                    <button aria-label="Edit" onClick={() => { setEditing(m); setText(m.content ?? ""); input.current?.focus(); }}>Edit</button>
                  )}
                  {mine && <button aria-label="Delete" class="danger" onClick={() => confirm("Delete this message?") && s.remove(m)}>Delete</button>}
                </div>
              )}
            </li>
          );
        })}
        {pending.map((p) => (
          <li key={p.key} class="msg mine pending" data-testid="pending">
            <div class="meta"><span class="who">You</span> <span class="muted">{p.failed ? `not sent: ${p.failed}` : "sending…"}</span></div>
            <p class="text">{String(p.body.content ?? (p.body.content_json as any)?.filename ?? "")}</p>
            {p.failed && <button onClick={() => s.discard(p.key)}>Discard</button>}
          </li>
        ))}
        {streams.map((x) => (
          <li class="msg streaming" data-testid="streaming" aria-busy="true">
            <div class="meta"><span class="who">Agent</span> <span class="muted">answering…</span></div>
            <p class="text">{x.text}</p>
          </li>
        ))}
        <li ref={bottom} class="end" aria-hidden="true" />
      </ol>
      {typing && typing.until > Date.now() && <p class="typing muted" aria-live="polite">{typing.name} is typing…</p>}
      {conv.archived_at ? <p class="muted">This conversation is archived.</p> : conv.membership?.role === "observer" ? (
        <p class="muted observer" role="note">You are an observer here: you can read, not post.</p>
      ) : (
        <form class="composer" onSubmit={submit}>
          {(replyTo || editing) && (
            <p class="composing">
              {editing ? "Editing your message" : `Replying to: ${preview(replyTo!)}`}{" "}
              <button type="button" onClick={() => { setReplyTo(null); setEditing(null); setText(""); }}>Cancel</button>
            </p>
          )}
          {error && <p role="alert" class="error">{error}</p>}
          <div class="row">
            <label class="file-pick">
              <span aria-hidden="true">Attach</span>
              <input type="file" onChange={upload} aria-label="Attach a file" />
            </label>
            <textarea ref={input} aria-label="Message" placeholder="Message" rows={1} value={text}
              onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} onKeyDown={onKey} />
            <button type="submit">{editing ? "Save" : "Send"}</button>
          </div>
        </form>
      )}
    </section>
  );
}

function AgentSettings() {
  const [agent, setAgent] = useState<any>(null);
  const [providers, setProviders] = useState<any[]>([]);
  const [status, setStatus] = useState("");
  useEffect(() => {
    void store.api.call("GET", "/v1/agents/me").then(setAgent);
    void store.api.call("GET", "/v1/providers").then((p) => setProviders(p.items ?? p));
  }, []);
  if (!agent) return <section class="panel"><p>Loading…</p></section>;
  const brain = agent.model_config?.brain ?? {};
  const translation = agent.model_config?.translation ?? {};
  async function save(ev: Event) {
    ev.preventDefault();
    const f = new FormData(ev.target as HTMLFormElement);
    try {
      const body: any = {
        name: f.get("name"), description: f.get("description") || null, style: f.get("style"),
        is_public: f.get("is_public") === "on",
        model_config: {
          brain: { provider: f.get("provider"), model: f.get("model") },
          translation: { provider: f.get("translation_provider"), model: f.get("translation_model") },
        },
      };
      setAgent(await store.api.call("PATCH", "/v1/agents/me", body));
      setStatus("Saved.");
    } catch (err) {
      setStatus(errorText(err));
    }
  }
  return (
    <section class="panel">
      <h2>My agent</h2>
      <p class="muted">DID: <code data-testid="agent-did">{agent.did}</code></p>
      <form onSubmit={save}>
        <label>Name <input name="name" defaultValue={agent.name} required /></label>
        <label>Description <textarea name="description" defaultValue={agent.description ?? ""} rows={2} /></label>
        <label>Style <select name="style">
          {["formal", "friendly", "technical", "casual"].map((x) => <option value={x} selected={x === (agent.style ?? "friendly")}>{x}</option>)}
        </select></label>
        <label>Model provider <select name="provider">
          {providers.filter((p) => p.kind !== "tool").map((p) => <option value={p.id} selected={p.id === brain.provider}>{p.name ?? p.display_name ?? p.id}</option>)}
        </select></label>
        <label>Model <input name="model" defaultValue={brain.model ?? ""} required /></label>
        <label>Translation provider <select name="translation_provider">
          {providers.filter((p) => p.kind !== "tool").map((p) => <option value={p.id} selected={p.id === translation.provider}>{p.name ?? p.display_name ?? p.id}</option>)}
        </select></label>
        <label>Translation model <input name="translation_model" defaultValue={translation.model ?? ""} required /></label>
        <label class="check"><input type="checkbox" name="is_public" defaultChecked={agent.is_public} /> Public (others may address it)</label>
        <button type="submit">Save</button>
        {status && <p role="status">{status}</p>}
      </form>
      <PolicyEditor agent={agent} saved={setAgent} />
      <LlmKeys providers={providers} />
    </section>
  );
}

function LlmKeys({ providers }: { providers: any[] }) {
  const [keys, setKeys] = useState<any[]>([]);
  const [status, setStatus] = useState("");
  const load = () => store.api.call("GET", "/v1/me/llm-keys").then((x) => setKeys(x.items ?? x));
  useEffect(() => void load(), []);
  async function put(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    try {
      await store.api.call("PUT", `/v1/me/llm-keys/${encodeURIComponent(String(f.get("provider")))}`, { api_key: f.get("api_key") });
      form.reset(); // the key leaves the page once stored: it is never shown again
      setStatus("Key stored.");
      await load();
    } catch (err) {
      setStatus(errorText(err));
    }
  }
  async function remove(provider: string) {
    try {
      await store.api.call("DELETE", `/v1/me/llm-keys/${encodeURIComponent(provider)}`);
      setStatus("Key removed.");
      await load();
    } catch (err) {
      setStatus(errorText(err));
    }
  }
  const choices = providers.filter((p) => p.id !== "offline");
  return (
    <section aria-label="Provider keys">
      <h3>Provider keys</h3>
      <p class="muted">Stored encrypted on the server and never shown again.</p>
      {keys.length === 0 ? <p class="muted">No keys stored.</p> : (
        <ul data-testid="llm-keys">{keys.map((k) => (
          <li data-testid="llm-key">{k.provider} <span class="muted">set {new Date(k.set_at).toLocaleString()}</span>{" "}
            <button class="danger" aria-label={`Remove the ${k.provider} key`} onClick={() => remove(k.provider)}>Remove</button></li>
        ))}</ul>
      )}
      <form onSubmit={put} class="row wrap">
        <label>Provider <select name="provider" aria-label="Key provider">
          {choices.map((p) => <option value={p.id}>{p.name ?? p.id}</option>)}
        </select></label>
        <label>API key <input name="api_key" type="password" autocomplete="off" required /></label>
        <button type="submit">Store key</button>
      </form>
      {status && <p role="status">{status}</p>}
    </section>
  );
}

const MEMORY_TYPES = ["fact", "preference", "decision", "learning", "procedure"];

function Memories() {
  const agentId = String(store.me?.agent_did ?? "").split(":").pop();
  const [items, setItems] = useState<any[]>([]);
  const [error, setError] = useState("");
  const load = () => store.api.call("GET", `/v1/agents/${agentId}/memories`).then(setItems);
  useEffect(() => void load(), []);
  async function run(fn: () => Promise<unknown>) {
    setError("");
    try {
      await fn();
    } catch (err) {
      setError(errorText(err));
    }
  }
  function add(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    void run(async () => {
      await store.api.call("POST", `/v1/agents/${agentId}/memories`, {
        type: f.get("type"), content: f.get("content"), importance: Number(f.get("importance") || 5) });
      form.reset();
      await load();
    });
  }
  return (
    <section class="panel">
      <h2>My agent's memories</h2>
      <form onSubmit={add}>
        <label>Memory <textarea name="content" rows={2} required /></label>
        <div class="row">
          <label>Type <select name="type" aria-label="Memory type">{MEMORY_TYPES.map((t) => <option value={t}>{t}</option>)}</select></label>
          <label>Importance <input name="importance" type="number" min={1} max={10} defaultValue="5" /></label>
        </div>
        <button type="submit">Add memory</button>
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      <SearchBox scope="memories" label="Search memories" />
      <ul class="memories">{items.map((m) => (
        <li data-testid="memory">{m.content} <span class="muted">{m.type} · importance {m.importance} · used {m.uses}×</span>{" "}
          <button class="danger" aria-label={`Delete memory: ${m.content}`}
            onClick={() => run(async () => { await store.api.call("DELETE", `/v1/agents/${agentId}/memories/${m.id}`); await load(); })}>Delete</button></li>
      ))}</ul>
      {items.length === 0 && <p class="muted">No memories yet.</p>}
    </section>
  );
}

function Sessions() {
  const [items, setItems] = useState<any[]>([]);
  const load = () => store.api.call("GET", "/v1/me/sessions").then((x) => setItems(x.items ?? x));
  useEffect(() => void load(), []);
  return (
    <section class="panel">
      <h2>My sessions</h2>
      <ul>{items.map((x) => (
        <li>{x.device_id} {x.platform && `(${x.platform})`} {x.current ? <strong>this device</strong> :
          <button onClick={() => store.api.call("DELETE", `/v1/me/sessions/${x.id}`).then(load)}>Revoke</button>}</li>
      ))}</ul>
      <button onClick={() => store.logout()}>Log out</button>
    </section>
  );
}

function App() {
  const s = useStore();
  const route = useRoute();
  if (!s.me) return <Auth />;
  const chat = route.match(/^\/c\/([^/]+)(?:\/(members|context|t\/([^/]+)))?$/);
  let main;
  if (chat && chat[2] === "members") main = <Members id={chat[1]} />;
  else if (chat && chat[2] === "context") main = <ContextInspector id={chat[1]} key={chat[1]} />;
  else if (chat && chat[3]) main = <ThreadView id={chat[1]} root={chat[3]} Body={Body} key={chat[3]} />;
  else if (chat) main = <Chat id={chat[1]} key={chat[1]} />;
  else if (route === "/new") main = <NewChat />;
  else if (route === "/group") main = <NewGroup />;
  else if (route === "/agent") main = <AgentSettings />;
  else if (route === "/sessions") main = <Sessions />;
  else if (route === "/contacts") main = <Contacts />;
  else if (route === "/memories") main = <Memories />;
  else if (consentRoute(route)) main = <Consent api={s.api} id={consentRoute(route)!} />;
  else if (route === "/knowledge") main = <Knowledge />;
  else if (route === "/projects") main = <ProjectMemory />;
  else if (route === "/settings") main = <Settings />;
  else if (route === "/requests") main = <Requests />;
  else if (route === "/moderation") main = <Moderation />;
  if (!chat && s.openId) void s.open(null);
  return (
    <div class={main ? "shell has-main" : "shell"}>
      <header class="top">
        <a href="#/" class="brand">Confer</a>
        <ConnectionBadge />
        <nav aria-label="Account">
          {/* Requests first: its count must show on a phone, where the links scroll sideways */}
          <RequestsLink /> <ModerationLink />{" "}
          <a href="#/agent">Agent</a> <a href="#/memories">Memories</a> <a href="#/knowledge">Knowledge</a>{" "}
          <a href="#/projects">Projects</a> <a href="#/contacts">Contacts</a>{" "}
          <a href="#/settings">Settings</a> <a href="#/sessions">Sessions</a>{" "}
          <button class="link" onClick={() => s.logout()}>Log out {s.me.username}</button>
        </nav>
        <ReportOutcomes />
      </header>
      <ConversationList />
      <main class="main">{main ?? <p class="muted placeholder">Pick a conversation.</p>}</main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
if (store.api.tokens) store.start().catch((err) => {
  if (!(err instanceof ApiError)) console.error(err);
});
