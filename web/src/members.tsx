// A group's members and settings: add (local or remote), roles (member, admin, observer),
// remove, rename, archive, leave, and my notification setting here. The server enforces the
// rules (admins only; a group keeps an admin: 409 last_admin); its refusals are shown as they come.
import { useState } from "preact/hooks";
import { Participant } from "./store";
import { attempt, go, memberKind, useStore } from "./ui";

const ROLES = ["member", "admin", "observer"];

export function Members({ id }: { id: string }) {
  const s = useStore();
  const conv = s.conversations.get(id);
  const [error, setError] = useState("");
  if (!conv) return null;
  const admin = conv.membership?.role === "admin";
  const act = (fn: () => Promise<unknown>) => attempt(setError, fn);
  const path = `/v1/conversations/${id}`;
  function add(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const target = String(new FormData(form).get("member"));
    void act(async () => {
      await s.api.call("POST", `${path}/participants`, { did: s.didFor(target), role: "member" });
      await s.refreshConversation(id);
      form.reset();
    });
  }
  function rename(ev: Event) {
    ev.preventDefault();
    const name = String(new FormData(ev.target as HTMLFormElement).get("name")).trim();
    void act(() => s.updateConversation(id, { name }));
  }
  const setRole = (p: Participant, role: string) => act(async () => {
    try {
      await s.api.call("PATCH", `${path}/participants/${p.id}`, { role });
    } finally {
      await s.refreshConversation(id); // show the role the server kept, even after a refusal
    }
  });
  const remove = (p: Participant, name: string) => confirm(`Remove ${name} from the group?`) && act(async () => {
    await s.api.call("DELETE", `${path}/participants/${p.id}`);
    await s.refreshConversation(id);
  });
  const me = conv.membership?.participant_id;
  return (
    <section class="panel">
      <h2>Members of {s.title(conv)}</h2>
      {admin && (
        <form onSubmit={rename} class="row">
          <label>Group name <input name="name" defaultValue={conv.name ?? ""} required /></label>
          <button type="submit">Rename</button>
        </form>
      )}
      {error && <p role="alert" class="error">{error}</p>}
      <ul aria-label="Members" class="members">{conv.participants.map((p) => {
        const name = p.id === me ? "You" : p.name || s.nameOf(p.did);
        return (
          <li data-testid="member" data-role={p.role ?? ""} key={p.id ?? p.did}>
            <span class="member-name">{name}</span> <span class="muted">{[p.role, memberKind(p)].filter(Boolean).join(" · ")}</span>
            {admin && p.id && (
              <span class="row member-actions">
                <label class="sr-only" for={`role-${p.id}`}>Role of {name}</label>
                <select id={`role-${p.id}`} aria-label={`Role of ${name}`} value={p.role ?? "member"}
                  onChange={(e) => void setRole(p, (e.target as HTMLSelectElement).value)}>
                  {ROLES.map((r) => <option value={r}>{r}</option>)}
                </select>
                {p.id !== me && <button class="danger" aria-label={`Remove ${name}`} onClick={() => void remove(p, name)}>Remove</button>}
              </span>
            )}
          </li>
        );
      })}</ul>
      {!admin && <p class="muted">Only the group's admins can add or remove members and change roles.</p>}
      {admin && (
        <form onSubmit={add}>
          <label>Add a member (username or DID) <input name="member" required /></label>
          <button type="submit">Add</button>
        </form>
      )}
      <label>Notifications for this group{" "}
        <select aria-label="Notifications for this group" value={conv.membership?.notification ?? "all"}
          onChange={(e) => void act(async () => {
            const updated = await s.api.call("PATCH", `${path}/membership`, { notification: (e.target as HTMLSelectElement).value });
            s.conversations.set(id, { ...conv, ...updated });
            s.changed();
          })}>
          <option value="all">every message</option>
          <option value="mentions">mentions only</option>
          <option value="none">none</option>
        </select>
      </label>
      <div class="row settings">
        {admin && (conv.archived_at
          ? <button onClick={() => act(() => s.updateConversation(id, { archived: false }))}>Reopen</button>
          : <button onClick={() => act(() => s.updateConversation(id, { archived: true }))}>Archive</button>)}
        <button class="danger" onClick={() => confirm("Leave this group?") &&
          act(async () => { await s.leave(id); go("/"); })}>Leave group</button>
      </div>
      <p><a href={`#/c/${id}`}>Back to the conversation</a></p>
    </section>
  );
}
