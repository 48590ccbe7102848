// Search over my memories or knowledge (GET /v1/search?scope=…): full text always, semantic
// too where the server has pgvector; each hit names the method that found it.
import { useState } from "preact/hooks";
import { attempt, store } from "./ui";

export function SearchBox({ scope, label }: { scope: "memories" | "knowledge"; label: string }) {
  const [hits, setHits] = useState<any[] | null>(null);
  const [error, setError] = useState("");
  function search(ev: Event) {
    ev.preventDefault();
    const q = String(new FormData(ev.target as HTMLFormElement).get("q")).trim();
    if (!q) return setHits(null);
    void attempt(setError, async () => {
      const r = await store.api.call("GET", `/v1/search?scope=${scope}&q=${encodeURIComponent(q)}`);
      setHits(r.hits);
    });
  }
  return (
    <>
      <form onSubmit={search} class="row" role="search">
        <label>{label} <input name="q" type="search" /></label>
        <button type="submit">Search</button>
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      {hits && (
        <section aria-label="Search results">
          <h3>Results</h3>
          {hits.length === 0 ? <p class="muted" data-testid="no-hits">Nothing found.</p> :
            <ul>{hits.map((h) => <li data-testid="hit">{h.title && <strong>{h.title}: </strong>}{h.text} <span class="muted">({h.method})</span></li>)}</ul>}
        </section>
      )}
    </>
  );
}
