// My profile and preferences (PATCH /v1/me): display name, avatar, e-mail; language (used for
// translations on request), time zone, notification channels, and whether my agent may answer
// for me while I am away. The server validates each field (BCP 47 tag, IANA zone, URL) and its
// refusal is shown next to the form.
import { useState } from "preact/hooks";
import { attempt, store, useStore } from "./ui";
import { disablePush, enablePush, pushSupported } from "./push";

const LANGUAGES = ["en", "es", "de", "fr", "it", "pt", "nl", "zh", "ja", "ko", "ar", "ru"];

function zones(): string[] {
  try {
    return (Intl as any).supportedValuesOf("timeZone");
  } catch {
    return ["UTC"];
  }
}

export function Settings() {
  const s = useStore();
  const me = s.me;
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");
  const prefs = me.preferences ?? {};
  async function save(ev: Event) {
    ev.preventDefault();
    const f = new FormData(ev.target as HTMLFormElement);
    const text = (k: string) => String(f.get(k) ?? "").trim();
    setStatus("");
    const ok = await attempt(setError, async () => {
      s.me = await s.api.call("PATCH", "/v1/me", {
        display_name: text("display_name") || null,
        avatar_url: text("avatar_url") || null,
        email: text("email") || null,
        preferences: {
          language: text("language"),
          timezone: text("timezone"),
          notification: { push: f.get("push") === "on", email: f.get("notify_email") === "on" },
          privacy: {
            allow_offline_response: f.get("allow_offline_response") === "on",
            notification_preview: f.get("notification_preview") === "on",
            // Unset means the instance's default (CONFER_MESSAGE_REQUESTS_DEFAULT, which the client
            // cannot see): only a choice made here is sent, so saving the rest pins nothing.
            ...(prefs.privacy?.message_requests != null || f.get("message_requests") !== "on"
              ? { message_requests: f.get("message_requests") === "on" } : {}),
          },
        },
      });
      s.changed();
    });
    if (ok) setStatus("Saved.");
  }
  return (
    <section class="panel">
      <h2>Profile and preferences</h2>
      <div class="profile-card">
        {me.avatar_url && sameOrigin(me.avatar_url) ? <img class="avatar" src={me.avatar_url} alt="" /> :
          <span class="avatar initials" aria-hidden="true">{(me.display_name || me.username).slice(0, 1).toUpperCase()}</span>}
        <div><strong data-testid="profile-name">{me.display_name || me.username}</strong>
          <div class="muted">@{me.username} · <code>{me.did}</code></div></div>
      </div>
      <form onSubmit={save} key={me.preferences ? JSON.stringify(me.preferences) + me.display_name : "x"}>
        <fieldset>
          <legend>Profile</legend>
          <label>Display name <input name="display_name" defaultValue={me.display_name ?? ""} maxLength={128} autocomplete="name" /></label>
          <label>Avatar URL <input name="avatar_url" type="url" defaultValue={me.avatar_url ?? ""} placeholder="https://…" /></label>
          <p class="muted small">Pictures from other sites are not loaded here (the client makes no request off this instance); others' clients may show it.</p>
          <label>E-mail <input name="email" type="email" defaultValue={me.email ?? ""} autocomplete="email" /></label>
        </fieldset>
        <fieldset>
          <legend>Language and time</legend>
          <label>Language (messages are translated into it on request)
            <input name="language" list="languages" defaultValue={prefs.language ?? "en"} required /></label>
          <datalist id="languages">{LANGUAGES.map((l) => <option value={l} />)}</datalist>
          <label>Time zone <input name="timezone" list="zones" defaultValue={prefs.timezone ?? "UTC"} required /></label>
          <datalist id="zones">{zones().map((z) => <option value={z} />)}</datalist>
        </fieldset>
        <fieldset>
          <legend>Notifications</legend>
          <label class="check"><input type="checkbox" name="push" defaultChecked={prefs.notification?.push} /> Push notifications</label>
          <label class="check"><input type="checkbox" name="notify_email" defaultChecked={prefs.notification?.email} /> E-mail notifications</label>
          <label class="check"><input type="checkbox" name="notification_preview" defaultChecked={prefs.privacy?.notification_preview !== false} />
            {" "}Show who wrote and what in notifications (off: only how many messages wait)</label>
          <p class="muted small">You are notified only while none of your devices is connected.</p>
        </fieldset>
        <fieldset>
          <legend>Privacy</legend>
          <label class="check"><input type="checkbox" name="allow_offline_response" defaultChecked={prefs.privacy?.allow_offline_response} />
            {" "}My agent may answer for me while I am offline</label>
          <label class="check"><input type="checkbox" name="message_requests" defaultChecked={prefs.privacy?.message_requests ?? true} />
            {" "}Hold first messages from strangers as requests</label>
        </fieldset>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Save</button>
        {status && <span role="status"> {status}</span>}
      </form>
      <PushDevice />
      <PasswordForm />
    </section>
  );
}

/** This browser's Web Push subscription (docs/notifications.md): the browser asks for
 * permission, subscribes with the instance's VAPID key and the subscription is registered for
 * this device session (it ends with the session). */
function PushDevice() {
  const [status, setStatus] = useState("");
  if (!pushSupported()) return null;
  async function run(on: boolean) {
    setStatus("…");
    try {
      if (!on) {
        await disablePush(store.api);
        setStatus("This browser will not be notified.");
        return;
      }
      const state = await enablePush(store.api);
      setStatus({
        subscribed: "This browser will be notified.",
        denied: "The browser refused permission to show notifications.",
        disabled: "This instance does not send Web Push notifications.",
        unsupported: "This browser cannot receive push notifications.",
      }[state]);
    } catch (err) {
      setStatus(`This browser could not subscribe: ${(err as Error).message}`);
    }
  }
  return (
    <fieldset aria-label="Push on this browser">
      <legend>Push on this browser</legend>
      <button type="button" onClick={() => run(true)}>Notify this browser</button>{" "}
      <button type="button" onClick={() => run(false)}>Stop</button>
      {status && <p role="status">{status}</p>}
    </fieldset>
  );
}

/** PUT /v1/me/password: the current password is checked; every other session then ends. */
function PasswordForm() {
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");
  async function change(ev: Event) {
    ev.preventDefault();
    const form = ev.target as HTMLFormElement;
    const f = new FormData(form);
    setStatus("");
    let revoked = 0;
    const ok = await attempt(setError, async () => {
      const r = await store.api.call("PUT", "/v1/me/password", {
        current_password: f.get("current_password"), new_password: f.get("new_password") });
      revoked = r.revoked;
    });
    if (ok) {
      form.reset();
      setStatus(`Password changed; ${revoked === 1 ? "1 other session was" : `${revoked} other sessions were`} signed out.`);
    }
  }
  return (
    <form onSubmit={change} aria-label="Change password">
      <fieldset>
        <legend>Password</legend>
        <label>Current password <input name="current_password" type="password" autocomplete="current-password" required /></label>
        <label>New password <input name="new_password" type="password" autocomplete="new-password" minLength={8} required /></label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Change password</button>
        {status && <span role="status"> {status}</span>}
      </fieldset>
    </form>
  );
}

function sameOrigin(url: string): boolean {
  try {
    return new URL(url, location.href).origin === location.origin;
  } catch {
    return false;
  }
}
