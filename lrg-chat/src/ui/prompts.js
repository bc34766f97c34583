// ---- The prompt picker ------------------------------------------------------

// A tool server's prompts (GET …/prompts): one form per prompt with a field
// per argument; sending one posts it expanded as the next message
// (POST …/messages {prompt: {server, name, arguments}}). The server checks
// the arguments; a missing or unknown one comes back as an error naming it.
MENUS.push(["prompts-panel", "prompts-button"]);

async function drawPrompts() {
  const data = await api("GET", "/prompts");
  const panel = $("prompts-panel");
  panel.replaceChildren();
  panel.appendChild(el("h3", null, "Prompts of the tool servers"));
  if (!data.prompts.length) panel.appendChild(el("div", "notice", "No tool server of this chat offers prompts."));
  for (const p of data.prompts) {
    const form = panel.appendChild(el("form", "prompt-pick"));
    form.dataset.prompt = `${p.server}/${p.name}`;
    form.appendChild(el("div", "prompt-name", `${p.title || p.name}`)).appendChild(el("span", "muted", ` — ${p.server}`));
    if (p.description) form.appendChild(el("div", "muted", p.description));
    const inputs = [];
    for (const a of p.arguments) {
      const label = form.appendChild(el("label", null, `${a.name}${a.required ? " (required)" : ""} `));
      const input = label.appendChild(el("input"));
      input.name = a.name;
      input.required = Boolean(a.required);
      if (a.description) input.placeholder = a.description;
      inputs.push(input);
    }
    const send = form.appendChild(el("button", "primary", "Send"));
    send.type = "submit";
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const args = {};
      for (const i of inputs) if (i.value !== "") args[i.name] = i.value;
      send.disabled = true;
      api("POST", "/messages", { prompt: { server: p.server, name: p.name, arguments: args } })
        .then(() => closeMenus())
        .catch(report)
        .finally(() => { send.disabled = false; });
    });
  }
  for (const f of data.failed_servers || []) panel.appendChild(el("div", "notice warning", f.error));
}
$("prompts-button").addEventListener("click", () => {
  if (toggleMenu("prompts-panel", "prompts-button")) drawPrompts().catch(report);
});
