// The agentrt console's own script: fills the pages from the server-sent event streams,
// draws the charts as SVG and sends the actions. It sets text, never markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const csrf = document.querySelector('meta[name="agentrt-csrf"]').content;

function el(tag, attrs, text) {
  const node = tag.startsWith("svg:")
    ? document.createElementNS(SVG, tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function money(value) {
  return value === null || value === undefined ? "-" : "$" + Number(value).toFixed(4);
}

function ago(seconds) {
  if (seconds < 60) return Math.round(seconds) + " s";
  if (seconds < 3600) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function live(path, handlers) {
  const conn = document.getElementById("conn");
  const source = new EventSource(path);
  source.onopen = () => { conn.textContent = "live"; conn.className = "ok"; };
  source.onerror = () => { conn.textContent = "reconnecting"; conn.className = "bad"; };
  for (const [name, handle] of Object.entries(handlers)) {
    source.addEventListener(name, (message) => handle(JSON.parse(message.data)));
  }
}

// ---- charts: a line over time, and labelled bars ----

function lineChart(holder, points, label) {
  const w = 320, h = 120, pad = 28;
  const svg = el("svg:svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": label });
  if (points.length > 0) {
    const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1);
    const top = Math.max(...points.map((p) => p[1]), 1e-9);
    const x = (t) => pad + ((t - t0) / (t1 - t0)) * (w - pad - 8);
    const y = (v) => h - pad + 8 - (v / top) * (h - pad - 8);
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    svg.append(el("svg:path", { d: d.join(" "), class: "line" }));
    svg.append(el("svg:text", { x: 2, y: 12, class: "axis" }, top > 1e-9 ? top.toPrecision(3) : "0"));
    svg.append(el("svg:text", { x: 2, y: h - pad + 8, class: "axis" }, "0"));
    svg.append(el("svg:text", { x: w - 70, y: h - 4, class: "axis" }, ago(t1 - t0) + " shown"));
  }
  holder.replaceChildren(svg);
}

function barChart(holder, bars, label, format) {
  const shown = bars.slice(0, 12);
  const w = 320, row = 18, h = Math.max(row * shown.length + 4, 24);
  const svg = el("svg:svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": label });
  const top = Math.max(...shown.map((b) => b[1]), 1e-9);
  shown.forEach(([name, value], i) => {
    const y = 2 + i * row;
    svg.append(el("svg:text", { x: 0, y: y + 12, class: "axis" }, String(name).slice(0, 18)));
    const width = Math.max(1, (value / top) * (w - 190));
    svg.append(el("svg:rect", { x: 120, y: y + 2, width: width.toFixed(1), height: row - 6, class: "bar" }));
    svg.append(el("svg:text", { x: 124 + width, y: y + 12, class: "axis" }, format(value)));
  });
  holder.replaceChildren(svg);
}

// Running totals of [ended_at, cost_usd, ...] points: [[t, cost so far], ...] and
// [[t, turns so far], ...], for the lines of cost and turns over time.
function runningTotals(points) {
  let cost = 0;
  const costs = [], turns = [];
  points.forEach((p, i) => { cost += p[1]; costs.push([p[0], cost]); turns.push([p[0], i + 1]); });
  return [costs, turns];
}

function countBy(values) {
  const counts = {};
  for (const value of values) counts[value] = (counts[value] || 0) + 1;
  return Object.entries(counts).sort((a, b) => b[1] - a[1]);
}

// One stored budget of the agent (as `agentrt status` shows it), the one that binds marked.
function budgetText(b) {
  const parts = [];
  if (b.usd !== null) parts.push(`${money(b.left_usd)} of ${money(b.usd)} left`);
  if (b.tokens !== null) parts.push(`${b.left_tokens} of ${b.tokens} tokens left`);
  return `${b.scope}: ${parts.join(", ")}${b.binding ? " (binds)" : ""}`;
}

function budgetLeft(usd, tokens) {
  const parts = [];
  if (usd !== null && usd !== undefined) parts.push(money(usd));
  if (tokens !== null && tokens !== undefined) parts.push(tokens + " tokens");
  return parts.length ? parts.join(", ") : "no budget";
}

