// The OAuth consent page (authorize.html): shows which client asks and where it will be sent
// back, then POSTs the person's answer to /oauth/authorize with their API key in the
// Authorization header; the server answers where to send the browser (the client's redirect
// URI with a code, or with access_denied). The key is kept only in this origin's storage, as
// the executor page keeps it.

const KEY_STORAGE = "relay.key";
const FIELDS = ["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "resource", "scope"];

const params = new URLSearchParams(location.search);
const request = Object.fromEntries(FIELDS.filter((f) => params.has(f)).map((f) => [f, params.get(f)]));
const form = document.getElementById("consent");
const error = document.getElementById("error");

document.getElementById("asker").textContent = `The MCP client "${request.client_id}" asks to run code in one of your relay sessions.`;
document.getElementById("redirect").textContent = request.redirect_uri ?? "(none)";
form.elements.key.value = localStorage.getItem(KEY_STORAGE) ?? "";

form.onsubmit = async (event) => {
  event.preventDefault();
  const approve = event.submitter?.value === "yes";
  const key = form.elements.key.value.trim();
  error.textContent = "";
  try {
    const res = await fetch("/oauth/authorize", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ request, session: form.elements.session.value, approve }),
    });
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) {
      error.textContent = answer.error?.message ?? answer.error_description ?? `the server answered ${res.status}`;
      return;
    }
    localStorage.setItem(KEY_STORAGE, key);
    location.assign(answer.redirect);
  } catch (err) {
    error.textContent = `could not reach the server: ${err.message}`;
  }
};
