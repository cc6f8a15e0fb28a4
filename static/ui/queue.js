// The approval queue: each request as a card with its whole context (thread, requester,
// agent, the agent's rationale, the results it was based on, risk, expiry countdown,
// whether you may authorize it and who can), approve / edit / reject / respond with text
// instead of running the call, snooze it for yourself, bulk decisions,
// a confirmation for destructive and bulk decisions, an undo window after approving,
// keyboard shortcuts that can be switched off (WCAG 2.1.4). Kept live by ws/approvals/.
// Read-only for users without the decide permission (the server enforces it either
// way). Data goes in with textContent (SEC-03).

import {
  ReconnectingSocket,
  apiFetch,
  approvalConfirmation,
  countdown,
  editPreview,
  errorText,
  h,
  isTyping,
  prettyJson,
  readJsonScript,
  localTime,
  relativeTime,
  sentence,
  timeElement,
  utcTitle,
} from "./common.js";

const list = document.getElementById("queue");
const empty = document.getElementById("queue-empty");
const count = document.getElementById("queue-count");
const live = document.getElementById("queue-live");
const canDecide = list.dataset.canDecide === "1";
const viewName = list.dataset.view || "pending";
// "I can decide" (mine) leaves out what this user snoozed; "All pending" keeps it.
const mine = list.dataset.mine === "1";
const mineCount = document.getElementById("queue-mine-count");
// Requests snoozed or unsnoozed on this page: a live update must not bring them back
// (a snooze made in another tab shows after a reload).
const snoozedHere = new Set();
const unsnoozedHere = new Set();
// The snoozed view lists what the server sent; a live update cannot tell a snooze.
let loadingInitial = true;
const undoSeconds = Number(list.dataset.undoSeconds || "0");
const selectAll = document.getElementById("select-all");
const bulkApprove = document.getElementById("bulk-approve");
const bulkReject = document.getElementById("bulk-reject");
const bulkReason = document.getElementById("bulk-reason");
const bulkError = document.getElementById("bulk-error");
const shortcutsToggle = document.getElementById("shortcuts-enabled");
const dialog = document.getElementById("confirm");
const SHORTCUTS_KEY = "countersign.queue.shortcuts";

const items = new Map(); // approval id -> view
let current = null; // id of the keyboard selection

function announce(text) {
  live.textContent = text;
}

// The live region tells arrivals and every outcome of a request seen on this page
// (approved, rejected, expired, cancelled, then executed or failed), each once.
const announced = new Map(); // approval id -> the last outcome announced

function outcomePhrase(ctx) {
  if (!ctx || !ctx.status || ctx.status === "pending") return "";
  const name = `${ctx.tool} #${ctx.id}`;
  const execution = ctx.outcome && ctx.outcome.execution;
  const state = execution && execution.state;
  if (state === "succeeded" || state === "resolved") return `${name} executed`;
  if (state === "failed") return `${name} failed${execution.error ? `: ${execution.error}` : ""}`;
  if (state === "outcome_unknown") return `${name}: its outcome is unknown`;
  const by = ctx.decidedBy ? ` by ${ctx.decidedBy}` : "";
  return { approved: `${name} approved${by}`, rejected: `${name} rejected${by}`, expired: `${name} expired: nobody decided in time`, cancelled: `${name} cancelled` }[ctx.status] || `${name} ${ctx.status}`;
}

function announceOutcome(ctx) {
  const phrase = outcomePhrase(ctx);
  if (!phrase || announced.get(ctx.id) === phrase) return;
  announced.set(ctx.id, phrase);
  announce(phrase);
}

// The server's count covers every page; live arrivals and decisions move it. A card
// in its undo window is approved, no longer pending: it is not counted (nor by the
// tab title), though it stays on the page until the window ends.
let total = Number(count.textContent) || 0;
const bulk = document.getElementById("bulk");

function updateCounts(delta = 0) {
  const n = [...items.values()].filter((v) => !v.uncounted).length;
  total = Math.max(n, total + delta);
  count.textContent = String(total);
  empty.hidden = items.size > 0;
  // Nothing to select on an empty page: no bulk bar.
  if (bulk) bulk.hidden = items.size === 0;
  if (selectAll) selectAll.checked = items.size > 0 && [...items.values()].every((v) => v.check.checked);
}

// The tab title's count (attention.js) is the server's "I can decide" total: the
// unfiltered "I can decide" view and the "All pending" view's "… you can decide"
// show that same number.
document.addEventListener("countersign:attention", (event) => {
  const n = event.detail && Number.isInteger(event.detail.count) ? event.detail.count : null;
  if (n === null) return;
  if (mineCount) mineCount.textContent = String(n);
  const filtered = ["tool", "agent", "requester", "risk", "q"].some((name) => (filters.get(name) || "").trim());
  if (viewName === "pending" && mine && !filtered) {
    total = n;
    updateCounts();
  }
});

function shortcutsOn() {
  return localStorage.getItem(SHORTCUTS_KEY) !== "off";
}

// A destructive or high-risk approval, and every bulk decision, asks first (LP-01).
function needsConfirmation(ctx) {
  return ctx.isDestructive || highRisk(ctx);
}

function highRisk(ctx) {
  return Boolean(ctx.risk && (ctx.risk.level === "high" || ctx.risk.level === "critical"));
}

// -- confirmation dialog -------------------------------------------------------------

function confirmDialog(title, text, lines = []) {
  return new Promise((resolve) => {
    const yes = document.getElementById("confirm-yes");
    const no = document.getElementById("confirm-no");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    const ul = document.getElementById("confirm-list");
    ul.replaceChildren(...lines.map((line) => h("li", { text: line })));
    const opener = document.activeElement;
    const done = (answer) => {
      yes.removeEventListener("click", onYes);
      no.removeEventListener("click", onNo);
      dialog.removeEventListener("cancel", onNo);
      dialog.close();
      if (opener instanceof HTMLElement) opener.focus();
      resolve(answer);
    };
    const onYes = () => done(true);
    const onNo = (event) => {
      if (event) event.preventDefault();
      done(false);
    };
    yes.addEventListener("click", onYes);
    no.addEventListener("click", onNo);
    dialog.addEventListener("cancel", onNo);
    dialog.showModal();
    yes.focus(); // Enter confirms what the user just asked for; Escape cancels
  });
}

