// An ACP client on the official TypeScript SDK (@agentclientprotocol/sdk),
// a second implementation beside lrg's Rust fixture client: it spawns an
// agent, talks to it over stdio the way an editor does, and prints what it
// saw as one JSON object on stdout (lrg-cli/tests/acp_ts.rs reads it).
//
// Usage: node client.mjs '{"command": "lrg", "args": ["acp", ...],
//   "cwd": "/abs/dir", "prompts": ["note milk"], "answer": "allow_once"}'
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const config = JSON.parse(process.argv[2]);
const agent = spawn(config.command, config.args, {
  cwd: config.cwd,
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));

const seen = { updates: [], asked: [], stops: [] };

function text(content) {
  return content && content.type === "text" ? content.text : JSON.stringify(content);
}

// One line per update: its kind, and what a person would read of it.
function summary(update) {
  switch (update.sessionUpdate) {
    case "agent_message_chunk":
      return `message: ${text(update.content)}`;
    case "agent_thought_chunk":
      return `thought: ${text(update.content)}`;
    case "user_message_chunk":
      return `user: ${text(update.content)}`;
    case "tool_call":
      return `tool_call ${update.title} ${update.kind} ${update.status ?? "pending"} ${JSON.stringify(update.rawInput)}`;
    case "tool_call_update":
      return `tool_call_update ${update.status}`;
    default:
      return update.sessionUpdate;
  }
}

const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const result = await acp
  .client({ name: "ts-sdk-fixture-editor" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    seen.updates.push(summary(params.update));
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    seen.asked.push({
      title: params.toolCall.title,
      options: params.options.map((o) => o.kind),
    });
    const chosen = params.options.find((o) => o.kind === config.answer);
    if (!chosen) {
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: chosen.optionId } };
  })
  .connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION ?? 1,
      clientCapabilities: {},
    });
    const session = await ctx.request(acp.methods.agent.session.new, {
      cwd: config.cwd,
      mcpServers: [],
    });
    for (const prompt of config.prompts) {
      const response = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: prompt }],
      });
      seen.stops.push(response.stopReason);
    }
    const caps = init.agentCapabilities ?? {};
    let listed = null;
    if (caps.sessionCapabilities && caps.sessionCapabilities.list) {
      const list = await ctx.request(acp.methods.agent.session.list, { cwd: config.cwd });
      listed = list.sessions.map((s) => ({ sessionId: s.sessionId, cwd: s.cwd, title: s.title }));
    }
    return {
      protocolVersion: init.protocolVersion,
      agent: init.agentInfo ? init.agentInfo.name : null,
      loadSession: caps.loadSession ?? false,
      sessionCapabilities: Object.keys(caps.sessionCapabilities ?? {}).sort(),
      configOptions: (session.configOptions ?? []).map((o) => o.id),
      sessionId: session.sessionId,
      listed,
    };
  });

agent.stdin.end();
const code = await exited;
process.stdout.write(JSON.stringify({ ...result, ...seen, agentExit: code }) + "\n");
