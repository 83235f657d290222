// @ag-ui/client's HttpAgent runs a turn that ends in an interrupt, then resumes it.
// Usage: node agui_client.mjs URL approve|reject. Prints what the client saw: the event
// types, the argument pieces of each streamed tool call (as the client's own
// onToolCallArgsEvent got them), the interrupts, and the messages the client built.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, decision] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  threadId: "thread-1",
  initialMessages: [{ id: "m1", role: "user", content: "Refund order 7" }],
});
const seen = [];
const args = {};
const subscriber = {
  onEvent({ event }) {
    seen.push(event.type);
  },
  onToolCallArgsEvent({ event }) {
    (args[event.toolCallId] ??= []).push(event.delta);
  },
};
await agent.runAgent({ runId: "run-1" }, subscriber);
const interrupts = agent.pendingInterrupts;
const payload =
  decision === "reject" ? { approved: false, reason: "not today" } : { approved: true };
const resume = buildResumeArray(interrupts, {
  [interrupts[0].id]: { status: "resolved", payload },
});
await agent.runAgent({ runId: "run-2", resume }, subscriber);
console.log(
  JSON.stringify({
    interrupts,
    events: seen,
    args,
    messages: agent.messages,
    pendingAfter: agent.pendingInterrupts,
  }),
);
