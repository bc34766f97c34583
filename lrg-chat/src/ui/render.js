// How each event is drawn: the handlers `apply` calls, by event type.

// ---- applying events -------------------------------------------------------

function apply(e) {
  if (e.seq) {
    if (e.seq <= lastSeq) return;  // already shown (a replay overlap)
    lastSeq = e.seq;
  }
  const h = handlers[e.type];
  if (h) h(e);  // types this page does not know are ignored
}

const reasonText = {
  mode: (r) => `The mode “${modeNames[r.mode] || r.mode}” asks before this kind of tool runs.`,
  rule: () => "A rule says to ask before this tool runs.",
  bulk: (r) => `It is aimed at ${plural(r.targets, "item")}, more than the bulk limit of ${r.limit}.`,
  agent: () => "The agent asks before it runs this tool.",
  hook: (r) => r.reason ? `A hook asks: ${r.reason}` : "A hook asks before this tool runs.",
};
const modeNames = {
  ask_all: "ask for everything", auto_read: "run read-only tools", auto_safe: "run tools that destroy nothing", auto_all: "run everything",
};
const skipText = {
  repeated_call: "not run: the same call was already made", not_allowed: "not allowed", stopped: "not run: stopped",
  blocked: "not run: the tool is turned off", unknown_tool: "not run: no such tool",
  hook_denied: "not run: denied by a hook",
};
const hookEventNames = {
  user_prompt_submit: "before the message", pre_tool_use: "before the call", post_tool_use: "after the call", stop: "at the end",
};

function liveTurn() {
  if (!live) {
    live = add(el("div", "turn live"));
    live.thinking = null;
    live.raw = ""; live.reasoningRaw = "";
    live.text = live.appendChild(el("div", "text md"));
  }
  return live;
}
function dropLive() { if (live) { live.remove(); live = null; } }
function thinkingBlock(text, open) {
  const d = el("details", "thinking");
  d.appendChild(el("summary", null, "Thinking"));
  const body = d.appendChild(el("div", "body md"));
  renderMarkdown(body, text);
  if (open) d.open = true;
  return d;
}
// The live turn's Markdown, drawn again at most once an animation frame,
// and only the live turn.
let liveFrame = 0;
function scheduleLive() {
  if (liveFrame) return;
  liveFrame = requestAnimationFrame(() => {
    liveFrame = 0;
    const t = live;
    if (!t) return;
    const atBottom = nearBottom();
    const { text, thinking } = splitThink(t.raw);
    const reasoning = [t.reasoningRaw, thinking].filter(Boolean).join("\n\n");
    if (reasoning) {
      if (!t.thinking) { t.thinking = thinkingBlock("", true); t.insertBefore(t.thinking, t.text); }
      renderMarkdown(t.thinking.querySelector(".body"), reasoning);
    }
    renderMarkdown(t.text, text);
    if (atBottom) $("main").scrollTop = $("main").scrollHeight;
  });
}
// A typed answer (assistant_turn.json): the validated JSON, indented, with
// a button that copies it compact, as a program would read it.
function jsonBlock(value) {
  const box = el("div", "json-answer");
  const head = box.appendChild(el("div", "head"));
  head.appendChild(el("span", null, "JSON"));
  const copy = head.appendChild(el("button", "copy", "Copy"));
  copy.title = "Copy the JSON";
  box.appendChild(el("pre", "json", JSON.stringify(value, null, 2)));
  copy.addEventListener("click", () => copyJson(box, copy, JSON.stringify(value)));
  return box;
}
function copyJson(box, button, text) {
  const said = (what) => {
    button.textContent = what;
    clearTimeout(button.reset);
    button.reset = setTimeout(() => { button.textContent = "Copy"; }, 2000);
  };
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).then(() => said("Copied"), () => selectForCopy(box, text, said));
  } else {
    selectForCopy(box, text, said);
  }
}
// No clipboard API (a page served over plain http to another machine, or
// one the browser refused): the compact JSON in a box, selected, to copy
// by hand if the old copy command is refused too.
function selectForCopy(box, text, said) {
  let area = box.querySelector(".copy-text");
  if (!area) {
    area = box.appendChild(el("textarea", "copy-text"));
    area.readOnly = true;
    area.rows = 2;
    area.setAttribute("aria-label", "The JSON, selected to copy");
  }
  area.value = text;
  area.focus();
  area.select();
  let copied = false;
  try { copied = document.execCommand("copy"); } catch (_) { /* refused */ }
  said(copied ? "Copied" : "Selected: press Ctrl+C");
}
// A deny note, once: both `approval_answered` and `tool_skipped` carry it.
function addNote(card, note) {
  if (!note || card.noteShown) return;
  card.noteShown = true;
  card.appendChild(el("div", "warning note", `Your note: ${note}`));
}
// The items a destructive call is aimed at: its array argument's values.
function targetValues(args) {
  if (!args || typeof args !== "object") return null;
  const arrays = Object.values(args).filter(Array.isArray);
  return arrays.length ? arrays[0] : null;
}
function argValue(v) {
  if (typeof v === "string" && v.includes("\n")) return el("pre", null, v);
  if (Array.isArray(v)) return document.createTextNode(`[${words(v)}]`);
  return document.createTextNode(words(v));
}

