// My knowledge base: entries my agents may read into their context (docs/agents.md
// "Knowledge"): list by priority, add (the same content twice is stored once), delete, search.
import { useEffect, useState } from "preact/hooks";
import { parseTags } from "./contacts";
import { SearchBox } from "./search";
import { attempt, store } from "./ui";

export function Knowledge() {
  const [items, setItems] = useState<any[]>([]);
  const [status, setStatus] = useState("");
  const [error, setError] = useState("");
  const load = () => store.api.call("GET", "/v1/knowledge?limit=200").then(setItems);
  useEffect(() => void load(), []);
  function add(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    void attempt(setError, async () => {
      const entry = await store.api.call("POST", "/v1/knowledge", {
        category: String(f.get("category") || "general"), title: String(f.get("title") || "") || undefined,
        content: f.get("content"), tags: parseTags(String(f.get("tags") || "")),
        priority: Number(f.get("priority") || 0),
      });
      form.reset();
      // Identical content is stored once: the server answers with the entry it already had.
      setStatus(items.some((k) => k.id === entry.id) ? "Already in your knowledge." : "Added.");
      await load();
    });
  }
  const remove = (k: any) => confirm(`Delete “${k.title || k.content.slice(0, 40)}”?`) &&
    attempt(setError, async () => { await store.api.call("DELETE", `/v1/knowledge/${k.id}`); await load(); });
  return (
    <section class="panel">
      <h2>Knowledge</h2>
      <p class="muted">What your agents may read into their context, highest priority first.</p>
      <form onSubmit={add} aria-label="Add knowledge">
        <label>Title <input name="title" /></label>
        <label>Content <textarea name="content" rows={3} required /></label>
        <div class="row wrap">
          <label>Category <input name="category" defaultValue="general" required /></label>
          <label>Tags <input name="tags" placeholder="ops, release" /></label>
          <label>Priority <input name="priority" type="number" defaultValue="0" /></label>
        </div>
        <button type="submit">Add knowledge</button>
        {status && <span role="status" class="muted"> {status}</span>}
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      <SearchBox scope="knowledge" label="Search knowledge" key={items.length} />
      {items.length > 0 && <h3>Entries ({items.length})</h3>}
      <ul class="memories" aria-label="Knowledge entries">{items.map((k) => (
        <li data-testid="knowledge" key={k.id}>
          {k.title && <strong>{k.title}</strong>} <span class="text">{k.content}</span>
          <div class="muted">{k.category} · priority {k.priority}{k.tags?.length ? ` · ${k.tags.join(", ")}` : ""}</div>
          <button class="danger" aria-label={`Delete knowledge: ${k.title || k.content}`} onClick={() => void remove(k)}>Delete</button>
        </li>
      ))}</ul>
      {items.length === 0 && <p class="muted">No knowledge yet.</p>}
    </section>
  );
}
