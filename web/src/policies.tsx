// My agent's policy: what it does with a request from a peer (docs/agents.md "Policy"). Rules
// are tried in order and the first match wins (action, optional peer DID glob, optional text
// glob); the default applies when none matches. Levels shape the outcome on the server: read
// (L1) proceeds unless denied, ask/share (L2) follow the policy — a trusted contact skips the
// question — and commit (L3) always asks unless denied.
import { useState } from "preact/hooks";
import { attempt, store } from "./ui";

interface Rule { peer?: string | null; action: string; pattern?: string | null; effect: string }
const ACTIONS = [["read", "read (L1)"], ["ask", "ask (L2, messages)"], ["share", "share (L2)"], ["commit", "commit (L3)"]];
const EFFECTS = ["allow", "ask", "deny"];

export function PolicyEditor({ agent, saved }: { agent: any; saved: (a: any) => void }) {
  const [rules, setRules] = useState<Rule[]>(agent.policies?.rules ?? []);
  const [fallback, setFallback] = useState<string>(agent.policies?.default ?? "ask");
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");
  const change = (i: number, patch: Partial<Rule>) => setRules(rules.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  async function save(ev: Event) {
    ev.preventDefault();
    setStatus("");
    const clean = rules.map((r) => ({ action: r.action, effect: r.effect, peer: r.peer?.trim() || null, pattern: r.pattern?.trim() || null }));
    const ok = await attempt(setError, async () => saved(await store.api.call("PATCH", "/v1/agents/me", { policies: { default: fallback, rules: clean } })));
    if (ok) setStatus("Policy saved.");
  }
  return (
    <form onSubmit={save} aria-label="Policy">
      <h3>Policy</h3>
      <p class="muted small">What your agent does with a peer's request: the first matching rule wins, else the default.</p>
      <ol class="rules">{rules.map((r, i) => (
        <li data-testid="policy-rule" class="row wrap" key={i}>
          <label>Action <select aria-label={`Action of rule ${i + 1}`} value={r.action} onChange={(e) => change(i, { action: (e.target as HTMLSelectElement).value })}>
            {ACTIONS.map(([v, label]) => <option value={v}>{label}</option>)}</select></label>
          <label>From (DID, * allowed) <input aria-label={`Peer of rule ${i + 1}`} value={r.peer ?? ""} placeholder="any peer"
            onInput={(e) => change(i, { peer: (e.target as HTMLInputElement).value })} /></label>
          <label>Text matching <input aria-label={`Pattern of rule ${i + 1}`} value={r.pattern ?? ""} placeholder="any text"
            onInput={(e) => change(i, { pattern: (e.target as HTMLInputElement).value })} /></label>
          <label>Then <select aria-label={`Effect of rule ${i + 1}`} value={r.effect} onChange={(e) => change(i, { effect: (e.target as HTMLSelectElement).value })}>
            {EFFECTS.map((v) => <option value={v}>{v}</option>)}</select></label>
          <button type="button" class="danger" aria-label={`Remove rule ${i + 1}`} onClick={() => setRules(rules.filter((_, j) => j !== i))}>Remove</button>
        </li>
      ))}</ol>
      <div class="row wrap">
        <button type="button" onClick={() => setRules([...rules, { action: "ask", effect: "allow", peer: "", pattern: "" }])}>Add rule</button>
        <label class="inline">Otherwise <select aria-label="Policy default" value={fallback} onChange={(e) => setFallback((e.target as HTMLSelectElement).value)}>
          <option value="ask">ask me</option><option value="auto">allow</option><option value="deny">deny</option></select></label>
        <button type="submit">Save policy</button>
      </div>
      {error && <p role="alert" class="error">{error}</p>}
      {status && <p role="status">{status}</p>}
    </form>
  );
}
