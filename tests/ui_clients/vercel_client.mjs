// The `ai` package's transport (as useChat uses it) parses and validates the UI message
// stream; readUIMessageStream builds the message. A turn waits for approval; the
// approval is answered as addToolApprovalResponse does, and the turn resumes.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [api, decision] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api });
const user = { id: "u1", role: "user", parts: [{ type: "text", text: "Refund order 7" }] };

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
console.log(JSON.stringify({ first, second }));