// A call's card: its tool, class, targets and arguments, from its
// tool_call (or from an approval_needed, which carries the same fields).
function callCard(e) {
  const c = el("div", `card ${e.class}`);
  c.dataset.call = e.call_id;
  c.setAttribute("role", "group");
  c.setAttribute("aria-label", `Tool call: ${e.title || e.tool}`);
  const head = c.appendChild(el("div", "head"));
  head.appendChild(el("span", "title", e.title || e.tool));
  if (e.title) head.appendChild(el("span", "notice", e.tool));
  head.appendChild(el("span", `badge ${e.class}`, e.class));
  // A client tool: the app's own front end carries it out and answers.
  if (e.runs_on === "client") head.appendChild(el("span", "notice runs-on-client", "runs in the app"));
  c.status = head.appendChild(el("span", "status", e.runs_on === "client" ? "waits for the app" : "asked"));
  if (e.targets !== undefined && e.targets !== null) {
    const box = c.appendChild(el("div", "targets", `Aimed at ${plural(e.targets, "item")}`));
    const values = targetValues(e.arguments);
    if (values && values.length) {
      box.appendChild(document.createTextNode(":"));
      const list = box.appendChild(el("ul"));
      for (const v of values.slice(0, 50)) list.appendChild(el("li", null, words(v)));
      if (values.length > 50) list.appendChild(el("li", null, `… and ${values.length - 50} more`));
    }
  }
  const args = c.appendChild(el("ul", "args"));
  const entries = e.arguments && typeof e.arguments === "object" ? Object.entries(e.arguments) : [];
  if (!entries.length) args.appendChild(el("li", "k", "no arguments"));
  for (const [k, v] of entries) {
    const li = args.appendChild(el("li"));
    li.appendChild(el("span", "k", `${k}: `));
    li.appendChild(argValue(v));
  }
  return c;
}

