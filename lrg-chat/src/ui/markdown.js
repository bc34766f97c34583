// ---- Markdown, safely ------------------------------------------------------
// Model output is hostile input. markdown-it parses it with raw HTML off
// (`html: false`: tags arrive as text), refuses links other than http(s)
// and mailto, and renders images as links (a remote image fetched would
// leak the conversation); DOMPurify then sanitizes what came out, and the
// page inserts DOM nodes, never an HTML string.

const md = window.markdownit({ html: false, linkify: true, typographer: false })
  .use(window.markdownitTaskLists, { enabled: false });
md.validateLink = (url) => /^(https?:|mailto:)/i.test(String(url).trim());
// `![alt](url)`: a link named after the image, never an <img>.
md.renderer.rules.image = (tokens, idx) => {
  const t = tokens[idx];
  const src = t.attrGet("src") || "";
  const alt = t.children && t.children.length ? md.renderer.renderInlineAsText(t.children, md.options, {}) : t.content;
  return `<a class="image-link" href="${md.utils.escapeHtml(src)}">image: ${md.utils.escapeHtml(alt || src)}</a>`;
};
const purifyConfig = {
  USE_PROFILES: { html: true },
  // Task lists' boxes (checked after, see renderMarkdown).
  ADD_TAGS: ["input"],
  ADD_ATTR: ["checked", "disabled", "type"],
  FORBID_TAGS: ["img", "style", "iframe", "form", "button", "textarea", "select", "video", "audio", "source", "picture", "object", "embed", "link", "meta", "base"],
  FORBID_ATTR: ["style", "srcset", "action", "formaction", "background", "poster"],
  // DOMPurify's own rule with only http(s) and mailto as schemes: a value
  // with no scheme (a class, a type) passes; markdown-it made no relative link.
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
  RETURN_DOM_FRAGMENT: true,
};
window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    if (node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  }
});

// `<think>…</think>` inside the answer is reasoning: split it out, also
// while it streams (an open tag with no close yet: the rest is reasoning).
function splitThink(raw) {
  let text = "", thinking = "", rest = String(raw || "");
  for (;;) {
    const open = rest.search(/<think>/i);
    if (open < 0) { text += rest; break; }
    text += rest.slice(0, open);
    rest = rest.slice(open + 7);
    const close = rest.search(/<\/think>/i);
    if (close < 0) { thinking += rest; break; }
    thinking += rest.slice(0, close);
    rest = rest.slice(close + 8);
  }
  return { text: text.replace(/^\s+/, ""), thinking: thinking.trim() };
}

// Render `source` as Markdown into `box` (replacing what it held).
function renderMarkdown(box, source) {
  // No whitespace text between tags (an answer's textContent is its text);
  // code keeps its newlines, as they are escaped there.
  const html = md.render(String(source || "")).replace(/>\n</g, "><").trim();
  const frag = window.DOMPurify.sanitize(html, purifyConfig);
  for (const pre of frag.querySelectorAll("pre")) codeBlock(pre);
  // Task list boxes show the state; they are not controls.
  for (const box of frag.querySelectorAll("input")) {
    if (box.type !== "checkbox") { box.remove(); continue; }
    box.disabled = true;
    box.setAttribute("aria-label", box.checked ? "done" : "not done");
  }
  box.replaceChildren(frag);
  box.raw = source;
}

// A fenced block: its language and a Copy button above it.
function codeBlock(pre) {
  const code = pre.querySelector("code");
  const m = code && /(?:^|\s)language-([\w+#.-]+)/.exec(code.className);
  const wrap = el("div", "code");
  const head = wrap.appendChild(el("div", "code-head"));
  head.appendChild(el("span", "lang", m ? m[1] : "code"));
  const copy = head.appendChild(el("button", "copy-code", "Copy"));
  copy.type = "button";
  copy.setAttribute("aria-label", `Copy the ${m ? m[1] + " " : ""}code`);
  pre.replaceWith(wrap);
  wrap.appendChild(pre);
  copy.addEventListener("click", () => copyText(copy, (code || pre).textContent, "Copy"));
}

// Copy `text`, and say so on `button` for a moment; without the clipboard
// API, the old copy command on a hidden selection.
function copyText(button, text, label) {
  const said = (what) => {
    button.dataset.said = what;
    if (!button.classList.contains("icon")) button.textContent = what;
    button.setAttribute("aria-label", what);
    clearTimeout(button.reset);
    button.reset = setTimeout(() => {
      delete button.dataset.said;
      if (!button.classList.contains("icon")) button.textContent = label;
      button.setAttribute("aria-label", button.dataset.label || label);
    }, 2000);
  };
  const fallback = () => {
    const area = document.body.appendChild(el("textarea", "offscreen"));
    area.value = text; area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (_) { /* refused */ }
    area.remove();
    said(ok ? "Copied" : "Could not copy");
  };
  if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(() => said("Copied"), fallback);
  else fallback();
}
