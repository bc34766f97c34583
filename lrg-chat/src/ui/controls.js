// What the person does: send, edit, stop, clear, compact, switch models,
// set permissions; the keyboard and clicks outside the menus.

// ---- sending and controls --------------------------------------------------

// Resolves true (confirmed), false (cancelled) or "alt" (the third
// choice, shown only when altLabel is given). With checkLabel, a checkbox
// is shown too; read it with $("modal-check-box").checked once resolved.
// With `input` (its starting value), a text field; read $("modal-input").value.
function ask(text, confirmLabel, altLabel, checkLabel, input) {
  return new Promise((resolve) => {
    const alt = $("modal-alt");
    const field = $("modal-input");
    const before = document.activeElement;
    $("modal-check").classList.toggle("hidden", !checkLabel);
    $("modal-check-text").textContent = checkLabel || "";
    $("modal-check-box").checked = false;
    field.classList.toggle("hidden", input === undefined);
    field.value = input || "";
    $("modal-text").textContent = text;
    $("modal-confirm").textContent = confirmLabel;
    alt.textContent = altLabel || "";
    alt.classList.toggle("hidden", !altLabel);
    $("modal").classList.remove("hidden");
    const done = (v) => () => {
      $("modal").classList.add("hidden");
      $("modal-confirm").onclick = null; $("modal-cancel").onclick = null; alt.onclick = null; field.onkeydown = null;
      modalCancel = null;
      if (before && before.focus && before.isConnected) before.focus();
      resolve(v);
    };
    $("modal-confirm").onclick = done(true);
    $("modal-cancel").onclick = done(false);
    modalCancel = done(false);
    alt.onclick = done("alt");
    field.onkeydown = (ev) => { if (ev.key === "Enter" && !ev.isComposing) { ev.preventDefault(); done(true)(); } };
    if (input !== undefined) { field.focus(); field.select(); } else $("modal-confirm").focus();
  });
}
let modalCancel = null;

// Asked once per provider: the chat remembers the answer, and "don't ask
// again" keeps it for every chat (in the permission settings).
async function cloudOk() {
  if (!(current && current.locality === "cloud" && !cloudConsented)) return true;
  const ok = await ask(`This chat runs on ${current.id}, a cloud model: what you send goes to ${current.sends_to || "its provider"}. Send it there?`,
    "Send it", null, `Don't ask again for ${current.provider}`);
  if (!ok) return false;
  try { await consent(current.provider, $("modal-check-box").checked); }
  catch (err) { report(err); return false; }
  return true;
}

async function send() {
  const input = $("input");
  const text = input.value;
  if ((!text.trim() && !pendingImages.length) || busy || !chatOpen) return;
  const images = await imagesOk(text);
  if (!images) return;
  if (!(await cloudOk())) return;
  input.value = "";
  const body = { text };
  if (images.length) body.images = images.map((i) => ({ mime: i.mime, data: i.data }));
  const batch = images.length ? images : null;
  if (batch) { sentImages.push(batch); clearAttachments(false); }
  try { await api("POST", "/messages", body); }
  catch (err) {
    input.value = text;
    if (batch) { sentImages.splice(sentImages.indexOf(batch), 1); restoreAttachments(batch); }
    report(err);
  }
}
// Edit the last message and send it again: the turn after it is replaced.
function editMessage(node) {
  if (busy || node.classList.contains("editing")) return;
  const text = [...node.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join("");
  node.classList.add("editing");
  const editor = el("div", "editor");
  const area = editor.appendChild(el("textarea"));
  area.value = text;
  area.setAttribute("aria-label", "Edit your message");
  const row = editor.appendChild(el("div", "buttons"));
  const cancel = row.appendChild(el("button", "edit-cancel", "Cancel"));
  const save = row.appendChild(el("button", "edit-send primary", "Send"));
  const hidden = [...node.childNodes];
  for (const n of hidden) if (n.nodeType === Node.TEXT_NODE) n.remove(); else n.classList.add("hidden");
  node.prepend(editor);
  const close = () => { editor.remove(); node.classList.remove("editing"); node.prepend(document.createTextNode(text)); for (const n of hidden) if (n.classList) n.classList.remove("hidden"); };
  cancel.addEventListener("click", close);
  const go = async () => {
    const next = area.value;
    if (!next.trim()) return;
    if (!(await cloudOk())) return;
    save.disabled = cancel.disabled = true;
    try { await api("POST", "/retry", { text: next }); }
    catch (err) { save.disabled = cancel.disabled = false; report(err); return; }
    if (node.isConnected) close();
  };
  save.addEventListener("click", go);
  area.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); go(); }
    if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); close(); }
  });
  area.focus();
}
async function regenerate() {
  if (busy) return;
  if (!(await cloudOk())) return;
  api("POST", "/retry", {}).catch(report);
}
$("send").addEventListener("click", send);
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
});
function stop() { api("POST", "/stop", {}).catch(report); }
$("stop").addEventListener("click", stop);
$("retry").addEventListener("click", regenerate);
$("clear").addEventListener("click", async () => {
  if (!(await ask("Clear this conversation? The model forgets it, and it is not shown again.", "Clear"))) return;
  api("POST", "/clear", {}).catch(report);
});
$("compact").addEventListener("click", () => {
  endProgress();
  compacting = notice("Summarizing the conversation so far…", "progress");
  compacting.setAttribute("role", "status");
  api("POST", "/compact", {}).catch((err) => { endProgress(); report(err); });
});