const handlers = {
  user_message(e) {
    userMessages++;
    const u = el("div", "user msg", e.text);
    if (editAfter && e.seq && e.seq === editAfter.seq + 1 && editAfter.node.isConnected) editAfter.node.remove();
    editAfter = null;
    if (e.images) {
      const shown = takeSentImages(e.images);
      if (shown) {
        const box = u.appendChild(el("div", "thumbs"));
        for (const img of shown) { const tag = box.appendChild(el("img")); tag.src = img.url; tag.alt = img.name || "attached image"; }
      } else {
        u.appendChild(el("div", "notice", `(${plural(e.images, "image")})`));
      }
    }
    add(u, e.seq);
    actions(u, () => e.text, "user");
    refreshLast();
    updateControls();
  },
  delta(e) {
    const t = liveTurn();
    if (e.kind === "reasoning") t.reasoningRaw += e.text; else t.raw += e.text;
    scheduleLive();
  },
  // A call while the model writes it: a card in the live turn, keyed by the
  // call's index, that grows with each fragment. Live only, like deltas: the
  // numbered tool_call that follows draws the real card, and dropping the
  // live turn drops this one.
  tool_call_delta(e) {
    const t = liveTurn();
    if (!t.calls) t.calls = new Map();
    let c = t.calls.get(e.index);
    const atBottom = nearBottom();
    if (!c) {
      c = t.appendChild(el("div", "card streaming"));
      const head = c.appendChild(el("div", "head"));
      c.toolName = head.appendChild(el("span", "title", e.tool || "tool"));
      head.appendChild(el("span", "status", "writing…"));
      c.args = c.appendChild(el("pre", "args"));
      t.calls.set(e.index, c);
    }
    if (e.tool) c.toolName.textContent = e.tool;
    c.args.textContent += e.arguments_fragment;
    c.args.scrollTop = c.args.scrollHeight;
    if (atBottom) $("main").scrollTop = $("main").scrollHeight;
  },
  assistant_turn(e) {
    dropLive();
    const { text, thinking } = splitThink(e.text);
    const reasoning = [e.reasoning, thinking].filter(Boolean).join("\n\n");
    lastTurnStopped = false;
    if (!text && !reasoning && e.json === undefined) return;
    const t = el("div", "turn");
    if (reasoning) t.appendChild(thinkingBlock(reasoning, false));
    // A typed answer is shown as its validated JSON; its text is that JSON
    // as the model wrote it.
    if (e.json !== undefined) t.appendChild(jsonBlock(e.json));
    else if (text) renderMarkdown(t.appendChild(el("div", "text md")), text);
    // Stopped midway: what was shown stays, marked.
    if (e.stopped) {
      t.classList.add("stopped");
      t.appendChild(el("div", "stopped-mark", "Stopped"));
      lastTurnStopped = true;
    }
    add(t, e.seq);
    actions(t, () => text, "turn");
    refreshLast();
  },
  tool_call(e) {
    dropLive();
    const c = callCard(e);
    cards.set(e.call_id, c);
    add(c, e.seq);
  },
  approval_needed(e) {
    // The question carries its call: a sub-agent's (whose tool_call is in
    // its own stream) gets its card from the question itself.
    let c = cards.get(e.call_id);
    if (!c) {
      c = callCard(e);
      if (e.sub_agent) {
        c.classList.add("from-sub-agent");
        c.querySelector(".head").insertBefore(el("span", "notice sub-agent", `sub-agent ${e.sub_agent.sub_session_id}`), c.status);
      }
      cards.set(e.call_id, c);
      add(c, e.seq);
    }
    c.classList.add("waiting");
    c.status.textContent = "waits for you";
    const box = c.appendChild(el("div", "approval"));
    box.setAttribute("role", "group");
    const name = c.querySelector(".title").textContent;
    box.setAttribute("aria-label", `Allow ${name}?`);
    c.approval = box;
    const r = reasonText[e.reason && e.reason.kind];
    box.appendChild(el("div", "why", r ? r(e.reason) : "It asks before it runs."));
    for (const w of e.warnings || []) box.appendChild(el("div", "warning", w));
    const buttons = box.appendChild(el("div", "buttons"));
    const answer = (kind, note) => () => {
      for (const b of box.querySelectorAll("button, input")) b.disabled = true;
      const body = { answer: kind };
      if (note) body.note = note;
      api("POST", `/approvals/${encodeURIComponent(e.call_id)}`, body).catch((err) => {
        for (const b of box.querySelectorAll("button, input")) b.disabled = false;
        report(err);
      });
    };
    const btn = (cls, text, fn) => { const b = buttons.appendChild(el("button", cls, text)); b.addEventListener("click", fn); return b; };
    // The answers the question allows (an older event says only whether
    // "always" is offered).
    const allowed = e.answers && e.answers.length ? e.answers
      : ["once", "this_chat"].concat(e.offer_always ? ["always"] : [], ["deny"]);
    let first = null;
    if (allowed.includes("once")) first = btn("approve-once primary", "Allow once", answer("once"));
    if (allowed.includes("this_chat")) btn("approve-chat", "Allow in this chat", answer("chat"));
    if (allowed.includes("always")) btn("approve-always", "Always allow", answer("always"));
    const note = buttons.appendChild(el("input", "deny-note"));
    note.placeholder = "Note for the model (optional)";
    note.setAttribute("aria-label", "Note for the model, sent with Don't allow (Enter)");
    const deny = () => answer("deny", note.value.trim())();
    note.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && !ev.isComposing) { ev.preventDefault(); deny(); } });
    btn("deny danger", "Don't allow", deny);
    announce(`${name} waits for your approval.`, false);
    // Focus moves to the question, unless the person is typing.
    if (first && (document.activeElement !== $("input") || !$("input").value)) first.focus();
  },
  approval_answered(e) {
    const c = cards.get(e.call_id); if (!c) return;
    c.classList.remove("waiting");
    if (c.approval) { c.approval.remove(); c.approval = null; }
    const kind = e.answer && e.answer.kind;
    c.status.textContent = { once: "allowed once", this_chat: "allowed in this chat", always: "always allowed", deny: "not allowed" }[kind] || kind;
    if (kind === "deny") addNote(c, e.answer.note);
  },
  tool_running(e) {
    const c = cards.get(e.call_id); if (!c) return;
    c.classList.add("running");
    c.status.textContent = "running…";
    lastRunning = c;
  },
  tool_done(e) {
    const c = cards.get(e.call_id); if (!c) return;
    c.classList.remove("running", "waiting");
    c.classList.add(e.ok ? "done" : "failed");
    c.status.textContent = e.ok ? "done" : "failed";
    if (lastRunning === c) lastRunning = null;
    const d = c.appendChild(el("details", "result"));
    d.appendChild(el("summary", null, e.ok ? "Result" : "Error"));
    d.appendChild(el("pre", null, e.text || "(no text)"));
    if (e.images && e.images.length) {
      const box = c.appendChild(el("div", "images"));
      for (const img of e.images) showImage(box, e.call_id, img);
    }
    // Resources it links to or embeds; the model can read a link with read_mcp_resource.
    if (e.resources && e.resources.length) {
      const list = c.appendChild(el("ul", "resources"));
      for (const r of e.resources) {
        const li = list.appendChild(el("li"));
        li.appendChild(el("span", "badge", r.embedded ? "embedded" : "link"));
        li.appendChild(document.createTextNode(` ${r.name || ""} `));
        li.appendChild(el("code", null, r.uri));
        li.title = [r.mimeType, r.description, `from ${r.server}`].filter(Boolean).join(" — ");
      }
    }
    if (e.structured !== undefined) {
      const s = c.appendChild(el("details", "result structured"));
      s.appendChild(el("summary", null, "Structured result"));
      s.appendChild(el("pre", null, JSON.stringify(e.structured, null, 2)));
    }
  },
  resource_updated(e) { notice(`Resource updated: ${e.uri} (${e.server})`, "resource-updated", e.seq); },
  tool_skipped(e) {
    const c = cards.get(e.call_id); if (!c) return;
    c.classList.remove("waiting");
    if (c.approval) { c.approval.remove(); c.approval = null; }
    c.classList.add("skipped");
    c.status.textContent = skipText[e.reason] || e.reason;
    addNote(c, e.note);
  },
  hook_decision(e) {
    // On the call's card when it is about one; otherwise a line of its own.
    const reason = e.reason ? `: ${e.reason}` : "";
    const text = `Hook ${e.hook} (${hookEventNames[e.event] || e.event}) — ${e.decision}${reason}`;
    const c = e.call_id && cards.get(e.call_id);
    const refused = e.decision === "deny" || e.decision === "block";
    if (c) c.appendChild(el("div", refused ? "hook refused" : "hook", text));
    else notice(text, refused ? "warning" : "", e.seq);
    if (e.decision === "block") announce(text, true);
  },
  tools_found(e) {
    const names = e.names && e.names.length ? e.names.join(", ") : "nothing found";
    const what = e.query == null ? "Tools offered for this message" : `Searched the tools for “${e.query}”`;
    notice(`${what}: ${names}`, "tools-found", e.seq);
  },
  warning(e) {
    if (e.retrying) dropLive();
    if (lastRunning && !e.retrying) lastRunning.appendChild(el("div", "warning", e.message));
    else {
      const n = notice(e.message, "warning", e.seq);
      if (e.retrying) retryNotes.push(n);
    }
  },
  error(e) { dropLive(); endProgress(); notice(e.message, "error", e.seq); announce(e.message, true); },
  stopped(e) {
    dropLive();
    // A stopped turn with text shows it, marked; with none, this line.
    if (!lastTurnStopped) notice("Stopped.", "", e.seq);
    lastTurnStopped = false;
  },
  busy(e) {
    autonomous = Boolean(e.busy && e.autonomous);
    setBusy(e.busy);
    if (!e.busy) { dropLive(); foldRetries(); endProgress(); refreshLast(); chatsChanged(); showCost(e.chat_total); }
  },
  sends_to(e) {
    // Where the conversation goes now, as the session says it (above the conversation).
    const line = $("sends-to");
    line.classList.toggle("cloud", Boolean(e.host) && (!current || current.locality !== "server"));
    line.textContent = e.host ? `This conversation is sent to ${e.host} (${e.provider}).`
      : "This conversation stays on this machine.";
  },
  usage(e) {
    showCost(e.chat_total);
    if (!e.context_window) return;
    const pct = Math.min(100, Math.round((e.prompt_tokens + e.completion_tokens) * 100 / e.context_window));
    $("context").querySelector(".fill").style.width = `${pct}%`;
    $("context").querySelector(".label").textContent = `context ${pct}% of ${e.context_window.toLocaleString()}`;
    // The breakdown, where the provider reported one, on hover.
    const n = (x) => x.toLocaleString();
    const read = e.cached_prompt_tokens == null ? "" : `, ${n(e.cached_prompt_tokens)} from cache`;
    const wrote = e.reasoning_tokens == null ? "" : `, ${n(e.reasoning_tokens)} reasoning`;
    $("context").title = `How much of the context window the last turn used: ${n(e.prompt_tokens)} tokens read${read}; ${n(e.completion_tokens)} written${wrote}`;
  },
  permissions(e) { if (!$("perm-panel").classList.contains("hidden")) drawPermissions(); },
  rewound(e) {
    dropLive();
    if (transcriptSeq && e.to_seq <= transcriptSeq) {
      // The message answered again is the last one the transcript drew:
      // keep everything up to it (an edit's new text, next, replaces it).
      const users = log.querySelectorAll(".user.msg");
      const last = users[users.length - 1];
      if (last) { while (last.nextSibling) last.nextSibling.remove(); editAfter = { seq: e.seq || 0, node: last }; }
      refreshLast();
      return;
    }
    for (const node of [...log.children]) if (node.dataset.seq && Number(node.dataset.seq) > e.to_seq) node.remove();
    for (const node of [...log.children]) if (!node.dataset.seq) node.remove();
    userMessages = log.querySelectorAll(".user.msg").length;
    refreshLast();
  },
  cleared(e) { clearView(); resetMeter(); notice("The conversation was cleared.", "", e.seq); updateControls(); },
  agent_commands(e) { agentCommands = e.commands || []; },
  plan(e) {
    // The agent tells its plan whole each time: the newest replaces the last.
    for (const old of log.querySelectorAll(".plan")) old.remove();
    const p = el("div", "plan");
    p.appendChild(el("div", "notice", "The agent's plan:"));
    const list = p.appendChild(el("ol"));
    const marks = { completed: "✓", in_progress: "▸", pending: "○" };
    for (const step of e.entries || []) {
      list.appendChild(el("li", `plan-${step.status}`, `${marks[step.status] || "○"} ${step.content}`));
    }
    add(p, e.seq);
  },
  model_switched(e) {
    notice(`Switched from ${e.from} to ${e.to}`, "divider", e.seq);
    if (!current || current.id !== e.to) loadModels().catch(() => { /* the menu says it next time */ });
  },
  compacted(e) {
    clearView();
    endProgress();
    const s = el("div", "turn summary");
    s.appendChild(el("div", "notice", "The conversation so far, summarized:"));
    renderMarkdown(s.appendChild(el("div", "text md")), e.summary);
    add(s, e.seq);
    userMessages = 1;  // the summary seeds the history as a message
    updateControls();
  },
  resync() { resynced = true; /* the server ends the stream; see catchUp */ },
};

