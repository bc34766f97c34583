// ---- The prompt picker ------------------------------------------------------

// A tool server's prompts (GET …/prompts): one form per prompt with a field
// per argument; sending one posts it expanded as the next message
// (POST …/messages {prompt: {server, name, arguments}}). The server checks
// the arguments; a missing or unknown one comes back as an error naming it.
MENUS.push(["prompts-panel", "prompts-button"]);

// The slash commands the chat's agent (an ACP agent as the model) takes, from
// its newest `agent_commands` event; picking one writes `/name ` in the box
// and sending it passes it to the agent as typed.
let agentCommands = [];

function drawAgentCommands(panel) {
  if (!agentCommands.length) return;
  panel.appendChild(el("h3", null, "Commands of the agent"));
  for (const c of agentCommands) {
    const pick = panel.appendChild(el("button", "agent-command", `/${c.name}`));
    pick.type = "button";
    pick.title = c.hint ? `${c.description} (then: ${c.hint})` : c.description;
    pick.appendChild(el("span", "muted", ` — ${c.description}`));
    pick.addEventListener("click", () => {
      const input = $("input");
      input.value = `/${c.name} `;
      closeMenus();
      input.focus();
    });
  }
}

async function drawPrompts() {
  const data = await api("GET", "/prompts");
  const panel = $("prompts-panel");
  panel.replaceChildren();
  drawAgentCommands(panel);
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
