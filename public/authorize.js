// The OAuth consent page (authorize.html). What it shows comes from the server: GET
// /oauth/consent with this page's query checks the request as /oauth/authorize did and answers
// the client's name and where that name comes from, and where the browser (with the code) goes
// afterwards. Nothing in the address can make it say more, and what a client chose is set as
// text only. The buttons act only once the page has been visible for ARM_DELAY_MS: a click
// meant for something else, on a page that just appeared, is no consent. Inside a frame it
// refuses to work (its server refuses framing too). The person's answer is POSTed to
// /oauth/authorize with their API key in the Authorization header; the server answers where to
// send the browser (the client's redirect URI with a code, or with access_denied). The key is
// kept only in this origin's storage, as the executor page keeps it.

const KEY_STORAGE = "relay.key";
const FIELDS = ["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "resource", "scope"];
/** How long the page must have been visible before a click on Allow or Deny counts. */
const ARM_DELAY_MS = 1000;

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const request = Object.fromEntries(FIELDS.filter((f) => params.has(f)).map((f) => [f, params.get(f)]));
const form = $("consent");
const status = $("status");
const buttons = [...form.querySelectorAll("button")];
let armed = false;
let armTimer;

if (window.top !== window) {
  status.textContent = "This page does not work inside another page: open it in a tab of its own.";
} else {
  show().catch((err) => {
    status.textContent = `Could not reach the server: ${err.message}`;
  });
}

async function show() {
  const res = await fetch(`/oauth/consent${location.search}`);
  const view = await res.json().catch(() => ({}));
  if (!res.ok) {
    status.textContent = view.error_description ?? `The server answered ${res.status}.`;
    status.classList.add("error");
    return;
  }
  describe(view);
  form.elements.key.value = localStorage.getItem(KEY_STORAGE) ?? "";
  status.hidden = true;
  form.hidden = false;
  arm();
  document.addEventListener("visibilitychange", arm);
  addEventListener("pageshow", arm);
}

/** Fills in who asks and where the browser goes, from the server's ConsentView. */
function describe(view) {
  $("client-name").textContent = view.clientName ? `“${view.clientName}”` : "A client with no name";
  $("client-source").textContent =
    view.nameSource.kind === "document"
      ? `as its client metadata document at ${view.nameSource.host} names it`
      : "as it named itself when it registered here (anyone can register any name: judge it by where it sends you)";
  const { redirect } = view;
  const [host, note] = {
    web: () => [redirect.host, "a web site"],
    loopback: () => [`this computer, port ${redirect.port}`, `(${redirect.host}): a program running here`],
    app: () => [`the app that opens ${redirect.scheme}: links`, ""],
  }[redirect.kind]();
  $("redirect-host").textContent = host;
  $("redirect-note").textContent = note;
  $("loopback-warning").hidden = redirect.kind !== "loopback";
  $("client-id").textContent = view.clientId;
  $("redirect-uri").textContent = view.redirectUri;
}

/** Disables the buttons, and enables them once the page has been visible for ARM_DELAY_MS. */
function arm() {
  clearTimeout(armTimer);
  setArmed(false);
  if (document.visibilityState === "visible") armTimer = setTimeout(() => setArmed(true), ARM_DELAY_MS);
}

function setArmed(on) {
  armed = on;
  for (const button of buttons) button.disabled = !on;
}

form.onsubmit = async (event) => {
  event.preventDefault();
  if (!armed) return;
  const approve = event.submitter?.value === "yes";
  const key = form.elements.key.value.trim();
  $("error").textContent = "";
  setArmed(false);
  try {
    const res = await fetch("/oauth/authorize", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ request, session: form.elements.session.value, approve }),
    });
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) {
      $("error").textContent = answer.error?.message ?? answer.error_description ?? `the server answered ${res.status}`;
      setArmed(true);
      return;
    }
    localStorage.setItem(KEY_STORAGE, key);
    location.assign(answer.redirect);
  } catch (err) {
    $("error").textContent = `could not reach the server: ${err.message}`;
    setArmed(true);
  }
};
