// The thread page: replays the thread's AG-UI event log from seq 0 over the socket,
// follows it live, and overlays what the log does not carry (call states, approvals,
// results written by the application, activity labels) from the server's state read
// and from notifications. A fresh load and a live session therefore build the same
// transcript through the same code. All data goes in with textContent (SEC-03).

import {
  ReconnectingSocket,
  apiFetch,
  errorText,
  h,
  prettyArguments,
  prettyJson,
  readJsonScript,
} from "./common.js";

const root = document.getElementById("thread");
const transcript = document.getElementById("transcript");
const pendingBox = document.getElementById("pending-messages");
const loading = document.getElementById("transcript-loading");
const statusEl = document.getElementById("thread-status");
const composer = document.getElementById("composer");
const input = document.getElementById("composer-input");
const send = document.getElementById("composer-send");
const reasonEl = document.getElementById("composer-reason");
const composerError = document.getElementById("composer-error");
const cancelForm = document.getElementById("cancel-pending");
const cancelReason = document.getElementById("cancel-pending-reason");
const cancelSend = document.getElementById("cancel-pending-send");
const cancelError = document.getElementById("cancel-pending-error");

const STATE_LABELS = {
  streaming: "streaming",
  complete: "complete",
  pending: "pending",
  awaiting_approval: "pending approval",
  approved: "approved",
  executing: "running",
  succeeded: "done",
  failed: "failed",
  declined: "declined",
  expired: "expired",
  cancelled: "cancelled",
  outcome_unknown: "outcome unknown",
};
// States only move forward; a stale read never moves a card back.
const STATE_RANK = {
  streaming: 0,
  complete: 1,
  pending: 2,
  awaiting_approval: 3,
  approved: 4,
  executing: 5,
  outcome_unknown: 6,
  succeeded: 7,
  failed: 7,
  declined: 7,
  expired: 7,
  cancelled: 7,
};
const STATUS_LABELS = {
  running: "running",
  waiting_for_approval: "waiting for approval",
  waiting_for_tools: "waiting for tools",
  idle: "idle",
  failed: "failed",
};

const model = {
  lastSeq: 0,
  messages: new Map(), // messageId -> {el, body}
  calls: new Map(), // toolCallId -> call view
  known: new Map(), // toolCallId -> server-side info (label, state, approval, result)
  status: "idle",
  runActive: false,
  posting: false,
  caughtUp: false,
};

// -- messages -------------------------------------------------------------------

function roleLabel(role) {
  return { user: "You", assistant: "Agent", system: "System", developer: "Developer", tool: "Tool" }[role] || role;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && p.type === "text" ? p.text : `[${p && p.type}]`)).join("\n");
  }
  return content == null ? "" : JSON.stringify(content);
}

function ensureMessage(id, role, { container = transcript, streaming = false } = {}) {
  let view = model.messages.get(id);
  if (view) return view;
  const body = h("div", { class: "msg-body" });
  const el = h(
    "article",
    { class: `msg msg-${role}${streaming ? " streaming" : ""}`, dataset: { messageId: id } },
    h("h3", { class: "msg-role", text: roleLabel(role) }),
    body,
  );
  container.append(el);
  view = { el, body, role };
  model.messages.set(id, view);
  return view;
}

function addFinishedMessage(message) {
  const pending = pendingBox.querySelector(`[data-message-id="${CSS.escape(message.id)}"]`);
  if (pending) {
    pending.remove();
    model.messages.delete(message.id);
  }
  if (model.messages.has(message.id)) return;
  const view = ensureMessage(message.id, message.role);
  view.body.textContent = contentText(message.content);
}

// -- tool call cards --------------------------------------------------------------

