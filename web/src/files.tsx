// A file message: download with the bearer token (the API needs it, so not a plain link), and
// for a file a peer sent, wait while this instance is still fetching its bytes from the
// sender's instance (409 attachment_pending, docs/federation.md "Files").
import { useState } from "preact/hooks";
import { ApiError } from "./api";
import { Message } from "./store";
import { errorText, formatSize, store } from "./ui";

const PENDING_WAIT_MS = 60_000;

/** The attachment's bytes; retries while they are still on their way (1 s apart, 60 s in all). */
async function fetchBytes(id: string, waiting: () => void): Promise<Blob> {
  const deadline = Date.now() + PENDING_WAIT_MS;
  for (;;) {
    try {
      return await store.api.call("GET", `/v1/attachments/${id}`);
    } catch (err) {
      const pending = err instanceof ApiError && err.problem.code === "attachment_pending";
      if (!pending || Date.now() > deadline) throw err;
      waiting();
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

function save(blob: Blob, filename: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function FileBody({ m }: { m: Message }) {
  const j = m.content_json ?? {};
  const [status, setStatus] = useState("");
  async function download() {
    setStatus("");
    try {
      save(await fetchBytes(j.attachment_id, () => setStatus("Still arriving from the sender's instance…")), j.filename);
      setStatus("");
    } catch (err) {
      setStatus(`Download failed: ${errorText(err)}`);
    }
  }
  return (
    <p>{m.content && <span>{m.content} </span>}
      <button class="file" onClick={download}>
        Download {j.filename}{typeof j.size_bytes === "number" ? ` (${formatSize(j.size_bytes)})` : ""}
      </button>
      {status && <span class="muted" role="status"> {status}</span>}
    </p>
  );
}
