// The thread page: replays the thread's AG-UI event log from seq 0 over the socket,
// follows it live, and overlays what the log does not carry (call states, approvals,
// results written by the application, activity labels) from the server's state read
// and from notifications. A fresh load and a live session therefore build the same
// transcript through the same code. All data goes in with textContent (SEC-03).

import {
  ReconnectingSocket,
  apiFetch,
  approvalConfirmation,
  countdown,
  editPreview,
  errorText,
  h,
  prettyArguments,
  prettyJson,
  readJsonScript,
  sentence,
  timeElement,
  utcTitle,
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
const announcer = document.getElementById("announcer");
const waitingBar = document.getElementById("waiting-bar");
const waitingText = document.getElementById("waiting-text");
const waitingJump = document.getElementById("waiting-jump");
const jumpLatest = document.getElementById("jump-latest");
const canSeeQueue = root.dataset.canSeeQueue === "1";
// Only the owner writes to a thread (the server refuses others with 403
// not_thread_owner): an approver reading it must not request calls they then decide.
const isOwner = root.dataset.isOwner === "1";
// The server defers UI approvals this long so that they can be undone (0: no undo).
const undoSeconds = Number(root.dataset.undoSeconds || "0");

// A tool result longer than this (characters or lines) starts collapsed.
const COLLAPSE_CHARS = 600;
const COLLAPSE_LINES = 12;
// Why a call did not run, in words (the tool message's error code).
const ERROR_LABELS = {
  declined_by_operator: "Rejected by an approver",
  answered_by_operator: "Answered by an approver instead of running",
  approval_expired: "Not run: the approval expired",
  cancelled: "Cancelled",
  policy_denied: "Denied by policy",
  unknown_tool: "Unknown tool",
  refused: "Execution refused",
  invalid_arguments: "Invalid arguments",
};
const REFUSAL_LABELS = {
  rejected: "Rejected — the call did not run",
  responded: "Answered by an approver — the call did not run",
  expired: "Expired — the call did not run",
  cancelled: "Cancelled — the call did not run",
  denied: "Denied by policy — the call did not run",
  refused: "Refused — the call did not run",
};

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
  // A declined call whose approver answered it with text (the agent got the answer).
  responded: "responded",
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
  const decisionEl = h("p", { class: "call-decision", hidden: true });
  const pendingEl = h("div", { class: "call-pending", hidden: true });
  const resultEl = h("div", { class: "call-result", hidden: true });
  const el = h(
    "section",
    { class: "call", id: `call-${id}`, tabindex: "-1", dataset: { toolCallId: id }, "aria-label": `Tool call ${name}` },
    h("header", { class: "call-head" }, h("span", { class: "call-icon", "aria-hidden": "true", text: "⚙" }), h("h3", { class: "call-title" }, nameEl, " ", labelEl), badgeEl, stateEl),
    h("div", { class: "call-args-wrap" }, h("h4", { class: "visually-hidden", text: "Arguments" }), argsEl),
    editedEl,
    pendingEl,
    decisionEl,
    resultEl,
  );
  transcript.append(el);
  call = { id, name, el, nameEl, labelEl, badgeEl, stateEl, argsEl, editedEl, decisionEl, pendingEl, resultEl, argsText: "", state: null, result: null, complete: false, panel: null };
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
  paintState(call);
  renderDecisionArea(call);
}

/** The call's state in words: "responded" for a declined call an approver answered. */
function shownState(call) {
  if (call.state === "declined" && call.approval && call.approval.status === "responded") return "responded";
  return call.state;
}

function paintState(call) {
  if (!call.state) return;
  const state = shownState(call);
  call.el.classList.toggle("is-responded", state === "responded");
  call.stateEl.textContent = STATE_LABELS[state] || state;
  call.stateEl.className = `call-state state-${state}`;
}

