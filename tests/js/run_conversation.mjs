// A whole conversation through the official @ag-ui/client HttpAgent, feeding back
// its accumulated history every turn, against a live Countersign server.
//
//   node run_conversation.mjs '<json config>'
//
// config: {"base": "http://127.0.0.1:PORT", "agent": "demo", "token": "...",
//          "operatorToken": "...", "threadId": "...", "steps": [...]}
// Each step is one of
//   {"say": "...", "tools": [...]}            add a user message, runAgent
//   {"resume": {"approved": true, ...}}       runAgent answering every pending
//                                             interrupt with that payload
//   {"answer": "..."}                          runAgent after answering every pending
//                                             client tool call of the last run
//   {"queue": "approve" | "reject"}            follow the thread (GET .../events)
//                                             through the client's own pipeline while
//                                             an operator decides the pending
//                                             interrupt in the queue (REST API)
// Steps that carry "tools" keep them for later runs (a browser app advertises its
// tools on every run). Prints {"runs": [...], "messages": [...], "warnings": [...]}.
// runAgent()/connectAgent() reject on any protocol violation the client detects,
// and any HTTP error fails the run, which makes this script exit non-zero.
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { finalize, takeWhile } from "rxjs";

const config = JSON.parse(process.argv[2]);
const warnings = [];
const originalWarn = console.warn;
console.warn = (...args) => {
  warnings.push(args.map(String).join(" "));
  originalWarn(...args);
};

// The log's seq rides on SSE `id:` lines, which AG-UI parsers ignore; a client
// that wants to follow the thread later remembers the last one it saw.
let lastSeq = 0;
const trackingFetch = async (url, init) => {
  const response = await fetch(url, init);
  if (!response.body) return response;
  const decoder = new TextDecoder();
  let carry = "";
  const tap = new TransformStream({
    transform(chunk, controller) {
      carry += decoder.decode(chunk, { stream: true });
      const lines = carry.split("\n");
      carry = lines.pop();
      for (const line of lines) if (line.startsWith("id: ")) lastSeq = Number(line.slice(4));
      controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(tap), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
};

// HttpAgent with connect(): follow the thread's event log from the last seq seen
// until the next run ends, through the client's own verification and reducer.
class FollowingAgent extends HttpAgent {
  connect() {
    const controller = new AbortController();
    const url = `${config.base}/agui/threads/${encodeURIComponent(this.threadId)}/events?after=${lastSeq}`;
    const events = transformHttpEventStream(
      runHttpRequest(() =>
        this.fetch(url, {
          method: "GET",
          headers: { ...this.headers, Accept: "text/event-stream" },
          signal: controller.signal,
        }),
      ),
    );
    return events.pipe(
      takeWhile((e) => e.type !== "RUN_FINISHED" && e.type !== "RUN_ERROR", true),
      finalize(() => controller.abort()),
    );
  }
}

const agent = new FollowingAgent({
  url: `${config.base}/agui/${config.agent}/`,
  threadId: config.threadId,
  headers: { Authorization: `Token ${config.token}` },
  fetch: trackingFetch,
});

const runs = [];
let tools = [];
let lastPending = [];
let turn = 0;

function recorder(step) {
  const seen = { step, eventTypes: [] };
  runs.push(seen);
  return [
    seen,
    {
      onEvent: ({ event }) => {
        seen.eventTypes.push(event.type);
        if (event.type === "RUN_STARTED") seen.runId = event.runId;
      },
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        seen.pendingToolCallIds = params.pendingToolCallIds;
        seen.interrupts = params.interrupts;
      },
      onRunErrorEvent: ({ event }) => {
        seen.error = event.message;
      },
    },
  ];
}

async function run(step, extra = {}) {
  turn += 1;
  const [seen, subscriber] = recorder(step);
  await agent.runAgent({ runId: `${config.threadId}-run-${turn}`, tools, ...extra }, subscriber);
  lastPending = seen.pendingToolCallIds ?? [];
  return seen;
}

for (const step of config.steps) {
  if (step.tools) tools = step.tools;
  if (step.say !== undefined) {
    agent.addMessage({ id: `${config.threadId}-u${turn + 1}`, role: "user", content: step.say });
    await run(step);
  } else if (step.answer !== undefined) {
    // The interrupted (or finished) run's unanswered client calls, derived from
    // the stream as FT-05/IR-06 say when the outcome names none.
    const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    const started = agent.messages.flatMap((m) => (m.toolCalls ?? []).map((c) => c.id));
    const pending = lastPending.length ? lastPending : started.filter((id) => !answered.has(id));
    const toolNames = new Set(tools.map((t) => t.name));
    const calls = agent.messages.flatMap((m) => m.toolCalls ?? []);
    for (const id of pending) {
      const call = calls.find((c) => c.id === id);
      if (!call || !toolNames.has(call.function.name) || answered.has(id)) continue;
      agent.addMessage({ id: `${config.threadId}-answer-${id}`, role: "tool", toolCallId: id, content: step.answer });
    }
    if (step.resume) {
      const resume = agent.pendingInterrupts.map((i) => ({
        interruptId: i.id,
        status: "resolved",
        payload: step.resume,
      }));
      await run(step, { resume });
    } else {
      await run(step);
    }
  } else if (step.resume) {
    const resume = agent.pendingInterrupts.map((i) => ({
      interruptId: i.id,
      status: "resolved",
      payload: step.resume,
    }));
    await run(step, { resume });
  } else if (step.queue) {
    const [interrupt] = agent.pendingInterrupts;
    // The client leaves the interrupt to the approval queue and follows the thread.
    agent.pendingInterrupts = [];
    const [seen, subscriber] = recorder(step);
    const following = agent.connectAgent({}, subscriber);
    const decided = await fetch(`${config.base}/api/approvals/${interrupt.metadata.approvalId}/${step.queue}/`, {
      method: "POST",
      headers: { Authorization: `Token ${config.operatorToken}`, "Content-Type": "application/json" },
      body: JSON.stringify(step.queue === "reject" ? { reason: "not eligible" } : {}),
    });
    if (!decided.ok) throw new Error(`queue decision failed: HTTP ${decided.status}: ${await decided.text()}`);
    await following;
    lastPending = seen.pendingToolCallIds ?? [];
  }
}

process.stdout.write(JSON.stringify({ runs, messages: agent.messages, warnings }) + "\n");
