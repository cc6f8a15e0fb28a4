// The approval queue: every pending request with its tool, arguments, schema verdict,
// thread, age and expiry countdown; approve, reject with a reason, edit-then-approve,
// bulk decisions and keyboard shortcuts; kept live by ws/approvals/. Read-only for
// users without the decide permission (the server enforces it either way). Data goes
// in with textContent (SEC-03).

import {
  ReconnectingSocket,
  apiFetch,
  countdown,
  errorText,
  h,
  isTyping,
  prettyJson,
  readJsonScript,
  relativeTime,
} from "./common.js";

const list = document.getElementById("queue");
const empty = document.getElementById("queue-empty");
const count = document.getElementById("queue-count");
const live = document.getElementById("queue-live");
const canDecide = list.dataset.canDecide === "1";
const selectAll = document.getElementById("select-all");
const bulkApprove = document.getElementById("bulk-approve");
const bulkReject = document.getElementById("bulk-reject");
const bulkReason = document.getElementById("bulk-reason");
const bulkError = document.getElementById("bulk-error");

const items = new Map(); // approval id -> view
let current = null; // id of the keyboard selection

function announce(text) {
  live.textContent = text;
}

function updateCounts() {
  const n = items.size;
  count.textContent = String(n);
  empty.hidden = n > 0;
  if (selectAll) selectAll.checked = n > 0 && [...items.values()].every((v) => v.check.checked);
}

// -- one request --------------------------------------------------------------------

function create(approval) {
  const id = approval.id;
  const check = h("input", { type: "checkbox", id: `select-${id}`, "aria-label": `Select ${approval.tool} request ${id}` });
  const title = h("h2", { class: "req-tool", id: `req-title-${id}`, text: approval.tool });
  const destructive = h("span", { class: "badge badge-destructive", text: "destructive", hidden: !approval.isDestructive });
  const label = h("p", { class: "req-label muted", text: approval.label || "", hidden: !approval.label });
  const verdict = h("span", { class: "verdict" });
  const thread = h("a", { class: "req-thread", href: `/threads/${encodeURIComponent(approval.threadId)}/` }, "Open thread");
  const age = h("span", { class: "req-age" });
  const expiry = h("span", { class: "req-expiry" });
  const args = h("pre", { class: "call-args req-args", "aria-label": "Arguments", hidden: !approval.toolCallId && approval.kind !== "tool_call" });
  // Sent back after an approval (issue 14.6): why, and the approved version beside the current one.
  const changedNote = h("p", { class: "req-changed" });
  const previousArgs = h("pre", { class: "call-args req-previous-args", "aria-label": "Arguments approved earlier" });
  const changed = h("div", { class: "req-changed-box", hidden: true }, changedNote, h("p", { class: "req-meta", text: "Approved earlier:" }), previousArgs, h("p", { class: "req-meta", text: "Now:" }));
  // An interrupt or input request: the agent's question and a form from its schema (IR-18).
  const message = h("p", { class: "req-message", text: approval.message || "", hidden: !approval.message || approval.kind === "tool_call" });
  const form = needsForm(approval) ? responseForm(approval.responseSchema, id) : null;
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const el = h(
    "li",
    { class: "req card", tabindex: "-1", dataset: { approvalId: String(id) }, "aria-labelledby": `req-title-${id}` },
    h(
      "div",
      { class: "req-head" },
      canDecide ? h("label", { class: "check", for: `select-${id}` }, check, h("span", { class: "visually-hidden", text: "Select" })) : null,
      title,
      destructive,
      verdict,
    ),
    label,
    h("p", { class: "req-meta" }, thread, " · ", age, " · ", expiry),
    changed,
    message,
    args,
    form ? form.el : null,
  );
  const view = { id, el, check, title, label, destructive, verdict, thread, age, expiry, args, changed, changedNote, previousArgs, error, approval, form, editing: false };
  if (canDecide) buildActions(view);
  el.append(error);
  el.addEventListener("focusin", () => select(id, { focus: false }));
  el.addEventListener("click", (event) => {
    if (!(event.target instanceof Element) || !event.target.closest("button, a, input, textarea, label")) select(id);
  });
  check.addEventListener("change", updateCounts);
  update(view, approval);
  return view;
}

// A request that is not (only) a tool call is answered with a response to its schema.
function needsForm(approval) {
  return approval.kind !== "tool_call" && !approval.toolCallId && approval.responseSchema && typeof approval.responseSchema === "object";
}

