// Reports and moderation (docs/federation.md "Reports and moderation"): "Report" on someone
// else's message files `POST /v1/reports` (the server's refusals, such as 429 beyond the rate
// limit, are shown as they come); the reporter hears the outcome from `report.resolved`; an
// admin's "Moderation" screen lists `GET /v1/admin/reports` and resolves them.
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";
import { Message } from "./store";
import { attempt, errorText, store, useStore } from "./ui";

const CATEGORIES = ["spam", "abuse", "harassment", "illegal", "impersonation", "other"];
const ACTIONS: [string, string][] = [
  ["dismiss", "Dismiss"], ["delete_message", "Delete message"], ["block_peer", "Block peer"], ["suspend_user", "Suspend user"],
];
const OUTCOMES: Record<string, string> = {
  dismiss: "dismissed", delete_message: "the message was deleted", block_peer: "the sender's instance is blocked",
  suspend_user: "the user is suspended",
};

/** Outcomes of my reports, from `report.resolved` events, until I close them. */
let outcomes: { report_id: string; action: string }[] = [];
store.onFrame((f) => {
  if (f.type !== "report.resolved") return;
  outcomes = [...outcomes.filter((o) => o.report_id !== f.data.report_id), f.data];
  store.changed();
});

/** Why a report was refused, with the wait a 429 names (Retry-After, RFC 9110 §10.2.3). */
function refusal(err: unknown): string {
  if (err instanceof ApiError && err.problem.status === 429)
    return `Not sent: too many reports. ${errorText(err)}`.trim();
  return errorText(err);
}

/** "Report" on a message of someone else: a category and an optional explanation. */
export function ReportButton({ m }: { m: Message }) {
  const [open, setOpen] = useState(false);
  const [error, setError] = useState("");
  const [done, setDone] = useState(false);
  async function submit(ev: Event) {
    ev.preventDefault();
    const f = new FormData(ev.target as HTMLFormElement);
    setError("");
    try {
      await store.api.call("POST", "/v1/reports", {
        target_type: "message", message_id: m.id, category: f.get("category"), text: String(f.get("text") || "") || undefined,
      });
      setDone(true);
      setOpen(false);
    } catch (err) {
      setError(refusal(err));
    }
  }
  if (done) return <span role="status" class="muted"> Reported.</span>;
  if (!open) return <button aria-label="Report" onClick={() => setOpen(true)}>Report</button>;
  return (
    <form class="report" onSubmit={submit} aria-label="Report this message">
      <label>Category <select name="category" aria-label="Report category">
        {CATEGORIES.map((c) => <option value={c}>{c}</option>)}
      </select></label>
      <label>Why <textarea name="text" rows={2} maxLength={2000} aria-label="Report details" /></label>
      <button type="submit">Send report</button> <button type="button" onClick={() => setOpen(false)}>Cancel</button>
      {error && <p role="alert" class="error">{error}</p>}
    </form>
  );
}

/** What became of my reports (shown once each, until closed). */
export function ReportOutcomes() {
  const s = useStore();
  if (!outcomes.length) return null;
  return (
    <div class="report-outcomes">{outcomes.map((o) => (
      <p data-testid="report-outcome" key={o.report_id} role="status">
        Your report was reviewed: {OUTCOMES[o.action] ?? o.action}.{" "}
        <button class="link" onClick={() => { outcomes = outcomes.filter((x) => x !== o); s.changed(); }}>Close</button>
      </p>
    ))}</div>
  );
}

/** The "Moderation" nav link, for admins only (`is_admin` of GET /v1/me). */
export function ModerationLink() {
  const s = useStore();
  return s.me?.is_admin ? <a href="#/moderation">Moderation</a> : null;
}

/** The admin's queue: open reports with the reported message as it was, and the resolutions. */
export function Moderation() {
  const [items, setItems] = useState<any[]>([]);
  const [error, setError] = useState("");
  const load = () => store.api.call("GET", "/v1/admin/reports?status=open&limit=100").then((p) => setItems(p.items));
  useEffect(() => void load().catch((err) => setError(errorText(err))), []);
  const resolve = (r: any, action: string, label: string) =>
    confirm(`${label}?`) && attempt(setError, async () => {
      await store.api.call("POST", `/v1/admin/reports/${r.id}/resolve`, { action });
      await load();
    });
  return (
    <section class="panel">
      <h2>Moderation</h2>
      <p class="muted">Open reports, newest first, with the message as it was when reported.</p>
      {error && <p role="alert" class="error">{error}</p>}
      <ul class="memories" aria-label="Reports">{items.map((r) => (
        <li data-testid="report" key={r.id}>
          <strong>{r.category}</strong> <span class="muted">{r.target_type} · {new Date(r.created_at).toLocaleString()}</span>
          {r.snapshot?.content && <blockquote class="text">{String(r.snapshot.content)}</blockquote>}
          <div class="muted small">{r.target_did ?? r.snapshot?.sender_did ?? ""}</div>
          {r.text && <p class="text">{r.text}</p>}
          <div class="row wrap">{ACTIONS.filter(([a]) => a !== "delete_message" || r.message_id).map(([action, label]) => (
            <button class={action === "dismiss" ? "" : "danger"} onClick={() => void resolve(r, action, label)}>{label}</button>
          ))}</div>
        </li>
      ))}</ul>
      {items.length === 0 && !error && <p class="muted">No open reports.</p>}
    </section>
  );
}