function forceCallState(call, state) {
  if (!(state in STATE_RANK)) return;
  // An undone approval is the one way back: approved → awaiting approval.
  const undone = state === "awaiting_approval" && call.state === "approved";
  if (call.state && STATE_RANK[state] < STATE_RANK[call.state] && !undone) return;
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

/** Parse a tool message's string content as a JSON object, or return null. */
function parseObject(content) {
  if (typeof content !== "string") return content && typeof content === "object" && !Array.isArray(content) ? content : null;
  try {
    const parsed = JSON.parse(content);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

/**
 * Say in words how a call ended when the tool message is one the application wrote:
 * a refusal ({status, reason, executed: false}) or an error ({error, detail}).
 * Returns {head, text} or null for an ordinary result (shown as it is).
 */
function readableOutcome(result) {
  const body = parseObject(result.content);
  if (!body) return null;
  if (body.executed === false && typeof body.status === "string") {
    const head = REFUSAL_LABELS[body.status] || `Not run (${body.status})`;
    if (body.status === "responded" && typeof body.response === "string") {
      return { head: `${head}${typeof body.by === "string" ? ` (${body.by})` : ""}`, text: `The agent was told: ${body.response}` };
    }
    return { head, text: typeof body.reason === "string" && body.reason ? `Reason: ${body.reason}` : "" };
  }
  if (result.error && typeof body.detail === "string" && Object.keys(body).every((k) => k === "error" || k === "detail")) {
    // The code is the head's; the detail is the sentence (once, not twice).
    return { head: ERROR_LABELS[result.error] || `Failed: ${String(result.error).replace(/_/g, " ")}`, text: body.detail };
  }
  return null;
}

function resultHead(result) {
  if (!result.error) return "Result";
  return ERROR_LABELS[result.error] || `Failed: ${String(result.error).replace(/_/g, " ")}`;
}

/** Collapse a long result behind a "Show full result" toggle (expanded on click). */
function collapsible(box, bodyEl, text) {
  const lines = text.split("\n").length;
  if (text.length <= COLLAPSE_CHARS && lines <= COLLAPSE_LINES) return;
  const bodyId = `${box.closest(".call").id}-result-body`;
  bodyEl.id = bodyId;
  bodyEl.classList.add("collapsed");
  const toggle = h("button", { type: "button", class: "btn btn-quiet result-toggle", "aria-expanded": "false", "aria-controls": bodyId });
  const label = (open) => (open ? "Show less" : `Show the full result (${lines} line${lines === 1 ? "" : "s"}, ${text.length} characters)`);
  toggle.textContent = label(false);
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    bodyEl.classList.toggle("collapsed", !open);
    toggle.textContent = label(open);
  });
  box.append(toggle);
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
  const outcome = readableOutcome(result);
  box.append(h("h4", { class: "result-head", text: outcome ? outcome.head : resultHead(result) }));
  const content = result.content;
  if (outcome) {
    if (outcome.text) box.append(h("p", { class: "part part-text result-words", text: outcome.text }));
  } else if (Array.isArray(content)) {
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
    const pre = h("pre", { class: "part part-text", text });
    box.append(pre);
    collapsible(box, pre, text);
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
  call.approval = approval;
  paintState(call); // the approval's status can change the state's word (responded)
  const edited = approval.editedArguments !== null && approval.editedArguments !== undefined;
  call.badgeEl.hidden = !edited;
  call.el.classList.toggle("is-edited", edited);
  renderDecisionArea(call);
  if (!edited) {
    call.editedEl.hidden = true;
    call.argsEl.parentElement.hidden = false;
    return;
  }
  const facts = factsOf(approval);
  const editor = (facts && facts.arguments && facts.arguments.editedBy) || approval.decidedBy;
  const heading = approval.status === "pending" ? `Edited${editor ? ` by ${editor}` : ""}; runs once approved` : `Approved as edited${editor ? ` by ${editor}` : ""}`;
  const key = JSON.stringify([approval.proposedArguments, approval.editedArguments, heading]);
  // Proposed and approved side by side replace the streamed (proposed) arguments, so
  // the card never shows the proposal alone under an edited label.
  call.argsEl.parentElement.hidden = true;
  if (call.editedEl.dataset.key === key) return;
  call.editedEl.dataset.key = key;
  call.editedEl.replaceChildren(
    h("div", { class: "edited-col" }, h("h4", { text: "Proposed by the agent" }), h("pre", { class: "call-args", text: prettyJson(approval.proposedArguments) })),
    h("div", { class: "edited-col" }, h("h4", { text: heading }), h("pre", { class: "call-args", text: prettyJson(approval.editedArguments) })),
  );
  call.editedEl.hidden = false;
}

/** Apply the server's read of a call (label, state, approval, result) to its card. */
function applyKnown(call) {
  const info = model.known.get(call.id);
  if (!info) return;
  if (info.runId) call.el.dataset.runId = info.runId; // the client-visible run
  if (info.label) call.labelEl.textContent = info.label;
  if (info.result) setResult(call, info.result);
  if (info.state) forceCallState(call, info.state);
  if (info.approval) setApproval(call, info.approval);
}

// -- deciding where you are: the pending card and the decided card -----------------------

function timeEl(iso) {
  return timeElement(iso);
}

function isPendingHere(call) {
  const a = call.approval;
  return Boolean(a && a.status === "pending" && call.state === "awaiting_approval");
}

/** The facts every surface shows (approvals.facts), from the server's last read. */
function factsOf(approval) {
  return (approval && approval.context && approval.context.facts) || null;
}

function authorizationOf(approval) {
  const context = approval.context || {};
  const auth = context.authorization || {};
  return {
    // The facts' viewer also knows whether this user voted already (N of M).
    canAuthorize: Boolean(context.facts ? context.facts.viewer.canApprove : (context.canAuthorize ?? auth.canAuthorize)),
    canReject: Boolean(context.facts ? context.facts.viewer.canReject : (auth.canReject ?? context.canAuthorize)),
    canRespond: Boolean(context.facts && context.facts.viewer.canRespond),
    reason: auth.reason || "",
    whoCan: auth.whoCan || null,
  };
}

function renderDecisionArea(call) {
  if (!call.pendingEl) return;
  if (isPendingHere(call)) {
    call.decisionEl.hidden = true;
    renderPendingPanel(call);
  } else {
    if (call.panel) {
      call.panel = null;
      call.pendingEl.replaceChildren();
    }
    call.pendingEl.hidden = true;
    renderDecided(call);
  }
  updateWaitingBar();
}

/** Who decided, when, why, and how the execution ended, in one sentence. */
function renderDecided(call) {
  const a = call.approval;
  if (!a || a.status === "pending") {
    call.decisionEl.hidden = true;
    return;
  }
  const outcome = a.context && a.context.outcome;
  const execution = outcome && outcome.execution;
  // Re-rendered only when something it says changed: replacing a focused Undo
  // button would drop the keyboard focus.
  const key = JSON.stringify([a.status, a.decidedBy, a.approvals && a.approvals.by, a.decidedAt, a.reason, a.response, a.editedArguments, call.state, execution, call.undo && call.undo.until]);
  if (!call.decisionEl.hidden && call.decisionEl.dataset.key === key) return;
  call.decisionEl.dataset.key = key;
  const parts = [];
  // Every approver whose vote counted (N of M), not only the last one.
  const voters = a.status === "approved" && a.approvals && a.approvals.by && a.approvals.by.length ? a.approvals.by : a.decidedBy ? [a.decidedBy] : [];
  const who = voters.length ? ` by ${voters.length > 1 ? `${voters.slice(0, -1).join(", ")} and ${voters[voters.length - 1]}` : voters[0]}` : "";
  const edited = a.editedArguments !== null && a.editedArguments !== undefined;
  const verb = { approved: edited ? "Approved with edits" : "Approved", rejected: "Rejected", responded: "Answered instead of running it", expired: "Expired", cancelled: "Cancelled" }[a.status] || a.status;
  parts.push(h("strong", { text: `${verb}${a.status === "expired" ? "" : who}` }));
  const when = a.decidedAt || (a.status === "expired" ? a.expiresAt : null);
  if (when) parts.push(" at ", timeEl(when));
  // The quoted words may end in their own full stop: the sentence ends once.
  const quoted = a.reason || (a.status === "responded" && typeof a.response === "string" ? a.response : "");
  parts.push(`${sentence(quoted ? `: “${quoted}”` : "") || "."} `);
  parts.push(executionSentence(call, a));
  const focused = call.decisionEl.contains(document.activeElement) ? document.activeElement : null;
  call.decisionEl.replaceChildren(...parts);
  call.decisionEl.hidden = false;
  // The Undo button is reused across renders; moving it must not drop the focus.
  if (focused && call.decisionEl.contains(focused)) focused.focus({ preventScroll: true });
}

function executionSentence(call, approval) {
  if (approval.status !== "approved") return "The call did not run.";
  const outcome = approval.context && approval.context.outcome;
  const execution = outcome && outcome.execution ? outcome.execution : null;
  if (call.undo) return undoControls(call);
  const state = execution ? execution.state : null;
  if (state === "succeeded" || call.state === "succeeded") {
    const done = execution && execution.finishedAt ? [" at ", timeEl(execution.finishedAt)] : [];
    return h("span", {}, "Executed: succeeded", ...done, ".");
  }
  if (state === "failed" || call.state === "failed") {
    // The result below gives the detail; the code alone here, in words.
    const error = execution && execution.error ? ` (${execution.error.replace(/_/g, " ")})` : "";
    return `The execution failed${error}.`;
  }
  if (state === "outcome_unknown" || call.state === "outcome_unknown") return "Execution outcome unknown: an operator must resolve it.";
  return "Executing…";
}

function renderPendingPanel(call) {
  const a = call.approval;
  const auth = authorizationOf(a);
  const facts = factsOf(a);
  const viewer = (facts && facts.viewer) || {};
  const key = JSON.stringify([a.id, auth.canAuthorize, auth.canReject, auth.canRespond, facts && facts.headline, viewer.whyNot, viewer.whoCan]);
  if (call.panel && call.panel.key === key) {
    tickPanel(call);
    return;
  }
  const context = a.context || {};
  const risk = context.risk || (a.isDestructive ? { level: "high", reasons: ["destructive"] } : null);
  const expiry = h("span", { class: "pending-expiry" });
  const meta = [];
  if (context.requester) meta.push(`Requested by ${context.requester}${context.agent ? ` through the agent ${context.agent}` : ""}`);
  meta.push(expiry);
  if (canSeeQueue && a.queueUrl) meta.push(h("a", { href: a.queueUrl, text: "Open in the approval queue" }));
  const metaEl = h("p", { class: "pending-meta" });
  meta.forEach((item, index) => {
    if (index) metaEl.append(" · ");
    metaEl.append(item);
  });
  const panel = { key, expiry, busy: false };
  const children = [
    h("h4", { class: "pending-head", text: (facts && facts.headline) || "Waiting for a decision" }),
    risk
      ? h("p", { class: "pending-risk" }, h("span", { class: `risk risk-${risk.level}`, text: `${risk.level} risk` }), " ", (risk.reasons || []).join("; "))
      : null,
    metaEl,
  ];
  const words = [viewer.whyNot, viewer.whoCan].filter(Boolean).join(" ");
  if (words) children.push(h("p", { class: "notice pending-auth" }, words));
  if (a.kind && a.kind !== "tool_call") {
    // A remote agent's interrupt is answered with a response to its schema: the queue has the form.
    children.push(h("p", { class: "pending-meta", text: "This request is answered in the approval queue." }));
  } else if (auth.canAuthorize || auth.canReject) {
    children.push(...decisionControls(call, panel, auth, risk));
  }
  call.pendingEl.replaceChildren(...children.filter(Boolean));
  call.pendingEl.hidden = false;
  call.panel = panel;
  tickPanel(call);
}

function decisionControls(call, panel, auth, risk) {
  const id = call.approval.id;
  const approve = h("button", { type: "button", class: "btn btn-approve", text: "Approve", hidden: !auth.canAuthorize });
  const edit = h("button", { type: "button", class: "btn", text: "Edit & approve", "aria-expanded": "false", hidden: !auth.canAuthorize });
  const reason = h("input", { type: "text", id: `call-reason-${id}`, class: "reason", maxlength: "2000", placeholder: "Reason (required to reject)" });
  const reject = h("button", { type: "button", class: "btn btn-reject", text: "Reject" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const confirmYes = h("button", { type: "button", class: "btn btn-approve", text: "Yes, approve" });
  const confirmNo = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const confirmText = h("p", { class: "confirm-text" });
  const confirmList = h("ul", { class: "confirm-list" });
  const confirm = h("div", { class: "confirm", role: "group", "aria-label": "Confirm the approval", hidden: true }, confirmText, confirmList, h("div", { class: "actions" }, confirmYes, confirmNo));
  const textarea = h("textarea", { id: `call-edit-${id}`, rows: "6", spellcheck: "false", class: "edit-args" });
  const saveEdit = h("button", { type: "button", class: "btn btn-approve", text: "Approve edited arguments" });
  const cancelEdit = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const editor = h(
    "div",
    { class: "editor", hidden: true },
    h("label", { for: `call-edit-${id}`, text: "Edited arguments (JSON object; the server validates them again)" }),
    textarea,
    h("div", { class: "actions" }, saveEdit, cancelEdit),
  );
  // Respond: the agent gets this text instead of the tool's result; the tool never runs.
  const respond = h("button", { type: "button", class: "btn", text: "Respond", "aria-expanded": "false", "aria-controls": `call-respond-${id}`, hidden: !auth.canRespond });
  const respondText = h("textarea", { id: `call-respond-text-${id}`, rows: "3", maxlength: "10000", class: "respond-text" });
  const sendRespond = h("button", { type: "button", class: "btn btn-approve", text: "Send answer" });
  const cancelRespond = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const respondBox = h(
    "div",
    { class: "respond-box", id: `call-respond-${id}`, hidden: true },
    h("label", { for: `call-respond-text-${id}`, text: "Answer for the agent (the tool does not run)" }),
    respondText,
    h("div", { class: "actions" }, sendRespond, cancelRespond),
  );
  const actions = h(
    "div",
    { class: "actions" },
    approve,
    edit,
    h("label", { for: `call-reason-${id}`, class: "visually-hidden", text: "Reason for rejecting" }),
    reason,
    reject,
    respond,
  );
  Object.assign(panel, { approve, edit, reject, reason, error, saveEdit, confirmYes, respond, respondText, sendRespond });
  respond.addEventListener("click", () => {
    const open = respondBox.hidden;
    respondBox.hidden = !open;
    respond.setAttribute("aria-expanded", String(open));
    if (open) respondText.focus();
  });
  cancelRespond.addEventListener("click", () => {
    respondBox.hidden = true;
    respond.setAttribute("aria-expanded", "false");
    respond.focus();
  });
  sendRespond.addEventListener("click", () => decideHere(call, "respond"));
  const showError = (text) => {
    error.textContent = text;
    error.hidden = !text;
  };
  panel.showError = showError;
  // A destructive or high-risk (over a threshold) approval asks once more, showing
  // what would run: an edit is graded on its own arguments first.
  let pendingEdit;
  const askOrApprove = async (edited) => {
    let shownRisk = risk;
    let review = (factsOf(call.approval) || {}).review || {};
    let ask = Boolean((risk && (risk.level === "high" || risk.level === "critical")) || (call.approval && call.approval.isDestructive));
    if (edited !== undefined) {
      try {
        ({ risk: shownRisk, review, needsConfirmation: ask } = await editPreview(call.approval.id, edited));
      } catch (err) {
        showError(errorText(err));
        return;
      }
    }
    if (ask) {
      pendingEdit = edited;
      const { title, text, lines } = approvalConfirmation({ tool: call.name, risk: shownRisk, review, edited });
      confirmText.textContent = `${title} ${text}`;
      confirmList.replaceChildren(...lines.map((line) => h("li", { text: line })));
      confirm.hidden = false;
      confirmYes.focus();
      return;
    }
    decideHere(call, "approve", { edited });
  };
  approve.addEventListener("click", () => askOrApprove(undefined));
  confirmYes.addEventListener("click", () => {
    confirm.hidden = true;
    decideHere(call, "approve", { edited: pendingEdit });
  });
  confirmNo.addEventListener("click", () => {
    confirm.hidden = true;
    approve.focus();
  });
  reject.addEventListener("click", () => decideHere(call, "reject"));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      decideHere(call, "reject");
    }
  });
  edit.addEventListener("click", () => {
    const open = editor.hidden;
    editor.hidden = !open;
    edit.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      textarea.value = prettyJson(call.approval.editedArguments ?? call.approval.proposedArguments);
      textarea.focus();
    }
  });
  cancelEdit.addEventListener("click", () => {
    editor.hidden = true;
    edit.setAttribute("aria-expanded", "false");
    edit.focus();
  });
  saveEdit.addEventListener("click", () => {
    let edited;
    try {
      edited = JSON.parse(textarea.value);
    } catch (err) {
      showError(`Not valid JSON: ${err.message}`);
      return;
    }
    if (!edited || typeof edited !== "object" || Array.isArray(edited)) {
      showError("The edited arguments must be a JSON object.");
      return;
    }
    askOrApprove(edited);
  });
  return [actions, confirm, editor, respondBox, error];
}

