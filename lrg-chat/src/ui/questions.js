// Tool servers' questions (MCP elicitation), their progress bars and log
// lines. A `question` event carries everything to ask: a form drawn from
// its schema (inputs by type, selects for enums, defaults filled in), or a
// page to open, shown with the server that asks and a button that opens it
// only when pressed. Answered with POST …/questions/{id}; a refused answer
// names its field, which is marked, and the form stays. `tool_progress`
// (live) draws a bar on the call's card; `server_log` is a line.

const questionCards = new Map();  // question_id -> card

function questionField(name, s, required) {
  const row = el("label", "q-field");
  row.dataset.field = name;
  row.appendChild(el("span", "q-label", (s.title || name) + (required ? " *" : "")));
  if (s.description) row.appendChild(el("span", "q-help", s.description));
  let input;
  const titled = (list) => list.map((o) => [o.const, o.title || o.const]);
  const choices = s.enum ? s.enum.map((v, i) => [v, (s.enumNames && s.enumNames[i]) || v])
    : (s.oneOf || s.anyOf) ? titled(s.oneOf || s.anyOf) : null;
  if (s.type === "boolean") {
    input = el("input");
    input.type = "checkbox";
    input.checked = s.default === true;
  } else if (s.type === "array") {
    const items = s.items || {};
    const opts = items.enum ? items.enum.map((v) => [v, v]) : titled(items.anyOf || items.oneOf || []);
    input = el("select");
    input.multiple = true;
    for (const [v, t] of opts) {
      const o = input.appendChild(el("option", null, t));
      o.value = v;
      o.selected = Array.isArray(s.default) && s.default.includes(v);
    }
  } else if (choices) {
    input = el("select");
    if (!required) input.appendChild(el("option", null, "—")).value = "";
    for (const [v, t] of choices) {
      const o = input.appendChild(el("option", null, t));
      o.value = v;
      o.selected = s.default === v;
    }
  } else {
    input = el("input");
    const types = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
    input.type = s.type === "number" || s.type === "integer" ? "number" : (types[s.format] || "text");
    if (s.type === "integer") input.step = "1";
    if (s.type === "number") input.step = "any";
    if (s.minimum !== undefined) input.min = String(s.minimum);
    if (s.maximum !== undefined) input.max = String(s.maximum);
    if (s.minLength !== undefined) input.minLength = s.minLength;
    if (s.maxLength !== undefined) input.maxLength = s.maxLength;
    if (s.default !== undefined) input.value = String(s.default);
  }
  input.name = name;
  input.required = !!required;
  row.appendChild(input);
  row.error = row.appendChild(el("span", "q-error"));
  row.read = () => {
    if (s.type === "boolean") return input.checked;
    if (s.type === "array") return Array.from(input.selectedOptions).map((o) => o.value);
    const v = input.value;
    if (v === "") return undefined;
    if (s.type === "number" || s.type === "integer") return Number(v);
    // A datetime-local value has no seconds or zone: send it as UTC-less RFC 3339.
    if (s.format === "date-time" && /^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(v)) return `${v}:00Z`;
    return v;
  };
  return row;
}

