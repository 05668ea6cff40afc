// Chat messages (the OpenAI format) as a list: each message under its role, a thinking model's reasoning folded
// before its text, tool calls and tool results apart. Shared by the playground (chat environments put their messages
// in info.messages) and the episode viewer.
"use strict";

function messageText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {  // content parts: text is shown, anything else is named
    return content.map((part) => (typeof part.text === "string" ? part.text : `[${part.type || "part"}]`)).join("\n");
  }
  return content == null ? "" : JSON.stringify(content);
}

function labelled(label, text, className) {
  const box = document.createElement("div");
  box.className = className;
  const head = document.createElement("div");
  head.className = "label";
  head.textContent = label;
  const body = document.createElement("pre");
  body.textContent = text;
  box.append(head, body);
  return box;
}

function prettyArguments(args) {
  if (typeof args === "string") {
    try { args = JSON.parse(args); } catch { return args; }  // shown as the model wrote them
  }
  return JSON.stringify(args, null, 2);
}

function toolCallElement(call) {
  const fn = call.function || call;
  return labelled(`tool call · ${fn.name}`, prettyArguments(fn.arguments), "tool-call");
}

function messageElement(message) {
  const item = document.createElement("li");
  item.className = `message role-${message.role}`;
  item.dataset.role = message.role;
  const text = messageText(message.content);
  if (message.role === "tool") {
    item.append(labelled(`tool result${message.name ? ` · ${message.name}` : ""}`, text, "tool-result"));
    return item;
  }
  const role = document.createElement("div");
  role.className = "label";
  role.textContent = message.role;
  item.append(role);
  const reasoning = message.reasoning_content || message.reasoning;  // (vLLM's two names for it)
  if (typeof reasoning === "string" && reasoning) {
    const folded = document.createElement("details");
    folded.className = "reasoning";
    const summary = document.createElement("summary");
    summary.textContent = "reasoning";
    const body = document.createElement("pre");
    body.textContent = reasoning;
    folded.append(summary, body);
    item.append(folded);
  }
  if (text) {
    const body = document.createElement("pre");
    body.textContent = text;
    item.append(body);
  }
  for (const call of message.tool_calls || []) item.append(toolCallElement(call));
  return item;
}

function messageList(messages) {
  const list = document.createElement("ol");
  list.className = "messages";
  list.append(...messages.map(messageElement));
  return list;
}

// A playground action as the assistant message it stands for.
function actionMessage(action) {
  if (typeof action === "string") return { role: "assistant", content: action };
  if (action && Array.isArray(action.tool_calls)) return { role: "assistant", ...action };
  if (action && typeof action.name === "string") {
    return { role: "assistant", content: "", tool_calls: [{ function: { name: action.name, arguments: action.arguments } }] };
  }
  return { role: "assistant", content: JSON.stringify(action) };
}