function ensureCall(id, name) {
  let call = model.calls.get(id);
  if (call) return call;
  const nameEl = h("span", { class: "call-name", text: name });
  const labelEl = h("span", { class: "call-label" });
  const badgeEl = h("span", { class: "badge badge-edited", text: "edited", hidden: true });
  const stateEl = h("span", { class: "call-state", role: "status" });
  const argsEl = h("pre", { class: "call-args" });
  const editedEl = h("div", { class: "call-edited", hidden: true });
  const resultEl = h("div", { class: "call-result", hidden: true });
  const el = h(
    "section",
    { class: "call", dataset: { toolCallId: id }, "aria-label": `Tool call ${name}` },
    h("header", { class: "call-head" }, h("span", { class: "call-icon", "aria-hidden": "true", text: "⚙" }), nameEl, labelEl, badgeEl, stateEl),
    h("div", { class: "call-args-wrap" }, h("h4", { class: "visually-hidden", text: "Arguments" }), argsEl),
    editedEl,
    resultEl,
  );
  transcript.append(el);
  call = { id, name, el, nameEl, labelEl, badgeEl, stateEl, argsEl, editedEl, resultEl, argsText: "", state: null, result: null, complete: false };
  model.calls.set(id, call);
  setCallState(call, "streaming");
  applyKnown(call);
  return call;
}

function setCallState(call, state) {
  if (!(state in STATE_RANK)) return;
  if (call.state && STATE_RANK[state] < STATE_RANK[call.state]) return;
  if (call.state && STATE_RANK[state] === STATE_RANK[call.state] && STATE_RANK[state] === 7 && call.state !== state) {
    // Two terminal states: the server's read decides (applyKnown passes force).
    return;
  }
  call.state = state;
  call.el.dataset.state = state;
  call.stateEl.textContent = STATE_LABELS[state] || state;
  call.stateEl.className = `call-state state-${state}`;
}

function forceCallState(call, state) {
  if (!(state in STATE_RANK)) return;
  if (call.state && STATE_RANK[state] < STATE_RANK[call.state]) return;
  call.state = null;
  setCallState(call, state);
}

function setArgsText(call, text) {
  call.argsText = text;
  call.argsEl.textContent = call.complete ? prettyArguments(text) : text;
}

function completeCall(call) {
  call.complete = true;
  call.argsEl.textContent = prettyArguments(call.argsText);
  call.argsEl.classList.add("complete");
  setCallState(call, "complete");
}

function renderPart(part) {
  if (!part || typeof part !== "object") return h("pre", { class: "part part-text", text: String(part) });
  const source = part.source && typeof part.source === "object" ? part.source : null;
  const meta = part.metadata && typeof part.metadata === "object" ? part.metadata : {};
  const filename = typeof meta.filename === "string" ? meta.filename : typeof meta.name === "string" ? meta.name : "";
  switch (part.type) {
    case "text":
      return h("pre", { class: "part part-text", text: typeof part.text === "string" ? part.text : "" });
    case "image": {
      const src = safeSource(source, "image/");
      if (!src) return h("p", { class: "part part-missing", text: "[image that cannot be shown]" });
      return h("figure", { class: "part part-image" }, h("img", { src, alt: filename || "Image returned by the tool" }));
    }
    case "document": {
      const href = safeSource(source, "");
      const label = filename || (source && source.mimeType) || "document";
      if (!href) return h("p", { class: "part part-missing", text: `[document: ${label}]` });
      return h("p", { class: "part part-document" }, h("a", { href, download: filename || true, rel: "noopener noreferrer", target: "_blank" }, `Open document: ${label}`));
    }
    default:
      return h("p", { class: "part part-other", text: `[${String(part.type)} part${source && source.mimeType ? ` (${source.mimeType})` : ""}]` });
  }
}

/** Return a URL for a data/url source that is safe to load, or "" (no javascript: etc.). */
function safeSource(source, mimePrefix) {
  if (!source) return "";
  if (source.type === "data" && typeof source.value === "string") {
    const mime = typeof source.mimeType === "string" ? source.mimeType : "application/octet-stream";
    if (!/^[\w.+-]+\/[\w.+-]+$/.test(mime) || !mime.startsWith(mimePrefix)) return "";
    if (!/^[A-Za-z0-9+/=\s]*$/.test(source.value)) return "";
    if (mimePrefix === "image/") return `data:${mime};base64,${source.value.replace(/\s/g, "")}`;
    try {
      const bytes = Uint8Array.from(atob(source.value.replace(/\s/g, "")), (c) => c.charCodeAt(0));
      return URL.createObjectURL(new Blob([bytes], { type: mime }));
    } catch {
      return "";
    }
  }
  if (source.type === "url" && typeof source.value === "string") {
    try {
      const url = new URL(source.value, location.href);
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : "";
    } catch {
      return "";
    }
  }
  return "";
}