// ---- the model menu --------------------------------------------------------

function sendsToLine(entry) {
  const line = $("sends-to");
  line.classList.toggle("cloud", entry.locality === "cloud");
  if (entry.locality === "cloud") line.textContent = `This conversation is sent to ${entry.sends_to || "the model's provider"} (${entry.id}).`;
  else if (entry.locality === "server") line.textContent = `This conversation is sent to your AI server${entry.sends_to ? ` at ${entry.sends_to}` : ""} (${entry.id}).`;
  else line.textContent = `This conversation stays on this machine (${entry.id}).`;
}

// The person agreed to send this chat to `provider` (`always`: every chat).
async function consent(provider, always) {
  await api("POST", "/consent", { provider, always: Boolean(always) });
  cloudConsented = true;
}

function modelButton(m, onPick) {
  const b = el("button", `model${m.current ? " current" : ""}`);
  b.dataset.model = m.id;
  const line = b.appendChild(el("span", "line"));
  line.appendChild(el("span", null, m.model));
  line.appendChild(el("span", `badge ${m.locality}`, m.locality));
  if (m.current) line.appendChild(el("span", "notice", "current"));
  if (m.loaded) line.appendChild(el("span", "notice", "loaded"));
  if (m.reason) b.appendChild(el("span", "reason", m.reason));
  if (m.sends_to && m.locality !== "local") b.appendChild(el("span", "reason", `sends to ${m.sends_to}`));
  b.disabled = !m.available || Boolean(m.current && onPick === switchTo);
  b.addEventListener("click", () => onPick(m));
  return b;
}
// The models that can be used first, by provider; the others folded under
// "Not available (N)".
function drawModels(box, groups, onPick) {
  box.replaceChildren();
  const off = [];
  for (const group of groups) {
    const ok = group.models.filter((m) => m.available);
    const no = group.models.filter((m) => !m.available);
    if (no.length) off.push({ provider: group.provider, models: no });
    if (!ok.length) continue;
    box.appendChild(el("h3", null, group.provider));
    for (const m of ok) box.appendChild(modelButton(m, onPick));
  }
  const count = off.reduce((n, g) => n + g.models.length, 0);
  if (!box.children.length) box.appendChild(el("div", "notice", "No model is reachable now: see why below."));
  if (count) {
    const d = box.appendChild(el("details", "unavailable"));
    d.appendChild(el("summary", null, `Not available (${count})`));
    for (const g of off) {
      d.appendChild(el("h3", null, g.provider));
      for (const m of g.models) d.appendChild(modelButton(m, onPick));
    }
  }
}
async function loadModels() {
  const data = await api("GET", "/models");
  current = data.current;
  menuData = data;
  // An agent that keeps its own conversation cannot be summarized for it.
  $("compact").hidden = Boolean(current.keeps_conversation);
  cloudConsented = Boolean(data.cloud_consented);
  listChat({ session, token, model: current.id });
  $("model-button").textContent = `${current.id} ▾`;
  sendsToLine(current);
  drawModels($("model-menu"), data.groups, switchTo);
  const reachable = data.groups.some((g) => g.models.some((m) => m.available));
  if (!reachable) setBanner("No model is reachable: the menu says why for each.");
}

