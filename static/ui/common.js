// Shared helpers of the operator UI: CSRF-aware fetch, a reconnecting socket with
// exponential backoff, the offline banner, safe DOM building and time formatting.
// Data is only ever inserted with textContent / text nodes (SEC-03).

export function csrfToken() {
  return document.body.dataset.csrfToken || "";
}

export class ApiError extends Error {
  constructor(status, body) {
    const detail = (body && (body.detail || body.message)) || `HTTP ${status}`;
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.status = status;
    this.body = body || {};
  }
}

/** Send a JSON request with the session cookie and the CSRF header; return the parsed body. */
export async function apiFetch(url, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    headers["X-CSRFToken"] = csrfToken();
  }
  const response = await fetch(url, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: `Unexpected response (HTTP ${response.status})` };
    }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** Describe an API error for people: the detail plus any field errors it does not already say.
 *
 * A domain error about one field (edited arguments, a reason) carries the same sentence as
 * `detail` and as that field's message; it is shown once. */
export function errorText(error) {
  if (!(error instanceof ApiError)) return String(error && error.message ? error.message : error);
  let text = error.message;
  const fields = error.body && error.body.fields;
  if (fields && typeof fields === "object") {
    const parts = [];
    for (const [k, v] of Object.entries(fields)) {
      const messages = (Array.isArray(v) ? v : [v])
        .map((m) => (typeof m === "string" ? m : JSON.stringify(m)))
        .filter((m) => m && !text.includes(m));
      if (messages.length) parts.push(`${k}: ${messages.join(" ")}`);
    }
    if (parts.length) text += ` (${parts.join("; ")})`;
  }
  return text;
}

/** Create an element with attributes and children (strings become text nodes). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function readJsonScript(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

export function prettyJson(value) {
  return JSON.stringify(value, null, 2);
}

/** Pretty-print argument text when it parses as JSON; otherwise return it unchanged. */
export function prettyArguments(text) {
  if (!text) return "{}";
  try {
    return prettyJson(JSON.parse(text));
  } catch {
    return text;
  }
}

/**
 * ``text`` ending as one sentence: a full stop added only when it has none, so a
 * reason that ends in its own full stop never gives "..". The server's rule is the
 * same (core.text.sentence).
 */
export function sentence(text) {
  const trimmed = String(text ?? "").trimEnd();
  if (!trimmed || /[.!?…]["'”’)\]»]*$/.test(trimmed)) return trimmed;
  return `${trimmed}.`;
}

/**
 * Read an approver's edit before approving it: ``{arguments, risk, review,
 * needsConfirmation}`` graded by the server on the edited arguments (what would run),
 * so a confirmation never shows the proposal's risk for an edit. Throws ApiError
 * (400 naming the field) for an edit the approval would refuse.
 */
export function editPreview(approvalId, edited) {
  return apiFetch(`/approvals/${approvalId}/preview.json`, { method: "POST", body: { arguments: edited } });
}

/**
 * What a confirmation of an approval says, on every surface: ``{title, text, lines}``.
 * ``risk`` and ``review`` are those of the arguments that would run (the edit's, from
 * editPreview, when ``edited`` is given); ``lines`` are the checks to make first, the
 * risk's reasons (an over-threshold amount among them) and, for an edit, the arguments.
 */
export function approvalConfirmation({ tool, risk, review, edited }) {
  const high = Boolean(risk && (risk.level === "high" || risk.level === "critical"));
  const summary = review && review.summary ? `${sentence(review.summary)} ` : "";
  return {
    title: `Approve ${tool}${edited !== undefined ? " as edited" : ""}?`,
    text: `${summary}${high ? `This call is ${risk.level} risk.` : "This call changes or deletes data."} Approve it?`,
    lines: [
      ...((review && review.warnings) || []).map((w) => sentence(`Check first: ${w}`)),
      ...((risk && risk.reasons) || []),
      ...(edited !== undefined ? [`Runs with the edited arguments: ${JSON.stringify(edited)}`] : []),
    ],
  };
}

/** The one way a time is shown: the viewer's local time; the exact UTC time on hover. */
export function localTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const today = new Date().toDateString() === date.toDateString();
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return today ? time : `${date.toLocaleDateString([], { month: "short", day: "numeric" })}, ${time}`;
}

/** ``2026-12-03 09:14:26 UTC``: the hover text of every time shown. */
export function utcTitle(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** A ``<time>`` element in the one format (local time, exact UTC on hover). */
export function timeElement(iso, text) {
  const el = document.createElement("time");
  el.dateTime = iso || "";
  el.title = utcTitle(iso);
  el.textContent = text ?? localTime(iso);
  return el;
}

export function relativeTime(iso, now = Date.now()) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const seconds = Math.round((now - then) / 1000);
  const abs = Math.abs(seconds);
  const [value, unit] =
    abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.floor(abs / 60), "min"] : abs < 86400 ? [Math.floor(abs / 3600), "h"] : [Math.floor(abs / 86400), "d"];
  return seconds >= 0 ? `${value} ${unit} ago` : `in ${value} ${unit}`;
}