// A minimal form generated from a JSON Schema object's top-level properties (enum →
// select, boolean → checkbox, number/integer → number, string → text); anything else,
// or a schema without properties, is answered as raw JSON in a textarea.
function responseForm(schema, id) {
  const props = schema.type === "object" && schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const simple = props && Object.values(props).every((p) => p && ["string", "boolean", "number", "integer"].includes(p.type));
  if (!simple) {
    const raw = h("textarea", { id: `response-${id}`, rows: "6", spellcheck: "false", class: "edit-args" });
    raw.value = "{}";
    const el = h("div", { class: "response-form" }, h("label", { for: `response-${id}`, text: "Response (JSON matching the schema below)" }), raw, h("pre", { class: "call-args", text: prettyJson(schema) }));
    return { el, read: () => JSON.parse(raw.value) };
  }
  const fields = [];
  const el = h("fieldset", { class: "response-form" }, h("legend", { text: "Response" }));
  for (const [name, prop] of Object.entries(props)) {
    const fid = `response-${id}-${name}`;
    let input;
    if (Array.isArray(prop.enum)) {
      input = h("select", { id: fid }, h("option", { value: "", text: "—" }), ...prop.enum.map((v) => h("option", { value: String(v), text: String(v) })));
    } else if (prop.type === "boolean") {
      input = h("input", { id: fid, type: "checkbox" });
    } else {
      input = h("input", { id: fid, type: prop.type === "string" ? "text" : "number", step: prop.type === "integer" ? "1" : "any" });
    }
    fields.push({ name, prop, input });
    el.append(h("p", {}, h("label", { for: fid, text: `${prop.title || name}${required.has(name) ? " *" : ""}` }), " ", input));
  }
  const read = () => {
    const out = {};
    for (const { name, prop, input } of fields) {
      if (prop.type === "boolean") out[name] = input.checked;
      else if (input.value === "") continue;
      else if (prop.type === "number" || prop.type === "integer") out[name] = Number(input.value);
      else out[name] = input.value;
    }
    return out;
  };
  return { el, read };
}

function buildActions(view) {
  const id = view.id;
  const approve = h("button", { type: "button", class: "btn btn-approve", text: "Approve" });
  const edit = h("button", { type: "button", class: "btn", text: "Edit & approve", "aria-expanded": "false" });
  const reason = h("input", { type: "text", id: `reason-${id}`, class: "reason", placeholder: "Reason (required to reject)" });
  const reject = h("button", { type: "button", class: "btn btn-reject", text: "Reject" });
  const textarea = h("textarea", { id: `edit-${id}`, rows: "8", spellcheck: "false", class: "edit-args" });
  const saveEdit = h("button", { type: "button", class: "btn btn-approve", text: "Approve edited arguments" });
  const cancelEdit = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const editor = h(
    "div",
    { class: "editor", hidden: true },
    h("label", { for: `edit-${id}`, text: "Edited arguments (JSON object; the server validates them again)" }),
    textarea,
    h("div", { class: "actions" }, saveEdit, cancelEdit),
  );
  const actions = h(
    "div",
    { class: "actions" },
    approve,
    edit,
    h("label", { for: `reason-${id}`, class: "visually-hidden", text: "Reason for rejecting" }),
    reason,
    reject,
  );
  // A question has no arguments to edit: its answer is the form above.
  if (view.form) edit.hidden = true;
  view.el.append(actions, editor);
  Object.assign(view, { approve, edit, reason, reject, textarea, editor, saveEdit, cancelEdit });

  approve.addEventListener("click", () => decide(view, "approve"));
  reject.addEventListener("click", () => decide(view, "reject"));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      decide(view, "reject");
    } else if (event.key === "Escape") {
      reason.blur();
      view.el.focus();
    }
  });
  edit.addEventListener("click", () => openEditor(view));
  cancelEdit.addEventListener("click", () => closeEditor(view));
  saveEdit.addEventListener("click", () => {
    let edited;
    try {
      edited = JSON.parse(textarea.value);
    } catch (err) {
      showError(view, `Not valid JSON: ${err.message}`);
      return;
    }
    if (!edited || typeof edited !== "object" || Array.isArray(edited)) {
      showError(view, "The edited arguments must be a JSON object.");
      return;
    }
    decide(view, "approve", { edited });
  });
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeEditor(view);
  });
}