// -- one request ----------------------------------------------------------------------

function jsonText(value) {
  return typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value);
}

function diffList(diff) {
  return h(
    "ul",
    { class: "arg-diff" },
    diff.map((d) =>
      h(
        "li",
        { class: `diff-${d.change}` },
        h("code", { text: d.path }),
        ": ",
        d.change === "added" ? null : h("del", { text: jsonText(d.proposed) }),
        d.change === "changed" ? " → " : " ",
        d.change === "removed" ? null : h("ins", { text: jsonText(d.edited) }),
      ),
    ),
  );
}

function create(ctx) {
  const id = ctx.id;
  const check = h("input", { type: "checkbox", id: `select-${id}` });
  // One line per request; the rest (the detail) shows for the selected card only.
  const open = h("button", { type: "button", class: "req-open", "aria-expanded": "false", "aria-controls": `req-detail-${id}` });
  const title = h("h2", { class: "req-tool", id: `req-title-${id}` }, open);
  const risk = h("span", { class: "badge" });
  const votes = h("span", { class: "badge badge-votes" });
  const finalState = h("span", { class: "badge final-state", hidden: true });
  const summary = h("span", { class: "req-summary" });
  const requester = h("span", { class: "req-requester" });
  const age = h("span", { class: "req-age" });
  const expiry = h("span", { class: "req-expiry" });
  const snoozed = h("span", { class: "req-snoozed", hidden: true });
  const headline = h("p", { class: "req-headline", id: `req-headline-${id}` });
  const label = h("p", { class: "req-label muted" });
  const verdict = h("p", { class: "verdict verdict-bad", hidden: true });
  const threadLink = h("a", { class: "req-thread" });
  const callLink = h("a", { class: "req-call", text: "Show the call in its thread" });
  const agent = h("span", { class: "req-agent" });
  const riskWhy = h("ul", { class: "req-risk-reasons" });
  const rationale = h("blockquote", { class: "req-rationale" });
  const rationaleBox = h("div", { class: "req-rationale-box" }, h("p", { class: "req-meta", text: "The agent said before the call:" }), rationale);
  const basedOn = h("ul", { class: "req-based-on" });
  const basedOnBox = h("details", { class: "req-based-on-box", open: true }, h("summary", { text: "Results it was based on" }), basedOn);
  const argsHeading = h("p", { class: "req-meta", text: "Arguments:" });
  const args = h("pre", { class: "call-args req-args" });
  const diffBox = h("div", { class: "req-diff" });
  const changedNote = h("p", { class: "req-changed" });
  const previousArgs = h("pre", { class: "call-args req-previous-args" });
  const mismatch = h("p", { class: "req-mismatch verdict verdict-bad", role: "alert", hidden: true });
  const changed = h("div", { class: "req-changed-box", hidden: true }, changedNote, h("p", { class: "req-meta", text: "Approved earlier:" }), previousArgs);
  const message = h("p", { class: "req-message" });
  const authNote = h("p", { class: "notice req-auth", id: `req-auth-${id}`, hidden: true });
  const outcome = h("p", { class: "req-outcome", hidden: true });
  const undoBox = h("div", { class: "req-undo", role: "status", hidden: true });
  const undoNotice = h("p", { class: "notice req-undo-notice", hidden: true });
  const form = needsForm(ctx) ? responseForm(ctx.responseSchema, id) : null;
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const actionSlot = h("div", { class: "req-action-slot" });
  const warnings = h("ul", { class: "req-warnings notice", hidden: true, "aria-label": "Check before deciding" });
  const reviewFacts = h("dl", { class: "req-facts" });
  const detail = h(
    "div",
    { class: "req-detail", id: `req-detail-${id}` },
    headline,
    warnings,
    authNote,
    undoBox,
    undoNotice,
    error,
    actionSlot,
    reviewFacts,
    verdict,
    argsHeading,
    args,
    diffBox,
    mismatch,
    form ? form.el : null,
    outcome,
    label,
    message,
    changed,
    riskWhy,
    rationaleBox,
    basedOnBox,
    h("p", { class: "req-meta" }, threadLink, " · ", callLink, " · ", agent),
  );
  const el = h(
    "li",
    { class: "req card", tabindex: "-1", id: `req-${id}`, dataset: { approvalId: String(id) }, "aria-labelledby": `req-title-${id}` },
    h(
      "div",
      { class: "req-head" },
      canDecide && viewName === "pending" ? h("label", { class: "check", for: `select-${id}` }, check, h("span", { class: "visually-hidden", text: `Select ${ctx.tool} request ${id}` })) : null,
      title,
      finalState,
      summary,
      risk,
      votes,
      h("span", { class: "req-line" }, requester, " · ", age, " · ", expiry, snoozed),
    ),
    detail,
  );
  const view = { snoozed, undoNotice, finalState, warnings, reviewFacts, id, el, open, check, title, risk, votes, summary, headline, riskWhy, label, verdict, threadLink, callLink, requester, agent, age, expiry, rationale, rationaleBox, basedOn, basedOnBox, args, argsHeading, diffBox, mismatch, changed, changedNote, previousArgs, message, authNote, outcome, undoBox, error, actionSlot, detail, ctx, form, editing: false };
  if (canDecide && (viewName === "pending" || viewName === "snoozed")) buildActions(view);
  open.addEventListener("click", () => select(id));
  // Focus selects the card, except on its bulk checkbox: opening the card there would
  // move the box under the pointer between press and release.
  el.addEventListener("focusin", (event) => {
    if (event.target !== check) select(id, { focus: false });
  });
  el.addEventListener("click", (event) => {
    if (!(event.target instanceof Element) || !event.target.closest("button, a, input, textarea, label, select, summary")) select(id);
  });
  check.addEventListener("change", updateCounts);
  update(view, ctx);
  return view;
}

// A request that is not (only) a tool call is answered with a response to its schema.
function needsForm(ctx) {
  return ctx.kind !== "tool_call" && !ctx.toolCallId && ctx.responseSchema && typeof ctx.responseSchema === "object";
}

