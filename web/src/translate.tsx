// Translations on request: a message of someone else, translated by my agent's `translation`
// model into my preferred language (Settings), stored as a linked variant on the server and
// shown under the original, which never changes (docs/agents.md "Translations").
import { useEffect, useState } from "preact/hooks";
import { Message } from "./store";
import { attempt, useStore } from "./ui";

/** My preferred language (profile preferences), else the browser's, as a BCP 47 tag. */
export function myLanguage(me: any): string {
  return me?.preferences?.language || navigator.language || "en";
}

export function canTranslate(m: Message, mine: boolean): boolean {
  return !mine && !m.deleted && !!m.content && ["text", "code", "citation"].includes(m.content_type);
}

export function TranslateButton({ m }: { m: Message }) {
  const s = useStore();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const to = myLanguage(s.me);
  async function translate() {
    setBusy(true);
    await attempt(setError, async () => {
      const r = await s.api.call("POST", `/v1/conversations/${m.conversation_id}/messages/${m.id}/translation`, { to });
      s.translations.set(m.id, r.translation);
      s.changed();
    });
    setBusy(false);
  }
  if (s.translations.has(m.id)) return null;
  return (
    <>
      <button onClick={translate} disabled={busy} aria-label={`Translate into ${to}`}>{busy ? "Translating…" : "Translate"}</button>
      {error && <span role="alert" class="error">{error}</span>}
    </>
  );
}

export function TranslationView({ m }: { m: Message }) {
  const s = useStore();
  const t = s.translations.get(m.id);
  if (!t) return null;
  return (
    <div class="translation" data-testid="translation" lang={t.to}>
      <p class="text">{t.text}</p>
      <p class="muted small">Translated into {t.to}{t.model ? ` by ${t.provider}/${t.model}` : ""}{" "}
        <button class="link" onClick={() => { s.translations.delete(m.id); s.changed(); }}>Show original only</button></p>
    </div>
  );
}

/** "Translate new messages" in a conversation: others' new messages are then translated into
 * my language by the server (PUT/DELETE …/auto-translation) and arrive as `message.translated`. */
export function AutoTranslate({ id }: { id: string }) {
  const s = useStore();
  const [language, setLanguage] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState("");
  const path = `/v1/conversations/${id}/auto-translation`;
  useEffect(() => {
    void s.api.call("GET", path).then((r) => setLanguage(r.language ?? null), () => setLanguage(null));
  }, [id]);
  if (language === undefined) return null;
  const to = myLanguage(s.me);
  async function toggle(on: boolean) {
    await attempt(setError, async () => {
      if (on) setLanguage((await s.api.call("PUT", path, { to })).language);
      else {
        await s.api.call("DELETE", path);
        setLanguage(null);
      }
    });
  }
  return (
    <label class="check inline auto-translate">
      <input type="checkbox" checked={!!language} onChange={(e) => void toggle((e.target as HTMLInputElement).checked)} />
      {" "}Translate new messages into {language ?? to}
      {error && <span role="alert" class="error"> {error}</span>}
    </label>
  );
}
