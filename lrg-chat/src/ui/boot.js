// ---- start -----------------------------------------------------------------

function start() {
  readFragment();
  generation++;
  lastSeq = 0;
  clearView();
  closeMenus();
  resetMeter();
  setBanner("");
  drawChats();
  setupSidebar();
  chatOpen = Boolean(session && token);
  setBusy(false);
  // Nothing of the chat shown before stays: its model and where it sent.
  current = null; menuData = null;
  $("model-button").textContent = "…";
  $("sends-to").textContent = ""; $("sends-to").classList.remove("cloud");
  if (!chatOpen) {
    setConn("no chat");
    if (ownerToken) {
      $("empty").textContent = "Open one of your chats, or start a new one.";
      notice("No chat is open: pick one from the list, or start a new chat.", "");
    } else {
      notice("This page needs a chat link: /v1/ui/chat#session=…&token=…", "error");
    }
    return;
  }
  $("empty").textContent = "Start the conversation: type a message below.";
  loadModels().catch(() => { /* the stream reports an ended chat */ });
  stream(generation);
}
window.addEventListener("hashchange", start);
window.addEventListener("online", () => setBanner(""));
start();
$("input").focus();