// A form generated from a JSON Schema object's top-level properties (enum → select,
// boolean → checkbox, number/integer → number, string → text); anything else, or a
// schema without properties, is answered as raw JSON in a textarea. ``initial``
// fills the fields; ``onInput`` is called on every change.
function schemaForm(schema, idPrefix, { legend = "Response", initial = {}, onInput } = {}) {
  const props = schema && schema.type === "object" && schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const simple = props && Object.values(props).every((p) => p && (Array.isArray(p.enum) || ["string", "boolean", "number", "integer"].includes(p.type)));
  if (!simple) return null;
  const fields = [];
  const el = h("fieldset", { class: "schema-form" }, h("legend", { text: legend }));
  for (const [name, prop] of Object.entries(props)) {
    const fid = `${idPrefix}-${name}`;
    let input;
    if (Array.isArray(prop.enum)) {
      input = h("select", { id: fid }, h("option", { value: "", text: "—" }), ...prop.enum.map((v) => h("option", { value: String(v), text: String(v) })));
    } else if (prop.type === "boolean") {
      input = h("input", { id: fid, type: "checkbox" });
    } else {
      input = h("input", { id: fid, type: prop.type === "string" ? "text" : "number", step: prop.type === "integer" ? "1" : "any" });
    }
    if (name in initial) {
      if (prop.type === "boolean") input.checked = Boolean(initial[name]);
      else input.value = String(initial[name]);
    }
    if (onInput) input.addEventListener("input", onInput);
    if (onInput) input.addEventListener("change", onInput);
    fields.push({ name, prop, input });
    const hint = prop.description ? h("span", { class: "muted field-hint", text: ` ${prop.description}` }) : null;
    el.append(h("p", {}, h("label", { for: fid, text: `${prop.title || name}${required.has(name) ? " *" : ""}` }), " ", input, hint));
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
  const write = (value) => {
    for (const { name, prop, input } of fields) {
      if (prop.type === "boolean") input.checked = Boolean(value[name]);
      else input.value = name in value ? String(value[name]) : "";
    }
  };
  return { el, read, write };
}

function responseForm(schema, id) {
  const generated = schemaForm(schema, `response-${id}`);
  if (generated) return generated;
  const raw = h("textarea", { id: `response-${id}`, rows: "6", spellcheck: "false", class: "edit-args" });
  raw.value = "{}";
  const el = h("div", { class: "response-form" }, h("label", { for: `response-${id}`, text: "Response (JSON matching the schema below)" }), raw, h("pre", { class: "call-args", text: prettyJson(schema) }));
  return { el, read: () => JSON.parse(raw.value) };
}

// The client-side diff of edited against proposed arguments (the server computes the
// same for the audit trail, approvals.selectors.arguments_diff).
function argumentsDiff(proposed, edited) {
  const out = [];
  const walk = (path, left, right) => {
    const isObj = (v) => v && typeof v === "object" && !Array.isArray(v);
    if (isObj(left) && isObj(right)) {
      for (const key of [...new Set([...Object.keys(left), ...Object.keys(right)])].sort()) {
        const sub = path ? `${path}.${key}` : key;
        if (!(key in right)) out.push({ path: sub, change: "removed", proposed: left[key], edited: null });
        else if (!(key in left)) out.push({ path: sub, change: "added", proposed: null, edited: right[key] });
        else walk(sub, left[key], right[key]);
      }
    } else if (JSON.stringify(left) !== JSON.stringify(right)) {
      out.push({ path: path || "(arguments)", change: "changed", proposed: left, edited: right });
    }
  };
  walk("", proposed, edited);
  return out;
}

function buildActions(view) {
  const id = view.id;
  const approve = h("button", { type: "button", class: "btn btn-approve", text: "Approve" });
  const edit = h("button", { type: "button", class: "btn", text: "Edit & approve", "aria-expanded": "false", "aria-controls": `editor-${id}` });
  const reason = h("input", { type: "text", id: `reason-${id}`, class: "reason", placeholder: "Reason (required to reject)" });
  const reject = h("button", { type: "button", class: "btn btn-reject", text: "Reject" });
  const textarea = h("textarea", { id: `edit-${id}`, rows: "8", spellcheck: "false", class: "edit-args" });
  const rawToggle = h("button", { type: "button", class: "btn btn-quiet", text: "Edit as raw JSON", "aria-pressed": "false" });
  const saveEdit = h("button", { type: "button", class: "btn btn-approve", text: "Approve edited arguments" });
  const cancelEdit = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const editDiff = h("div", { class: "edit-diff", "aria-live": "polite" });
  const rawBox = h("div", { class: "raw-json", hidden: true }, h("label", { for: `edit-${id}`, text: "Edited arguments (JSON object; the server validates them again)" }), textarea);
  const formSlot = h("div", { class: "form-slot" });
  const editor = h("div", { class: "editor", id: `editor-${id}`, hidden: true }, formSlot, rawBox, h("p", { class: "req-meta", text: "Changes against the proposed arguments:" }), editDiff, h("div", { class: "actions" }, rawToggle, saveEdit, cancelEdit));
  // Respond: answer the call with text instead of running it (the agent reads it as the result).
  const respond = h("button", { type: "button", class: "btn", text: "Respond", "aria-expanded": "false", "aria-controls": `respond-${id}` });
  const respondText = h("textarea", { id: `respond-text-${id}`, rows: "3", maxlength: "10000", class: "respond-text", "aria-describedby": `respond-help-${id}` });
  const sendRespond = h("button", { type: "button", class: "btn btn-approve", text: "Send answer" });
  const cancelRespond = h("button", { type: "button", class: "btn btn-quiet", text: "Cancel" });
  const respondBox = h(
    "div",
    { class: "respond-box", id: `respond-${id}`, hidden: true },
    h("label", { for: `respond-text-${id}`, text: "Answer for the agent" }),
    respondText,
    h("p", { class: "req-meta", id: `respond-help-${id}`, text: "The tool does not run: the agent gets this text as the call's result and continues." }),
    h("div", { class: "actions" }, sendRespond, cancelRespond),
  );
  // Snooze: hide it from your own "I can decide" view for a while; it stays pending for everyone.
  const snoozeFor = h("select", { id: `snooze-${id}`, class: "snooze-for" }, h("option", { value: "3600", text: "1 hour" }), h("option", { value: "14400", text: "4 hours" }), h("option", { value: "86400", text: "24 hours" }));
  const snooze = h("button", { type: "button", class: "btn btn-quiet", text: "Snooze" });
  const snoozeLabel = h("label", { for: `snooze-${id}`, class: "visually-hidden", text: "Snooze for" });
  const actions = h("div", { class: "actions" }, approve, edit, h("label", { for: `reason-${id}`, class: "visually-hidden", text: "Reason for rejecting" }), reason, reject, respond, snoozeLabel, snoozeFor, snooze);
  if (view.form) edit.hidden = respond.hidden = true; // a question has no arguments to edit, nor a call to answer
  view.actionSlot.append(actions, editor, respondBox);
  Object.assign(view, { approve, edit, reason, reject, respond, respondText, respondBox, sendRespond, snooze, snoozeFor, textarea, editor, saveEdit, cancelEdit, rawToggle, rawBox, formSlot, editDiff, actions, schemaEditor: null });

  respond.addEventListener("click", () => {
    const open = respondBox.hidden;
    respondBox.hidden = !open;
    respond.setAttribute("aria-expanded", String(open));
    if (open) respondText.focus();
  });
  const closeRespond = () => {
    respondBox.hidden = true;
    respond.setAttribute("aria-expanded", "false");
    respond.focus();
  };
  cancelRespond.addEventListener("click", closeRespond);
  respondText.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeRespond();
  });
  sendRespond.addEventListener("click", () => decide(view, "respond", { text: respondText.value }));
  snooze.addEventListener("click", () => toggleSnooze(view));

  approve.addEventListener("click", () => approveWithChecks(view));
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
  rawToggle.addEventListener("click", () => {
    setRaw(view, view.rawBox.hidden);
    (view.rawBox.hidden ? view.formSlot.querySelector("input, select") : textarea)?.focus();
  });
  textarea.addEventListener("input", () => refreshEditDiff(view));
  saveEdit.addEventListener("click", () => {
    const edited = readEdited(view);
    if (edited === undefined) return;
    approveWithChecks(view, { edited });
  });
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeEditor(view);
  });
}