function resultKey(result) {
  return JSON.stringify([result.content, result.error || null]);
}

function setResult(call, result) {
  if (!result) return;
  const key = resultKey(result);
  if (call.result === key) return;
  call.result = key;
  const box = call.resultEl;
  box.replaceChildren();
  box.hidden = false;
  const isError = Boolean(result.error);
  box.classList.toggle("is-error", isError);
  call.el.classList.toggle("has-error", isError);
  box.append(h("h4", { class: "result-head", text: isError ? `Error: ${result.error}` : "Result" }));
  const content = result.content;
  if (Array.isArray(content)) {
    for (const part of content) box.append(renderPart(part));
  } else {
    let text = typeof content === "string" ? content : content == null ? "" : prettyJson(content);
    if (typeof content === "string") {
      try {
        const parsed = JSON.parse(content);
        if (parsed && typeof parsed === "object") text = prettyJson(parsed);
      } catch {
        // plain text
      }
    }
    box.append(h("pre", { class: "part part-text", text }));
  }
  if (!call.complete) completeCall(call);
  if (isError) {
    if (!["declined", "expired", "failed", "cancelled"].includes(call.state)) setCallState(call, "failed");
  } else {
    setCallState(call, "succeeded");
  }
}

function setApproval(call, approval) {
  if (!approval) return;
  const edited = approval.editedArguments !== null && approval.editedArguments !== undefined;
  call.badgeEl.hidden = !edited;
  call.el.classList.toggle("is-edited", edited);
  if (!edited) {
    call.editedEl.hidden = true;
    return;
  }
  const key = JSON.stringify([approval.proposedArguments, approval.editedArguments]);
  if (call.editedEl.dataset.key === key) return;
  call.editedEl.dataset.key = key;
  call.editedEl.replaceChildren(
    h("div", { class: "edited-col" }, h("h4", { text: "Proposed by the agent" }), h("pre", { class: "call-args", text: prettyJson(approval.proposedArguments) })),
    h("div", { class: "edited-col" }, h("h4", { text: `Approved as edited${approval.decidedBy ? ` by ${approval.decidedBy}` : ""}` }), h("pre", { class: "call-args", text: prettyJson(approval.editedArguments) })),
  );
  call.editedEl.hidden = false;
}

/** Apply the server's read of a call (label, state, approval, result) to its card. */
function applyKnown(call) {
  const info = model.known.get(call.id);
  if (!info) return;
  if (info.runId) call.el.dataset.runId = info.runId; // the client-visible run (issue 13.1)
  if (info.label) call.labelEl.textContent = info.label;
  if (info.result) setResult(call, info.result);
  if (info.state) forceCallState(call, info.state);
  if (info.approval) setApproval(call, info.approval);
}

// -- events ---------------------------------------------------------------------

