# ruff: noqa: E501 (the page's own lines)
"""The demo's page: one HTML file with its script, no build step. It speaks AG-UI to
`/agui` with `fetch` and reads the server-sent events itself. Every text it shows is
set with `textContent` (never parsed as HTML)."""

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>advisorchain demo: the order assistant</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d2330; }
  header { background: #1d2330; color: #fff; padding: 10px 18px; }
  header small { color: #aab; margin-left: 10px; }
  main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; padding: 16px; }
  section { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 3px #0002; }
  h2 { font-size: 14px; text-transform: uppercase; letter-spacing: .04em; color: #667; margin: 0 0 8px; }
  #chat { min-height: 360px; display: flex; flex-direction: column; gap: 8px; }
  .msg { padding: 8px 11px; border-radius: 8px; max-width: 90%; white-space: pre-wrap; }
  .user { background: #dbe8ff; align-self: flex-end; }
  .answer { background: #eef0f3; align-self: flex-start; }
  .tool { font: 12px ui-monospace, monospace; color: #445; align-self: flex-start; }
  .tool .state { font-weight: 600; }
  .approval { border: 1px solid #e0a100; background: #fff8e1; border-radius: 8px; padding: 8px 10px; }
  .approval textarea { width: 100%; font: 12px ui-monospace, monospace; box-sizing: border-box; }
  .approval button { margin: 4px 6px 0 0; }
  .error { color: #a00; }
  form { display: flex; gap: 8px; margin-top: 10px; }
  #question { flex: 1; padding: 7px; font: inherit; }
  .turn { border-top: 1px solid #e3e5ea; padding-top: 6px; margin-top: 6px; font-size: 13px; }
  .turn b { display: block; margin-bottom: 2px; }
  .turn table { border-collapse: collapse; width: 100%; font: 12px ui-monospace, monospace; }
  .turn td { border-top: 1px solid #eee; padding: 2px 4px; vertical-align: top; word-break: break-word; }
  .turn table { table-layout: fixed; }
  .turn td:nth-child(1) { width: 11%; } .turn td:nth-child(2) { width: 20%; }
  .turn td:nth-child(3) { width: 22%; } .turn td:nth-child(4) { width: 13%; }
</style>
</head>
<body>
<header><b>advisorchain</b> order assistant <small>model: {{MODEL}} &middot; AG-UI 1.0</small></header>
<main>
  <section>
    <h2>Conversation</h2>
    <div id="chat"></div>
    <form id="ask">
      <input id="question" autocomplete="off" placeholder="Ask about orders A-1001 to A-1003">
      <button id="send">Send</button>
    </form>
  </section>
  <section>
    <h2>Turn inspector</h2>
    <div id="inspector"></div>
  </section>
</main>
<script>
"use strict";
const chat = document.getElementById("chat");
const inspector = document.getElementById("inspector");
const threadId = "thread-" + Math.random().toString(36).slice(2);
const history = [];
let runs = 0;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
function add(parent, node) { parent.appendChild(node); node.scrollIntoView({block: "nearest"}); return node; }
function newId() { return Math.random().toString(36).slice(2); }

function newTurn(question) {
  const box = add(inspector, el("div", "turn"));
  box.appendChild(el("b", "", question));
  const summary = box.appendChild(el("div", "summary", "running..."));
  const table = box.appendChild(el("table"));
  return {question, box, summary, table, started: performance.now(), text: "", calls: {},
          modelCalls: 0, inputTokens: 0, outputTokens: 0, answer: null, approvals: 0};
}

function row(turn, cells) {
  const tr = turn.table.appendChild(el("tr"));
  return cells.map((c) => tr.appendChild(el("td", "", c)));
}

async function run(body, turn) {
  body.threadId = threadId;
  body.runId = "run-" + (++runs);
  let response;
  try {
    response = await fetch("/agui", {method: "POST", headers: {"content-type": "application/json"},
                                     body: JSON.stringify(body)});
  } catch (e) { add(chat, el("div", "msg error", "The server cannot be reached.")); return; }
  if (!response.ok) { add(chat, el("div", "msg error", "Refused: " + response.status)); return; }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (frame.startsWith("data: ")) handle(JSON.parse(frame.slice(6)), turn);
    }
  }
}

function toolLine(turn, id, name) {
  if (turn.calls[id]) return turn.calls[id];
  const line = add(chat, el("div", "msg tool"));
  const state = line.appendChild(el("span", "state", "calling "));
  line.appendChild(el("span", "", name + "("));
  const args = line.appendChild(el("span", "args", ""));
  line.appendChild(el("span", "", ")"));
  const cells = row(turn, ["tool", name, "", "", ""]);
  turn.calls[id] = {line, state, args, name, cells, text: ""};
  return turn.calls[id];
}

function handle(event, turn) {
  switch (event.type) {
    case "TEXT_MESSAGE_START":
      turn.answer = add(chat, el("div", "msg answer", ""));
      break;
    case "TEXT_MESSAGE_CONTENT":
      turn.text += event.delta;
      turn.answer.textContent += event.delta;
      break;
    case "TOOL_CALL_START":
      toolLine(turn, event.toolCallId, event.toolCallName);
      break;
    case "TOOL_CALL_ARGS": {
      const call = turn.calls[event.toolCallId];
      call.text += event.delta;
      call.args.textContent = call.text;
      call.cells[2].textContent = call.text;
      break;
    }
    case "TOOL_CALL_RESULT": {
      const call = turn.calls[event.toolCallId];
      if (call) call.cells[4].textContent = event.content;
      break;
    }
    case "CUSTOM": {
      const v = event.value;
      const call = v && turn.calls[v.toolCallId];
      if (!call) break;
      if (event.name === "advisorchain.tool_call_started") {
        call.state.textContent = "running ";
      } else if (event.name === "advisorchain.tool_call_finished") {
        call.state.textContent = (v.outcome === "ok" ? "done " : v.outcome + " ") ;
        call.line.dataset.outcome = v.outcome;
        call.cells[3].textContent = v.outcome + ", " + (v.duration * 1000).toFixed(1) + " ms";
      }
      break;
    }
    case "RUN_FINISHED": {
      const u = (event.usage || [])[0] || {};
      turn.inputTokens += u.inputTokens || 0;
      turn.outputTokens += u.outputTokens || 0;
      turn.modelCalls += (event.result && event.result.modelCalls) || 0;
      const seconds = ((performance.now() - turn.started) / 1000).toFixed(2);
      turn.summary.textContent = turn.modelCalls + " model calls, " + turn.inputTokens + " in / " +
        turn.outputTokens + " out tokens, " + seconds + " s, " + turn.approvals + " approvals";
      if (event.outcome && event.outcome.type === "interrupt") {
        turn.summary.textContent += " (waiting for you)";
        // one resume answers every interrupt of the run: it is sent once all are decided
        const answers = {left: event.outcome.interrupts.length, resume: []};
        event.outcome.interrupts.forEach((i) => askApproval(i, turn, answers));
      } else {
        history.push({id: newId(), role: "user", content: turn.question});
        if (turn.text) history.push({id: newId(), role: "assistant", content: turn.text});
        document.getElementById("send").disabled = false;
      }
      break;
    }
    case "RUN_ERROR":
      add(chat, el("div", "msg error", event.message));
      turn.summary.textContent = "failed: " + event.message;
      document.getElementById("send").disabled = false;
      break;
  }
}

function askApproval(interrupt, turn, answers) {
  const meta = interrupt.metadata || {};
  const box = add(chat, el("div", "msg approval"));
  box.appendChild(el("div", "", "Approve " + meta.toolName + "?"));
  const args = box.appendChild(el("textarea"));
  args.rows = 2;
  args.value = meta.arguments || "{}";
  const approve = box.appendChild(el("button", "approve", "Approve"));
  const edit = box.appendChild(el("button", "edit-approve", "Approve edited"));
  const reject = box.appendChild(el("button", "reject", "Reject"));
  const answer = (payload, label) => {
    [approve, edit, reject, args].forEach((b) => b.disabled = true);
    box.appendChild(el("div", "decided", label));
    turn.approvals += 1;
    row(turn, ["approval", meta.toolName, args.value, label, ""]);
    answers.resume.push({interruptId: interrupt.id, status: "resolved", payload});
    answers.left -= 1;
    if (answers.left === 0) run({messages: [], resume: answers.resume}, turn);
  };
  approve.onclick = () => answer({approved: true}, "approved");
  edit.onclick = () => {
    let edited;
    try { edited = JSON.parse(args.value); } catch (e) { args.classList.add("error"); return; }
    answer({approved: true, arguments: edited}, "approved with edits");
  };
  reject.onclick = () => answer({approved: false, reason: "the customer said no"}, "rejected");
}

document.getElementById("ask").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = document.getElementById("question");
  const question = input.value.trim();
  if (!question) return;
  input.value = "";
  document.getElementById("send").disabled = true;
  add(chat, el("div", "msg user", question));
  const turn = newTurn(question);
  run({messages: [...history, {id: newId(), role: "user", content: question}]}, turn);
});
</script>
</body>
</html>
"""