/** Approve, reject or respond through the queue's REST endpoints (same service, same checks). */
async function decideHere(call, decision, { edited } = {}) {
  const panel = call.panel;
  if (!panel || panel.busy) return;
  const why = decision === "respond" ? "" : panel.reason.value.trim();
  if (decision === "respond" && !panel.respondText.value.trim()) {
    panel.showError("Write the answer first: the agent gets it instead of the tool's result.");
    panel.respondText.focus();
    return;
  }
  if (decision === "reject" && !why) {
    panel.showError("Give a reason to reject: it is sent to the agent.");
    panel.reason.focus();
    return;
  }
  panel.showError("");
  panel.busy = true;
  for (const b of [panel.approve, panel.edit, panel.reject, panel.saveEdit, panel.confirmYes, panel.respond, panel.sendRespond]) b.disabled = true;
  const body = {};
  if (why) body.reason = why;
  if (decision === "respond") body.text = panel.respondText.value;
  if (edited !== undefined) body.editedArguments = edited;
  if (decision === "approve" && undoSeconds > 0) body.undo = true;
  try {
    const result = await apiFetch(`/api/approvals/${call.approval.id}/${decision}/`, { method: "POST", body });
    if (result && result.undoUntil) call.undo = { until: result.undoUntil, approvalId: call.approval.id };
    const approval = { ...call.approval, ...(result || {}) };
    const info = model.known.get(call.id) || {};
    info.approval = approval;
    model.known.set(call.id, info);
    setApproval(call, approval);
    if (approval.status === "approved") forceCallState(call, "approved");
    announce(`${call.name} ${approval.status}${call.undo ? `; it executes in ${undoSeconds} seconds unless you undo` : ""}`);
    // The buttons are gone with the pending panel: focus stays on the card (or Undo).
    if (call.undo && call.undoButton && call.el.contains(call.undoButton)) call.undoButton.focus();
    else call.el.focus({ preventScroll: true });
  } catch (error) {
    panel.showError(errorText(error));
    panel.busy = false;
    for (const b of [panel.approve, panel.edit, panel.reject, panel.saveEdit, panel.confirmYes, panel.respond, panel.sendRespond]) b.disabled = false;
  } finally {
    refreshSoon(0);
  }
}

