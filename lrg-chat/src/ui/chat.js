// The chat token lives in the URL fragment: browsers never send it to a
// server or put it in a Referer. Every request carries it as a Bearer token.
const $ = (id) => document.getElementById(id);
const log = $("log");
let session = "", token = "";
let owner = "", ownerToken = ""; // the owner of the chat list (the fragment's owner + owner_token), if given
let lastSeq = 0;          // last numbered event applied
let transcriptSeq = 0;    // the view was rebuilt from the transcript, up to this event (0: it was not)
let resynced = false;     // the server said resync: see where to go on from before reconnecting
let generation = 0;       // bumps when the chat changes (model switch): old streams stop
let busy = false;
let chatOpen = false;     // a chat is shown and has not ended
let current = null;       // the current model's menu entry
let menuData = null;      // the last model menu (for New chat)
let cloudConsented = false; // the person agreed to send this chat to the current model's provider (the server remembers it)
let userMessages = 0;
let live = null;          // the model turn being streamed
let lastRunning = null;   // card of the last running tool (for warnings)
let autonomous = false;   // the model works on its own (busy.autonomous): what it adds is marked
let lastTurnStopped = false; // the last assistant_turn was a stopped one (its `stopped` needs no notice)
let editAfter = null;     // a rewound drawn from the transcript kept this user message: an edit's new one replaces it
let retryNotes = [];      // this turn's retrying warnings, folded when it ends
let compacting = null;    // the progress line of a compaction
const cards = new Map();  // call_id -> card