export function countdown(iso, now = Date.now()) {
  const left = Math.round((Date.parse(iso) - now) / 1000);
  if (Number.isNaN(left)) return "";
  if (left <= 0) return "expired";
  const d = Math.floor(left / 86400);
  const hh = Math.floor((left % 86400) / 3600);
  const mm = Math.floor((left % 3600) / 60);
  const ss = left % 60;
  const pad = (n) => String(n).padStart(2, "0");
  return `${d ? `${d}d ` : ""}${pad(hh)}:${pad(mm)}:${pad(ss)}`;
}

/** Whether a key event comes from somewhere the user types (shortcuts must not fire). */
export function isTyping(event) {
  const target = event.target;
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  const tag = target.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (target.getAttribute("type") || "text").toLowerCase();
    return !["checkbox", "radio", "button", "submit", "reset"].includes(type);
  }
  return false;
}

const banner = () => document.getElementById("offline-banner");

export function showBanner(text) {
  const el = banner();
  if (!el) return;
  el.textContent = text;
  el.hidden = false;
}

export function hideBanner() {
  const el = banner();
  if (el) el.hidden = true;
}

/** Close codes after which reconnecting cannot help. */
const FATAL_CLOSE = {
  4401: "Signed out — reload the page to sign in again.",
  4403: "You may not watch this page any more.",
  4404: "This thread no longer exists or is not visible to you.",
  4400: "The page asked for something the server did not understand; reload it.",
};

/**
 * A WebSocket that reconnects with exponential backoff (0.5 s doubling to 15 s, with
 * jitter) and shows the offline banner while it is down. ``url()`` is called on every
 * (re)connect, so callers can resume from their last ``seq``.
 */
export class ReconnectingSocket {
  constructor({ url, onMessage, onOpen, onDown }) {
    this.url = url;
    this.onMessage = onMessage;
    this.onOpen = onOpen || (() => {});
    this.onDown = onDown || (() => {});
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.stopped = false;
    this.everOpened = false;
    window.addEventListener("online", () => this.reconnectSoon(0));
  }

  start() {
    this.connect();
  }

  connect() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    let ws;
    try {
      ws = new WebSocket(`${scheme}//${location.host}${this.url()}`);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.attempt = 0;
      this.everOpened = true;
      hideBanner();
      document.body.dataset.socket = "open";
      this.onOpen();
    });
    ws.addEventListener("message", (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      this.onMessage(data);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      document.body.dataset.socket = "closed";
      this.onDown();
      if (FATAL_CLOSE[event.code]) {
        this.stopped = true;
        showBanner(FATAL_CLOSE[event.code]);
        return;
      }
      showBanner("Offline — reconnecting…");
      this.scheduleReconnect();
    });
  }

  scheduleReconnect() {
    if (this.stopped) return;
    const base = Math.min(15000, 500 * 2 ** this.attempt);
    this.attempt += 1;
    this.reconnectSoon(base * (0.5 + Math.random() / 2));
  }

  reconnectSoon(delay) {
    if (this.stopped || (this.ws && this.ws.readyState <= WebSocket.OPEN)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  send(data) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(data));
  }
}