/** "Approved — executes in N s" with an Undo button, while the server's window lasts. */
function undoControls(call) {
  const left = Math.max(0, Math.ceil((Date.parse(call.undo.until) - Date.now()) / 1000));
  if (!left) {
    call.undo = null;
    return "Executing…";
  }
  // Kept across re-renders, so a focused Undo button stays focused.
  if (call.undoEl && call.undoEl.dataset.until === call.undo.until) return call.undoEl;
  const text = h("span", { class: "undo-text", text: `Executes in ${left} s unless you undo. ` });
  const button = h("button", { type: "button", class: "btn", text: "Undo" });
  button.addEventListener("click", () => undoHere(call, button));
  call.undoText = text;
  call.undoButton = button;
  call.undoEl = h("span", { class: "call-undo", dataset: { until: call.undo.until } }, text, button);
  return call.undoEl;
}

async function undoHere(call, button) {
  const undo = call.undo;
  if (!undo) return;
  button.disabled = true;
  try {
    const back = await apiFetch(`/api/approvals/${undo.approvalId}/undo/`, { method: "POST", body: {} });
    call.undo = null;
    const approval = { ...call.approval, ...(back || {}) };
    const info = model.known.get(call.id) || {};
    info.approval = approval;
    info.state = "awaiting_approval";
    model.known.set(call.id, info);
    forceCallState(call, "awaiting_approval");
    setApproval(call, approval);
    announce(`${call.name} approval undone; it waits for a decision again`);
    call.el.focus();
  } catch (error) {
    call.undo = null;
    renderDecided(call);
    call.decisionEl.append(h("span", { class: "error", role: "alert", text: errorText(error) }));
  } finally {
    refreshSoon(0);
  }
}