function readEdited(view) {
  if (view.schemaEditor && view.rawBox.hidden) return view.schemaEditor.read();
  let edited;
  try {
    edited = JSON.parse(view.textarea.value);
  } catch (err) {
    showError(view, `Not valid JSON: ${err.message}`);
    return undefined;
  }
  if (!edited || typeof edited !== "object" || Array.isArray(edited)) {
    showError(view, "The edited arguments must be a JSON object.");
    return undefined;
  }
  return edited;
}

function refreshEditDiff(view) {
  let edited;
  try {
    edited = view.schemaEditor && view.rawBox.hidden ? view.schemaEditor.read() : JSON.parse(view.textarea.value);
  } catch {
    view.editDiff.replaceChildren(h("p", { class: "muted", text: "(not valid JSON yet)" }));
    return;
  }
  const diff = argumentsDiff(view.ctx.proposedArguments, edited);
  view.editDiff.replaceChildren(diff.length ? diffList(diff) : h("p", { class: "muted", text: "No changes yet." }));
}

function setRaw(view, raw) {
  if (view.schemaEditor) {
    // Carry the values across so the two editors never disagree.
    if (raw) view.textarea.value = prettyJson(view.schemaEditor.read());
    else {
      try {
        view.schemaEditor.write(JSON.parse(view.textarea.value));
      } catch {
        /* keep the form's values */
      }
    }
    view.schemaEditor.el.hidden = raw;
  }
  view.rawBox.hidden = !raw;
  view.rawToggle.setAttribute("aria-pressed", raw ? "true" : "false");
  view.rawToggle.textContent = raw ? "Edit in the form" : "Edit as raw JSON";
  refreshEditDiff(view);
}

function openEditor(view, start = view.ctx.editedArguments ?? view.ctx.proposedArguments) {
  view.editing = true;
  view.textarea.value = prettyJson(start);
  if (!view.schemaEditor && view.ctx.parametersSchema) {
    view.schemaEditor = schemaForm(view.ctx.parametersSchema, `edit-${view.id}-field`, { legend: "Edit the arguments", initial: start || {}, onInput: () => refreshEditDiff(view) });
    if (view.schemaEditor) view.formSlot.append(view.schemaEditor.el);
  }
  view.editor.hidden = false;
  view.edit.setAttribute("aria-expanded", "true");
  setRaw(view, !view.schemaEditor);
  const first = view.editor.querySelector("input, select, textarea");
  if (first) first.focus();
}

function closeEditor(view) {
  view.editing = false;
  view.editor.hidden = true;
  view.edit.setAttribute("aria-expanded", "false");
  view.edit.focus();
}

function money(value) {
  return typeof value === "number" ? value.toFixed(2) : null;
}