// What the chat has cost: an unknown price is never shown as $0 ("unpriced"),
// a partly priced total as a lower bound.
function money(cost) {
  if (!cost) return "";
  if (cost.usd == null) return "unpriced";
  const usd = cost.usd < 0.01 ? cost.usd.toFixed(4) : cost.usd.toFixed(2);
  return `${cost.priced ? "" : "≥ "}$${usd}`;
}
function showCost(total) {
  if (!total) return;
  const tokens = (total.prompt_tokens || 0) + (total.completion_tokens || 0);
  $("cost").textContent = `${money(total.cost)} · ${tokens.toLocaleString()} tokens`;
}

// Retry warnings, kept while the turn runs, folded into one line once it ends.
function foldRetries() {
  const notes = retryNotes.filter((n) => n.isConnected);
  retryNotes = [];
  if (!notes.length) return;
  const d = el("details", "retries");
  d.dataset.seq = notes[0].dataset.seq || "";
  d.appendChild(el("summary", null, `Retried ${plural(notes.length, "time")}`));
  notes[0].replaceWith(d);
  for (const n of notes) d.appendChild(n);
}
function endProgress() { if (compacting) { compacting.remove(); compacting = null; } }
function resetMeter() {
  $("context").querySelector(".fill").style.width = "0";
  $("context").querySelector(".label").textContent = "context –";
  $("context").title = "How much of the context window the last turn used";
}