function tickUndo(call) {
  if (!call.undo || !call.undoText) return;
  const left = Math.max(0, Math.ceil((Date.parse(call.undo.until) - Date.now()) / 1000));
  if (left) call.undoText.textContent = `Executes in ${left} s unless you undo. `;
  else {
    call.undo = null;
    renderDecided(call);
  }
}

function tickPanel(call, now = Date.now()) {
  const panel = call.panel;
  if (!panel || !call.approval) return;
  const left = countdown(call.approval.expiresAt, now);
  panel.expiry.textContent = left === "expired" ? "expired" : `expires in ${left}`;
  panel.expiry.title = utcTitle(call.approval.expiresAt);
  panel.expiry.classList.toggle("soon", Date.parse(call.approval.expiresAt) - now < 5 * 60 * 1000);
}

setInterval(() => {
  const now = Date.now();
  for (const call of model.calls.values()) {
    if (call.panel) tickPanel(call, now);
    if (call.undo) tickUndo(call);
  }
}, 1000);

/** The "waiting for you" bar: requests in this thread this user can decide. */
function updateWaitingBar() {
  if (!waitingBar) return;
  const mine = [...model.calls.values()].filter((c) => isPendingHere(c) && authorizationOf(c.approval).canAuthorize);
  waitingBar.hidden = mine.length === 0;
  if (!mine.length) return;
  const first = mine[0];
  waitingText.textContent =
    mine.length === 1
      ? `A request waits for your decision: ${first.name}${first.labelEl.textContent ? ` — ${first.labelEl.textContent}` : ""}.`
      : `${mine.length} requests wait for your decision.`;
  waitingJump.href = `#${first.el.id}`;
  waitingJump.dataset.target = first.el.id;
}

