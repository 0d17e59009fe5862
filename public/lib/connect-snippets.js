// How to connect an MCP client to this relay session: a snippet per client with this server's
// URL and the tenant's key filled in, each with a copy button. The key is shown masked unless
// the person asks; the copy button always copies the real one.

const MASK = "••••••••";

/** The snippets for `url` and `key`: [{id, title, where, text}]. */
export function snippets(url, key) {
  const auth = `Bearer ${key}`;
  const json = (value) => JSON.stringify(value, null, 2);
  return [
    {
      id: "claude-code",
      title: "Claude Code",
      where: "Run in a terminal:",
      text: `claude mcp add --transport http relay ${url} --header "Authorization: ${auth}"`,
    },
    {
      id: "claude-desktop",
      title: "Claude Desktop (through mcp-remote)",
      where: "Add to claude_desktop_config.json (needs Node.js for npx):",
      text: json({ mcpServers: { relay: { command: "npx", args: ["mcp-remote", url, "--header", `Authorization: ${auth}`] } } }),
    },
    {
      id: "cursor",
      title: "Cursor",
      where: "Add to ~/.cursor/mcp.json (or .cursor/mcp.json in a project):",
      text: json({ mcpServers: { relay: { url, headers: { Authorization: auth } } } }),
    },
    {
      id: "json",
      title: "Any client (JSON)",
      where: "Streamable HTTP endpoint and header, in the mcpServers form most clients read (as scripts/dev.sh prints it):",
      text: json({ mcpServers: { relay: { type: "http", url, headers: { Authorization: auth } } } }),
    },
  ];
}

/** The MCP endpoint of relay session `session` on `origin`. */
export function mcpUrl(origin, session) {
  return session === "default" ? `${origin}/mcp` : `${origin}/mcp?session=${encodeURIComponent(session)}`;
}

/** Renders the snippets into `container`; `showKey` is the checkbox that unmasks the key. */
export function renderSnippets(container, showKey, { origin, session, key }) {
  const url = mcpUrl(origin, session);
  const list = snippets(url, key);
  const codes = new Map();
  container.replaceChildren();
  for (const snippet of list) {
    const box = document.createElement("div");
    box.className = "snippet";
    const title = Object.assign(document.createElement("h3"), { textContent: snippet.title, id: `snippet-${snippet.id}-title` });
    const where = Object.assign(document.createElement("p"), { textContent: snippet.where });
    const code = document.createElement("code");
    const pre = Object.assign(document.createElement("pre"), { tabIndex: 0 });
    pre.setAttribute("aria-labelledby", title.id);
    pre.append(code);
    const copy = Object.assign(document.createElement("button"), { type: "button", textContent: "Copy" });
    copy.dataset.snippet = snippet.id;
    copy.setAttribute("aria-label", `Copy the ${snippet.title} snippet`);
    copy.onclick = () => copyText(copy, snippet.text);
    box.append(title, where, pre, copy);
    container.append(box);
    codes.set(code, snippet.text);
  }
  const show = () => {
    for (const [code, text] of codes) code.textContent = showKey.checked ? text : text.replaceAll(key, MASK);
  };
  showKey.onchange = show;
  show();
}

async function copyText(button, text) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed: select the text instead";
  }
  setTimeout(() => (button.textContent = "Copy"), 2000);
}