// ---- tool calls waiting for a person ----

async function post(body) {
  const reply = await fetch("action", {
    method: "POST",
    headers: { "content-type": "application/json", "x-agentrt-csrf": csrf },
    body: JSON.stringify(body),
  });
  return [reply.ok, await reply.json()];
}

function approvalCard(a) {
  const card = el("article", { class: "approval", "data-id": a.id });
  const title = el("h3");
  title.append(el("span", { class: "tool" }, a.tool), " for agent ",
    el("a", { href: "agent?name=" + encodeURIComponent(a.name) }, a.name),
    a.request === null ? "" : ` (request #${a.request})`);
  const left = el("span", { class: "left" });
  card.append(title, el("p", { class: "reason" }, a.reason || "(no reason given)"), left,
    el("pre", { class: "input" }, a.input));
  const edit = el("textarea", { class: "edit", rows: 3 });
  edit.value = a.input;
  const message = el("input", { class: "message", type: "text", placeholder: "why not (the model reads it)" });
  const outcome = el("p", { class: "outcome", role: "status" });
  const buttons = el("div");
  const decide = async (body) => {
    const [ok, data] = await post({ action: "decide", id: a.id, ...body });
    outcome.className = ok ? "outcome" : "outcome error";
    outcome.textContent = ok ? "decided" : `${data.error}: ${data.message}`;
  };
  const allow = el("button", { class: "allow" }, "Allow");
  allow.addEventListener("click", () => decide({ allowed: true }));
  const edited = el("button", { class: "allow-edited" }, "Allow with edited input");
  edited.addEventListener("click", () => decide({ allowed: true, updated_input: edit.value }));
  const deny = el("button", { class: "deny danger" }, "Deny");
  deny.addEventListener("click", () => decide({ allowed: false, message: message.value }));
  buttons.append(allow, edited, deny);
  const questions = questionForm(a, decide) || elicitationForm(a, decide);
  if (questions) card.append(questions);
  card.append(edit, message, buttons, outcome);
  card.tick = () => {
    const seconds = Math.max(0, a.expires_at - Date.now() / 1000);
    left.textContent = seconds > 0 ? `${Math.ceil(seconds)} s left before approval_timeout denies it`
      : "approval_timeout has denied it";
  };
  card.tick();
  return card;
}

// The model's questions for the user (AskUserQuestion): one answer field per question, its
// options as buttons that fill it; "Answer" allows the call with the answers added to its
// input, as the CLI takes them. An input shown cut short is left to the JSON editor.
function questionForm(a, decide) {
  if (a.tool !== "AskUserQuestion") return null;
  let input;
  try { input = JSON.parse(a.input); } catch (e) { return null; }
  if (!input || !Array.isArray(input.questions)) return null;
  const form = el("div", { class: "questions" });
  const fields = [];
  for (const q of input.questions) {
    if (!q || typeof q.question !== "string") continue;
    const field = el("input", { class: "answer", type: "text", placeholder: "the answer" });
    const options = el("div", { class: "options" });
    for (const o of Array.isArray(q.options) ? q.options : []) {
      if (!o || typeof o.label !== "string") continue;
      const pick = el("button", { class: "option", title: o.description || "" }, o.label);
      pick.addEventListener("click", () => {
        field.value = q.multiSelect && field.value ? `${field.value}, ${o.label}` : o.label;
      });
      options.append(pick);
    }
    fields.push([q.question, field]);
    form.append(el("p", { class: "question" }, q.question), options, field);
  }
  const send = el("button", { class: "answer-send" }, "Answer");
  send.addEventListener("click", () => {
    const answers = Object.fromEntries(fields.map(([question, field]) => [question, field.value]));
    decide({ allowed: true, updated_input: JSON.stringify({ ...input, answers }) });
  });
  form.append(send);
  return form;
}