function questionCard(e) {
  const c = el("div", "card question waiting");
  c.setAttribute("role", "group");
  c.setAttribute("aria-label", `${e.server} asks a question`);
  const head = c.appendChild(el("div", "head"));
  head.appendChild(el("span", "title", `${e.server} asks`));
  c.status = head.appendChild(el("span", "status", "waits for you"));
  c.appendChild(el("div", "q-message", e.message));
  const box = c.appendChild(el("div", "q-body"));
  const buttons = el("div", "buttons");
  const send = (body) => {
    for (const b of c.querySelectorAll("button, input, select")) b.disabled = true;
    for (const r of c.querySelectorAll(".q-field")) { r.classList.remove("bad"); r.error.textContent = ""; }
    api("POST", `/questions/${e.question_id}`, body).catch((err) => {
      for (const b of c.querySelectorAll("button, input, select")) b.disabled = false;
      // "`content.email`: is not a valid email address": mark that field.
      const m = /`content\.([^`]+)`: (.*)/.exec(err.message || "");
      const row = m && c.querySelector(`.q-field[data-field="${CSS.escape(m[1])}"]`);
      if (row) { row.classList.add("bad"); row.error.textContent = m[2]; row.querySelector("input, select").focus(); }
      else report(err);
    });
  };
  const btn = (cls, text, fn) => { const b = buttons.appendChild(el("button", cls, text)); b.addEventListener("click", fn); return b; };
  if (e.mode === "url") {
    box.appendChild(el("div", "q-help", `${e.server} asks you to open this page:`));
    box.appendChild(el("code", "q-url", e.url));
    // Opened only when the person presses it, never by the page itself.
    btn("primary", "Open in your browser", () => { window.open(e.url, "_blank", "noopener,noreferrer"); });
    btn("", "Done", () => send({ action: "accept" }));
  } else {
    const schema = e.requested_schema || {};
    const required = new Set(schema.required || []);
    const rows = Object.entries(schema.properties || {}).map(([name, s]) => box.appendChild(questionField(name, s, required.has(name))));
    btn("primary", "Send", () => {
      const content = {};
      for (const r of rows) { const v = r.read(); if (v !== undefined) content[r.dataset.field] = v; }
      send({ action: "accept", content });
    });
  }
  btn("", "Decline", () => send({ action: "decline" }));
  btn("danger", "Cancel", () => send({ action: "cancel" }));
  c.appendChild(buttons);
  return c;
}

handlers.question = (e) => {
  dropLive();
  const c = questionCard(e);
  questionCards.set(e.question_id, c);
  // Under the call that asks, when the call is shown.
  const call = e.tool_call_id && cards.get(e.tool_call_id);
  if (call && call.isConnected) { call.appendChild(c); if (e.seq) c.dataset.seq = String(e.seq); } else add(c, e.seq);
  announce(`${e.server} asks: ${e.message}`, false);
  const first = c.querySelector("input, select, button");
  if (first && (document.activeElement !== $("input") || !$("input").value)) first.focus();
};

handlers.question_answered = (e) => {
  const c = questionCards.get(e.question_id); if (!c) return;
  c.classList.remove("waiting");
  c.status.textContent = { accept: "answered", decline: "declined", cancel: "cancelled" }[e.action] || e.action;
  for (const b of c.querySelectorAll("button, input, select")) b.disabled = true;
  c.querySelector(".buttons").remove();
  if (e.reason) c.appendChild(el("div", "notice", e.reason));
};

handlers.tool_progress = (e) => {
  const c = cards.get(e.call_id); if (!c) return;
  if (!c.progress) {
    c.progress = c.appendChild(el("div", "progress"));
    c.progress.bar = c.progress.appendChild(el("progress"));
    c.progress.text = c.progress.appendChild(el("span", "q-help"));
  }
  const p = c.progress;
  if (e.total) { p.bar.max = e.total; p.bar.value = e.progress; } else { p.bar.removeAttribute("value"); }
  const pct = e.total ? ` ${Math.round((100 * e.progress) / e.total)}%` : ` ${e.progress}`;
  p.text.textContent = (e.message ? `${e.message} ` : "") + pct.trim();
};

// A local model loading before this chat's turn (live only): one bar,
// gone once the model is in.
let loadingBar = null;
handlers.model_loading = (e) => {
  if (!loadingBar || !loadingBar.isConnected) {
    loadingBar = add(el("div", "notice loading", `Loading ${e.model}`));
    loadingBar.bar = loadingBar.appendChild(el("progress"));
    loadingBar.bar.max = 1;
  }
  loadingBar.bar.value = e.progress;
  if (e.progress >= 1) { loadingBar.remove(); loadingBar = null; }
};

handlers.server_log = (e) => {
  notice(`${e.server} ${e.level}: ${e.message}`, e.level === "warning" ? "warning" : "error", e.seq);
};
