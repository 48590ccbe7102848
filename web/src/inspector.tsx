// The context inspector: exactly what my agent's model gets in this conversation — the
// assembled parts in order with their token estimates, what went in and what the budget left
// out, and the rendered system text (GET /v1/conversations/{id}/agent-context). Looking does
// not count as using: memory use counts do not change.
import { useEffect, useState } from "preact/hooks";
import { attempt, useStore } from "./ui";

const PART_NAMES: Record<string, string> = {
  system_prompt: "System prompt", personality: "Personality", memories: "Memories",
  knowledge: "Knowledge", concepts: "Concepts", ambient: "Ambient context",
  history: "History", summary: "Summary",
};

export function ContextInspector({ id }: { id: string }) {
  const s = useStore();
  const conv = s.conversations.get(id);
  const [audience, setAudience] = useState<"owner" | "others">("owner");
  const [ctx, setCtx] = useState<any>(null);
  const [error, setError] = useState("");
  const load = () => attempt(setError, async () => setCtx(await s.api.call("GET", `/v1/conversations/${id}/agent-context?audience=${audience}`)));
  useEffect(() => {
    void s.open(id);
    void load();
  }, [id, audience]);
  return (
    <section class="panel wide">
      <h2>Agent context{conv ? `: ${s.title(conv)}` : ""}</h2>
      <p><a href={`#/c/${id}`}>Back to the conversation</a></p>
      <div class="row wrap">
        <label class="inline">As seen when answering{" "}
          <select aria-label="Audience" value={audience} onChange={(e) => setAudience((e.target as HTMLSelectElement).value as any)}>
            <option value="owner">me (the owner)</option>
            <option value="others">someone else (no memories, no ambient context)</option>
          </select>
        </label>
        <button onClick={() => void load()}>Refresh</button>
      </div>
      {error && <p role="alert" class="error">{error}</p>}
      {ctx && (
        <>
          <p data-testid="context-total">
            <strong>{ctx.total_tokens}</strong> of {ctx.budget_tokens} tokens · model <code>{ctx.provider}/{ctx.model}</code>
          </p>
          <meter min={0} max={ctx.budget_tokens} value={ctx.total_tokens} aria-label="Tokens used of the budget" />
          <table class="parts">
            <caption class="sr-only">Context parts</caption>
            <thead><tr><th scope="col">Part</th><th scope="col">Tokens</th><th scope="col">In</th><th scope="col">Left out</th></tr></thead>
            <tbody>
              {ctx.parts.map((p: any) => (
                <tr data-testid="context-part" data-part={p.name} key={p.name}>
                  <th scope="row">{PART_NAMES[p.name] ?? p.name}</th>
                  <td data-testid="part-tokens">{p.tokens}</td>
                  <td>{p.items.length}</td>
                  <td>{p.dropped.length}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {ctx.parts.filter((p: any) => p.content).map((p: any) => (
            <details key={p.name} data-testid="part-content">
              <summary>{PART_NAMES[p.name] ?? p.name} ({p.tokens} tokens)</summary>
              <pre class="json">{p.content}</pre>
            </details>
          ))}
          <details>
            <summary>System text sent to the model</summary>
            <pre class="json" data-testid="context-system">{ctx.system}</pre>
          </details>
          <details>
            <summary>Turns ({ctx.turns.length})</summary>
            <ol>{ctx.turns.map((t: any) => <li><strong>{t.role}</strong>: {typeof t.content === "string" ? t.content : JSON.stringify(t.content)}</li>)}</ol>
          </details>
        </>
      )}
    </section>
  );
}