// A switch never ends this chat: "New chat" opens one on the model and
// keeps this one (listed above the log, and Back returns to it); "Carry
// this conversation over" moves this chat to the model, in place. Either
// way the question typed so far stays in the input.
async function switchTo(m) {
  closeMenus();
  const receiver = m.locality === "cloud" ? ` ${m.id} runs in the cloud: what it is given goes to ${m.sends_to || "its provider"}.`
    : m.locality === "server" && m.sends_to ? ` ${m.id} runs on your server at ${m.sends_to}.` : "";
  const choice = await ask(`Switch to ${m.id}? A new chat starts on it, and this one is kept: you can come back to it. Or carry this conversation over, and ${m.id} is given all of it.${receiver}`,
    "New chat", `Carry this conversation over to ${m.id}`);
  if (!choice) return;
  const seed = $("input").value;
  try {
    if (choice === "alt") {
      await api("POST", "/model", { model: m.id, carry_over: true });
      // The question above named where it goes: agreed, for this chat.
      if (m.locality === "cloud") await consent(m.provider, false).catch(report);
      await loadModels();
    } else {
      const link = await api("POST", "/model", { model: m.id });
      session = link.session; token = link.chat_token;
      if (m.locality === "cloud") await consent(m.provider, false).catch(report);
      history.pushState(null, "", fragmentFor(link.session, link.chat_token));
      start();
    }
  } catch (err) { report(err); }
  $("input").value = seed;
  $("input").focus();
}

// ---- the chats of this page ------------------------------------------------

// Every chat this page has shown, each a link to its own fragment: a model
// switch opens a new chat beside the old one, which goes on. With the
// owner's chat list (the sidebar), that list says it instead.
const pageChats = [];
function listChat(entry) {
  const known = pageChats.find((c) => c.session === entry.session);
  if (known) Object.assign(known, entry); else pageChats.push(entry);
  drawChats();
}
function drawChats() {
  const nav = $("chats");
  nav.replaceChildren();
  nav.classList.toggle("hidden", pageChats.length < 2 || Boolean(ownerToken));
  nav.appendChild(el("span", null, "Chats:"));
  pageChats.forEach((c, i) => {
    const label = `Chat ${i + 1} (${c.model})`;
    if (c.session === session) { nav.appendChild(el("span", "current", label)); return; }
    const a = nav.appendChild(el("a", null, label));
    a.href = fragmentFor(c.session, c.token);
  });
}

// The header's pop-up panels and the buttons that open them.
const MENUS = [["model-menu", "model-button"], ["perm-panel", "perm-button"], ["prompt-panel", "prompt-button"]];
function closeMenus(except) {
  for (const [menu, button] of MENUS) {
    if (menu === except) continue;
    $(menu).classList.add("hidden");
    $(button).setAttribute("aria-expanded", "false");
  }
}
function toggleMenu(menu, button) {
  closeMenus(menu);
  const hidden = $(menu).classList.toggle("hidden");
  $(button).setAttribute("aria-expanded", String(!hidden));
  return !hidden;
}
$("model-button").addEventListener("click", () => {
  if (toggleMenu("model-menu", "model-button")) loadModels().catch(report);
});

// ---- "What it may do…" -----------------------------------------------------

