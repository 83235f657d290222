// The `ai` package's transport (as useChat uses it) parses and validates the UI message
// stream; readUIMessageStream builds the message. A turn waits for approval; the
// approval is answered as addToolApprovalResponse does, and the turn resumes.
// Usage: node vercel_client.mjs URL approve|reject. Prints both messages, and for each
// tool part the states and partial inputs the snapshots showed while the input streamed.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [api, decision] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api });
const user = { id: "u1", role: "user", parts: [{ type: "text", text: "Refund order 7" }] };
const streaming = {};

async function send(messages, message) {
  const stream = await transport.sendMessages({
    trigger: "submit-message",
    chatId: "chat-1",
    messageId: undefined,
    messages,
    abortSignal: undefined,
  });
  let last;
  for await (const snapshot of readUIMessageStream({
    stream,
    message,
    onError: (error) => {
      throw error;
    },
  })) {
    for (const part of snapshot.parts) {
      if (part.state === "input-streaming") {
        (streaming[part.toolCallId] ??= []).push(JSON.stringify(part.input ?? null));
      }
    }
    last = snapshot;
  }
  return last;
}

const first = await send([user]);
const waiting = structuredClone(first);
const part = waiting.parts.find((p) => p.state === "approval-requested");
part.state = "approval-responded";
part.approval = {
  id: part.approval.id,
  approved: decision !== "reject",
  ...(decision === "reject" ? { reason: "not today" } : {}),
};
const second = await send([user, waiting], waiting);
console.log(JSON.stringify({ first, second, streaming }));