function update(view, ctx) {
  view.ctx = ctx;
  const facts = ctx.facts || {};
  const viewer = facts.viewer || {};
  const votes = facts.votes || { given: 0, required: 1, text: "" };
  const args = facts.arguments || { approved: ctx.editedArguments ?? ctx.proposedArguments, diff: ctx.argumentsDiff || [] };
  view.open.textContent = ctx.tool;
  const review = facts.review || null;
  view.summary.textContent = (review && review.summary) || ctx.label || "";
  view.warnings.replaceChildren(...((review && review.warnings) || []).map((w) => h("li", { text: sentence(`Check first: ${w}`) })));
  view.warnings.hidden = !(review && review.warnings && review.warnings.length);
  view.reviewFacts.replaceChildren(...((review && review.declared && review.facts) || []).flatMap((f) => [h("dt", { text: f.label }), h("dd", { text: f.value })]));
  view.label.textContent = "";
  view.label.hidden = true;
  const level = (ctx.risk && ctx.risk.level) || "medium";
  view.risk.textContent = `${level} risk`;
  view.risk.className = `badge risk-${level}${level === "high" || level === "critical" ? " badge-destructive" : ""}`;
  view.votes.textContent = votes.required > 1 || votes.given ? votes.text : "";
  view.votes.hidden = !view.votes.textContent;
  view.headline.textContent = facts.headline || "";
  view.riskWhy.replaceChildren(...((ctx.risk && ctx.risk.reasons) || []).map((r) => h("li", { text: r })));
  // Only a problem is flagged: "valid" next to a call the tool may still refuse would mislead.
  view.verdict.hidden = ctx.schemaValid !== false;
  view.verdict.textContent = ctx.schemaValid === false ? `The arguments do not fit the tool's schema: ${ctx.schemaErrors || "see the schema"}` : "";
  view.threadLink.textContent = `Thread: ${ctx.thread.title}`;
  view.threadLink.href = ctx.thread.url;
  view.callLink.href = ctx.callUrl;
  view.requester.textContent = `requested by ${ctx.requester || "unknown"}`;
  view.agent.textContent = `agent ${ctx.agent}`;
  view.rationale.textContent = ctx.rationale || "";
  view.rationaleBox.hidden = !ctx.rationale;
  view.basedOn.replaceChildren(
    ...(ctx.basedOn || []).map((r) => h("li", {}, h("code", { text: r.tool || r.toolCallId }), r.error ? h("span", { class: "badge badge-destructive", text: "error" }) : null, h("pre", { class: "call-args", text: r.content }))),
  );
  view.basedOnBox.hidden = !(ctx.basedOn && ctx.basedOn.length);
  view.message.textContent = ctx.message || "";
  view.message.hidden = !ctx.message || ctx.kind === "tool_call";
  // What would run: the approved (edited) arguments, with the proposal beside them.
  view.argsHeading.textContent = args.edited ? `Arguments as edited${args.editedBy ? ` by ${args.editedBy}` : ""} (these run):` : "Arguments:";
  view.args.textContent = prettyJson(args.approved);
  // A question bound to no call has no arguments (IR-18).
  view.args.hidden = view.argsHeading.hidden = !ctx.toolCallId && ctx.kind !== "tool_call";
  view.mismatch.hidden = !ctx.argumentsMismatch;
  if (ctx.argumentsMismatch) view.mismatch.textContent = `The agent reported running other arguments than the approved ones: ${JSON.stringify(ctx.argumentsMismatch.reportedArguments)}`;
  view.diffBox.replaceChildren(...(args.diff && args.diff.length ? [h("p", { class: "req-meta", text: "Proposed by the agent → approved:" }), diffList(args.diff)] : []));
  view.changed.hidden = !ctx.reapproval;
  if (ctx.reapproval) {
    view.changedNote.textContent = ctx.reapproval === "schema_changed" ? `Schema changed since approval (request #${ctx.supersedes})` : `Arguments changed since approval (request #${ctx.supersedes})`;
    view.previousArgs.textContent = prettyJson(ctx.previousArguments);
  }
  const pending = (viewName === "pending" || viewName === "snoozed") && ctx.status === "pending";
  const blocked = pending && canDecide && !viewer.canApprove;
  const words = [viewer.whyNot, viewer.whoCan].filter(Boolean).join(" ");
  view.authNote.hidden = !(pending && words);
  view.authNote.textContent = words;
  if (view.approve) {
    view.approve.disabled = blocked;
    view.edit.disabled = blocked;
    view.reject.disabled = pending && !viewer.canReject;
    view.reason.disabled = view.reject.disabled;
    view.respond.disabled = pending && !viewer.canRespond;
    view.sendRespond.disabled = view.respond.disabled;
    if (blocked) {
      view.approve.setAttribute("aria-describedby", view.authNote.id);
    } else view.approve.removeAttribute("aria-describedby");
  }
  // Each final state has its own word, icon and colour (app.css .state-*).
  const final = finalState(ctx);
  view.finalState.hidden = !final;
  if (final) {
    view.finalState.textContent = final.text;
    view.finalState.className = `badge final-state state-${final.state}`;
  }
  view.outcome.hidden = !ctx.outcome || viewName !== "decided";
  if (ctx.outcome) view.outcome.textContent = [facts.headline, outcomeText(ctx.outcome)].filter(Boolean).join(" ");
  // The decided view says it once, in the outcome line.
  view.headline.hidden = viewName === "decided";
  paintSnooze(view);
  tick(view);
}

// A request this user snoozed says until when (their local time, UTC on hover),
// and its Snooze button becomes Unsnooze.
function paintSnooze(view) {
  const until = view.ctx.status === "pending" ? view.ctx.snoozedUntil : null;
  view.snoozed.hidden = !until;
  view.snoozed.replaceChildren(...(until ? [" · Snoozed until ", timeElement(until)] : []));
  if (!view.snooze) return;
  view.snooze.textContent = until ? "Unsnooze" : "Snooze";
  view.snoozeFor.hidden = Boolean(until);
}

// The badge of a decided request: ``{state, text}``, or null while it is pending.
function finalState(ctx) {
  if (!ctx.status || ctx.status === "pending") return null;
  const execution = ctx.outcome && ctx.outcome.execution;
  const ran = execution && execution.state;
  if (ctx.status === "approved" && (ran === "succeeded" || ran === "resolved")) return { state: "succeeded", text: "Approved · executed" };
  if (ctx.status === "approved" && ran === "failed") return { state: "failed", text: "Approved · failed" };
  if (ctx.status === "approved" && ran === "outcome_unknown") return { state: "outcome_unknown", text: "Approved · outcome unknown" };
  const words = { approved: "Approved", rejected: "Rejected", responded: "Responded", expired: "Expired", cancelled: "Cancelled" };
  return { state: ctx.status, text: words[ctx.status] || ctx.status };
}

function outcomeText(outcome) {
  return outcome.execution && outcome.execution.result ? `Result: ${outcome.execution.result}` : "";
}

function tick(view, now = Date.now()) {
  const a = view.ctx;
  if (a.snoozedUntil && Date.parse(a.snoozedUntil) <= now) {
    a.snoozedUntil = null; // the snooze is over: the request is back for this user
    paintSnooze(view);
  }
  view.age.textContent = a.requestedAt ? relativeTime(a.requestedAt, now) : "";
  view.age.title = utcTitle(a.requestedAt);
  if (viewName !== "decided") {
    const left = countdown(a.expiresAt, now);
    view.expiry.textContent = left === "expired" ? "expired" : `expires in ${left}`;
    view.expiry.classList.toggle("soon", Date.parse(a.expiresAt) - now < 5 * 60 * 1000);
    view.expiry.title = utcTitle(a.expiresAt);
  } else {
    // One time per card: when it was decided (or expired), in the viewer's time.
    const at = a.decidedAt || a.expiresAt;
    const verb = { approved: "approved", rejected: "rejected", responded: "answered", expired: "expired", cancelled: "cancelled" }[a.status] || a.status;
    view.expiry.textContent = `${verb} ${localTime(at)}`;
    view.expiry.title = utcTitle(at);
  }
  if (view.undoUntil) {
    const left = Math.max(0, Math.ceil((Date.parse(view.undoUntil) - now) / 1000));
    // The headline says what stands: the approval, not the wait it ended.
    view.headline.textContent = `Approved by you — executes in ${left} s; you can undo it until then.`;
    view.headline.hidden = false;
    if (left <= 0) {
      view.undoUntil = null;
      remove(view.id, { ...view.ctx, status: "approved" });
    }
  }
}

