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
