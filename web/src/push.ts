// Web Push for this browser (docs/notifications.md): subscribe the device session with the
// instance's VAPID key, so Confer can notify while no tab is connected. Not imported by
// main.tsx yet; a settings toggle calls enablePush(api) / disablePush(api).
import type { Api } from "./api";

export type PushState = "subscribed" | "unsupported" | "denied" | "disabled";

const WORKER = "/static/push-sw.js";

function keyBytes(base64url: string): ArrayBuffer {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  const bytes = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes.buffer;
}

export function pushSupported(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

/** Ask for permission, subscribe with the VAPID key and register the subscription. */
export async function enablePush(api: Api): Promise<PushState> {
  if (!pushSupported()) return "unsupported";
  const key = await api.raw("GET", "/v1/push/vapid-public-key", undefined, {}, false);
  if (!key.enabled) return "disabled";
  if ((await Notification.requestPermission()) !== "granted") return "denied";
  const registration = await navigator.serviceWorker.register(WORKER, { scope: "/static/" });
  await navigator.serviceWorker.ready;
  let subscription = await registration.pushManager.getSubscription();
  if (subscription === null) {
    subscription = await registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: keyBytes(key.public_key),
    });
  }
  await api.call("POST", "/v1/push/subscriptions", subscription.toJSON());
  return "subscribed";
}

/** Remove this device's subscription here and at the push service. */
export async function disablePush(api: Api): Promise<void> {
  if (!pushSupported()) return;
  const registration = await navigator.serviceWorker.getRegistration("/static/");
  const subscription = await registration?.pushManager.getSubscription();
  await subscription?.unsubscribe();
  try {
    await api.call("DELETE", "/v1/push/subscriptions");
  } catch {
    /* already gone: nothing to remove */
  }
}