async function drawPermissions() {
  const p = await api("GET", "/permissions");
  const panel = $("perm-panel");
  panel.replaceChildren();
  panel.appendChild(el("h3", null, "What it may do"));
  const modeLabel = panel.appendChild(el("label", null, "Without asking: "));
  const mode = modeLabel.appendChild(el("select"));
  mode.id = "perm-mode";
  for (const [k, v] of Object.entries(modeNames)) {
    const o = mode.appendChild(el("option", null, v)); o.value = k; o.selected = k === p.mode;
  }
  mode.addEventListener("change", () => putPermissions({ mode: mode.value }));
  const bulkLabel = panel.appendChild(el("label", null, "Ask when a destructive call is aimed at more than "));
  const bulk = bulkLabel.appendChild(el("input"));
  bulk.type = "number"; bulk.min = "0"; bulk.value = String(p.bulk_limit); bulk.id = "perm-bulk";
  bulkLabel.appendChild(document.createTextNode(" items (0: never)"));
  bulk.addEventListener("change", () => putPermissions({ bulk_limit: Math.max(0, Number(bulk.value) | 0) }));
  if (p.tools.length) {
    panel.appendChild(el("h3", null, "Per tool"));
    const table = panel.appendChild(el("table"));
    for (const t of p.tools) {
      const tr = table.appendChild(el("tr"));
      const name = tr.appendChild(el("td"));
      name.appendChild(el("div", null, t.title || t.name));
      name.appendChild(el("span", `badge ${t.class}`, t.class));
      const cell = tr.appendChild(el("td"));
      const sel = cell.appendChild(el("select"));
      sel.dataset.tool = t.name;
      sel.setAttribute("aria-label", `${t.title || t.name}: what it may do`);
      for (const [k, v] of [["", "as the mode says"], ["allow", "allow"], ["ask", "ask"], ["block", "turned off"]]) {
        const o = sel.appendChild(el("option", null, v)); o.value = k; o.selected = (t.rule || "") === k;
      }
      sel.addEventListener("change", () => {
        const rules = { ...p.rules };
        if (sel.value) rules[t.name] = sel.value; else delete rules[t.name];
        p.rules = rules;
        putPermissions({ rules });
      });
    }
  }
  panel.appendChild(el("div", "saved", p.saved ? "Saved: these settings last." : p.save_error ? `Not saved: ${p.save_error}` : "Not saved: they last while this server runs."));
}
function putPermissions(change) { api("PUT", "/permissions", change).then(drawPermissions).catch(report); }
$("perm-button").addEventListener("click", () => {
  if (toggleMenu("perm-panel", "perm-button")) drawPermissions().catch(report);
});

// ---- "Show the system prompt" ----------------------------------------------

// What the next model turn would send: each section labelled with where it
// comes from (GET …/prompt), then the tools offered.
async function drawPrompt() {
  const p = await api("GET", "/prompt");
  const panel = $("prompt-panel");
  panel.replaceChildren();
  panel.appendChild(el("h3", null, "The system prompt of the next turn"));
  const addedBy = { builder: "", session: " (added by the session)", provider: " (added by the provider)" };
  if (!p.sections || !p.sections.length) panel.appendChild(el("div", "notice", "No system prompt."));
  for (const s of p.sections || []) {
    const d = panel.appendChild(el("details", "prompt-section"));
    d.appendChild(el("summary", null, `${s.name}${s.source ? ` — ${s.source}` : ""}${addedBy[s.added_by] || ""}`));
    d.appendChild(el("pre", null, s.text));
  }
  if (p.tools && p.tools.length) {
    panel.appendChild(el("h3", null, `Tools offered (${p.tools.length})`));
    const list = panel.appendChild(el("ul", "prompt-tools"));
    for (const t of p.tools) {
      const li = list.appendChild(el("li"));
      li.appendChild(el("span", `badge ${t.class}`, t.class));
      li.appendChild(document.createTextNode(` ${t.name}: ${t.description || ""}`));
    }
  }
}
$("prompt-button").addEventListener("click", () => {
  if (toggleMenu("prompt-panel", "prompt-button")) drawPrompt().catch(report);
});

// ---- the keyboard, and clicks outside ------------------------------------

const typing = (t) => t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape") {
    if (modalCancel) { modalCancel(); return; }
    const open = MENUS.some(([m]) => !$(m).classList.contains("hidden"))
      || !$("new-models").classList.contains("hidden") || drawerOpen();
    if (open) { closeMenus(); closeNewModels(); if (drawerOpen()) openSidebar(false); return; }
    if (busy) { ev.preventDefault(); stop(); }
    return;
  }
  if (ev.key === "/" && !typing(ev.target) && !modalCancel && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
    ev.preventDefault();
    $("input").focus();
  }
});
// Menus close on a click outside them (and the drawer, on a narrow window).
document.addEventListener("click", (ev) => {
  const t = ev.target;
  for (const [menu, button] of MENUS) {
    if (!$(menu).classList.contains("hidden") && !$(menu).contains(t) && !$(button).contains(t) && !$("modal").contains(t)) {
      $(menu).classList.add("hidden");
      $(button).setAttribute("aria-expanded", "false");
    }
  }
  if (!$("new-models").classList.contains("hidden") && !$("new-models").contains(t) && !$("new-chat").contains(t)) closeNewModels();
  if (drawerOpen() && !$("sidebar").contains(t) && !$("side-button").contains(t) && !$("modal").contains(t) && t.isConnected) openSidebar(false);
});
