// The thread list: a "new thread" form (POST /api/threads/) and a table kept live by
// polling /threads.json every few seconds. Data goes in with textContent (SEC-03).

import { apiFetch, errorText, h, relativeTime } from "./common.js";

const rows = document.getElementById("thread-rows");
const form = document.getElementById("new-thread-form");
const formError = document.getElementById("new-thread-error");
const POLL_MS = 3000;

function row(thread) {
  return h(
    "tr",
    { dataset: { threadId: thread.id } },
    h("td", {}, h("a", { href: thread.url, text: thread.title })),
    h("td", { text: thread.agent }),
    h("td", {}, h("span", { class: `status status-${thread.status}`, text: thread.statusLabel })),
    h("td", {}, h("time", { datetime: thread.updatedAt, title: thread.updatedAt, text: relativeTime(thread.updatedAt) })),
  );
}

function render(threads) {
  if (!threads.length) {
    rows.replaceChildren(h("tr", { class: "empty" }, h("td", { colspan: "4", text: "No threads yet. Create one above." })));
    return;
  }
  // Keep focus on a link that survives the re-render.
  const focusedId = document.activeElement && document.activeElement.closest && document.activeElement.closest("tr")?.dataset.threadId;
  rows.replaceChildren(...threads.map(row));
  if (focusedId) rows.querySelector(`tr[data-thread-id="${CSS.escape(focusedId)}"] a`)?.focus();
}

function refreshTimes() {
  for (const el of rows.querySelectorAll("time[datetime]")) {
    el.title = el.getAttribute("datetime");
    el.textContent = relativeTime(el.getAttribute("datetime"));
  }
}

async function poll() {
  try {
    const data = await apiFetch("/threads.json");
    render(data.threads || []);
  } catch {
    // try again at the next tick
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  formError.hidden = true;
  const data = new FormData(form);
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    const thread = await apiFetch("/api/threads/", {
      method: "POST",
      body: { title: String(data.get("title") || ""), agent: String(data.get("agent") || "") },
    });
    const id = thread.id || thread.thread_id || thread.threadId;
    location.assign(`/threads/${encodeURIComponent(id)}/`);
  } catch (error) {
    formError.textContent = errorText(error);
    formError.hidden = false;
    button.disabled = false;
  }
});

refreshTimes();
setTimeout(poll, POLL_MS);