// An MCP server's question (McpElicitation): one field per property of the form it asks for,
// a box for a boolean; "Answer" allows it with the form's content, each value of its
// property's type, which the CLI sends the server as accepted.
function elicitationForm(a, decide) {
  if (a.tool !== "McpElicitation") return null;
  let input;
  try { input = JSON.parse(a.input); } catch (e) { return null; }
  const schema = input && input.requested_schema;
  const properties = schema && typeof schema.properties === "object" ? schema.properties : null;
  if (!properties) return null;
  const form = el("div", { class: "questions" });
  form.append(el("p", { class: "question" }, `${input.mcp_server_name}: ${input.message}`));
  const fields = [];
  for (const [name, spec] of Object.entries(properties)) {
    const kind = spec && spec.type;
    const field = kind === "boolean" ? el("input", { class: "answer", type: "checkbox", name })
      : el("input", { class: "answer", type: kind === "number" || kind === "integer" ? "number" : "text", name });
    fields.push([name, kind, field]);
    const label = el("label", {}, (spec && spec.title) || name);
    label.append(" ", field);
    form.append(label);
  }
  const send = el("button", { class: "answer-send" }, "Answer");
  send.addEventListener("click", () => {
    const value = (kind, field) => kind === "boolean" ? field.checked
      : kind === "number" || kind === "integer" ? Number(field.value) : field.value;
    const content = Object.fromEntries(fields.map(([name, kind, field]) => [name, value(kind, field)]));
    decide({ allowed: true, updated_input: JSON.stringify(content) });
  });
  form.append(send);
  return form;
}

function showApprovals(approvals) {
  const section = document.getElementById("approvals-section");
  const holder = document.getElementById("approvals");
  const wanted = new Set((approvals || []).map((a) => a.id));
  for (const card of [...holder.children]) if (!wanted.has(card.dataset.id)) card.remove();
  const present = new Set([...holder.children].map((card) => card.dataset.id));
  for (const a of approvals || []) if (!present.has(a.id)) holder.append(approvalCard(a));
  section.hidden = holder.children.length === 0;
}

setInterval(() => document.querySelectorAll(".approval").forEach((card) => card.tick()), 1000);

// ---- the fleet page ----

