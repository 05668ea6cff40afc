// The playground: this tab is one session on the server, over the same WebSocket protocol the clients use
// (docs/protocol.md). Closing the tab closes the connection, and the server ends the session with it.
"use strict";

const $ = (id) => document.getElementById(id);
const play = { ws: null, nextId: 1, waiting: new Map(), session: null, env: null, episode: null, live: false };

function tokenProtocol(token) {
  // the token rides in a WebSocket subprotocol (base64url): a browser sets no headers, and URLs get logged
  const encoded = btoa(String.fromCharCode(...new TextEncoder().encode(token)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return `openenv-gym.bearer.${encoded}`;
}

function connect(token) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const protocols = ["openenv-gym", ...(token ? [tokenProtocol(token)] : [])];
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${scheme}://${location.host}/`, protocols);
    ws.onopen = () => {
      ws.onclose = () => status("disconnected: reload the page to start a new session");
      resolve(ws);
    };
    ws.onerror = () => reject(new Error("cannot open a WebSocket to this server"));
    ws.onmessage = (event) => {
      for (const answer of JSON.parse(event.data)) {
        const waiter = play.waiting.get(answer.id);
        if (!waiter) continue;
        play.waiting.delete(answer.id);
        if (answer.error) waiter.reject(answer.error); else waiter.resolve(answer);
      }
    };
  });
}

function request(message) {
  const id = play.nextId++;
  return new Promise((resolve, reject) => {
    play.waiting.set(id, { resolve, reject });
    play.ws.send(JSON.stringify([{ id, ...message }]));
  });
}

function status(text) { $("status").textContent = text; }
function showError(error) {
  $("error").textContent = error ? `${error.code || "error"}: ${error.message || error}` : "";
}

// -- tool forms, generated from the tools' JSON schemas ---------------------------------------------------

function fieldFor(name, schema, required) {
  const label = document.createElement("label");
  label.textContent = `${name}${required ? " *" : ""} `;
  let input;
  if (Array.isArray(schema.enum)) {
    input = document.createElement("select");
    for (const value of schema.enum) {
      const option = document.createElement("option");
      option.value = JSON.stringify(value);
      option.textContent = String(value);
      input.append(option);
    }
    input.dataset.kind = "enum";
  } else if (schema.type === "boolean") {
    input = document.createElement("input");
    input.type = "checkbox";
    input.dataset.kind = "boolean";
  } else if (schema.type === "integer" || schema.type === "number") {
    input = document.createElement("input");
    input.type = "text";  // free, so that a wrong value reaches the server and its error shows
    input.inputMode = "numeric";
    input.dataset.kind = schema.type;
  } else if (schema.type === "string") {
    input = document.createElement("input");
    input.type = "text";
    input.dataset.kind = "string";
  } else {
    input = document.createElement("textarea");
    input.rows = 2;
    input.placeholder = "JSON";
    input.dataset.kind = "json";
  }
  input.name = name;
  input.dataset.required = required ? "1" : "";
  if (schema.description) input.title = schema.description;
  label.append(input);
  return label;
}

function readField(input) {
  const kind = input.dataset.kind;
  if (kind === "boolean") return input.checked;
  const text = input.value.trim();
  if (text === "") return undefined;
  if (kind === "enum" || kind === "json") return JSON.parse(text);
  if (kind === "integer" || kind === "number") {
    const number = Number(text);
    return Number.isNaN(number) ? text : number;  // not a number: sent as it is, the env says what is wrong
  }
  return text;
}

function toolForm(tool) {
  const form = document.createElement("form");
  form.className = "tool";
  form.dataset.tool = tool.name;
  const title = document.createElement("strong");
  title.textContent = tool.name;
  const about = document.createElement("span");
  about.textContent = tool.description ? ` — ${tool.description}` : "";
  form.append(title, about);
  const schema = tool.parameters || tool.inputSchema || {};
  const required = new Set(schema.required || []);
  for (const [name, field] of Object.entries(schema.properties || {})) {
    form.append(fieldFor(name, field || {}, required.has(name)));
  }
  const button = document.createElement("button");
  button.type = "submit";
  button.textContent = `Call ${tool.name}`;
  form.append(button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const args = {};
    try {
      for (const input of form.querySelectorAll("input, select, textarea")) {
        const value = readField(input);
        if (value !== undefined) args[input.name] = value;
      }
    } catch (error) {
      showError({ code: "bad_input", message: `a field is not valid JSON: ${error.message}` });
      return;
    }
    act({ name: tool.name, arguments: args });
  });
  return form;
}

function showTools(tools) {
  const box = $("tools");
  box.replaceChildren(...(tools || []).map(toolForm));
}

// -- the episode ----------------------------------------------------------------------------------------------

function chatMessages(info) {
  return info && Array.isArray(info.messages) && info.messages.length ? info.messages : null;
}

function showObservation(obs, info) {
  // a chat environment's observation is its messages, shown as a list; any other is text, line breaks kept
  const messages = chatMessages(info);
  $("observation").textContent = obs;
  $("observation").hidden = messages !== null;
  $("chat").replaceChildren(...(messages ? [messageList(messages)] : []));
}

