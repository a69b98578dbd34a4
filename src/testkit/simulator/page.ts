/**
 * The simulator's single page. Everything the provider answers is inserted with textContent, never
 * as HTML: a provider's message must not be able to run script in the marketplace page.
 */
export function renderPage(nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Marketplace simulator</title>
<style nonce="${nonce}">
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #222; max-width: 70rem; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; }
  .muted { color: #666; }
  section { border: 1px solid #ddd; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
  button, select, a.button { font: inherit; padding: .35rem .8rem; margin-right: .4rem; }
  a.button { border: 1px solid #888; border-radius: 3px; text-decoration: none; color: inherit; background: #f4f4f4; }
  a.button[aria-disabled="true"] { pointer-events: none; opacity: .5; }
  #status { min-height: 1.4em; }
  #status.error { color: #b00020; }
  .credential { font-family: ui-monospace, monospace; word-break: break-all; }
  .entry { border-top: 1px solid #eee; padding: .5rem 0; }
  .entry pre { margin: .2rem 0; white-space: pre-wrap; word-break: break-all; font-size: 12px; background: #fafafa; padding: .3rem; }
  .ok { color: #08660d; } .bad { color: #b00020; }
  #pending { min-height: 1.4em; color: #8a5a00; }
  details summary { cursor: pointer; color: #444; }
</style>
</head>
<body>
<h1>Marketplace simulator</h1>
<div class="muted">Provider <span id="provider"></span> · fake connector <span id="connector"></span> · product <span id="product"></span> in <span id="region"></span></div>

<section>
  <h2>Resource</h2>
  <p id="resource">No resource yet.</p>
  <button id="provision" type="button">Provision</button>
  <select id="plan" aria-label="Plan"></select>
  <button id="resize" type="button">Resize</button>
  <button id="rotate" type="button">Rotate credentials</button>
  <button id="deprovision" type="button">Deprovision</button>
  <button id="usage" type="button">Usage (measures)</button>
  <a id="sso" class="button" href="/sso" target="_blank" rel="noopener">Open dashboard (SSO)</a>
  <p id="status" role="status"></p>
  <p id="pending" aria-live="polite"></p>
</section>

<section>
  <h2>Credentials</h2>
  <div id="credentials"><span class="muted">None.</span></div>
  <p><button id="new-credentials" type="button">New credential set</button>
  <button id="delete-credentials" type="button">Delete this set</button></p>
</section>

<section>
  <h2>Requests and answers</h2>
  <p class="muted">Signed with test keys only (masterkey.json): the canonical string and the full signature are shown. <button id="clear-log" type="button">Clear log</button></p>
  <div id="log"><span class="muted">Nothing sent yet.</span></div>
</section>

<script nonce="${nonce}">
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var current = null;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function render(state) {
    current = state;
    $('provider').textContent = state.provider;
    $('connector').textContent = state.connector;
    $('product').textContent = state.product;
    $('region').textContent = state.region;
    var plan = $('plan');
    if (plan.options.length !== state.plans.length) {
      plan.textContent = '';
      state.plans.forEach(function (p) { var o = el('option', '', p); o.value = p; plan.appendChild(o); });
    }
    var has = state.resource !== null;
    $('resource').textContent = has ? ('Resource ' + state.resource.id + ' on plan ' + state.resource.plan) : 'No resource yet.';
    $('provision').disabled = has;
    ['resize', 'rotate', 'deprovision', 'plan', 'usage', 'new-credentials'].forEach(function (id) { $(id).disabled = !has; });
    $('delete-credentials').disabled = !has || state.credentials === null;
    renderPending(state.pending);
    $('sso').setAttribute('aria-disabled', has ? 'false' : 'true');

    var creds = $('credentials');
    creds.textContent = '';
    if (state.credentials === null) creds.appendChild(el('span', 'muted', 'None.'));
    else {
      creds.appendChild(el('div', 'muted', 'Credential set ' + state.credentials.id));
      Object.keys(state.credentials.values).forEach(function (k) {
        creds.appendChild(el('div', 'credential', k + '=' + state.credentials.values[k]));
      });
    }

    var log = $('log');
    log.textContent = '';
    if (state.log.length === 0) log.appendChild(el('span', 'muted', 'Nothing sent yet.'));
    state.log.forEach(function (entry) {
      var box = el('div', 'entry');
      var status = entry.response ? entry.response.status : 'no answer';
      var good = entry.response && entry.response.status < 300;
      box.appendChild(el('div', good ? 'ok' : 'bad', entry.at + ' · ' + entry.action + ' → ' + status));
      box.appendChild(el('pre', '', entry.request.method + ' ' + entry.request.url + '\\n' +
        Object.keys(entry.request.headers).map(function (h) { return h + ': ' + entry.request.headers[h]; }).join('\\n') +
        (entry.request.body === undefined ? '' : '\\n\\n' + JSON.stringify(entry.request.body, null, 2))));
      if (entry.response) box.appendChild(el('pre', '', entry.response.status + '\\n' + (entry.response.body === undefined ? '' : JSON.stringify(entry.response.body, null, 2))));
      if (entry.steps) box.appendChild(el('pre', 'steps', entry.steps.join('\\n')));
      if (entry.callback) {
        var tries = entry.callback.attempts || [];
        box.appendChild(el('pre', 'callback', 'callback ' + entry.callback.id + ' → ' + entry.callback.status +
          ' (' + tries.length + ' attempt' + (tries.length === 1 ? '' : 's') + (tries.length > 1 ? ': ' + tries.join(', ') : '') + ')' +
          (entry.callback.payload === undefined ? '' : '\\n' + JSON.stringify(entry.callback.payload, null, 2))));
      }
      if (entry.signing) {
        var details = el('details', 'signing');
        details.appendChild(el('summary', '', 'Canonical string and signature'));
        details.appendChild(el('pre', 'canonical', entry.signing.canonical));
        details.appendChild(el('pre', 'signature', 'X-Signature: ' + entry.signing.signature));
        box.appendChild(details);
      }
      if (entry.curl) {
        var copy = el('button', 'copy-curl', 'Copy as curl');
        copy.type = 'button';
        var curlText = entry.curl;
        copy.addEventListener('click', function () {
          var done = function () { copy.textContent = 'Copied'; };
          if (navigator.clipboard) navigator.clipboard.writeText(curlText).then(done, function () { copy.textContent = 'Select the command below'; });
        });
        box.appendChild(copy);
        var curlDetails = el('details', 'curl');
        curlDetails.appendChild(el('summary', '', 'curl (valid 5 minutes)'));
        curlDetails.appendChild(el('pre', 'curl-command', curlText));
        box.appendChild(curlDetails);
      }
      log.appendChild(box);
    });
  }

  var countdown = null;
  function renderPending(pending) {
    if (countdown) { clearInterval(countdown); countdown = null; }
    var p = $('pending');
    if (!pending) { p.textContent = ''; return; }
    var tick = function () {
      var left = Math.max(0, Math.ceil((pending.deadline - Date.now()) / 1000));
      p.textContent = pending.action + ': 202 accepted, waiting for callback ' + pending.callbackId + ' (' + left + ' s left)';
    };
    tick();
    countdown = setInterval(tick, 1000);
  }

  function setStatus(text, error) {
    var s = $('status');
    s.textContent = text;
    s.className = error ? 'error' : '';
  }

  function act(action, body) {
    setStatus(action + '…', false);
    ['provision', 'resize', 'rotate', 'deprovision', 'usage', 'new-credentials', 'delete-credentials'].forEach(function (id) { $(id).disabled = true; });
    // While the action runs (a 202 waits for its callback), poll the state for the pending banner.
    var poll = setInterval(function () {
      fetch('/api/state').then(function (r) { return r.json(); }).then(function (state) { renderPending(state.pending); });
    }, 500);
    return fetch('/api/' + action, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body || {}) })
      .then(function (r) { return r.json(); })
      .finally(function () { clearInterval(poll); })
      .then(function (answer) {
        if (answer.state) render(answer.state);
        setStatus(answer.ok ? action + ': done' : action + ' failed: ' + answer.message, !answer.ok);
      })
      .catch(function (e) { setStatus(action + ' failed: ' + e, true); if (current) render(current); });
  }

  $('provision').addEventListener('click', function () { act('provision'); });
  $('resize').addEventListener('click', function () { act('resize', { plan: $('plan').value }); });
  $('rotate').addEventListener('click', function () { act('rotate'); });
  $('deprovision').addEventListener('click', function () { act('deprovision'); });
  $('usage').addEventListener('click', function () { act('usage'); });
  $('new-credentials').addEventListener('click', function () { act('new-credentials'); });
  $('delete-credentials').addEventListener('click', function () { act('delete-credentials'); });
  $('clear-log').addEventListener('click', function () { act('clear-log'); });
  // Back from the dashboard tab: show the single sign-on hop the server logged.
  window.addEventListener('focus', function () { fetch('/api/state').then(function (r) { return r.json(); }).then(render); });

  fetch('/api/state').then(function (r) { return r.json(); }).then(render);
})();
</script>
</body>
</html>
`;
}
