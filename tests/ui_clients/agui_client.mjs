// @ag-ui/client's HttpAgent runs a turn that ends in an interrupt, then resumes it.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, decision] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  threadId: "thread-1",
  initialMessages: [{ id: "m1", role: "user", content: "Refund order 7" }],
});
const seen = [];
const subscriber = {
  onEvent({ event }) {
    seen.push(event.type);
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
    messages: agent.messages,
    pendingAfter: agent.pendingInterrupts,
  }),
);
