// ---- attachments -----------------------------------------------------------
// Images from the Attach button, a paste or a drop, sent as the message's
// images; text files dropped in become a quoted block in the message.

let pendingImages = [];   // {mime, data (base64), name, bytes, url (blob: for the thumbnail)}
const sentImages = [];    // batches sent, waiting for their user_message to show them
// The server's limits: the request body (the images travel as base64 in
// it) and the image types it takes. A server that says its own wins.
function limits() {
  const l = (menuData && menuData.limits) || {};
  return { bodyBytes: l.body_bytes || 8 * 1024 * 1024, maxImages: l.max_images || 0 };
}
const mb = (n) => n < 1024 * 1024 ? `${Math.max(1, Math.round(n / 1024))} KB` : `${(n / (1024 * 1024)).toFixed(1)} MB`;

function takeSentImages(count) {
  const i = sentImages.findIndex((b) => b.length === count);
  return i < 0 ? null : sentImages.splice(i, 1)[0];
}
function drawAttachments() {
  const box = $("attachments");
  box.replaceChildren();
  pendingImages.forEach((img, i) => {
    const t = box.appendChild(el("div", "thumb"));
    const tag = t.appendChild(el("img"));
    tag.src = img.url; tag.alt = img.name || `image ${i + 1}`;
    const rm = t.appendChild(el("button", "remove", "×"));
    rm.setAttribute("aria-label", `Remove ${img.name || `image ${i + 1}`}`);
    rm.addEventListener("click", () => { pendingImages.splice(i, 1); drawAttachments(); $("input").focus(); });
  });
  drawProblem();
}
// What stands in the way of sending them, under the thumbnails.
function drawProblem() {
  const box = $("attachments");
  const old = box.querySelector(".said");
  if (old) old.remove();
  const said = attachmentProblem();
  if (said) box.appendChild(el("div", `said ${said.error ? "error" : ""}`, said.text)).setAttribute("role", "status");
}
// What is wrong with the images before they are sent, if anything.
function attachmentProblem(text) {
  if (!pendingImages.length) return null;
  const l = limits();
  const bytes = pendingImages.reduce((n, i) => n + i.data.length, 0) + (text || $("input").value).length + 1024;
  if (bytes > l.bodyBytes) return { error: true, text: `These images are too large to send together: ${mb(bytes)} as sent, and this server takes at most ${mb(l.bodyBytes)} a message. Remove some.` };
  if (l.maxImages && pendingImages.length > l.maxImages) return { error: true, text: `This server takes at most ${plural(l.maxImages, "image")} a message. Remove some.` };
  if (current && current.vision === false) return { error: false, text: `${current.id} does not see images: it would get the text only.` };
  return null;
}
// The images to send with `text`, or null when the person is told why not.
async function imagesOk(text) {
  const problem = attachmentProblem(text);
  if (problem && problem.error) { drawAttachments(); announce(problem.text, true); return null; }
  if (problem && !(await ask(`${problem.text} Send it anyway?`, "Send"))) return null;
  return [...pendingImages];
}
function clearAttachments(revoke) {
  if (revoke) for (const i of pendingImages) URL.revokeObjectURL(i.url);
  pendingImages = [];
  drawAttachments();
}
function restoreAttachments(batch) { pendingImages = [...batch, ...pendingImages]; drawAttachments(); }

function readAs(file, how) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error || new Error("the file could not be read"));
    if (how === "text") r.readAsText(file); else r.readAsDataURL(file);
  });
}
const textFile = (f) => f.type.startsWith("text/") || /\.(txt|md|markdown|json|ya?ml|toml|csv|tsv|log|xml|html?|css|js|ts|tsx|jsx|py|rs|go|java|c|h|cpp|hpp|cs|rb|php|sh|sql|ini|cfg|conf)$/i.test(f.name);
async function addFiles(files) {
  for (const f of files) {
    try {
      if (f.type.startsWith("image/")) {
        const url = await readAs(f, "data");
        const comma = url.indexOf(",");
        pendingImages.push({ mime: f.type, data: url.slice(comma + 1), name: f.name || "pasted image", bytes: f.size, url: URL.createObjectURL(f) });
      } else if (textFile(f)) {
        if (f.size > 512 * 1024) { report(new Error(`${f.name} is ${mb(f.size)}: only text files up to 0.5 MB are added to a message.`)); continue; }
        quoteText(f.name, await readAs(f, "text"));
      } else {
        report(new Error(`${f.name || "That file"} is neither an image nor text: it cannot be sent.`));
      }
    } catch (err) { report(err); }
  }
  drawAttachments();
}
// A text file's contents, as a fenced block named after it, in the message.
function quoteText(name, text) {
  const longest = Math.max(2, ...(text.match(/`+/g) || []).map((m) => m.length));
  const fence = "`".repeat(longest + 1);
  const input = $("input");
  const before = input.value && !input.value.endsWith("\n") ? `${input.value}\n\n` : input.value;
  input.value = `${before}${name}:\n${fence}\n${text.replace(/\n$/, "")}\n${fence}\n`;
  input.focus();
}
$("attach").addEventListener("click", () => $("file").click());
$("file").addEventListener("change", () => { const files = [...$("file").files]; $("file").value = ""; addFiles(files); });
$("input").addEventListener("paste", (ev) => {
  const files = [...(ev.clipboardData ? ev.clipboardData.files : [])].filter((f) => f.type.startsWith("image/"));
  if (!files.length) return;
  if (!ev.clipboardData.getData("text/plain")) ev.preventDefault();
  addFiles(files);
});
$("input").addEventListener("input", () => { if (pendingImages.length) drawProblem(); });
for (const zone of [$("main"), document.querySelector("footer")]) {
  zone.addEventListener("dragover", (ev) => {
    if (!ev.dataTransfer || ![...ev.dataTransfer.types].includes("Files")) return;
    ev.preventDefault();
    document.querySelector("footer").classList.add("dropping");
  });
  zone.addEventListener("dragleave", () => document.querySelector("footer").classList.remove("dropping"));
  zone.addEventListener("drop", (ev) => {
    document.querySelector("footer").classList.remove("dropping");
    if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
    ev.preventDefault();
    if (chatOpen) addFiles([...ev.dataTransfer.files]);
  });
}