function showError(view, text) {
  view.error.textContent = text;
  view.error.hidden = !text;
}

function showNote(view, text) {
  view.headline.textContent = `${text} ${(view.ctx.facts && view.ctx.facts.headline) || ""}`.trim();
}

function setBusy(view, busy) {
  if (!view.approve) return;
  const viewer = (view.ctx.facts && view.ctx.facts.viewer) || {};
  for (const b of [view.approve, view.edit, view.reject, view.saveEdit]) b.disabled = busy || (b === view.reject ? !viewer.canReject : !viewer.canApprove);
  for (const b of [view.respond, view.sendRespond]) b.disabled = busy || !viewer.canRespond;
  view.el.classList.toggle("busy", busy);
}

// -- undo ------------------------------------------------------------------------------

function showUndo(view, undoUntil) {
  view.undoUntil = undoUntil;
  view.uncounted = true;
  updateCounts(-1);
  const undo = h("button", { type: "button", class: "btn", text: "Undo", "aria-describedby": view.headline.id });
  view.undoBox.replaceChildren(undo);
  tick(view);
  view.undoBox.hidden = false;
  view.actions.hidden = true;
  view.editor.hidden = true;
  undo.addEventListener("click", async () => {
    undo.disabled = true;
    try {
      const edit = view.lastEdit ?? view.ctx.editedArguments;
      const hadEdit = Boolean(edit);
      const back = await apiFetch(`/api/approvals/${view.id}/undo/`, { method: "POST", body: {} });
      view.undoUntil = null;
      view.uncounted = false;
      updateCounts(1);
      view.undoBox.hidden = true;
      view.actions.hidden = false;
      setBusy(view, false);
      await refresh(view.id, back);
      const dropped = hadEdit && edit && (back.editedArguments === null || back.editedArguments === undefined);
      if (dropped) {
        // Never let a plain Approve run the proposal unseen: the edit is back in the
        // editor, and Approve says it approves the proposal.
        const changes = argumentsDiff(back.proposedArguments ?? view.ctx.proposedArguments, edit)
          .map((d) => `${d.path} ${d.change === "added" ? "" : `${jsonText(d.proposed)} → `}${d.change === "removed" ? "removed" : jsonText(d.edited)}`)
          .join(", ");
        const said = `Undone: your edit (${changes}) was discarded with the approval; the request is back with the arguments the agent proposed. Your edit is in the editor below: approve it again there, or approve the proposal as it stands.`;
        view.undoNotice.textContent = said;
        view.undoNotice.hidden = false;
        view.approve.textContent = "Approve as proposed";
        announce(said);
        openEditor(view, edit);
      } else {
        const said = `Approval undone; the request is pending again.`;
        showNote(view, said);
        announce(said);
        view.approve.focus();
      }
    } catch (error) {
      showError(view, errorText(error));
      view.undoUntil = null;
      remove(view.id, { ...view.ctx, status: "approved" });
    }
  });
  tick(view);
  undo.focus();
}

// Inside the undo window the card shows what will run: an edited approval's card is
// read again (the edited arguments, their summary and the proposal beside them).
async function showApproved(view) {
  try {
    const res = await fetch(`/approvals/${view.id}/context.json`, { credentials: "same-origin" });
    if (!res.ok || !view.undoUntil) return;
    const ctx = await res.json();
    if (ctx.status !== "approved" || !view.undoUntil) return;
    update(view, ctx);
    view.actions.hidden = true;
    view.editor.hidden = true;
    tick(view);
  } catch {
    /* offline: the thread page shows the edit; the undo still works */
  }
}

// -- list ------------------------------------------------------------------------------

const filters = new URLSearchParams(window.location.search);

// The page's filters (server-side for the first render) applied to live additions too.
function matchesFilters(ctx) {
  const want = (name) => (filters.get(name) || "").trim();
  if (want("tool") && ctx.tool !== want("tool")) return false;
  if (want("agent") && ctx.agent !== want("agent")) return false;
  if (want("requester") && ctx.requester !== want("requester")) return false;
  if (want("risk") && (!ctx.risk || ctx.risk.level !== want("risk"))) return false;
  const q = want("q").toLowerCase();
  if (q) {
    const hay = [ctx.tool, ctx.thread && ctx.thread.title, ctx.requester, ctx.reason, JSON.stringify(ctx.proposedArguments)].join(" ").toLowerCase();
    if (!hay.includes(q)) return false;
  }
  return true;
}

function belongs(ctx) {
  let inView = viewName === "decided" ? ctx.status !== "pending" : ctx.status === "pending";
  if (viewName === "snoozed") inView = inView && (loadingInitial || items.has(ctx.id)) && !unsnoozedHere.has(ctx.id);
  else if (viewName === "pending" && mine) {
    // Snoozed here, or before this page loaded (the server's card says until when).
    const snoozed = ctx.snoozedUntil && Date.parse(ctx.snoozedUntil) > Date.now();
    inView = inView && !snoozedHere.has(ctx.id) && !snoozed;
  }
  // "I can decide" lists what waits for this user (approvals_waiting_for): a live
  // arrival routed elsewhere, or one they voted on, is not theirs.
  const viewer = (ctx.facts && ctx.facts.viewer) || null;
  const theirs = !(viewName === "pending" && mine) || !viewer || viewer.canApprove || viewer.canReject;
  return inView && theirs && matchesFilters(ctx);
}

