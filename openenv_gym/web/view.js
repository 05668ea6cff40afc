// The episode viewer: the summaries of a rollout's episodes (GET /api/episodes), filtered here by return, task,
// GRPO group and ending; a histogram of the returns shown; the groups side by side with their reward spread; one
// episode (GET /api/episodes/N) read turn by turn.
"use strict";

const $ = (id) => document.getElementById(id);
const view = { episodes: [], shown: [] };
const MAX_ROWS = 500;  // rows drawn at once: a narrower filter shows the rest
const BINS = 20;
const SVG = "http://www.w3.org/2000/svg";

function status(text) { $("status").textContent = text; }

async function getJSON(path) {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

async function load() {
  let listing;
  try {
    listing = await getJSON("/api/episodes");
  } catch (error) {
    status(`cannot read the episodes: ${error.message}`);
    return;
  }
  view.episodes = listing.episodes;
  $("file").textContent = listing.file;
  const bad = listing.bad_lines.map((b) => `line ${b.line}: ${b.reason}`).join("; ");
  $("bad-lines").textContent = listing.bad_line_count
    ? `${listing.bad_line_count} lines are not episodes and are left out (${bad}${
      listing.bad_line_count > listing.bad_lines.length ? "; …" : ""})` : "";
  const tasks = [...new Set(view.episodes.map((e) => e.task))].slice(0, 1000);
  $("task-names").replaceChildren(...tasks.map((task) => Object.assign(document.createElement("option"), { value: task })));
  applyFilters();
}

// -- filters ----------------------------------------------------------------------------------------------------

function bound(id) {
  const text = $(id).value.trim();
  return text === "" ? null : Number(text);
}

function matches(episode, filter) {
  if (filter.min !== null && !(episode.return >= filter.min)) return false;
  if (filter.max !== null && !(episode.return <= filter.max)) return false;
  if (filter.task && !episode.task.toLowerCase().includes(filter.task)) return false;
  if (filter.group && episode.group !== filter.group) return false;
  if (filter.ended === "failed") return episode.error !== null;
  if (filter.ended) return episode.error === null && episode[filter.ended];
  return true;
}

function applyFilters() {
  const filter = { min: bound("min-return"), max: bound("max-return"), group: $("group-filter").value.trim(),
                   task: $("task-filter").value.trim().toLowerCase(), ended: $("ended").value };
  view.shown = view.episodes.filter((episode) => matches(episode, filter));
  $("count").textContent = `(${view.shown.length.toLocaleString()} of ${view.episodes.length.toLocaleString()} episodes)`;
  drawHistogram(view.shown.filter((e) => e.error === null).map((e) => e.return));
  drawTable(view.shown);
  drawGroups(view.shown);
  status(view.episodes.length ? "click an episode to read it" : "the file holds no episodes yet: Reload later");
}

// -- the histogram of returns -------------------------------------------------------------------------------------

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function drawHistogram(returns) {
  const chart = $("histogram");
  chart.replaceChildren();
  if (!returns.length) {
    chart.append(svg("text", { x: 320, y: 85, "text-anchor": "middle" }, "no finished episode matches"));
    return;
  }
  const low = Math.min(...returns), high = Math.max(...returns);
  const bins = low === high ? 1 : BINS;
  const width = (high - low) / bins;
  const counts = new Array(bins).fill(0);
  for (const value of returns) counts[Math.min(bins - 1, width ? Math.floor((value - low) / width) : 0)] += 1;
  const tallest = Math.max(...counts);
  const [left, top, plotWidth, plotHeight] = [40, 10, 580, 130];
  counts.forEach((count, i) => {
    const height = (count / tallest) * plotHeight;
    const [from, to] = [low + i * width, i === bins - 1 ? high : low + (i + 1) * width];
    const bar = svg("rect", { class: "bar", x: left + (i * plotWidth) / bins + 1, y: top + plotHeight - height,
                              width: plotWidth / bins - 2, height, "data-count": count,
                              "data-from": from, "data-to": to });
    bar.append(svg("title", {}, `${from.toFixed(3)} to ${to.toFixed(3)}: ${count} episodes (click to filter)`));
    bar.addEventListener("click", () => {
      $("min-return").value = from;
      $("max-return").value = to;
      applyFilters();
    });
    chart.append(bar);
  });
  const axis = top + plotHeight + 16;
  chart.append(svg("text", { x: left, y: axis }, low.toFixed(3)),
               svg("text", { x: left + plotWidth, y: axis, "text-anchor": "end" }, high.toFixed(3)),
               svg("text", { x: left - 4, y: top + 10, "text-anchor": "end" }, String(tallest)),
               svg("text", { x: left + plotWidth / 2, y: axis, "text-anchor": "middle" }, "return"));
}

// -- the list of episodes -----------------------------------------------------------------------------------------

function ending(episode) {
  if (episode.error !== null) return `failed: ${episode.error}`;
  return episode.terminated ? "terminated" : episode.truncated ? "truncated" : "-";
}

function drawTable(episodes) {
  const rows = episodes.slice(0, MAX_ROWS).map((episode) => {
    const row = document.createElement("tr");
    row.dataset.index = episode.index;
    for (const text of [episode.index, episode.task, episode.return.toFixed(3), episode.steps, ending(episode)]) {
      row.append(Object.assign(document.createElement("td"), { textContent: String(text) }));
    }
    row.addEventListener("click", () => showEpisode(episode.index));
    return row;
  });
  $("episodes").tBodies[0].replaceChildren(...rows);
  $("more").textContent = episodes.length > MAX_ROWS
    ? `the first ${MAX_ROWS} of ${episodes.length.toLocaleString()} are listed: narrow the filters to see the rest` : "";
}

// -- GRPO groups side by side --------------------------------------------------------------------------------------

const score = (episode) => episode.group_reward ?? episode.return;

function groupsOf(episodes) {
  const groups = new Map();
  for (const episode of episodes) {
    if (episode.group === null) continue;
    if (!groups.has(episode.group)) groups.set(episode.group, []);
    groups.get(episode.group).push(episode);
  }
  return [...groups].map(([id, members]) => {
    members.sort((a, b) => (a.member ?? 0) - (b.member ?? 0));
    const scores = members.filter((e) => e.error === null).map(score);
    const spread = scores.length ? Math.max(...scores) - Math.min(...scores) : 0;
    return { id, members, spread };
  }).sort((a, b) => b.spread - a.spread);
}

function drawGroups(episodes) {
  const groups = groupsOf(episodes);
  $("groups-box").hidden = groups.length === 0;
  $("group-count").textContent = `(${groups.length.toLocaleString()})`;
  const rows = groups.slice(0, MAX_ROWS).map((group) => {
    const row = document.createElement("tr");
    row.dataset.group = group.id;
    const name = Object.assign(document.createElement("td"), { className: "group-id", textContent: group.id,
                                                               title: "list this group's episodes" });
    name.addEventListener("click", () => { $("group-filter").value = group.id; applyFilters(); });
    const members = document.createElement("td");
    for (const episode of group.members) {
      const member = Object.assign(document.createElement("button"), {
        className: episode.error === null ? "member" : "member failed",
        textContent: episode.error === null ? score(episode).toFixed(3) : "failed",
        title: `member ${episode.member} · episode ${episode.index} · return ${episode.return}` });
      member.dataset.index = episode.index;
      member.addEventListener("click", () => showEpisode(episode.index));
      members.append(member);
    }
    row.append(name, Object.assign(document.createElement("td"), { textContent: group.members[0].task }),
               Object.assign(document.createElement("td"), { className: "spread", textContent: group.spread.toFixed(3) }),
               members);
    return row;
  });
  $("groups").tBodies[0].replaceChildren(...rows);
}

// -- one episode, turn by turn -------------------------------------------------------------------------------------

function turnsOf(messages) {
  // turn 0 is what the episode began with; every assistant message starts the next turn
  const turns = [[]];
  for (const message of messages) {
    if (message.role === "assistant") turns.push([message]); else turns[turns.length - 1].push(message);
  }
  return turns;
}

function turnTitle(episode, number) {
  if (number === 0) return "start";
  const parts = [`turn ${number}`];
  const reward = (episode.rewards || [])[number - 1];
  if (reward !== undefined) parts.push(`reward ${Number(reward.toFixed(4))}`);  // without float noise
  const tokens = (episode.tokens || [])[number - 1];
  if (tokens && tokens.completion_ids) parts.push(`${tokens.completion_ids.length} completion tokens`);
  // the request this turn answers, in the agent program's turn graph: a new branch says what broke it
  const asked = (episode.turns || [])[number - 1];
  if (asked && asked.kind !== "start" && asked.kind !== "continues") {
    parts.push(`branch ${asked.branch}: ${asked.kind}` + (asked.parent === null ? "" : ` from turn ${asked.parent + 1}`));
  }
  return parts.join(" · ");
}

async function showEpisode(index) {
  let episode;
  try {
    episode = await getJSON(`/api/episodes/${index}`);
  } catch (error) {
    status(`cannot read episode ${index}: ${error.message}`);
    return;
  }
  const summary = view.episodes[index];
  for (const row of $("episodes").tBodies[0].rows) row.classList.toggle("selected", row.dataset.index === String(index));
  $("episode-title").textContent = `Episode ${index} · ${summary.task}`;
  $("episode-outcome").textContent = `return ${summary.return} · ${summary.steps} steps · ${ending(summary)}`;
  const turns = turnsOf(episode.messages || []).map((messages, number) => {
    const item = document.createElement("li");
    item.className = "turn";
    item.append(Object.assign(document.createElement("div"), { className: "turn-title", textContent: turnTitle(episode, number) }),
                messageList(messages));
    return item;
  });
  $("turns").replaceChildren(...turns);
  $("episode-info").textContent = JSON.stringify(episode.info || {}, null, 2);
  $("episode-box").hidden = false;
  $("episode-box").scrollIntoView({ block: "start" });
  status(`episode ${index}: ${turns.length - 1} turns`);
}

function main() {
  for (const id of ["min-return", "max-return", "task-filter", "group-filter"]) $(id).addEventListener("input", applyFilters);
  $("ended").addEventListener("change", applyFilters);
  $("clear").addEventListener("click", () => {
    for (const id of ["min-return", "max-return", "task-filter", "group-filter", "ended"]) $(id).value = "";
    applyFilters();
  });
  $("reload").addEventListener("click", load);
  load();
}

main();
