// Sub-agents: one card per sub-agent of the chat, under the spawn_sub_agent
// call that made it, with its status and times (from GET …/sub_agents,
// fetched again whenever the chat's stream says one changed), whether it
// waits for an approval (the question itself is in the log, answered
// there, on this chat), and its transcript folded away: read from its own
// stream (GET …/sub_agents/{n}/events) only while unfolded, so a page does
// not hold a connection per sub-agent.

const subAgents = new Map();  // sub_session_id -> card
let subAgentsGen = -1;        // the chat (generation) the cards belong to
let subAgentsQueued = 0;      // a list fetch is due
let subAgentsTick = 0;        // the timer that counts a working one's seconds

const subStatusText = {
  queued: "queued", running: "working…", done: "done", failed: "failed", stopped: "stopped",
  interrupted: "interrupted",
};
const subNumber = (id) => { const m = /::sub::(\d+)$/.exec(id || ""); return m ? Number(m[1]) : 0; };
const subFinished = (status) => !["queued", "running"].includes(status);

// The card of sub-agent `id`, made when it is new to this view (or the
// view was cleared and rebuilt meanwhile); `info` updates it.
function subAgentCard(id, info, seq) {
  if (subAgentsGen !== generation) { subAgents.clear(); subAgentsGen = generation; }
  let c = subAgents.get(id);
  if (c && !c.isConnected) { closeTranscript(c); subAgents.delete(id); c = null; }
  if (!c) {
    const n = (info && info.n) || subNumber(id);
    c = el("div", "card sub-agent queued");
    c.dataset.sub = id;
    c.setAttribute("role", "group");
    c.info = { id, n, status: "queued", description: "" };
    c.asking = new Set();
    const head = c.appendChild(el("div", "head"));
    c.titleNode = head.appendChild(el("span", "title", `Sub-agent ${n}`));
    head.appendChild(el("span", "badge sub", `sub-agent ${n}`));
    c.status = head.appendChild(el("span", "status", subStatusText.queued));
    c.times = c.appendChild(el("div", "times"));
    c.fold = c.appendChild(el("details", "transcript"));
    c.fold.appendChild(el("summary", null, "Transcript"));
    c.body = c.fold.appendChild(el("div", "body"));
    c.fold.addEventListener("toggle", () => { if (c.fold.open) openTranscript(c); else closeTranscript(c); });
    placeSubAgent(c, info && info.call_id, seq);
    subAgents.set(id, c);
  }
  if (info) updateSubAgent(c, info);
  return c;
}
// Under its spawn call's card (after its siblings), else at the end.
function placeSubAgent(c, callId, seq) {
  const spawn = callId && cards.get(callId);
  if (!spawn || !spawn.isConnected) { add(c, seq); return; }
  let after = spawn;
  while (after.nextElementSibling && after.nextElementSibling.classList.contains("sub-agent")) after = after.nextElementSibling;
  after.after(c);
  c.dataset.seq = String(seq || spawn.dataset.seq || 0);
}
function updateSubAgent(c, info) {
  const was = c.info.status;
  c.info = Object.assign(c.info, Object.fromEntries(Object.entries(info).filter(([, v]) => v !== undefined)));
  if (info.description) c.titleNode.textContent = info.description;
  c.setAttribute("aria-label", `Sub-agent ${c.info.n}: ${c.info.description || ""}`);
  drawSubStatus(c);
  // Unfolded while it was queued: its events begin now.
  if (c.fold.open && !c.streaming && was === "queued" && c.info.status !== "queued") openTranscript(c);
}
function drawSubStatus(c) {
  const status = c.info.status;
  for (const s of Object.keys(subStatusText)) c.classList.toggle(s, s === status);
  const waiting = c.asking.size > 0 && !subFinished(status);
  c.classList.toggle("waiting", waiting);
  c.status.textContent = waiting ? `waits for you (${plural(c.asking.size, "question")} below)` : (subStatusText[status] || status);
  drawSubTimes(c);
  if (status === "running" && !subAgentsTick) subAgentsTick = setInterval(tickSubAgents, 1000);
}
function drawSubTimes(c) {
  const start = c.info.started_at ? Date.parse(c.info.started_at) : NaN;
  if (Number.isNaN(start)) { c.times.textContent = c.info.status === "queued" ? "waits for a free place" : ""; return; }
  const end = c.info.ended_at ? Date.parse(c.info.ended_at) : NaN;
  const time = new Date(start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  const secs = (to) => { const s = Math.max(0, Math.round((to - start) / 1000)); return s < 1 ? "under a second" : plural(s, "second"); };
  let span = "";
  if (!Number.isNaN(end)) span = ` · took ${secs(end)}`;
  else if (c.info.status === "running") span = ` · for ${secs(Date.now())}`;
  c.times.textContent = `started ${time}${span}`;
  c.times.title = new Date(start).toLocaleString();
}
function tickSubAgents() {
  let running = 0;
  for (const c of subAgents.values()) {
    if (c.isConnected && c.info.status === "running") { running++; drawSubTimes(c); }
  }
  if (!running) { clearInterval(subAgentsTick); subAgentsTick = 0; }
}

// The list, fetched once for a burst of changes: it has the times, and
// the sub-agents of earlier runs of the chat (before a restart).
function refreshSubAgents() {
  if (subAgentsQueued) return;
  subAgentsQueued = setTimeout(async () => {
    subAgentsQueued = 0;
    const gen = generation;
    try {
      const data = await api("GET", "/sub_agents");
      if (gen !== generation) return;
      for (const a of data.sub_agents || []) subAgentCard(a.id, a);
    } catch (_) { /* the chat ended (its stream says so), or an older server: the events still tell */ }
  }, 120);
}

// ---- the chat's events about sub-agents -----------------------------------

handlers.subtask_start = (e) => {
  subAgentCard(e.sub_session_id, { description: e.description, call_id: e.call_id, status: "queued" }, e.seq);
  refreshSubAgents();
};
handlers.subtask_status = (e) => {
  const c = subAgentCard(e.sub_session_id, { status: e.status });
  if (subFinished(e.status)) c.asking.clear();
  drawSubStatus(c);
  refreshSubAgents();
};
{
  // A rebuilt or resumed view has the calls but not the events: the list
  // draws their cards.
  const toolCall = handlers.tool_call;
  handlers.tool_call = (e) => {
    toolCall(e);
    if (e.tool !== "spawn_sub_agent" && e.tool !== "sub_agent_result") return;
    refreshSubAgents();
    // A result says whose it is.
    const c = cards.get(e.call_id);
    const id = e.arguments && e.arguments.sub_session_id;
    if (e.tool === "sub_agent_result" && c && id) {
      c.querySelector(".head").insertBefore(el("span", "notice sub-agent", `the answer of sub-agent ${subNumber(id)}`), c.status);
    }
  };
  // A question of a sub-agent: asked in the log (see render.js), counted
  // on its card until it is answered.
  const asked = handlers.approval_needed;
  handlers.approval_needed = (e) => {
    asked(e);
    if (!e.sub_agent) return;
    const c = subAgentCard(e.sub_agent.sub_session_id);
    c.asking.add(e.call_id);
    drawSubStatus(c);
    const label = cards.get(e.call_id) && cards.get(e.call_id).querySelector(".notice.sub-agent");
    if (label) label.textContent = `asked by sub-agent ${c.info.n}${c.info.description ? ` (${c.info.description})` : ""}`;
  };
  const settled = (e) => {
    for (const c of subAgents.values()) if (c.asking.delete(e.call_id)) drawSubStatus(c);
  };
  for (const type of ["approval_answered", "tool_skipped"]) {
    const base = handlers[type];
    handlers[type] = (e) => { base(e); settled(e); };
  }
}

// ---- a sub-agent's own stream, while its transcript is unfolded -------------

function closeTranscript(c) {
  if (c.streaming) { c.streaming.abort(); c.streaming = null; }
}
async function openTranscript(c) {
  closeTranscript(c);
  const ctl = new AbortController();
  c.streaming = ctl;
  const gen = generation;
  const live = () => c.streaming === ctl && c.isConnected && gen === generation;
  let after = 0;
  let backoff = 500;
  const restart = () => { after = 0; c.tx = { lastSeq: 0, live: null, calls: new Map() }; c.body.replaceChildren(); };
  restart();
  c.body.appendChild(el("div", "notice", "Loading…"));
  while (live()) {
    let ended = false;
    try {
      const res = await fetch(`${base()}/sub_agents/${c.info.n}/events?after=${after}`, { headers: auth(), cache: "no-store", signal: ctl.signal });
      if (!live()) return;
      if (res.status === 409) { c.body.replaceChildren(el("div", "notice", "It has not started yet: its work shows here when it does.")); c.streaming = null; return; }
      if (!res.ok || !res.body) {
        let message = `HTTP ${res.status}`;
        try { const data = await res.json(); if (data && data.error) message = data.error.message; } catch (_) { /* no JSON */ }
        c.body.replaceChildren(el("div", "notice error", `The transcript cannot be shown: ${message}`));
        c.streaming = null;
        return;
      }
      if (after === 0) c.body.replaceChildren();
      backoff = 500;
      let resync = false;
      await readEvents(res, ctl, (e) => {
        if (e.type === "resync") { resync = true; return; }
        if (e.seq) after = e.seq;
        applySub(c, e);
      });
      if (resync) { restart(); continue; }
      ended = true;
    } catch (_) { /* cut: try again below */ }
    if (!live()) return;
    // Its stream ends once it has: what it did is all here.
    if (ended && subFinished(c.info.status)) { if (!c.body.childElementCount) c.body.appendChild(el("div", "notice", "Nothing was kept of its work.")); c.streaming = null; return; }
    if (ended) { refreshSubAgents(); }
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}
// The events of an SSE response, one JSON object per `data:` line, until
// it ends or `ctl` aborts it.
async function readEvents(res, ctl, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done || ctl.signal.aborted) return;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (data) { try { onEvent(JSON.parse(data)); } catch (e) { console.error(e); } }
      }
    }
  } finally { reader.cancel().catch(() => { /* gone already */ }); }
}

