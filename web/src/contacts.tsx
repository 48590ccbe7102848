// Contacts: add by DID, alias, tags (and a filter by tag), pin, mute, trust level, block,
// remove (docs/accounts.md "Contacts"). Trust: blocked is refused at the door, unknown and known
// go through the agent's policy, trusted skips the L2 consent question.
import { useEffect, useState } from "preact/hooks";
import { attempt, errorText, go, store } from "./ui";

const TRUST = ["unknown", "known", "trusted", "blocked"];

/** "a, b ,, c" → ["a", "b", "c"] (duplicates and blanks dropped). */
export function parseTags(text: string): string[] {
  return [...new Set(text.split(",").map((t) => t.trim()).filter(Boolean))];
}

function Contact({ c, run, setError }: { c: any; run: (fn: () => Promise<unknown>) => Promise<boolean>; setError: (t: string) => void }) {
  const [tags, setTags] = useState((c.tags ?? []).join(", "));
  const name = c.alias || c.name || store.nameOf(c.did);
  const patch = (change: Record<string, unknown>) => run(() => store.api.call("PATCH", `/v1/contacts/${c.id}`, change));
  return (
    <li data-testid="contact" data-trust={c.trust_level}>
      <strong>{name}</strong> <span class="muted">{c.trust_level}{c.muted ? " · muted" : ""}{c.pinned ? " · pinned" : ""}</span>
      {c.tags?.length ? <span class="tags" aria-label="Tags">{c.tags.map((t: string) => <span class="tag" data-testid="tag">{t}</span>)}</span> : null}
      <div class="muted"><code>{c.did}</code></div>
      <div class="row wrap">
        <label class="inline">Trust{" "}
          <select aria-label={`Trust level of ${name}`} value={c.trust_level}
            onChange={(e) => void patch({ trust_level: (e.target as HTMLSelectElement).value })}>
            {TRUST.map((v) => <option value={v}>{v}</option>)}
          </select>
        </label>
        <form class="row inline" onSubmit={(e) => { e.preventDefault(); void patch({ tags: parseTags(tags) }); }}>
          <input aria-label={`Tags of ${name}`} placeholder="tags, comma separated" value={tags}
            onInput={(e) => setTags((e.target as HTMLInputElement).value)} />
          <button type="submit" aria-label={`Save tags of ${name}`}>Save tags</button>
        </form>
      </div>
      <div class="row wrap">
        <button onClick={() => store.openDirect(c.did).then((id) => go(`/c/${id}`), (err) => setError(errorText(err)))}>Message</button>
        <button onClick={() => patch({ pinned: !c.pinned })}>{c.pinned ? "Unpin" : "Pin"}</button>
        <button onClick={() => patch({ muted: !c.muted })}>{c.muted ? "Unmute" : "Mute"}</button>
        {c.trust_level === "blocked"
          ? <button onClick={() => patch({ trust_level: "unknown" })}>Unblock</button>
          : <button class="danger" onClick={() => patch({ trust_level: "blocked" })}>Block</button>}
        <button class="danger" onClick={() => confirm("Remove this contact?") && run(() => store.api.call("DELETE", `/v1/contacts/${c.id}`))}>Remove</button>
      </div>
    </li>
  );
}

export function Contacts() {
  const [items, setItems] = useState<any[]>([]);
  const [error, setError] = useState("");
  const [tag, setTag] = useState("");
  const load = () => store.api.call("GET", "/v1/contacts").then(setItems);
  useEffect(() => void load(), []);
  const run = (fn: () => Promise<unknown>) => attempt(setError, async () => { await fn(); await load(); });
  function add(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    const tags = parseTags(String(f.get("tags") || ""));
    void run(async () => {
      await store.api.call("POST", "/v1/contacts", {
        did: store.didFor(String(f.get("did"))), alias: String(f.get("alias") || "") || undefined,
        tags: tags.length ? tags : undefined,
      });
      form.reset();
    });
  }
  const allTags = [...new Set(items.flatMap((c) => c.tags ?? []))].sort();
  const shown = tag ? items.filter((c) => (c.tags ?? []).includes(tag)) : items;
  return (
    <section class="panel">
      <h2>Contacts</h2>
      <p class="muted small">Trust: <strong>blocked</strong> contacts are refused; <strong>trusted</strong> ones skip the
        consent question for level-2 actions; <strong>unknown</strong> and <strong>known</strong> go through your agent's policy.</p>
      <form onSubmit={add}>
        <label>DID <input name="did" required placeholder="did:web:other.example:users:bob" /></label>
        <label>Alias <input name="alias" /></label>
        <label>Tags <input name="tags" placeholder="work, family" /></label>
        <button type="submit">Add contact</button>
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      {allTags.length > 0 && (
        <label>Show{" "}
          <select aria-label="Filter by tag" value={tag} onChange={(e) => setTag((e.target as HTMLSelectElement).value)}>
            <option value="">every contact</option>
            {allTags.map((t) => <option value={t}>tagged {t}</option>)}
          </select>
        </label>
      )}
      <ul class="contacts">{shown.map((c) => <Contact key={`${c.id}:${(c.tags ?? []).join()}`} c={c} run={run} setError={setError} />)}</ul>
      {items.length === 0 && <p class="muted">No contacts yet.</p>}
    </section>
  );
}