function upsert(ctx, { initial = false } = {}) {
  if (!ctx || ctx.id === undefined) return;
  const existing = items.get(ctx.id);
  if (existing && existing.undoUntil && ctx.status === "approved") return; // in its undo window
  if (!belongs(ctx)) {
    remove(ctx.id, ctx);
    return;
  }
  if (existing) {
    update(existing, ctx);
    return;
  }
  const view = create(ctx);
  items.set(ctx.id, view);
  if (initial) list.append(view.el); // the server's order: urgency, or newest decision first
  else if (viewName === "decided") list.prepend(view.el); // a new decision is the newest
  else {
    // Keep the page's order: soonest expiry (default) or oldest request first.
    const field = (filters.get("sort") || "expires") === "expires" ? "expiresAt" : "requestedAt";
    const after = [...items.values()].find((v) => v !== view && (v.ctx[field] || "") > (ctx[field] || ""));
    list.insertBefore(view.el, after ? after.el : null);
  }
  updateCounts(initial ? 0 : 1);
  if (!initial) {
    const what = (ctx.facts && ctx.facts.review && ctx.facts.review.summary) || ctx.label || "";
    if (viewName === "decided") announceOutcome(ctx);
    else announce(`New request: ${ctx.tool} #${ctx.id}${what ? ` — ${what}` : ""}`);
  }
  if (current === null) select(ctx.id, { focus: false });
}

// A live notification carries the broadcast snapshot; the card (with what this user
// may do) is read again from the server.
async function refresh(id, snapshot) {
  try {
    const res = await fetch(`/approvals/${id}/context.json`, { credentials: "same-origin" });
    if (res.ok) {
      const ctx = await res.json();
      const seen = items.has(id) || announced.has(id);
      upsert(ctx);
      if (seen) announceOutcome(ctx);
      return;
    }
  } catch {
    /* offline: the socket's snapshot is enough to drop a decided card */
  }
  if (snapshot && !belongs(snapshot)) remove(id, snapshot);
}

function remove(id, ctx) {
  const view = items.get(id);
  if (!view) return;
  const ids = [...items.keys()];
  const index = ids.indexOf(id);
  const hadFocus = view.el.contains(document.activeElement);
  view.el.remove();
  items.delete(id);
  const counted = !view.uncounted;
  if (ctx && ctx.status) announceOutcome(ctx);
  if (current === id) {
    current = null;
    const next = ids[index + 1] ?? ids[index - 1];
    if (next !== undefined && items.has(next)) select(next, { focus: hadFocus });
  }
  updateCounts(counted ? -1 : 0);
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
  for (const other of items.values()) other.open.setAttribute("aria-expanded", String(other === view));
  // A line's detail (the agent's rationale, the results it used) is read when it opens.
  if (view.ctx.detail === false && !view.loading) {
    view.loading = true;
    refresh(id).finally(() => {
      view.loading = false;
    });
  }
  if (focus) {
    view.el.focus();
    view.el.scrollIntoView({ block: "nearest" });
  }
}

function move(delta) {
  const ids = [...list.children].map((el) => Number(el.dataset.approvalId)).filter((id) => items.has(id));
  if (!ids.length) return;
  const index = current === null ? -1 : ids.indexOf(current);
  select(ids[Math.max(0, Math.min(ids.length - 1, index + delta))]);
}

// -- decisions -------------------------------------------------------------------------

async function approveWithChecks(view, { edited } = {}) {
  const viewer = (view.ctx.facts && view.ctx.facts.viewer) || {};
  if (!viewer.canApprove) {
    showError(view, [viewer.whyNot, viewer.whoCan].filter(Boolean).join(" ") || "You may not approve this request.");
    return false;
  }
  let risk = view.ctx.risk;
  let review = (view.ctx.facts && view.ctx.facts.review) || {};
  let ask = needsConfirmation(view.ctx);
  if (edited !== undefined && view.ctx.kind === "tool_call") {
    // The confirmation shows what would run: the edit, graded on its own arguments.
    try {
      ({ risk, review, needsConfirmation: ask } = await editPreview(view.id, edited));
    } catch (error) {
      showError(view, errorText(error));
      return false;
    }
  }
  if (ask) {
    const { title, text, lines } = approvalConfirmation({ tool: view.ctx.tool, risk, review, edited });
    const ok = await confirmDialog(title, text, lines);
    if (!ok) return false;
  }
  return decide(view, "approve", { edited });
}

async function decide(view, decision, { edited, reason, text, bulk = false } = {}) {
  if (decision === "respond" && !(text || "").trim()) {
    showError(view, "Write the answer first: the agent gets it instead of the tool's result.");
    view.respondText?.focus();
    return false;
  }
  const why = decision === "respond" ? "" : (reason ?? (view.reason ? view.reason.value : "")).trim();
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
  if (decision === "respond") body.text = text;
  if (decision === "approve" && view.form) {
    try {
      body.response = view.form.read();
    } catch (err) {
      showError(view, `Not valid JSON: ${err.message}`);
      setBusy(view, false);
      return false;
    }
  }
  const undoable = decision === "approve" && undoSeconds > 0 && view.ctx.kind === "tool_call";
  if (undoable) body.undo = true;
  try {
    const result = await apiFetch(`/api/approvals/${view.id}/${decision}/`, { method: "POST", body });
    view.undoNotice.hidden = true;
    if (view.approve) view.approve.textContent = "Approve";
    // What was approved, for the undo (the card is not read again inside the window).
    view.lastEdit = result && result.editedArguments ? result.editedArguments : edited ?? null;
    if (undoable && result && result.undoUntil && !bulk) {
      announce(`${view.ctx.tool} approved; it executes in ${undoSeconds} seconds unless you undo`);
      showUndo(view, result.undoUntil);
      if (view.lastEdit) showApproved(view);
    } else {
      const status = { approve: "approved", reject: "rejected", respond: "responded" }[decision];
      remove(view.id, result && result.status ? result : { ...view.ctx, status });
    }
    return true;
  } catch (error) {
    showError(view, errorText(error));
    setBusy(view, false);
    return false;
  }
}

