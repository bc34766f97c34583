// Tool servers that ask the model (MCP sampling). A `sampling_request`
// draws a card with the server, the model that would answer, the token
// limit and the server's messages; its approval (an `approval_needed`
// whose call_id is the sampling_id) lands on that card like a tool's.
// `sampling_done` says how it ended, with the answer and its usage.

reasonText.sampling = (r) => `The mode “${modeNames[r.mode] || r.mode}” asks before a tool server uses the model.`;

handlers.sampling_request = (e) => {
  dropLive();
  const c = el("div", "card sampling");
  c.dataset.call = e.sampling_id;
  c.setAttribute("role", "group");
  c.setAttribute("aria-label", `${e.server} asks the model`);
  const head = c.appendChild(el("div", "head"));
  head.appendChild(el("span", "title", `${e.server} asks the model`));
  head.appendChild(el("span", "notice", e.model));
  c.status = head.appendChild(el("span", "status", "asked"));
  const facts = c.appendChild(el("ul", "args"));
  const fact = (k, v) => { const li = facts.appendChild(el("li")); li.appendChild(el("span", "k", `${k}: `)); li.appendChild(el("span", null, v)); };
  fact("token limit", String(e.max_tokens));
  if (e.system_prompt) fact("system prompt", e.system_prompt);
  if (e.tools && e.tools.length) fact("its tools", e.tools.join(", "));
  if (e.include_context && e.include_context !== "none") {
    fact("context", e.shares_history ? `${e.include_context}: the chat's recent text is shared` : `${e.include_context} asked: nothing of the chat is shared`);
  }
  for (const m of e.messages || []) {
    const images = m.images ? ` [${plural(m.images, "image")}]` : "";
    fact(m.role, m.text + images);
  }
  cards.set(e.sampling_id, c);
  // Under the call it came during, when that call is shown.
  const call = e.tool_call_id && cards.get(e.tool_call_id);
  if (call && call.isConnected) { call.appendChild(c); if (e.seq) c.dataset.seq = String(e.seq); } else add(c, e.seq);
};

handlers.sampling_done = (e) => {
  const c = cards.get(e.sampling_id); if (!c) return;
  c.classList.remove("waiting");
  if (c.approval) { c.approval.remove(); c.approval = null; }
  c.status.textContent = e.outcome;
  if (e.text) c.appendChild(el("div", "result", e.text));
  if (e.tool_calls && e.tool_calls.length) c.appendChild(el("div", "notice", `calls ${e.tool_calls.join(", ")}`));
  if (e.usage) c.appendChild(el("div", "notice", `${e.usage.prompt_tokens} + ${e.usage.completion_tokens} tokens`));
  if (e.reason) c.appendChild(el("div", "notice", e.reason));
};