function record(entry) {
  play.episode.steps.push(entry);
  const item = document.createElement("li");
  const stepped = entry.action !== undefined;
  const messages = entry.info && Array.isArray(entry.info.messages) ? entry.info.messages : null;
  const head = document.createElement("div");
  head.className = "label";
  const number = play.episode.steps.length - 1;
  head.textContent = !stepped ? `reset · seed ${play.episode.seed}`
    : messages ? `step ${number}` : `step ${number} · action ${JSON.stringify(entry.action)}`;
  item.append(head);
  if (messages) {  // a chat environment: this turn's reply, then the environment's answer
    item.append(messageList(stepped ? [actionMessage(entry.action), ...messages] : messages));
  }
  if (!messages || !messages.length) {  // the observation as text (a chat env's when it answered no message)
    const body = document.createElement("pre");
    body.textContent = entry.obs;
    item.append(body);
  }
  if (stepped) {
    const outcome = document.createElement("div");
    outcome.textContent = `reward ${entry.reward} · terminated ${entry.terminated} · truncated ${entry.truncated}`;
    item.append(outcome);
  }
  const info = document.createElement("pre");
  info.className = "info";
  info.textContent = `info ${JSON.stringify({ ...entry.info, messages: undefined })}`;
  item.append(info);
  $("history").append(item);
}

// -- the task catalog: splits and their tasks (answers stay hidden, as everywhere) ------------------------------

async function showCatalog() {
  const splits = (await request({ op: "splits" })).splits || [];
  if (!splits.length) return;
  for (const split of splits) {
    const option = document.createElement("option");
    option.value = split.name;
    option.textContent = `${split.name} (${split.num_tasks} tasks)`;
    $("split").append(option);
  }
  $("split").addEventListener("change", showTasks);
  $("catalog").hidden = false;
}

async function showTasks() {
  const split = $("split").value;
  $("task").replaceChildren();
  if (!split) return;
  const listing = await request({ op: "tasks", split, start: 0, stop: 200 });
  for (const task of listing.tasks) {
    const option = document.createElement("option");
    option.value = String(task.index);
    const text = task.task || task.question || task.prompt;
    option.textContent = typeof text === "string" ? `${task.index}: ${text.slice(0, 80)}` : `task ${task.index}`;
    $("task").append(option);
  }
}

function resetOptions() {
  const split = $("split").value;
  return split ? { split, index: Number($("task").value) } : undefined;
}

async function reset() {
  showError(null);
  const seedText = $("seed").value.trim();
  const seed = seedText === "" ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
  try {
    const answer = await request({ op: "reset", session: play.session || undefined, seed, options: resetOptions() });
    play.session = answer.session;
    play.live = true;
    play.episode = { env: play.env.name, seed, options: resetOptions() || {}, steps: [] };
    $("history").replaceChildren();
    showObservation(answer.obs, answer.info);
    $("outcome").textContent = "";
    showTools(answer.info.tools || play.env.tools);
    record({ obs: answer.obs, info: answer.info });
    $("download").disabled = false;
    status(`playing ${play.env.name} (seed ${seed})`);
  } catch (error) {
    showError(error);
  }
}

async function act(action) {
  showError(null);
  if (!play.live) {
    showError({ code: "no_episode", message: "no episode is running: press Reset" });
    return;
  }
  try {
    const answer = await request({ op: "step", session: play.session, action });
    showObservation(answer.obs, answer.info);
    const over = answer.terminated || answer.truncated;
    $("outcome").textContent = `reward ${answer.reward}${over ? " · episode over" : ""}`;
    $("outcome").className = over ? "done" : "";
    if (answer.info && answer.info.error) showError(answer.info.error);
    record({ action, obs: answer.obs, reward: answer.reward, terminated: answer.terminated,
             truncated: answer.truncated, info: answer.info });
    if (over) { play.live = false; status("episode over: Reset to play again"); }
  } catch (error) {
    showError(error);
    if (["env_error", "timeout", "unknown_session"].includes(error.code)) { play.session = null; play.live = false; }
  }
}

function download() {
  const blob = new Blob([JSON.stringify(play.episode, null, 2)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `${play.env.name}-episode.json`;
  link.click();
  URL.revokeObjectURL(link.href);
}

async function start(token) {
  try {
    play.ws = await connect(token);
  } catch (error) {
    $("token-form").hidden = false;  // refused: most likely the server wants its token
    status(token ? "not connected: the server refused this token" : "not connected: enter the server's token");
    return;
  }
  $("token-form").hidden = true;
  try {
    const info = await request({ op: "info" });
    play.env = info.env;
    $("env-name").textContent = info.env.name;
    $("env-description").textContent = info.env.description || "";
    document.title = `${info.env.name} · openenv_gym playground`;
    showTools(info.env.tools);
    await showCatalog();
    status("connected: press Reset to start an episode");
  } catch (error) {
    status(`not connected: ${error.message || error}`);
  }
}

async function main() {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    start($("token").value);
  });
  await start(null);
  $("reset").addEventListener("click", reset);
  $("download").addEventListener("click", download);
  $("text-form").addEventListener("submit", (event) => {
    event.preventDefault();
    act($("text-action").value);
  });
}

main();
