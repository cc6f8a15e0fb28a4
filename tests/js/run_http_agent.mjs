// Run the official @ag-ui/client HttpAgent against a Countersign server.
//
//   node run_http_agent.mjs '<json config>'
//
// config: {"url": "http://127.0.0.1:PORT/agui/demo/", "token": "...",
//          "threadId": "...", "turns": [{"runId": "...", "messageId": "...", "content": "..."}]}
//
// Each turn adds a user message and calls runAgent(), so later turns resend the
// whole history, as a browser app would. Prints one JSON object on stdout:
// {"runs": [{"runId", "outcome", "pendingToolCallIds", "eventTypes"}], "messages", "warnings"}.
// runAgent() rejects on any protocol violation the client detects, which makes
// this script exit non-zero (AGUI-1.0.md §3.4).
import { HttpAgent } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);
const warnings = [];
const originalWarn = console.warn;
console.warn = (...args) => {
  warnings.push(args.map(String).join(" "));
  originalWarn(...args);
};

const agent = new HttpAgent({
  url: config.url,
  threadId: config.threadId,
  headers: { Authorization: `Token ${config.token}` },
});

const runs = [];
for (const turn of config.turns) {
  agent.addMessage({ id: turn.messageId, role: "user", content: turn.content });
  const seen = { runId: turn.runId, eventTypes: [] };
  await agent.runAgent(
    { runId: turn.runId },
    {
      onEvent: ({ event }) => {
        seen.eventTypes.push(event.type);
      },
      onRunFinishedEvent: (params) => {
        seen.outcome = params.outcome;
        seen.pendingToolCallIds = params.pendingToolCallIds;
      },
      onRunErrorEvent: ({ event }) => {
        seen.error = event.message;
      },
    },
  );
  runs.push(seen);
}

process.stdout.write(JSON.stringify({ runs, messages: agent.messages, warnings }) + "\n");