function openEditor(view) {
  view.editing = true;
  view.textarea.value = prettyJson(view.approval.editedArguments ?? view.approval.proposedArguments);
  view.editor.hidden = false;
  view.edit.setAttribute("aria-expanded", "true");
  view.textarea.focus();
}

function closeEditor(view) {
  view.editing = false;
  view.editor.hidden = true;
  view.edit.setAttribute("aria-expanded", "false");
  view.edit.focus();
}

function update(view, approval) {
  view.approval = approval;
  view.title.textContent = approval.tool;
  view.label.textContent = approval.label || "";
  view.label.hidden = !approval.label;
  view.destructive.hidden = !approval.isDestructive;
  view.verdict.textContent = approval.schemaValid ? "arguments valid" : `arguments invalid: ${approval.schemaErrors || "see schema"}`;
  view.verdict.className = `verdict ${approval.schemaValid ? "verdict-ok" : "verdict-bad"}`;
  view.args.textContent = prettyJson(approval.editedArguments ?? approval.proposedArguments);
  view.changed.hidden = !approval.reapproval;
  if (approval.reapproval) {
    view.changedNote.textContent =
      approval.reapproval === "schema_changed"
        ? `Schema changed since approval (request #${approval.supersedes}): schema ${(approval.previousSchemaHash || "").slice(0, 12)} → ${(approval.schemaHash || "").slice(0, 12)}`
        : `Arguments changed since approval (request #${approval.supersedes})`;
    view.previousArgs.textContent = prettyJson(approval.previousArguments);
  }
  tick(view);
}

function tick(view, now = Date.now()) {
  const a = view.approval;
  view.age.textContent = a.requestedAt ? `requested ${relativeTime(a.requestedAt, now)}` : "";
  view.age.title = a.requestedAt || "";
  const left = countdown(a.expiresAt, now);
  view.expiry.textContent = left === "expired" ? "expired" : `expires in ${left}`;
  view.expiry.title = a.expiresAt;
  view.expiry.classList.toggle("soon", Date.parse(a.expiresAt) - now < 5 * 60 * 1000);
}

function showError(view, text) {
  view.error.textContent = text;
  view.error.hidden = !text;
}

function setBusy(view, busy) {
  if (!canDecide) return;
  for (const b of [view.approve, view.edit, view.reject, view.saveEdit]) b.disabled = busy;
  view.el.classList.toggle("busy", busy);
}

// -- list ---------------------------------------------------------------------------

function upsert(approval) {
  if (!approval || approval.id === undefined) return;
  if (approval.status !== "pending") {
    remove(approval.id, approval);
    return;
  }
  const existing = items.get(approval.id);
  if (existing) {
    update(existing, approval);
    return;
  }
  const view = create(approval);
  items.set(approval.id, view);
  // Oldest first, by request time then id.
  const key = (a) => [a.requestedAt || "", a.id];
  const after = [...items.values()].find((v) => v !== view && (key(v.approval)[0] > key(approval)[0] || (key(v.approval)[0] === key(approval)[0] && v.id > approval.id)));
  list.insertBefore(view.el, after ? after.el : null);
  updateCounts();
  if (current === null) select(approval.id, { focus: false });
}

function remove(id, approval) {
  const view = items.get(id);
  if (!view) return;
  const ids = [...items.keys()];
  const index = ids.indexOf(id);
  const hadFocus = view.el.contains(document.activeElement);
  view.el.remove();
  items.delete(id);
  if (approval && approval.status) {
    announce(`${approval.tool} ${approval.status}${approval.decidedBy ? ` by ${approval.decidedBy}` : ""}`);
  }
  if (current === id) {
    current = null;
    const next = ids[index + 1] ?? ids[index - 1];
    if (next !== undefined && items.has(next)) select(next, { focus: hadFocus });
  }
  updateCounts();
}

function replaceAll(approvals) {
  const seen = new Set();
  for (const a of approvals) {
    if (a.status === "pending") {
      seen.add(a.id);
      upsert(a);
    }
  }
  for (const id of [...items.keys()]) if (!seen.has(id)) remove(id);
}

function select(id, { focus = true } = {}) {
  if (!items.has(id)) return;
  if (current !== null && items.has(current)) {
    items.get(current).el.classList.remove("selected");
    items.get(current).el.removeAttribute("aria-current");
  }
  current = id;
  const view = items.get(id);
  view.el.classList.add("selected");
  view.el.setAttribute("aria-current", "true");
  if (focus) {
    view.el.focus();
    view.el.scrollIntoView({ block: "nearest" });
  }
}

