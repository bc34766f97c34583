// ---- the owner's chats (the sidebar) ---------------------------------------
// With `owner` and `owner_token` in the fragment (the URL `lrg serve`
// prints), the page lists that owner's kept chats, newest first, and opens,
// renames, deletes and starts them. Each opened chat gets its own chat token.

const ownerBase = () => `/v1/owners/${encodeURIComponent(owner)}/chats`;
const ownerApi = (method, path, body) => request(ownerBase() + path, ownerToken, method, body);
const wide = () => window.matchMedia("(min-width: 1024px)").matches;
const drawerOpen = () => Boolean(ownerToken) && !wide() && !document.body.classList.contains("side-closed");
let listTimer = 0;

function openSidebar(open) {
  document.body.classList.toggle("side-closed", !open);
  $("side-button").setAttribute("aria-expanded", String(open));
  if (open) drawChatList().catch(() => { /* said in the list */ });
}
function setupSidebar() {
  const on = Boolean(owner && ownerToken);
  $("sidebar").classList.toggle("hidden", !on);
  $("side-button").classList.toggle("hidden", !on);
  clearInterval(listTimer);
  if (!on) return;
  // Open by default on a wide window, and whenever no chat is open.
  if (!document.body.dataset.sideSet) {
    document.body.dataset.sideSet = "1";
    openSidebar(wide() || !session);
  } else if (!session) openSidebar(true);
  else if (!wide()) openSidebar(false);
  drawChatList().catch(() => { /* said in the list */ });
  // `running` changes on other pages and other chats.
  listTimer = setInterval(() => {
    if (!document.body.classList.contains("side-closed") && !document.hidden) drawChatList().catch(() => {});
  }, 15000);
}
$("side-button").addEventListener("click", () => openSidebar(document.body.classList.contains("side-closed")));
$("side-close").addEventListener("click", () => openSidebar(false));

let listing = null;
async function drawChatList() {
  if (!ownerToken) return;
  if (listing) return listing;
  listing = (async () => {
    const state = $("chat-list-state");
    let data;
    try { data = await ownerApi("GET", ""); }
    catch (err) {
      state.textContent = err.status === 403 ? "This link's chat list is not valid any more." : `The chat list could not be loaded: ${err.message}`;
      throw err;
    }
    const list = $("chat-list");
    list.replaceChildren();
    const chats = (data && data.chats) || [];
    state.textContent = chats.length ? "" : "No chats yet.";
    for (const c of chats) list.appendChild(chatItem(c));
  })();
  try { await listing; } finally { listing = null; }
}
function chatItem(c) {
  const li = el("li", c.session === session ? "current" : "");
  li.dataset.session = c.session;
  const open = li.appendChild(el("button", "open-chat"));
  open.appendChild(el("span", "title", c.title || "New chat"));
  const meta = open.appendChild(el("span", "meta"));
  if (c.running) { const dot = meta.appendChild(el("span", "running-dot")); dot.title = "running now"; }
  meta.appendChild(el("span", null, c.model || ""));
  const when = c.updated_at || c.created_at;
  if (when) { const d = new Date(when); if (!isNaN(d)) meta.appendChild(el("span", null, d.toLocaleString([], { dateStyle: "short", timeStyle: "short" }))); }
  open.setAttribute("aria-label", `${c.title || "New chat"}, ${c.model || ""}${c.running ? ", running now" : ""}`);
  if (c.session === session) open.setAttribute("aria-current", "page");
  open.addEventListener("click", () => openChat(c.session));
  const acts = li.appendChild(el("div", "item-actions"));
  const rename = acts.appendChild(el("button", "rename", "Rename"));
  rename.setAttribute("aria-label", `Rename ${c.title || "this chat"}`);
  rename.addEventListener("click", () => renameChat(c));
  const del = acts.appendChild(el("button", "delete danger", "Delete"));
  del.setAttribute("aria-label", `Delete ${c.title || "this chat"}`);
  del.addEventListener("click", () => deleteChat(c));
  return li;
}
// Move the page to a chat (its fragment: reload and Back/Forward work).
function go(s, t) {
  history.pushState(null, "", fragmentFor(s, t));
  start();
}
async function openChat(id) {
  try {
    const r = await ownerApi("POST", `/${encodeURIComponent(id)}/open`);
    if (!wide()) openSidebar(false);
    go(r.session, r.chat_token);
  } catch (err) { report(err); }
}
async function renameChat(c) {
  if (!(await ask(`A name for “${c.title}” (empty: named after its first message):`, "Rename", null, null, c.name || ""))) return;
  const name = $("modal-input").value.trim();
  try { await ownerApi("PATCH", `/${encodeURIComponent(c.session)}`, { name }); }
  catch (err) { report(err); }
  drawChatList().catch(() => {});
}
async function deleteChat(c) {
  if (!(await ask(`Delete “${c.title}”? It is ended and removed from the store: it cannot be opened again.`, "Delete"))) return;
  try { await ownerApi("DELETE", `/${encodeURIComponent(c.session)}`); }
  catch (err) { report(err); return; }
  if (c.session === session) go("", "");
  else drawChatList().catch(() => {});
}
// A new chat: on the model picked from the menu, or the server's default.
async function newChat(model) {
  closeNewModels();
  try {
    const r = await ownerApi("POST", "", model ? { model } : {});
    if (!wide()) openSidebar(false);
    go(r.session, r.chat_token);
  } catch (err) { report(err); }
}
function closeNewModels() { $("new-models").classList.add("hidden"); $("new-chat").setAttribute("aria-expanded", "false"); }
$("new-chat").addEventListener("click", () => {
  const box = $("new-models");
  if (!box.classList.contains("hidden")) { closeNewModels(); return; }
  // No menu yet (no chat open): the server's default model.
  if (!menuData) { newChat(null); return; }
  drawModels(box, menuData.groups, (m) => newChat(m.id));
  box.classList.remove("hidden");
  $("new-chat").setAttribute("aria-expanded", "true");
  const first = box.querySelector("button.model:not(:disabled)");
  if (first) first.focus();
});
// The list changed: a turn ended (its title, its running dot).
function chatsChanged() { if (ownerToken) drawChatList().catch(() => {}); }
