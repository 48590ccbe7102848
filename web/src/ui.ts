// What every screen shares: the one client store, a hook that re-renders on its changes,
// hash navigation and error text. Kept apart from main.tsx so screens in their own modules can
// use them without importing the entry point.
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";
import { Store } from "./store";

export const store = new Store();

export function useStore(): Store {
  const [, tick] = useState(0);
  useEffect(() => {
    const off = store.subscribe(() => tick((n) => n + 1));
    return () => void off();
  }, []);
  return store;
}

export const go = (path: string) => (location.hash = path);

/** A readable sentence for an error: the problem's detail (RFC 9457) when the server sent one. */
export const errorText = (err: unknown): string => {
  if (err instanceof ApiError) return err.problem.detail || err.problem.title || err.message;
  return err instanceof Error ? err.message : String(err);
};

/** Run an action, reporting its failure through ``fail`` (and clearing it first). */
export async function attempt(fail: (text: string) => void, fn: () => Promise<unknown>): Promise<boolean> {
  fail("");
  try {
    await fn();
    return true;
  } catch (err) {
    fail(errorText(err));
    return false;
  }
}

/** The host part of a did:web (``localhost%3A8001`` → ``localhost:8001``). */
export function didHost(did: string | null | undefined): string {
  return decodeURIComponent(String(did ?? "").split(":")[2] ?? "");
}

/** ``url`` when it is an absolute http(s) address, else null: only such a URL from a message
 * (a citation's) becomes a link — a javascript: or data: URL would run in this page when
 * clicked, whatever the server accepted when it was stored. */
export function webUrl(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const parsed = new URL(url);
    return (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.host ? parsed.href : null;
  } catch {
    return null;
  }
}

/** A file's size as a person reads it: bytes below 1 KiB ("2 bytes"), KiB below 1 MiB, then
 * MiB with one decimal ("24.5 MiB"). */
export function formatSize(bytes: number): string {
  if (bytes < 1024) return bytes === 1 ? "1 byte" : `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${Math.ceil(bytes / 1024)} KiB`;
  const mib = bytes / (1024 * 1024);
  return `${Number.isInteger(mib) ? mib : mib.toFixed(1)} MiB`;
}

/** What a group member is, beside their role: "agent" for an own agent, "on <host>" for
 * someone on another instance (a peer), nothing for a person of this instance. */
export function memberKind(p: { participant_type: string; did?: string | null }): string {
  if (p.participant_type === "peer_agent") return `on ${didHost(p.did) || "another instance"}`;
  if (p.participant_type === "own_agent") return "agent";
  return "";
}