function applyEvent(event) {
  switch (event.type) {
    case "RUN_STARTED": {
      model.runActive = true;
      setStatus("running");
      const messages = (event.input && event.input.messages) || [];
      for (const message of messages) {
        if (!message || typeof message !== "object" || !message.id) continue;
        if (message.role === "tool") {
          const call = model.calls.get(message.toolCallId) || ensureCall(message.toolCallId, "tool");
          setResult(call, { content: message.content, error: message.error || null });
        } else if (message.role === "assistant") {
          if (!model.messages.has(message.id) && message.content) addFinishedMessage(message);
          for (const tc of message.toolCalls || []) {
            if (model.calls.has(tc.id)) continue;
            const call = ensureCall(tc.id, (tc.function && tc.function.name) || "tool");
            setArgsText(call, (tc.function && tc.function.arguments) || "");
            completeCall(call);
          }
        } else if (!model.messages.has(message.id) || pendingBox.querySelector(`[data-message-id="${CSS.escape(message.id)}"]`)) {
          addFinishedMessage(message);
        }
      }
      break;
    }
    case "TEXT_MESSAGE_START": {
      ensureMessage(event.messageId, event.role || "assistant", { streaming: true });
      break;
    }
    case "TEXT_MESSAGE_CONTENT": {
      const view = ensureMessage(event.messageId, "assistant", { streaming: true });
      view.body.append(event.delta || "");
      break;
    }
    case "TEXT_MESSAGE_END": {
      const view = model.messages.get(event.messageId);
      if (view) {
        view.el.classList.remove("streaming");
        view.body.normalize();
      }
      break;
    }
    case "TOOL_CALL_START": {
      const call = ensureCall(event.toolCallId, event.toolCallName || "tool");
      if (call.complete) {
        call.complete = false; // TC-06: a reopened call streams more arguments
        call.argsEl.textContent = call.argsText;
        call.state = null;
        setCallState(call, "streaming");
      }
      break;
    }
    case "TOOL_CALL_ARGS": {
      const call = ensureCall(event.toolCallId, "tool");
      setArgsText(call, call.argsText + (event.delta || ""));
      break;
    }
    case "TOOL_CALL_END": {
      const call = ensureCall(event.toolCallId, "tool");
      completeCall(call);
      refreshSoon();
      break;
    }
    case "TOOL_CALL_RESULT": {
      const call = ensureCall(event.toolCallId, "tool");
      const error = event.metadata && typeof event.metadata === "object" ? event.metadata.error : null;
      setResult(call, { content: event.content, error: error || null });
      break;
    }
    case "RUN_FINISHED": {
      model.runActive = false;
      for (const call of model.calls.values()) {
        if (call.state === "complete" && !call.result) setCallState(call, "pending");
      }
      refreshSoon();
      break;
    }
    case "RUN_ERROR": {
      model.runActive = false;
      for (const call of model.calls.values()) {
        if ((call.state === "streaming" || call.state === "complete") && !call.result) {
          call.complete = true;
          call.argsEl.textContent = prettyArguments(call.argsText);
          setCallState(call, "cancelled");
        }
      }
      for (const view of model.messages.values()) view.el.classList.remove("streaming");
      transcript.append(
        h("div", { class: "run-error", role: "alert" }, h("strong", { text: "The run failed: " }), event.message || "unknown error", event.code ? ` (${event.code})` : ""),
      );
      refreshSoon();
      break;
    }
    default:
      break;
  }
}

function onNotification(note) {
  if (note.type !== "tool_call.state" || !note.toolCallId) return;
  const info = model.known.get(note.toolCallId) || {};
  if (note.state) info.state = note.state;
  if (note.approval) info.approval = note.approval;
  model.known.set(note.toolCallId, info);
  const call = model.calls.get(note.toolCallId);
  if (call) {
    if (note.state) forceCallState(call, note.state);
    if (note.approval) setApproval(call, note.approval);
  }
  refreshSoon();
}

// -- the server's read ------------------------------------------------------------

function applyServerState(data) {
  if (!data) return;
  for (const [id, info] of Object.entries(data.calls || {})) {
    model.known.set(id, info);
    const call = model.calls.get(id);
    if (call) applyKnown(call);
  }
  for (const message of data.pendingUserMessages || []) {
    if (model.messages.has(message.id)) continue;
    const view = ensureMessage(message.id, "user", { container: pendingBox });
    view.body.textContent = contentText(message.content);
  }
  if (data.status) setStatus(data.status, { fromServer: true });
}

let refreshTimer = null;
let refreshing = false;
let refreshAgain = false;

function refreshSoon(delay = 150) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, delay);
}

async function refresh() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  try {
    applyServerState(await apiFetch(root.dataset.stateUrl));
  } catch {
    // The socket's reconnection reports outages; the next event retries.
  } finally {
    refreshing = false;
    if (refreshAgain) {
      refreshAgain = false;
      refreshSoon(50);
    }
  }
}

// -- status and composer ----------------------------------------------------------