function move(delta) {
  const ids = [...list.children].map((el) => Number(el.dataset.approvalId)).filter((id) => items.has(id));
  if (!ids.length) return;
  const index = current === null ? -1 : ids.indexOf(current);
  const next = ids[Math.max(0, Math.min(ids.length - 1, index + delta))];
  select(next);
}

// -- decisions ----------------------------------------------------------------------

async function decide(view, decision, { edited, reason } = {}) {
  const why = (reason ?? (view.reason ? view.reason.value : "")).trim();
  if (decision === "reject" && !why) {
    showError(view, "Give a reason to reject: it is sent to the agent.");
    view.reason?.focus();
    return false;
  }
  showError(view, "");
  setBusy(view, true);
  const body = {};
  if (why) body.reason = why;
  if (edited !== undefined) body.editedArguments = edited;
  if (decision === "approve" && view.form) {
    try {
      body.response = view.form.read();
    } catch (err) {
      showError(view, `Not valid JSON: ${err.message}`);
      setBusy(view, false);
      return false;
    }
  }
  try {
    const result = await apiFetch(`/api/approvals/${view.id}/${decision}/`, { method: "POST", body });
    remove(view.id, result && result.status ? result : { ...view.approval, status: decision === "approve" ? "approved" : "rejected" });
    return true;
  } catch (error) {
    showError(view, errorText(error));
    if (error && error.status === 409) {
      // Already decided or expired elsewhere: the queue's socket will drop it.
    }
    setBusy(view, false);
    return false;
  }
}

function selectedViews() {
  return [...items.values()].filter((v) => v.check.checked);
}

if (canDecide) {
  selectAll.addEventListener("change", () => {
    for (const v of items.values()) v.check.checked = selectAll.checked;
  });
  bulkApprove.addEventListener("click", async () => {
    bulkError.hidden = true;
    const views = selectedViews();
    if (!views.length) {
      bulkError.textContent = "Select at least one request first.";
      bulkError.hidden = false;
      return;
    }
    const results = await Promise.all(views.map((v) => decide(v, "approve")));
    reportBulk(results, "approved");
  });
  bulkReject.addEventListener("click", async () => {
    bulkError.hidden = true;
    const views = selectedViews();
    const reason = bulkReason.value.trim();
    if (!views.length || !reason) {
      bulkError.textContent = !views.length ? "Select at least one request first." : "Give a reason to reject the selected requests.";
      bulkError.hidden = false;
      if (views.length) bulkReason.focus();
      return;
    }
    const results = await Promise.all(views.map((v) => decide(v, "reject", { reason })));
    reportBulk(results, "rejected");
  });
}

function reportBulk(results, verb) {
  const ok = results.filter(Boolean).length;
  const failed = results.length - ok;
  announce(`${ok} ${verb}${failed ? `, ${failed} failed` : ""}`);
  if (failed) {
    bulkError.textContent = `${failed} request${failed === 1 ? "" : "s"} could not be ${verb}; see the messages on them.`;
    bulkError.hidden = false;
  }
  updateCounts();
}

document.addEventListener("keydown", (event) => {
  if (isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
  const view = current !== null ? items.get(current) : null;
  switch (event.key) {
    case "j":
      event.preventDefault();
      move(1);
      break;
    case "k":
      event.preventDefault();
      move(-1);
      break;
    case "a":
      if (canDecide && view) {
        event.preventDefault();
        decide(view, "approve");
      }
      break;
    case "r":
      if (canDecide && view) {
        event.preventDefault();
        if (view.reason.value.trim()) decide(view, "reject");
        else {
          showError(view, "Type the reason for rejecting, then press Enter.");
          view.reason.focus();
        }
      }
      break;
    case "x":
      if (canDecide && view) {
        event.preventDefault();
        view.check.checked = !view.check.checked;
        updateCounts();
      }
      break;
    default:
      break;
  }
});

// -- live ---------------------------------------------------------------------------

const socket = new ReconnectingSocket({
  url: () => list.dataset.socketPath,
  onMessage: (data) => {
    if (!data) return;
    if (data.kind === "snapshot" && Array.isArray(data.approvals)) replaceAll(data.approvals);
    else if (data.kind === "notification" && data.approval) upsert(data.approval);
  },
});

for (const approval of readJsonScript("queue-initial") || []) upsert(approval);
updateCounts();
setInterval(() => {
  const now = Date.now();
  for (const view of items.values()) tick(view, now);
}, 1000);
socket.start();