// Snoozing hides a request from your own "I can decide" view until the chosen time;
// it stays pending for every other approver, and expiry still applies.
async function toggleSnooze(view) {
  showError(view, "");
  view.snooze.disabled = true;
  const unsnooze = viewName === "snoozed" || Boolean(view.ctx.snoozedUntil);
  try {
    let until = null;
    if (unsnooze) await apiFetch(`/api/approvals/${view.id}/snooze/`, { method: "DELETE" });
    else until = (await apiFetch(`/api/approvals/${view.id}/snooze/`, { method: "POST", body: { seconds: Number(view.snoozeFor.value) } })).until;
    const tool = view.ctx.tool;
    (unsnooze ? unsnoozedHere : snoozedHere).add(view.id);
    (unsnooze ? snoozedHere : unsnoozedHere).delete(view.id);
    const said = unsnooze ? `${tool} is back in your queue` : `${tool} snoozed until ${localTime(until)}`;
    if ((unsnooze && viewName === "snoozed") || (!unsnooze && mine)) remove(view.id, null);
    else {
      view.snooze.disabled = false;
      view.ctx.snoozedUntil = until;
      paintSnooze(view);
      view.snooze.focus();
    }
    announce(said);
  } catch (error) {
    showError(view, errorText(error));
    view.snooze.disabled = false;
  }
}

function selectedViews() {
  return [...items.values()].filter((v) => v.check.checked && !v.undoUntil);
}

if (canDecide && bulkApprove) {
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
    const allowed = views.filter((v) => v.ctx.facts && v.ctx.facts.viewer && v.ctx.facts.viewer.canApprove);
    const refused = views.length - allowed.length;
    const lines = allowed.map((v) => `${v.ctx.tool} #${v.id} (${v.ctx.risk ? v.ctx.risk.level : "medium"} risk) — ${v.ctx.thread.title}`);
    if (refused) lines.push(`${refused} you may not authorize will be left pending`);
    const ok = await confirmDialog(`Approve ${allowed.length} request${allowed.length === 1 ? "" : "s"}?`, "A bulk approval executes every selected call.", lines);
    if (!ok) return;
    const results = await Promise.all(allowed.map((v) => decide(v, "approve", { bulk: true })));
    reportBulk([...results, ...Array(refused).fill(false)], "approved");
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
    const ok = await confirmDialog(`Reject ${views.length} request${views.length === 1 ? "" : "s"}?`, sentence(`Each agent is told: “${reason}”`), views.map((v) => `${v.ctx.tool} #${v.id} — ${v.ctx.thread.title}`));
    if (!ok) return;
    const results = await Promise.all(views.map((v) => decide(v, "reject", { reason })));
    reportBulk(results, "rejected");
  });
}

function reportBulk(results, verb) {
  const ok = results.filter(Boolean).length;
  const failed = results.length - ok;
  announce(`${ok} ${verb}${failed ? `, ${failed} not` : ""}`);
  if (failed) {
    bulkError.textContent = `${failed} request${failed === 1 ? "" : "s"} could not be ${verb}; see the messages on them.`;
    bulkError.hidden = false;
  }
  updateCounts();
}

// -- keyboard shortcuts (switchable, WCAG 2.1.4) -----------------------------------------

if (shortcutsToggle) {
  shortcutsToggle.checked = shortcutsOn();
  shortcutsToggle.addEventListener("change", () => {
    localStorage.setItem(SHORTCUTS_KEY, shortcutsToggle.checked ? "on" : "off");
    announce(`Keyboard shortcuts ${shortcutsToggle.checked ? "on" : "off"}`);
  });
}

const shortcutsDialog = document.getElementById("shortcuts");
const shortcutsOpen = document.getElementById("shortcuts-open");
if (shortcutsDialog && shortcutsOpen) {
  const close = () => {
    shortcutsDialog.close();
    shortcutsOpen.focus();
  };
  shortcutsOpen.addEventListener("click", () => {
    shortcutsDialog.showModal();
    document.getElementById("shortcuts-close").focus();
  });
  document.getElementById("shortcuts-close").addEventListener("click", close);
}

document.addEventListener("keydown", (event) => {
  if (event.key === "?" && shortcutsOpen && !isTyping(event) && !dialog.open && !shortcutsDialog.open) {
    event.preventDefault();
    shortcutsOpen.click();
    return;
  }
  if (!shortcutsToggle || !shortcutsOn() || dialog.open || (shortcutsDialog && shortcutsDialog.open)) return;
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
      if (canDecide && view && view.approve && !view.undoUntil && !view.approve.disabled) {
        event.preventDefault();
        approveWithChecks(view); // a destructive call is confirmed first
      }
      break;
    case "r":
      if (canDecide && view && view.reason && !view.undoUntil && !view.reject.disabled) {
        event.preventDefault();
        if (view.reason.value.trim()) decide(view, "reject");
        else {
          showError(view, "Type the reason for rejecting, then press Enter.");
          view.reason.focus();
        }
      }
      break;
    case "x":
      if (canDecide && view && view.approve) {
        event.preventDefault();
        view.check.checked = !view.check.checked;
        updateCounts();
      }
      break;
    default:
      break;
  }
});

// -- live ------------------------------------------------------------------------------

const socket = new ReconnectingSocket({
  url: () => list.dataset.socketPath,
  onMessage: (data) => {
    if (!data) return;
    if (data.kind === "snapshot" && Array.isArray(data.approvals)) {
      if (viewName !== "pending") return;
      // After a reconnect: add what is new, drop what was decided meanwhile.
      const pending = new Set(data.approvals.filter((a) => a.status === "pending").map((a) => a.id));
      for (const id of pending) if (!items.has(id)) refresh(id);
      for (const [id, view] of [...items]) if (!pending.has(id) && !view.undoUntil) refresh(id);
    } else if (data.kind === "notification" && data.approval) refresh(data.approval.id, data.approval);
  },
});

for (const ctx of readJsonScript("queue-initial") || []) upsert(ctx, { initial: true });
loadingInitial = false;
updateCounts();
// A link to one request (a notification's signed link, the thread page's "Open in the
// approval queue") names its card in the fragment; the cards are built here, after the
// browser's own fragment scroll, so focus it now.
const linked = /^#req-(\d+)$/.exec(location.hash);
if (linked) {
  const card = document.getElementById(`req-${linked[1]}`);
  if (card) {
    card.scrollIntoView({ block: "center" });
    card.focus({ preventScroll: true });
  }
}
setInterval(() => {
  const now = Date.now();
  for (const view of items.values()) tick(view, now);
}, 1000);
socket.start();
