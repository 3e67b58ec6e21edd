// The pages' passkey buttons (passkeys.go): each ceremony is a begin
// request, the browser's passkey dialog, and a finish request. The server
// keeps the challenge; this script only carries JSON between it and
// navigator.credentials. It is the app's one script, loaded from the app
// itself, as its Content-Security-Policy requires.
"use strict";

(() => {
  const supported = window.PublicKeyCredential &&
    typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function" &&
    typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function";

  const message = document.getElementById("passkey-message");
  const say = (text) => {
    message.textContent = text;
    message.hidden = false;
  };

  // post sends body as JSON and returns the answer's JSON. A sensitive
  // action that needs a recent authentication is redirected to /reauth:
  // then the browser goes there, and the promise never settles.
  const post = async (path, body) => {
    const res = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body ?? {}),
      credentials: "same-origin",
    });
    if (res.redirected) {
      location.assign(res.url);
      return new Promise(() => {});
    }
    const answer = await res.json().catch(() => ({ error: "The server's answer could not be read." }));
    if (!res.ok) throw new Error(answer.error || "Refused (" + res.status + ").");
    return answer;
  };

  // withNext is path with the page to go to after, if any.
  const withNext = (path, next) => next ? path + "?" + new URLSearchParams({ next }) : path;

  // signIn runs a sign-in (or a re-authentication) ceremony.
  const signIn = async (button, begin, finish) => {
    button.disabled = true;
    try {
      const options = await post(begin);
      const credential = await navigator.credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey),
      });
      const done = await post(withNext(finish, button.dataset.next), credential.toJSON());
      location.assign(done.next);
    } catch (err) {
      say(err.name === "NotAllowedError" ? "The passkey dialog was closed, or it timed out." : err.message);
      button.disabled = false;
    }
  };

  for (const el of document.querySelectorAll(".passkey-signin, #passkey-add-form")) el.hidden = !supported;
  if (!supported) {
    const unsupported = document.getElementById("passkey-unsupported");
    if (unsupported) unsupported.hidden = false;
    return;
  }

  const signin = document.getElementById("passkey-signin");
  if (signin) signin.addEventListener("click", () => signIn(signin, "/passkeys/login/begin", "/passkeys/login/finish"));

  const reauth = document.getElementById("passkey-reauth");
  if (reauth) reauth.addEventListener("click", () => signIn(reauth, "/reauth/passkey/begin", "/reauth/passkey/finish"));

  const add = document.getElementById("passkey-add-form");
  if (add) {
    add.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = document.getElementById("passkey-add");
      button.disabled = true;
      try {
        const options = await post("/passkeys/register/begin");
        const credential = await navigator.credentials.create({
          publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey),
        });
        const done = await post("/passkeys/register/finish", { name: add.elements.name.value, credential: credential.toJSON() });
        location.assign(done.next);
      } catch (err) {
        say(err.name === "NotAllowedError" ? "The passkey dialog was closed, or it timed out." : err.message);
        button.disabled = false;
      }
    });
  }
})();