function setStatus(status, { fromServer = false } = {}) {
  if (fromServer && model.runActive && status !== "running") {
    // A read taken before the run's end arrived; the RUN_FINISHED refresh corrects it.
    status = "running";
  }
  model.status = status;
  statusEl.textContent = STATUS_LABELS[status] || status;
  statusEl.className = `status status-${status}`;
  updateComposer();
}

function composerBlockReason() {
  if (model.posting) return "Sending…";
  if (!model.caughtUp) return "Loading the conversation…";
  if (model.runActive || model.status === "running") return "The agent is working; you can write again when it finishes.";
  const waiting = [...model.calls.values()].filter((c) => ["pending", "awaiting_approval", "approved", "executing", "outcome_unknown"].includes(c.state));
  if (model.status === "waiting_for_approval") {
    const n = waiting.filter((c) => c.state === "awaiting_approval").length || 1;
    return `Waiting for an operator to approve ${n} tool call${n === 1 ? "" : "s"} — or cancel below.`;
  }
  if (model.status === "waiting_for_tools") return "Waiting for tool results before the agent continues.";
  return "";
}

function updateComposer() {
  const reason = composerBlockReason();
  const blocked = Boolean(reason);
  input.disabled = blocked;
  send.disabled = blocked;
  reasonEl.textContent = reason;
  composer.classList.toggle("is-blocked", blocked);
  // Calls waiting for an operator can be abandoned by the thread's owner.
  cancelForm.hidden = !(model.caughtUp && model.status === "waiting_for_approval");
}

cancelForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const reason = cancelReason.value.trim();
  if (!reason || cancelSend.disabled) return;
  cancelError.hidden = true;
  cancelSend.disabled = true;
  try {
    const url = root.dataset.messagesUrl.replace(/messages\/$/, "cancel-pending/");
    await apiFetch(url, { method: "POST", body: { reason } });
    cancelReason.value = "";
    cancelForm.hidden = true;
  } catch (error) {
    cancelError.textContent = errorText(error);
    cancelError.hidden = false;
  } finally {
    cancelSend.disabled = false;
    refreshSoon(0);
  }
});

composer.addEventListener("submit", async (event) => {
  event.preventDefault();
  const content = input.value.trim();
  if (!content || send.disabled) return;
  composerError.hidden = true;
  model.posting = true;
  updateComposer();
  try {
    const data = await apiFetch(root.dataset.messagesUrl, { method: "POST", body: { content } });
    input.value = "";
    const message = data && data.message;
    if (message && message.id && !model.messages.has(message.id)) {
      const view = ensureMessage(message.id, "user", { container: pendingBox });
      view.body.textContent = contentText(message.content ?? content);
    }
    model.status = "running";
  } catch (error) {
    composerError.textContent = errorText(error);
    composerError.hidden = false;
  } finally {
    model.posting = false;
    updateComposer();
    refreshSoon(0);
  }
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

// -- the socket -------------------------------------------------------------------

const socket = new ReconnectingSocket({
  url: () => `${root.dataset.socketPath}?after=${model.lastSeq}`,
  onOpen: () => refreshSoon(0),
  onMessage: (data) => {
    if (data && data.kind === "notification") {
      onNotification(data);
      return;
    }
    if (!data || typeof data.seq !== "number") return;
    if (data.seq <= model.lastSeq) return; // already applied
    if (data.seq !== model.lastSeq + 1) {
      socket.send({ type: "resync", after: model.lastSeq });
      return;
    }
    model.lastSeq = data.seq;
    root.dataset.lastSeq = String(model.lastSeq);
    applyEvent(data);
    if (!model.caughtUp) caughtUpSoon();
  },
});

let caughtUpTimer = null;
function caughtUpSoon() {
  clearTimeout(caughtUpTimer);
  caughtUpTimer = setTimeout(markCaughtUp, 250);
}
function markCaughtUp() {
  if (model.caughtUp) return;
  model.caughtUp = true;
  loading.hidden = true;
  root.dataset.ready = "1";
  updateComposer();
}

applyServerState(readJsonScript("thread-ui-state"));
socket.start();
// An empty thread sends nothing: consider it loaded once the socket had its chance.
setTimeout(markCaughtUp, 1200);