waitingJump.addEventListener("click", (event) => {
  const target = document.getElementById(waitingJump.dataset.target || "");
  if (!target) return;
  event.preventDefault();
  jumpTo(target);
});

function jumpTo(card) {
  card.scrollIntoView({ block: "center" });
  card.focus({ preventScroll: true });
  history.replaceState(null, "", `#${card.id}`);
}

// -- following the conversation ------------------------------------------------------------

const FOLLOW_SLACK_PX = 80;
const follow = { on: false, unseen: false, height: 0 };

function atBottom() {
  const doc = document.documentElement;
  return window.innerHeight + window.scrollY >= doc.scrollHeight - FOLLOW_SLACK_PX;
}

function scrollToLatest() {
  window.scrollTo({ top: document.documentElement.scrollHeight });
  follow.height = document.documentElement.scrollHeight;
  follow.on = true;
  follow.unseen = false;
  jumpLatest.hidden = true;
}

// Only the operator's own scrolling stops the following: a scroll that comes with a
// change of the page's height is the browser keeping content in place (scroll
// anchoring), not the operator leaving the end.
window.addEventListener(
  "scroll",
  () => {
    if (!model.caughtUp) return;
    const height = document.documentElement.scrollHeight;
    if (atBottom()) {
      follow.on = true;
      follow.unseen = false;
      jumpLatest.hidden = true;
    } else if (height === follow.height) {
      follow.on = false;
    }
    follow.height = height;
  },
  { passive: true },
);

/** Whether a mutation brought new conversation: a message or card, or streamed text. */
function isNewContent(mutation) {
  const target = mutation.target.nodeType === Node.TEXT_NODE ? mutation.target.parentElement : mutation.target;
  if (!target) return false;
  if (target.closest(".msg-body")) return true;
  return mutation.type === "childList" && (target === transcript || target === pendingBox) && mutation.addedNodes.length > 0;
}