function fleetPage() {
  const body = document.querySelector("#fleet tbody");
  const filters = { state: "#f-state", node: "#f-node", backend: "#f-backend" };
  const history = [];
  let agents = [];
  let sortKey = "name", sortDown = false;

  function fillFilter(key) {
    const select = document.querySelector(filters[key]);
    const chosen = select.value;
    const values = [...new Set(agents.map((a) => a[key] ?? "-"))].sort();
    select.replaceChildren(el("option", { value: "" }, "all"));
    for (const value of values) select.append(el("option", { value }, value));
    select.value = values.includes(chosen) ? chosen : "";
  }

  function render() {
    const name = document.getElementById("f-name").value;
    const rows = agents.filter((a) =>
      Object.entries(filters).every(([key, sel]) => {
        const want = document.querySelector(sel).value;
        return !want || (a[key] ?? "-") === want;
      }) && (!name || a.name.includes(name)));
    rows.sort((a, b) => {
      const x = a[sortKey] ?? "", y = b[sortKey] ?? "";
      const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
      return sortDown ? -order : order;
    });
    body.replaceChildren(...rows.map((a) => {
      const tr = el("tr", { "data-name": a.name, "data-state": a.state });
      const link = el("a", { href: "agent?name=" + encodeURIComponent(a.name) }, a.name);
      const cell = el("td"); cell.append(link); tr.append(cell);
      const cells = [a.node, a.pid, a.backend, a.mode, a.state, a.session_id, a.turns,
        money(a.cost_usd), a.restarts, a.queued,
        a.oldest_queued === null ? "-" : ago(a.oldest_queued), a.last_outcome,
        a.updated_at === null ? "-" : ago(Date.now() / 1000 - a.updated_at) + " ago",
        a.mode === null ? "-" : budgetLeft(a.budget_left_usd, a.budget_left_tokens)];
      for (const value of cells) tr.append(el("td", {}, value ?? "-"));
      tr.children[5].className = "state";
      return tr;
    }));
    document.getElementById("count").textContent = `(${rows.length} of ${agents.length})`;
  }

  // The store's turn history, when it keeps one: the lines then cover more than the
  // time this page has been open.
  let stored = null, storedTurns = -1;

  async function fromStore(turns) {
    if (turns === storedTurns) return;
    storedTurns = turns;
    const data = await (await fetch("history")).json();
    stored = data.chart;
    document.getElementById("chart-span").textContent = stored
      ? `from the store: the fleet's last ${stored.length} turns` : "since this page opened: " + data.why;
    charts();
  }

  function charts() {
    const [costs, turns] = stored ? runningTotals(stored)
      : [history.map((p) => [p[0], p[1]]), history.map((p) => [p[0], p[2]])];
    lineChart(document.getElementById("chart-cost"), costs, "fleet cost");
    lineChart(document.getElementById("chart-turns"), turns, "fleet turns");
    const outcomes = {};
    for (const a of agents) if (a.last_outcome) outcomes[a.last_outcome] = (outcomes[a.last_outcome] || 0) + 1;
    barChart(document.getElementById("chart-outcomes"),
      Object.entries(outcomes).sort((a, b) => b[1] - a[1]), "outcomes", String);
    barChart(document.getElementById("chart-agents"),
      agents.map((a) => [a.name, a.cost_usd || 0]).sort((a, b) => b[1] - a[1]), "cost by agent", money);
  }

  document.querySelectorAll("#fleet th").forEach((th) => th.addEventListener("click", () => {
    const key = th.dataset.key;
    sortDown = sortKey === key ? !sortDown : false;
    sortKey = key;
    render();
  }));
  document.getElementById("filters").addEventListener("input", render);

  function sample() {
    const cost = agents.reduce((sum, a) => sum + (a.cost_usd || 0), 0);
    const turns = agents.reduce((sum, a) => sum + a.turns, 0);
    history.push([Date.now() / 1000, cost, turns]);
    if (history.length > 2000) history.shift();
    charts();
  }

  // The stream sends the fleet when it changes; the lines go on between changes.
  setInterval(() => { if (agents.length) { sample(); render(); } }, 5000);
  live("events/fleet", {
    fleet: (data) => {
      showApprovals(data.approvals);
      agents = data.agents;
      Object.keys(filters).forEach(fillFilter);
      render();
      sample();
      fromStore(agents.reduce((sum, a) => sum + a.turns, 0));
    },
  });
}

// ---- the agent page ----

// The agent page's turn history from the store: a page of its turns, newest first, and
// the charts of its newest turns; fetched again when the stored count of turns changes.
function historyOf(name) {
  const body = document.querySelector("#history tbody");
  const newer = document.getElementById("history-newer"), older = document.getElementById("history-older");
  let offset = 0, known = -1, page = 20;

  async function load() {
    const data = await (await fetch(`history?name=${encodeURIComponent(name)}&offset=${offset}`)).json();
    const why = document.getElementById("history-why");
    why.hidden = !data.why;
    why.textContent = data.why || "";
    if (!data.turns) return;
    page = data.page;
    body.replaceChildren(...data.turns.map((t) => {
      const tr = el("tr", { "data-outcome": t.outcome });
      const cells = [new Date(t.ended_at * 1000).toLocaleString(), t.node, t.outcome,
        t.duration.toFixed(1) + " s", money(t.cost_usd), `${t.input_tokens} / ${t.output_tokens}`];
      for (const value of cells) tr.append(el("td", {}, value));
      for (const text of [t.prompt, t.answer]) tr.append(el("td", { class: "text" }, text ?? "(not kept)"));
      return tr;
    }));
    newer.disabled = offset === 0;
    older.disabled = !data.more;
    document.getElementById("history-at").textContent = data.turns.length
      ? `turns ${offset + 1} to ${offset + data.turns.length}, newest first` : "no turns yet";
    const [costs, turns] = runningTotals(data.chart);
    lineChart(document.getElementById("h-cost"), costs, "cost over time");
    lineChart(document.getElementById("h-turns"), turns, "turns over time");
    lineChart(document.getElementById("h-durations"), data.chart.map((p) => [p[0], p[2]]), "turn durations");
    barChart(document.getElementById("h-outcomes"), countBy(data.chart.map((p) => p[3])), "outcomes", String);
  }

  newer.addEventListener("click", () => { offset = Math.max(0, offset - page); load(); });
  older.addEventListener("click", () => { offset += page; load(); });
  return { turns: (count) => { if (count !== known) { known = count; load(); } } };
}