function readFragment() {
  const p = new URLSearchParams(location.hash.slice(1));
  session = p.get("session") || "";
  token = p.get("token") || "";
  owner = p.get("owner") || "";
  ownerToken = p.get("owner_token") || "";
}
// The fragment of a chat; the owner and their token go along, so a reload,
// Back and Forward keep the chat list.
function fragmentFor(s, t) {
  const p = new URLSearchParams();
  if (s) { p.set("session", s); p.set("token", t); }
  if (owner && ownerToken) { p.set("owner", owner); p.set("owner_token", ownerToken); }
  return `#${p.toString()}`;
}
const base = () => `/v1/chat/sessions/${encodeURIComponent(session)}`;
const auth = () => ({ "Authorization": `Bearer ${token}` });

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || `${one}s`)}`; }
const nearBottom = () => { const m = $("main"); return m.scrollHeight - m.scrollTop - m.clientHeight < 80; };
function add(node, seq) {
  if (seq) node.dataset.seq = String(seq);
  if (autonomous) node.classList.add("autonomous");
  const atBottom = nearBottom();
  log.appendChild(node);
  if (atBottom) $("main").scrollTop = $("main").scrollHeight;
  return node;
}
function notice(text, kind, seq) { return add(el("div", `notice ${kind || ""}`, text), seq); }
// Said to a screen reader: approvals waiting, errors (not every delta).
function announce(text, urgent) {
  const box = $(urgent ? "alerts" : "announce");
  box.textContent = "";
  setTimeout(() => { box.textContent = text; }, 30);
}

async function request(url, bearer, method, body) {
  const init = { method, headers: { "Authorization": `Bearer ${bearer}` }, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(url, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* not JSON, or no body */ }
  if (!res.ok) {
    const message = data && data.error ? data.error.message : `HTTP ${res.status}`;
    const err = new Error(message);
    err.status = res.status; err.kind = data && data.error ? data.error.kind : "";
    throw err;
  }
  return data;
}
const api = (method, path, body) => request(base() + path, token, method, body);
function report(err) { notice(err.message, "error"); announce(err.message, true); }

// Time the page saw a message, on hover (the events carry no time).
function stamp(node) {
  const now = new Date();
  node.title = `${now.toLocaleString()}`;
  return now.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}
// Copy (as Markdown), and Edit or Regenerate on the last ones; labels are
// drawn by CSS, so a message's text stays its own.
function actions(node, raw, kind) {
  const bar = node.appendChild(el("div", "actions"));
  const time = bar.appendChild(el("span", "time"));
  time.dataset.time = stamp(node);
  const btn = (cls, label, fn) => {
    const b = bar.appendChild(el("button", `act icon ${cls}`));
    b.type = "button"; b.dataset.label = label;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", fn);
    return b;
  };
  const copy = btn("copy", "Copy the message as Markdown", () => copyText(copy, raw(), "Copy"));
  if (kind === "user") btn("edit", "Edit the message and send it again", () => editMessage(node));
  else btn("regen", "Regenerate this reply", () => regenerate());
}
let lastQueued = false;
function refreshLast() {
  if (lastQueued) return;
  lastQueued = true;
  setTimeout(() => {
    lastQueued = false;
    for (const n of log.querySelectorAll(".user.last, .turn.last")) n.classList.remove("last");
    const users = log.querySelectorAll(".user.msg");
    const lastUser = users[users.length - 1];
    if (lastUser) lastUser.classList.add("last");
    const turns = log.querySelectorAll(".turn:not(.live):not(.summary)");
    const lastTurn = turns[turns.length - 1];
    if (lastTurn && (!lastUser || (lastUser.compareDocumentPosition(lastTurn) & Node.DOCUMENT_POSITION_FOLLOWING))) lastTurn.classList.add("last");
  }, 0);
}

// ---- the event stream ------------------------------------------------------

function setBanner(text) { const b = $("banner"); b.textContent = text || ""; b.classList.toggle("hidden", !text); }
async function stream(gen) {
  let backoff = 500;
  while (gen === generation) {
    const ctl = new AbortController();
    const from = lastSeq;
    let reached = false;
    try {
      const res = await fetch(`${base()}/events?after=${lastSeq}`, { headers: auth(), cache: "no-store", signal: ctl.signal });
      reached = true;
      if (res.status === 403 || res.status === 404) { ended(); return; }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setConn("live");
      setBanner("");
      backoff = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || gen !== generation) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data) { try { apply(JSON.parse(data)); } catch (e) { console.error(e); } }
        }
      }
      ctl.abort();
    } catch (_) { /* reconnect below */ }
    if (gen !== generation) return;
    if (resynced) {
      resynced = false;
      // At once, unless the last connection got nowhere (a resync before
      // any event) and catching up changed nothing either.
      try { if ((await catchUp(gen)) || lastSeq !== from) continue; } catch (_) { /* retry below */ }
      if (gen !== generation) return;
    }
    // Said in words, with a countdown: offline, the server gone, or the
    // stream cut.
    const why = !navigator.onLine ? "You are offline." : reached ? "The connection to the chat was cut." : "The server cannot be reached.";
    for (let left = Math.ceil(backoff / 1000); left > 0 && gen === generation; left--) {
      setConn(`reconnecting in ${left} s…`);
      if (!reached || !navigator.onLine) setBanner(`${why} Reconnecting in ${left} s…`);
      await new Promise((r) => setTimeout(r, Math.min(1000, backoff)));
    }
    if (gen !== generation) return;
    setConn("reconnecting…");
    backoff = Math.min(backoff * 2, 10000);
  }
}
// After a resync. When the chat's log still keeps every event after the
// last one shown, reconnecting with after= replays them. When it has
// forgotten some (a page left open on a long chat: the log keeps only the
// newest events), the view is rebuilt from the transcript and the events
// are followed from where it ends. Returns whether it rebuilt.
async function catchUp(gen) {
  const res = await fetch(`${base()}/transcript`, { headers: auth(), cache: "no-store" });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const first = Number(res.headers.get("lrg-first-kept-seq") || "1");
  const last = Number(res.headers.get("lrg-last-seq") || "0");
  const t = await res.json();
  if (gen !== generation || lastSeq + 1 >= first) return false;
  rebuild(t, last);
  return true;
}
function rebuild(t, seq) {
  clearView();
  autonomous = false;
  if (t.truncated) notice("Older messages are not shown here.", "");
  const skipped = { denied: "not_allowed", skipped: "repeated_call", stopped: "stopped" };
  for (const row of t.rows || []) {
    if (row.type === "user") handlers.user_message({ text: row.text, images: row.images || 0 });
    else if (row.type === "assistant") handlers.assistant_turn({ text: row.text, reasoning: row.reasoning || "" });
    else if (row.type === "tool_call") {
      let args;
      try { args = JSON.parse(row.arguments); } catch (_) { args = { arguments: row.arguments }; }
      handlers.tool_call({ call_id: row.call_id, tool: row.tool, class: "", arguments: args });
      const c = cards.get(row.call_id);
      if (c) { const badge = c.querySelector(".badge"); if (badge) badge.remove(); }  // not in the transcript
      if (row.outcome === "ok" || row.outcome === "failed") {
        handlers.tool_done({ call_id: row.call_id, ok: row.outcome === "ok", text: row.output, images: row.images || [] });
      } else if (skipped[row.outcome]) {
        handlers.tool_skipped({ call_id: row.call_id, reason: skipped[row.outcome] });
      } else {
        handlers.tool_running({ call_id: row.call_id });
      }
    }
  }
  // Drawn before any event this page follows: `rewound` keeps them (seq 0).
  for (const node of log.children) if (!node.dataset.seq) node.dataset.seq = "0";
  lastSeq = seq;
  transcriptSeq = seq;
}
function setConn(text) { $("conn").textContent = text; }
// An ended chat, or a link that is not valid: say so, and offer the chat
// list and a new chat where the page has the owner's token.
function ended() {
  setConn("ended");
  chatOpen = false;
  setBusy(false);
  const box = notice(ownerToken ? "This chat has ended, or the link is not valid. Open one of your chats, or start a new one."
    : "This chat has ended, or the link is not valid. Ask the app that gave you this link (or lrg serve) for a new one.", "error ended");
  if (ownerToken) {
    const row = box.appendChild(el("div", "ended-actions"));
    const list = row.appendChild(el("button", null, "Your chats"));
    // Not taken for a click outside the drawer it opens.
    list.addEventListener("click", (ev) => { ev.stopPropagation(); openSidebar(true); });
    const fresh = row.appendChild(el("button", "primary", "New chat"));
    fresh.addEventListener("click", () => newChat(null));
  }
  announce("This chat has ended.", true);
}