// New content: follow it while the operator is at the end; otherwise offer a jump.
new MutationObserver((mutations) => {
  if (!model.caughtUp) return;
  const fresh = mutations.some(isNewContent);
  if (follow.on) {
    scrollToLatest();
  } else if (fresh && !follow.unseen) {
    follow.unseen = true;
    jumpLatest.hidden = false;
  }
}).observe(root, { childList: true, subtree: true, characterData: true });

// The page also grows or shrinks outside the transcript (the composer's notes, a
// form shown): keep the end in view while following, and remember the height.
new ResizeObserver(() => {
  if (!model.caughtUp) return;
  if (follow.on && !atBottom()) scrollToLatest();
  follow.height = document.documentElement.scrollHeight;
}).observe(document.body);

jumpLatest.addEventListener("click", () => {
  scrollToLatest();
  const last = transcript.lastElementChild;
  if (last) {
    if (!last.hasAttribute("tabindex")) last.setAttribute("tabindex", "-1");
    last.focus({ preventScroll: true });
  }
});

function announce(text) {
  // Replaced, not appended: one polite announcement per finished message.
  announcer.textContent = text.length > 400 ? `${text.slice(0, 400)}…` : text;
}

// -- previews: show first, persist in batches --------------------------------------
//
// With ?preview=1 the socket also sends the events the worker validated but has not
// written yet ({kind: "preview", runId, previews: [{p, event}]}); the batch that writes them is
// followed by {kind: "confirmed", runId, through}. The text of unconfirmed deltas is
// shown as a tentative suffix after the committed text of its message or call
// (once that has a committed START), hidden from assistive technology; the log's
// rows replace it. A preview is dropped when confirmed, when the log reaches a
// run's end, when the socket reopens, or PREVIEW_MAX_MS after it came: a preview
// the log never got (its worker died before the write) stays at most that long.

const PREVIEW_MAX_MS = 5000;
const previews = {
  list: [], // {runId, p, event, at}, in arrival order
  confirmed: new Map(), // runId -> highest confirmed p
  shown: new Map(), // "m:<messageId>" | "c:<toolCallId>" -> tentative span
  timer: null,
};

function previewKey(event) {
  if (event.type === "TEXT_MESSAGE_CONTENT") return `m:${event.messageId}`;
  if (event.type === "TOOL_CALL_ARGS") return `c:${event.toolCallId}`;
  return null;
}

function onPreview(data) {
  const at = Date.now();
  for (const item of Array.isArray(data.previews) ? data.previews : []) {
    const event = item && item.event;
    if (!event || typeof event !== "object" || typeof item.p !== "number") continue;
    // Confirmed already (the log's rows came first, e.g. by a catch-up read).
    if (item.p <= (previews.confirmed.get(data.runId) || 0)) continue;
    previews.list.push({ runId: data.runId, p: item.p, event, at });
  }
  renderTentative();
}

function onConfirmed(data) {
  if (typeof data.through !== "number") return;
  previews.confirmed.set(data.runId, Math.max(data.through, previews.confirmed.get(data.runId) || 0));
  dropPreviews((item) => item.runId === data.runId && item.p <= data.through);
}

function dropPreviews(test) {
  const before = previews.list.length;
  previews.list = previews.list.filter((item) => !test(item));
  if (previews.list.length !== before) renderTentative();
}

/**
 * A committed delta arrived: drop the previews it stands for (the first previews of
 * its item whose deltas it starts with, in order), so that its text never shows twice
 * while its confirmation is still on the way.
 */
function consumePreviews(event, delta) {
  const key = previewKey(event);
  if (!previews.list.length || !key) return;
  let rest = delta;
  const kept = [];
  let consuming = true;
  for (const item of previews.list) {
    const part = item.event.delta || "";
    if (consuming && previewKey(item.event) === key) {
      if (part && rest.startsWith(part)) {
        rest = rest.slice(part.length);
        continue;
      }
      consuming = false;
    }
    kept.push(item);
  }
  previews.list = kept;
}

function tentativeHost(key) {
  const id = key.slice(2);
  if (key.startsWith("m:")) {
    const view = model.messages.get(id);
    return view ? view.body : null;
  }
  const call = model.calls.get(id);
  return call && !call.complete ? call.argsEl : null;
}