let turnHistory = null;

function agentPage() {
  const name = new URLSearchParams(location.search).get("name") || "";
  turnHistory = historyOf(name);
  document.getElementById("agent-name").textContent = name;
  const liveText = document.getElementById("live");
  const events = document.getElementById("events");
  const outcome = document.getElementById("outcome");

  function facts(data) {
    const s = data.status || {}, r = data.record || {};
    const list = [["backend", r.backend], ["mode", s.mode], ["session", s.session_id ?? r.session_id],
      ["turns", r.turns ?? s.turns], ["cost", money(r.cost_usd)], ["tokens in / out",
      r.input_tokens === undefined ? "-" : `${r.input_tokens} / ${r.output_tokens}`],
      ["restarts", s.restarts], ["queued", s.queued], ["last outcome", r.last_stop_reason],
      ["cwd", r.cwd], ["CLI pid", s.cli_pid], ["credential", s.credential],
      ["parked until", s.parked_until ? new Date(s.parked_until * 1000).toISOString() + " (usage limit)" : "-"],
      ["halted because", s.halt_reason],
      ["spent", s.spent_usd === undefined ? "-" : `${money(s.spent_usd)}, ${s.spent_tokens} tokens`],
      ["budget left", s.spent_usd === undefined ? "-" : budgetLeft(s.budget_left_usd, s.budget_left_tokens)],
      ["budgets", data.budgets.length ? data.budgets.map(budgetText).join("; ") : "none"],
      ["current request", s.current ? `#${s.current.ref} (${s.current.origin}, ${s.current.elapsed.toFixed(1)} s)` : "none"]];
    const dl = document.getElementById("facts");
    dl.replaceChildren();
    for (const [key, value] of list) dl.append(el("dt", {}, key), el("dd", {}, value ?? "-"));
    document.getElementById("agent-state").textContent = s.state || data.stored_state || "unknown";
    // The actions go through a runtime that runs the agent: without its status (stopped, or
    // its owner out of reach) none of them can work, so none is offered.
    const acting = data.status !== null;
    document.querySelectorAll(".actions button, .actions textarea").forEach((control) => {
      control.disabled = !acting;
    });
    const why = document.getElementById("unreachable");
    why.hidden = acting;
    why.className = data.unreachable ? "error" : "note";
    why.textContent = data.unreachable
      || "No runtime runs this agent: its record, history and transcript stay in the store, "
        + "and its actions come back when a program starts it again.";
    turnHistory.turns(r.turns);
    queue(data);
  }

  let shownQueue = "";

  // The queued requests, each withdrawable; listed from the store where it keeps them (so
  // another program's queue too), else only counted from the status.
  function queue(data) {
    const s = data.status || {}, q = data.queue;
    const count = q.requests ? q.requests.length : s.queued;
    document.getElementById("queue-count").textContent = count === undefined ? ""
      : `(${count}` + (s.oldest_queued ? `, oldest waiting ${ago(s.oldest_queued)}` : "") + ")";
    const why = document.getElementById("queue-why");
    why.hidden = !q.why;
    why.textContent = q.why ? `${q.why}` + (s.queued_keys && s.queued_keys.length
      ? ` (keys: ${s.queued_keys.join(", ")})` : "") : "";
    const body = document.querySelector("#queue tbody");
    const waited = (accepted) => ago(Math.max(0, Date.now() / 1000 - accepted));
    // Rows are made again only when the queue changed (a button under the pointer stays);
    // else only their ages move on.
    const listed = JSON.stringify([q.requests, data.status === null]);
    if (listed === shownQueue) {
      body.querySelectorAll("td.age").forEach((td) => { td.textContent = waited(Number(td.dataset.accepted)); });
      return;
    }
    shownQueue = listed;
    body.replaceChildren(...(q.requests || []).map((request) => {
      const tr = el("tr", { "data-ref": request.ref ?? "" });
      for (const value of [request.ref === null ? "-" : "#" + request.ref, request.key ?? "-"]) {
        tr.append(el("td", {}, value));
      }
      tr.append(el("td", { class: "age", "data-accepted": request.accepted_at }, waited(request.accepted_at)));
      tr.append(el("td", { class: "text" }, request.prompt ?? "-"));
      const cell = el("td");
      if (request.ref !== null) {
        const button = el("button", { class: "withdraw" }, "Withdraw");
        button.disabled = data.status === null;
        button.addEventListener("click", async () => {
          button.disabled = true;
          const [ok, reply] = await post({ name, action: "withdraw", ref: request.ref });
          outcome.className = ok ? "" : "error";
          outcome.textContent = !ok ? `${reply.error}: ${reply.message}`
            : reply.withdrawn ? `request #${request.ref} withdrawn`
              : `request #${request.ref} was no longer queued`;
        });
        cell.append(button);
      }
      tr.append(cell);
      return tr;
    }));
  }

  // A message ended: the next one's text starts a paragraph of its own (the turn's
  // messages arrive as one run of text, which would otherwise join them mid-line).
  let messageEnded = false;

  function event(data) {
    if (data.kind === "text") {
      if (messageEnded && data.text) {
        liveText.textContent += "\n\n";
        messageEnded = false;
      }
      liveText.textContent += data.text;
      if (data.boundary && liveText.textContent !== "") messageEnded = true;
      return;
    }
    if (data.kind === "text_retracted") { liveText.textContent = liveText.textContent.slice(0, -data.text.length); }
    const parts = [data.kind];
    if (data.tool) parts.push(data.tool);
    if (data.input) parts.push(data.input);
    if (data.content) parts.push(data.content);
    if (data.allowed !== undefined) parts.push(data.allowed ? "allowed" : "denied", "by " + data.decided_by);
    if (data.reason) parts.push(data.reason);
    if (data.message) parts.push(data.message);
    events.append(el("li", { class: "event-" + data.kind }, parts.join(" | ")));
  }

  async function act(action) {
    const prompt = document.getElementById("prompt").value;
    outcome.className = "";
    outcome.textContent = action + "...";
    const [ok, data] = await post({ name, action, prompt });
    if (!ok) {
      outcome.className = "error";
      outcome.textContent = `${data.error}: ${data.message}`;
    } else if (action === "ask") {
      outcome.textContent = `${data.stop_reason} in ${data.duration.toFixed(1)} s, ${money(data.cost_usd)}: ${data.text}`;
    } else {
      outcome.textContent = action + " done" + (data.ref !== undefined ? ` (request #${data.ref})` : "")
        + (data.interrupted === false ? " (no turn was running)" : "");
    }
  }

  for (const action of ["ask", "tell", "interrupt", "halt", "unhalt", "reset_session", "stop"]) {
    document.getElementById("do-" + action).addEventListener("click", () => act(action));
  }

  live("events/agent?name=" + encodeURIComponent(name), {
    agent: facts,
    turn: (data) => {
      document.getElementById("turn-ref").textContent = "#" + data.ref;
      liveText.textContent = "";
      messageEnded = false;
      events.replaceChildren();
    },
    event,
    dropped: (data) => events.append(el("li", { class: "event-dropped" },
      `${data.count} events not shown: ${data.why || "this page fell behind the turn"}`)),
  });

  fetch("transcript?name=" + encodeURIComponent(name)).then((r) => r.json()).then((data) => {
    document.getElementById("transcript").textContent = data.lines ? data.lines.join("\n") : data.why;
  });
}

if (document.body.dataset.page === "fleet") fleetPage(); else agentPage();
