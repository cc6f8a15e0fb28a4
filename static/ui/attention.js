// Telling the operator that a request waits, on every page: the tab title carries the
// number of pending requests waiting for this user ("(3) Threads · Countersign", the
// same number as the queue's "I can decide" view), and
// opt-in browser notifications (Notification API) announce each new one. The queue's
// live stream (ws/approvals/) is the doorbell; what this user can decide is the
// server's answer (data-attention-url), so the count and the queue never disagree.
// Loaded only for users who may decide (the server leaves data-attention-url out
// otherwise). Data goes in with textContent / Notification text (SEC-03).

import { ReconnectingSocket, apiFetch } from "./common.js";

const STORAGE_KEY = "countersign.notifications";
const url = document.body.dataset.attentionUrl;
const toggle = document.getElementById("notify-toggle");
const baseTitle = document.title.replace(/^\(\d+\)\s+/, "");

const state = {
  known: null, // Set of request ids seen so far; null until the first answer
  count: 0,
};

function setCount(n) {
  state.count = n;
  document.title = n > 0 ? `(${n}) ${baseTitle}` : baseTitle;
  document.body.dataset.attentionCount = String(n);
  document.dispatchEvent(new CustomEvent("countersign:attention", { detail: { count: n } }));
}

// -- browser notifications ------------------------------------------------------------

function supported() {
  return "Notification" in window;
}

function wanted() {
  return localStorage.getItem(STORAGE_KEY) === "on";
}

function enabled() {
  return supported() && wanted() && Notification.permission === "granted";
}

function renderToggle() {
  if (!toggle) return;
  if (!supported()) {
    toggle.hidden = true;
    return;
  }
  toggle.hidden = false;
  const denied = Notification.permission === "denied";
  const on = enabled();
  toggle.setAttribute("aria-pressed", on ? "true" : "false");
  toggle.disabled = denied;
  toggle.textContent = denied ? "Notifications blocked" : on ? "Notifications on" : "Notify me";
  toggle.title = denied
    ? "This browser blocks notifications for this site; allow them in the site settings."
    : on
      ? "You get a browser notification for each new request. Click to turn off."
      : "Get a browser notification when a request waits for you.";
}

async function onToggle() {
  if (enabled()) {
    localStorage.setItem(STORAGE_KEY, "off");
  } else {
    let permission = Notification.permission;
    if (permission === "default") permission = await Notification.requestPermission();
    localStorage.setItem(STORAGE_KEY, permission === "granted" ? "on" : "off");
  }
  renderToggle();
}

function notify(request) {
  if (!enabled()) return;
  const where = request.threadTitle ? ` in “${request.threadTitle}”` : "";
  const note = new Notification(`Approval needed: ${request.tool}`, {
    body: `${request.label || request.tool}${where}`,
    tag: `countersign-approval-${request.id}`,
  });
  note.addEventListener("click", () => {
    window.focus();
    location.assign(request.url);
  });
}

// -- the count ------------------------------------------------------------------------

function apply(data) {
  const requests = (data && Array.isArray(data.requests) ? data.requests : []).filter((r) => r.canDecide);
  const ids = new Set(requests.map((r) => r.id));
  if (state.known !== null) {
    for (const request of requests) if (!state.known.has(request.id)) notify(request);
  }
  state.known = new Set([...(state.known || []), ...ids]);
  // The server's count is the queue's "I can decide" total (past the 500 listed too).
  setCount(data && Number.isInteger(data.count) ? data.count : requests.length);
}

let timer = null;
let busy = false;
let again = false;

async function refresh() {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    apply(await apiFetch(url));
  } catch {
    // The socket's reconnection (and its banner) covers outages; the next ring retries.
  } finally {
    busy = false;
    if (again) {
      again = false;
      refreshSoon(50);
    }
  }
}

function refreshSoon(delay = 200) {
  clearTimeout(timer);
  timer = setTimeout(refresh, delay);
}

if (url) {
  if (toggle) toggle.addEventListener("click", onToggle);
  renderToggle();
  new ReconnectingSocket({
    url: () => "/ws/approvals/",
    // Any change of the queue may change what waits for this user: ask the server.
    onMessage: (data) => {
      if (data && (data.kind === "snapshot" || data.kind === "notification")) refreshSoon();
    },
  }).start();
  refresh();
}
