// Project memory shared with a peer agent (docs/agents.md "Project memory"): one versioned
// document per project and peer. Saving names the version read (If-Match); a stale save is
// refused (412) and says so. Every version is kept: view one, or restore it as a new version.
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";
import { attempt, store } from "./ui";

interface Doc { version: number; facts_md?: string | null; decisions_md?: string | null; updated_at?: string }

export function ProjectMemory() {
  const [contacts, setContacts] = useState<any[]>([]);
  const [peer, setPeer] = useState("");
  const [project, setProject] = useState("");
  const [doc, setDoc] = useState<Doc | null>(null);
  const [opened, setOpened] = useState(false);
  const [facts, setFacts] = useState("");
  const [decisions, setDecisions] = useState("");
  const [versions, setVersions] = useState<any[]>([]);
  const [viewing, setViewing] = useState<any>(null);
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");
  useEffect(() => void store.api.call("GET", "/v1/contacts").then(setContacts), []);
  const base = () => `/v1/project-memory/${encodeURIComponent(project)}`;
  const q = () => `peer=${encodeURIComponent(peer)}`;
  async function open(ev?: Event) {
    ev?.preventDefault();
    setStatus("");
    setViewing(null);
    await attempt(setError, async () => {
      let current: Doc | null = null;
      try {
        current = await store.api.call("GET", `${base()}?${q()}`);
      } catch (err) {
        if (!(err instanceof ApiError && err.problem.code === "project_memory_not_found")) throw err;
      }
      setDoc(current);
      setFacts(current?.facts_md ?? "");
      setDecisions(current?.decisions_md ?? "");
      setVersions(current ? await store.api.call("GET", `${base()}/versions?${q()}`) : []);
      setOpened(true);
    });
  }
  async function write(body: { facts_md: string; decisions_md: string }, done: string) {
    const ok = await attempt(setError, async () => {
      const headers: Record<string, string> = doc ? { "If-Match": `"${doc.version}"` } : {};
      const saved: Doc = await store.api.call("PUT", `${base()}?${q()}`, body, headers);
      setDoc(saved);
      setFacts(saved.facts_md ?? "");
      setDecisions(saved.decisions_md ?? "");
      setVersions(await store.api.call("GET", `${base()}/versions?${q()}`));
      setViewing(null);
    });
    if (ok) setStatus(done);
    else setStatus("");
  }
  const save = (ev: Event) => {
    ev.preventDefault();
    void write({ facts_md: facts, decisions_md: decisions }, "Saved.");
  };
  const peers = contacts.filter((c) => c.trust_level !== "blocked");
  return (
    <section class="panel">
      <h2>Project memory</h2>
      <p class="muted">A document you share with a peer agent per project (facts and decisions), every version kept.</p>
      <form onSubmit={open} class="row wrap">
        <label>Peer (a contact)
          <select aria-label="Peer" value={peer} onChange={(e) => setPeer((e.target as HTMLSelectElement).value)} required>
            <option value="" disabled>choose a contact</option>
            {peers.map((c) => <option value={c.did}>{c.alias || c.name || store.nameOf(c.did)}</option>)}
          </select>
        </label>
        <label>Project <input aria-label="Project" value={project} required
          onInput={(e) => setProject((e.target as HTMLInputElement).value)} placeholder="confer" /></label>
        <button type="submit">Open</button>
      </form>
      {peers.length === 0 && <p class="muted">Add the peer as a contact first.</p>}
      {error && <p role="alert" class="error">{error}</p>}
      {opened && (
        <form onSubmit={save} aria-label="Project memory document">
          <p data-testid="pm-version">{doc ? `Version ${doc.version}` : "No document yet: saving creates version 1."}</p>
          <label>Facts (Markdown) <textarea rows={5} value={facts} onInput={(e) => setFacts((e.target as HTMLTextAreaElement).value)} /></label>
          <label>Decisions (Markdown) <textarea rows={5} value={decisions} onInput={(e) => setDecisions((e.target as HTMLTextAreaElement).value)} /></label>
          <div class="row">
            <button type="submit">Save</button>
            <button type="button" onClick={() => void open()}>Reload</button>
            {status && <span role="status">{status}</span>}
          </div>
        </form>
      )}
      {versions.length > 0 && (
        <section aria-label="Versions">
          <h3>Versions</h3>
          <ul class="versions">{versions.map((v) => (
            <li data-testid="pm-history" key={v.version}>
              Version {v.version} <span class="muted">{new Date(v.created_at).toLocaleString()}{v.written_via ? ` · via ${v.written_via}` : ""}</span>{" "}
              <button onClick={() => setViewing(v)} aria-label={`View version ${v.version}`}>View</button>
              {doc && v.version !== doc.version && (
                <button aria-label={`Restore version ${v.version}`} onClick={() =>
                  void write({ facts_md: v.facts_md ?? "", decisions_md: v.decisions_md ?? "" }, `Restored version ${v.version}.`)}>Restore</button>
              )}
            </li>
          ))}</ul>
          {viewing && (
            <article data-testid="pm-viewing" aria-label={`Version ${viewing.version}`}>
              <h4>Version {viewing.version}</h4>
              <h5>Facts</h5><pre class="json">{viewing.facts_md || "(empty)"}</pre>
              <h5>Decisions</h5><pre class="json">{viewing.decisions_md || "(empty)"}</pre>
            </article>
          )}
        </section>
      )}
    </section>
  );
}