/** Show each item's unconfirmed preview text after its committed text; expire old previews. */
function renderTentative() {
  const texts = new Map();
  for (const item of previews.list) {
    const key = previewKey(item.event);
    if (key) texts.set(key, (texts.get(key) || "") + (item.event.delta || ""));
  }
  for (const [key, span] of previews.shown) {
    if (!texts.has(key)) {
      span.remove();
      previews.shown.delete(key);
    }
  }
  for (const [key, text] of texts) {
    const host = tentativeHost(key);
    if (!host) continue; // no committed START yet: nothing is created before it
    let span = previews.shown.get(key);
    if (!span) {
      span = h("span", { class: "tentative", "aria-hidden": "true" });
      previews.shown.set(key, span);
    }
    if (host.lastChild !== span) host.append(span);
    if (span.textContent !== text) span.textContent = text;
  }
  clearTimeout(previews.timer);
  if (previews.list.length) {
    const oldest = Math.min(...previews.list.map((item) => item.at));
    previews.timer = setTimeout(() => {
      const limit = Date.now() - PREVIEW_MAX_MS;
      previews.list = previews.list.filter((item) => item.at > limit);
      renderTentative();
    }, Math.max(0, oldest + PREVIEW_MAX_MS - Date.now()));
  }
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
      consumePreviews(event, event.delta || "");
      const tentative = view.body.querySelector(":scope > .tentative");
      if (tentative) tentative.before(event.delta || "");
      else view.body.append(event.delta || "");
      break;
    }
    case "TEXT_MESSAGE_END": {
      // Every delta of the message is in the log now: what is still previewed is stale.
      dropPreviews((item) => previewKey(item.event) === `m:${event.messageId}`);
      const view = model.messages.get(event.messageId);
      if (view) {
        view.el.classList.remove("streaming");
        view.body.normalize();
        // Live messages only: a replay at load announces nothing.
        if (model.caughtUp) announce(`${roleLabel(view.role)}: ${view.body.textContent}`);
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
      consumePreviews(event, event.delta || "");
      setArgsText(call, call.argsText + (event.delta || ""));
      break;
    }
    case "TOOL_CALL_END": {
      dropPreviews((item) => previewKey(item.event) === `c:${event.toolCallId}`);
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
      dropPreviews(() => true);
      for (const call of model.calls.values()) {
        if (call.state === "complete" && !call.result) setCallState(call, "pending");
      }
      refreshSoon();
      break;
    }
    case "RUN_ERROR": {
      model.runActive = false;
      dropPreviews(() => true);
      for (const call of model.calls.values()) {
        if ((call.state === "streaming" || call.state === "complete") && !call.result) {
          call.complete = true;
          call.argsEl.textContent = prettyArguments(call.argsText);
          setCallState(call, "cancelled");
        }
      }
      for (const view of model.messages.values()) view.el.classList.remove("streaming");
      transcript.append(
        h(
          "div",
          { class: "run-error", role: "alert" },
          h("strong", { text: "The run failed: " }),
          event.message || "unknown error",
          // The code only when the message does not already say it.
          event.code && !(event.message || "").includes(event.code) ? ` (${event.code})` : "",
        ),
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
  // The broadcast carries no per-user context; keep the last read's until the refresh.
  if (note.approval) info.approval = { ...(info.approval || {}), ...note.approval };
  model.known.set(note.toolCallId, info);
  const call = model.calls.get(note.toolCallId);
  if (call) {
    if (note.state) forceCallState(call, note.state);
    if (note.approval) setApproval(call, info.approval);
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
  if (!isOwner) return "This thread belongs to another user: you can read it and decide its requests, but only its owner can write here.";
  if (model.posting) return "Sending…";
  if (!model.caughtUp) return "Loading the conversation…";
  if (model.runActive || model.status === "running") return "The agent is working; you can write again when it finishes.";
  const waiting = [...model.calls.values()].filter((c) => ["pending", "awaiting_approval", "approved", "executing", "outcome_unknown"].includes(c.state));
  if (model.status === "waiting_for_approval") {
    const n = waiting.filter((c) => c.state === "awaiting_approval").length || 1;
    return `Waiting for an approver to decide ${n} tool call${n === 1 ? "" : "s"} — or cancel below.`;
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
  // Calls waiting for an approver can be abandoned by the thread's owner.
  cancelForm.hidden = !(isOwner && model.caughtUp && model.status === "waiting_for_approval");
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
  url: () => `${root.dataset.socketPath}?after=${model.lastSeq}&preview=1`,
  onOpen: () => {
    // A new socket: what the old one previewed is confirmed by the log or lost.
    dropPreviews(() => true);
    refreshSoon(0);
  },
  onMessage: (data) => {
    if (data && data.kind === "notification") {
      onNotification(data);
      return;
    }
    if (data && data.kind === "preview") {
      onPreview(data);
      return;
    }
    if (data && data.kind === "confirmed") {
      onConfirmed(data);
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
    if (previews.list.length || previews.shown.size) renderTentative();
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
  updateComposer();
  // Open at the call a link names (#call-<toolCallId>), else at the latest message.
  const target = location.hash.startsWith("#call-") ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
  if (target) {
    jumpTo(target);
    follow.on = atBottom();
  } else {
    scrollToLatest();
  }
  root.dataset.ready = "1";
}

applyServerState(readJsonScript("thread-ui-state"));
socket.start();
// An empty thread sends nothing: consider it loaded once the socket had its chance.
setTimeout(markCaughtUp, 1200);
