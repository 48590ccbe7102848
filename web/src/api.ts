// REST access with per-device tokens and silent refresh (docs/accounts.md, "Device sessions").

export interface Tokens {
  access_token: string;
  refresh_token: string;
  expires_at: number; // epoch ms when the access token expires
}

export interface Problem {
  status: number;
  code?: string;
  title?: string;
  detail?: string;
}

export class ApiError extends Error {
  constructor(public problem: Problem) {
    super(problem.detail || problem.title || problem.code || `HTTP ${problem.status}`);
  }
}

const TOKENS = "confer.tokens";
const DEVICE = "confer.device";

/** This browser profile's device id: one session per device, kept across logins. */
export function deviceId(): string {
  let id = localStorage.getItem(DEVICE);
  if (!id) {
    id = "web-" + crypto.randomUUID().slice(0, 8);
    localStorage.setItem(DEVICE, id);
  }
  return id;
}

function readTokens(): Tokens | null {
  try {
    return JSON.parse(localStorage.getItem(TOKENS) || "null");
  } catch {
    return null;
  }
}

type Listener = () => void;

export class Api {
  tokens: Tokens | null = readTokens();
  private refreshing: Promise<boolean> | null = null;
  onSignedOut: Listener = () => {};

  private store(pair: { access_token: string; refresh_token: string; expires_in: number } | null) {
    this.tokens = pair && {
      access_token: pair.access_token,
      refresh_token: pair.refresh_token,
      expires_at: Date.now() + pair.expires_in * 1000,
    };
    if (this.tokens) localStorage.setItem(TOKENS, JSON.stringify(this.tokens));
    else localStorage.removeItem(TOKENS);
  }

  async register(username: string, password: string, display_name?: string) {
    const body = { username, password, device_id: deviceId(), platform: "web", display_name };
    this.store(await this.raw("POST", "/v1/auth/register", body, {}, false));
  }

  async login(username: string, password: string) {
    const body = { username, password, device_id: deviceId(), platform: "web" };
    this.store(await this.raw("POST", "/v1/auth/login", body, {}, false));
  }

  async logout() {
    try {
      await this.call("POST", "/v1/auth/logout");
    } finally {
      this.store(null);
    }
  }

  /** A valid access token, refreshed when it has less than a minute left. */
  async accessToken(): Promise<string | null> {
    const latest = readTokens(); // another tab may have rotated the pair already
    if (latest && this.tokens && latest.refresh_token !== this.tokens.refresh_token) this.tokens = latest;
    if (!this.tokens) return null;
    if (this.tokens.expires_at - Date.now() < 60_000) await this.refresh();
    return this.tokens?.access_token ?? null;
  }

  /** Rotate the refresh token once, however many callers ask at the same time. */
  refresh(): Promise<boolean> {
    if (!this.refreshing) {
      this.refreshing = (async () => {
        const held = this.tokens;
        if (!held) return false;
        try {
          const pair = await this.raw("POST", "/v1/auth/refresh", { refresh_token: held.refresh_token }, {}, false);
          this.store(pair);
          return true;
        } catch (err) {
          if (err instanceof ApiError && err.problem.status === 401) {
            this.store(null);
            this.onSignedOut();
          }
          return false;
        } finally {
          this.refreshing = null;
        }
      })();
    }
    return this.refreshing;
  }

  /** An authenticated call; a 401 triggers one refresh and one retry. */
  async call<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    try {
      return await this.raw(method, path, body, headers, true);
    } catch (err) {
      if (err instanceof ApiError && err.problem.status === 401 && this.tokens && (await this.refresh())) {
        return await this.raw(method, path, body, headers, true);
      }
      throw err;
    }
  }

  async raw(method: string, path: string, body: unknown, headers: Record<string, string>, auth: boolean): Promise<any> {
    const h: Record<string, string> = { ...headers };
    if (auth) {
      const token = await this.accessToken();
      if (token) h.Authorization = `Bearer ${token}`;
    }
    let payload: BodyInit | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      h["Content-Type"] = "application/json";
      payload = JSON.stringify(body);
    }
    const response = await fetch(path, { method, headers: h, body: payload });
    if (!response.ok) {
      let problem: Problem = { status: response.status };
      try {
        problem = { ...(await response.json()), status: response.status };
      } catch {
        /* not problem+json */
      }
      throw new ApiError(problem);
    }
    if (response.status === 204) return null;
    const type = response.headers.get("content-type") || "";
    return type.includes("json") ? response.json() : response.blob();
  }
}
