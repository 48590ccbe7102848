// One WebSocket per tab (docs/websocket.md): subprotocol auth, resume by epoch + offset,
// resync_required, heartbeat answers, reconnect with backoff.

export type ConnectionState = "connecting" | "online" | "offline";

export interface Frame {
  type: string;
  offset?: number;
  data?: any;
}

export class Socket {
  state: ConnectionState = "offline";
  epoch: string | null = null;
  offset = 0;
  private ws: WebSocket | null = null;
  private attempts = 0;
  private timer: number | undefined;
  private stopped = false;

  constructor(
    private token: () => Promise<string | null>,
    private refresh: () => Promise<boolean>,
    private handlers: {
      onState: (s: ConnectionState) => void;
      onReady: (fresh: boolean) => void | Promise<void>;
      onEvent: (f: Frame) => void;
      onResync: () => void | Promise<void>;
    },
  ) {
    window.addEventListener("online", () => this.kick());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.kick();
    });
  }

  private setState(s: ConnectionState) {
    this.state = s;
    this.handlers.onState(s);
  }

  /** Reconnect now if the socket is down (network back, tab visible again). */
  kick() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.timer);
    this.attempts = 0;
    void this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ws?.close(1000);
    this.ws = null;
  }

  async connect() {
    if (this.stopped || this.ws) return;
    this.setState("connecting");
    const token = await this.token();
    if (!token) return this.setState("offline");
    const url = new URL("/v1/ws", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    if (this.epoch) {
      url.searchParams.set("epoch", this.epoch);
      url.searchParams.set("offset", String(this.offset));
    }
    const ws = new WebSocket(url, ["confer.v1", `bearer.${token}`]);
    this.ws = ws;
    let readied = false;
    ws.onmessage = async (msg) => {
      const frame: Frame = JSON.parse(msg.data);
      if (frame.type === "ping") return ws.send(JSON.stringify({ type: "pong" }));
      if (frame.type === "ready") {
        readied = true;
        this.attempts = 0;
        const fresh = this.epoch !== frame.data.epoch;
        if (fresh) {
          this.epoch = frame.data.epoch;
          this.offset = frame.data.offset;
        }
        this.setState("online");
        await this.handlers.onReady(fresh);
        return;
      }
      if (frame.type === "resync_required") {
        this.epoch = frame.data.epoch;
        this.offset = frame.data.offset;
        await this.handlers.onResync();
        return;
      }
      if (frame.offset !== undefined) {
        if (frame.offset <= this.offset) return; // already processed
        this.offset = frame.offset;
      }
      this.handlers.onEvent(frame);
    };
    ws.onclose = async (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.setState("offline");
      if (this.stopped) return;
      // A refused handshake (expired token) shows as 1006 before ready; 4001 after.
      if (ev.code === 4001 || !readied) await this.refresh();
      const delay = Math.min(10_000, 500 * 2 ** this.attempts++) * (0.75 + Math.random() / 2);
      this.timer = window.setTimeout(() => void this.connect(), delay);
    };
  }

  typing(conversationId: string) {
    if (this.ws?.readyState === WebSocket.OPEN)
      this.ws.send(JSON.stringify({ type: "typing", conversation_id: conversationId }));
  }
}