function clearView() {
  dropLive(); log.replaceChildren(); cards.clear(); lastRunning = null; userMessages = 0; transcriptSeq = 0;
  retryNotes = []; editAfter = null; lastTurnStopped = false;
}

function words(v) {
  if (v === null) return "none";
  if (Array.isArray(v)) return v.length > 12 ? `${v.slice(0, 12).map(words).join(", ")} … (${v.length} in all)` : v.map(words).join(", ") || "none";
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => `${k} ${words(x)}`).join("; ");
  if (typeof v === "boolean") return v ? "yes" : "no";
  const s = String(v);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

async function showImage(box, callId, img) {
  const tag = box.appendChild(el("img"));
  tag.alt = `image ${img.index + 1} (${img.mime}, ${img.bytes} bytes)`;
  try {
    const res = await fetch(`${base()}/images/${encodeURIComponent(callId)}/${img.index}`, { headers: auth(), cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    tag.src = URL.createObjectURL(await res.blob());
  } catch (err) { tag.replaceWith(el("span", "warning", `${tag.alt}: could not be loaded`)); }
}

function setBusy(b) {
  busy = b;
  document.body.classList.toggle("busy", b);
  updateControls();
}
// What can be pressed now: nothing to retry, clear or compact in an empty chat.
function updateControls() {
  const idle = chatOpen && !busy;
  $("stop").disabled = !(chatOpen && busy);
  $("send").disabled = !idle;
  $("attach").disabled = !chatOpen;
  for (const id of ["retry", "clear", "compact"]) $(id).disabled = !idle || userMessages === 0;
}