// One event of a sub-agent's stream, drawn in its transcript: compact,
// since the chat's own log is what the person reads.
function applySub(c, e) {
  const t = c.tx;
  if (e.seq) { if (e.seq <= t.lastSeq) return; t.lastSeq = e.seq; }
  const box = c.body;
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const row = (cls, text) => box.appendChild(el("div", `sub-row ${cls}`, text));
  const dropLiveRow = () => { if (t.live) { t.live.remove(); t.live = null; } };
  const call = (id) => t.calls.get(id);
  switch (e.type) {
    case "user_message": {
      const r = row("task");
      r.appendChild(el("span", "k", "Task: "));
      r.appendChild(document.createTextNode(e.text));
      break;
    }
    case "delta":
      if (e.kind !== "text") break;
      if (!t.live) t.live = row("answer live", "");
      t.live.textContent += e.text;
      break;
    case "assistant_turn": {
      dropLiveRow();
      const { text } = splitThink(e.text || "");
      if (text) renderMarkdown(row("answer md"), text);
      break;
    }
    case "tool_call": {
      dropLiveRow();
      const r = row(`call ${e.class || ""}`);
      r.appendChild(el("span", "tool", `→ ${e.title || e.tool}`));
      r.appendChild(el("span", "args", ` ${words(e.arguments)}`));
      r.status = r.appendChild(el("span", "state", ""));
      t.calls.set(e.call_id, r);
      break;
    }
    case "approval_needed": { const r = call(e.call_id); if (r) r.status.textContent = " · waits for your answer"; break; }
    case "approval_answered": {
      const r = call(e.call_id);
      const kind = e.answer && e.answer.kind;
      if (r) r.status.textContent = ` · ${{ once: "allowed once", this_chat: "allowed in this chat", always: "always allowed", deny: "not allowed" }[kind] || kind}`;
      break;
    }
    case "tool_running": { const r = call(e.call_id); if (r) r.status.textContent = " · running…"; break; }
    case "tool_done": {
      const r = call(e.call_id); if (!r) break;
      r.classList.add(e.ok ? "ok" : "failed");
      r.status.textContent = e.ok ? " · done" : " · failed";
      const d = r.appendChild(el("details", "result"));
      d.appendChild(el("summary", null, e.ok ? "Result" : "Error"));
      d.appendChild(el("pre", null, e.text || "(no text)"));
      break;
    }
    case "tool_skipped": { const r = call(e.call_id); if (r) r.status.textContent = ` · ${skipText[e.reason] || e.reason}`; break; }
    case "warning": if (!e.retrying) row("notice warning", e.message); break;
    case "error": dropLiveRow(); row("notice error", e.message); break;
    case "stopped": dropLiveRow(); row("notice", "Stopped."); break;
    default: break;  // the rest is the chat's business (busy, usage, …)
  }
  if (atBottom) box.scrollTop = box.scrollHeight;
}
