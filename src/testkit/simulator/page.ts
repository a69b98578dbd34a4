/**
 * The simulator's single page. Everything the provider answers is inserted with textContent, never
 * as HTML: a provider's message must not be able to run script in the marketplace page. The page
 * follows the backend through server-sent events (`/api/events`), so a callback that lands while
 * nobody clicks still shows; without EventSource it reads `/api/state` every second.
 */
export function renderPage(nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Marketplace simulator</title>
<style nonce="${nonce}">
  body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem 2rem; color: #222; max-width: 76rem; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; }
  h2 { font-size: 1.05rem; margin: 0 0 .6rem; }
  code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
  .muted { color: #666; }
  section { border: 1px solid #ddd; border-radius: 6px; padding: .9rem 1rem; margin: 1rem 0; }
  button, select, a.button { font: inherit; padding: .3rem .75rem; margin: 0 .35rem .3rem 0; }
  a.button { display: inline-block; border: 1px solid #888; border-radius: 3px; text-decoration: none; color: inherit; background: #f4f4f4; }
  a.button[aria-disabled="true"] { pointer-events: none; opacity: .5; }
  #live { float: right; font-size: 12px; }
  #live.down { color: #b00020; }
  #status { min-height: 1.4em; margin: .4rem 0 0; }
  #status.error { color: #b00020; }
  #pending { min-height: 1.4em; margin: 0; color: #8a5a00; }
  .credential-set { border-top: 1px solid #eee; padding: .4rem 0; }
  .credential-set .set-status { font-weight: 600; }
  .credential { font-family: ui-monospace, monospace; word-break: break-all; margin-left: 1rem; }
  .entry { border: 1px solid #e4e4e4; border-left: 5px solid #bbb; border-radius: 4px; padding: .45rem .7rem; margin: .6rem 0; }
  .entry.ok { border-left-color: #1b7f2a; }
  .entry.bad { border-left-color: #b00020; }
  .entry.waiting { border-left-color: #d08c00; }
  .headline { font-weight: 600; }
  .headline .seq, .headline time { font-weight: 400; color: #555; }
  .entry.ok .result { color: #08660d; } .entry.bad .result { color: #b00020; } .entry.waiting .result { color: #8a5a00; }
  .exchange { display: grid; grid-template-columns: 1fr 1fr; gap: .5rem; margin: .35rem 0; }
  .exchange > div { min-width: 0; }
  .label { font-size: 12px; color: #555; margin: 0; }
  pre { margin: .15rem 0; white-space: pre-wrap; word-break: break-all; font-size: 12px; background: #f7f7f7; padding: .35rem .45rem; border-radius: 3px; }
  .callback, .sso { margin: .35rem 0; padding: .35rem .5rem; background: #fbf8ef; border-radius: 3px; }
  .callback[data-state="done"] { background: #eff8f0; }
  .callback[data-state="error"], .callback[data-state="missed"] { background: #fbeeee; }
  .callback-state { font-weight: 600; }
  .attempts, .sso-steps { margin: .2rem 0 .1rem; padding-left: 1.4rem; font-size: 13px; }
  .sso { background: #f2f5fb; }
  .tools { margin-top: .3rem; }
  .tools button { font-size: 12px; padding: .2rem .55rem; }
  details summary { cursor: pointer; color: #444; font-size: 13px; }
  @media (max-width: 900px) { .exchange { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<span id="live" class="muted">connecting…</span>
<h1>Marketplace simulator</h1>
<div class="muted">Provider <span id="provider" class="mono"></span> · fake connector <span id="connector" class="mono"></span> · product <span id="product"></span> in <span id="region"></span> · times in UTC</div>

<section>
  <h2>Resource</h2>
  <p id="resource">No resource yet.</p>
  <button id="provision" type="button">Provision</button>
  <select id="plan" aria-label="Plan"></select>
  <button id="resize" type="button">Resize</button>
  <button id="rotate" type="button">Rotate credentials</button>
  <button id="usage" type="button">Usage (measures)</button>
  <a id="sso" class="button" href="/sso" target="_blank" rel="noopener">Open dashboard (SSO)</a>
  <button id="deprovision" type="button">Deprovision</button>
  <p id="status" role="status"></p>
  <p id="pending" aria-live="polite"></p>
</section>

<section>
  <h2>Credential sets</h2>
  <p><button id="new-credentials" type="button">New credential set</button>
  <button id="reveal" type="button" aria-pressed="false">Show values</button>
  <span class="muted">Every set the marketplace holds for the resource; each can be deleted on its own.</span></p>
  <div id="credentials"><span class="muted">None.</span></div>
</section>

<section>
  <h2>Requests and answers</h2>
  <p class="muted">Newest first, stamped when sent. Signed with test keys only (masterkey.json): the canonical string and the full signature are shown. <button id="clear-log" type="button">Clear log</button></p>
  <div id="log"><span class="muted">Nothing sent yet.</span></div>
</section>

<script nonce="${nonce}">
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var NL = '\\n';
  var current = null;
  var reveal = false;
  var sending = false;
  var openDetails = {};
  var BUTTONS = ['provision', 'resize', 'rotate', 'deprovision', 'usage', 'new-credentials', 'plan'];

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function clock(iso) { return iso ? iso.slice(11, 23) : ''; }
  function stamp(iso, prefix) { var t = el('time', '', (prefix || '') + clock(iso)); t.dateTime = iso; t.title = iso; return t; }
  function duration(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000));
    if (s < 120) return s + ' s';
    var m = Math.floor(s / 60);
    if (m < 120) return m + ' min';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }
  function elapsed(ms) { return ms < 1000 ? Math.max(0, Math.round(ms)) + ' ms' : (ms / 1000).toFixed(1) + ' s'; }
  function headerLines(headers) {
    return Object.keys(headers || {}).map(function (h) { return h + ': ' + headers[h]; }).join(NL);
  }
  function bodyText(body) {
    if (body === undefined) return '';
    return typeof body === 'string' ? body : JSON.stringify(body, null, 2);
  }
  // A details element that stays open across re-renders.
  function details(key, className, summary) {
    var d = el('details', className);
    d.appendChild(el('summary', '', summary));
    if (openDetails[key]) d.open = true;
    d.addEventListener('toggle', function () { if (d.open) openDetails[key] = true; else delete openDetails[key]; });
    return d;
  }

  function outcomeClass(entry) {
    if (entry.sso) {
      var steps = entry.sso.steps, last = steps[steps.length - 1];
      if (!entry.sso.finished) return 'waiting';
      if (!last || last.error || last.note || last.status >= 300) return 'bad';
      return 'ok';
    }
    if (entry.error) return 'bad';
    if (!entry.response) return 'waiting';
    if (entry.callback) return entry.callback.state === 'done' ? 'ok' : entry.callback.state === 'waiting' ? 'waiting' : 'bad';
    return entry.response.status < 300 ? 'ok' : 'bad';
  }

  function resultText(entry) {
    if (entry.sso) {
      var statuses = entry.sso.steps.map(function (s) { return s.error ? 'no answer' : s.status === undefined ? '…' : String(s.status); });
      var last = entry.sso.steps[entry.sso.steps.length - 1];
      var text = statuses.length ? statuses.join(' → ') : '…';
      if (entry.sso.finished && last && last.note) text += ' → dashboard NOT CHECKED';
      else if (entry.sso.finished && entry.sso.steps.length > 1 && last && last.status !== undefined) text = statuses.slice(0, -1).join(' → ') + ' → dashboard ' + last.status;
      return text;
    }
    if (entry.error) return entry.error;
    if (!entry.response) return 'sent, waiting for the answer…';
    var text2 = entry.response.status + ' in ' + entry.response.latencyMs + ' ms';
    if (entry.callback) text2 += ' · callback ' + entry.callback.state;
    return text2;
  }

  // '3 attempts received: 503 ×2, 204', in order, repeats folded.
  function attemptsSummary(attempts) {
    if (attempts.length === 0) return 'No attempt received yet.';
    var runs = [];
    attempts.forEach(function (a) {
      var label = a.status + (a.authorized ? '' : ' (no valid token)');
      var last = runs[runs.length - 1];
      if (last && last.label === label) last.count++;
      else runs.push({ label: label, count: 1 });
    });
    return attempts.length + (attempts.length === 1 ? ' attempt' : ' attempts') + ' received: ' +
      runs.map(function (r) { return r.count > 1 ? r.label + ' ×' + r.count : r.label; }).join(', ');
  }

  function renderCallback(entry) {
    var cb = entry.callback;
    var box = el('div', 'callback');
    box.setAttribute('data-state', cb.state);
    var line = el('div', '');
    line.appendChild(document.createTextNode('callback ' + cb.id + ': '));
    var label = { waiting: 'waiting', done: 'done', error: 'error', missed: 'missed (no callback within 24 h)' }[cb.state];
    line.appendChild(el('span', 'callback-state', label));
    if (cb.state === 'waiting') {
      line.appendChild(document.createTextNode(' · '));
      var countdown = el('span', 'countdown');
      countdown.setAttribute('data-deadline', String(cb.deadline));
      if (cb.waitUntil !== undefined) countdown.setAttribute('data-wait-until', String(cb.waitUntil));
      line.appendChild(countdown);
    } else if (cb.settledAt) {
      line.appendChild(document.createTextNode(' · accepted by the fake connector at ' + clock(cb.settledAt) +
        (entry.response ? ' (' + elapsed(Date.parse(cb.settledAt) - Date.parse(entry.response.at)) + ' after the 202)' : '')));
    }
    box.appendChild(line);
    if (cb.acceptedEarlier) box.appendChild(el('div', 'muted', 'A callback for this id had already been accepted at ' + clock(cb.acceptedEarlier) + ', before this request; only attempts since are listed.'));
    box.appendChild(el('div', 'attempts-summary', attemptsSummary(cb.attempts)));
    if (cb.attempts.length) {
      var attempts = el('ol', 'attempts');
      cb.attempts.forEach(function (a) {
        attempts.appendChild(el('li', '', clock(a.at) + ' → ' + a.status + (a.authorized ? '' : ' (no valid client_credentials token)')));
      });
      // A provider retrying for a while sends many: the list with times folds away.
      var all = details(entry.seq + ':attempts', 'all-attempts', 'Every attempt, with its time');
      all.appendChild(attempts);
      box.appendChild(all);
    }
    if (cb.payload !== undefined) box.appendChild(el('pre', 'callback-payload', JSON.stringify(cb.payload, null, 2)));
    return box;
  }

  function renderSso(entry) {
    var hop = entry.sso;
    var box = el('div', 'sso');
    var list = el('ol', 'sso-steps');
    if (hop.code.length) list.appendChild(el('li', 'sso-code', 'The fake connector issued a single-use code at ' + clock(hop.code.issuedAt) + ' (' + hop.code.length + ' characters; not shown, it signs in whoever holds it).'));
    hop.steps.forEach(function (s, i) {
      var parts = ['GET ' + s.url + (s.cookiesSent.length ? ' with cookies ' + s.cookiesSent.join(', ') : ' without cookies')];
      if (s.error) parts.push('→ ' + s.error);
      else if (s.status === undefined) parts.push('→ waiting for the answer…');
      else parts.push('→ ' + s.status + ' in ' + s.latencyMs + ' ms');
      var li = el('li', 'sso-step' + (i === 0 ? ' sso-first' : ''), parts.join(' '));
      var facts = [];
      if (s.location) facts.push('Location: ' + s.location);
      if (s.status !== undefined) facts.push(s.cookiesSet.length ? 'sets cookies: ' + s.cookiesSet.join(', ') : 'sets no cookie');
      if (s.contentType) facts.push(s.contentType);
      if (s.title) facts.push('title "' + s.title + '"');
      if (s.message) facts.push('says "' + s.message + '"');
      if (facts.length) li.appendChild(el('div', 'muted sso-facts', facts.join(' · ')));
      if (s.note) li.appendChild(el('div', 'sso-note', s.note));
      list.appendChild(li);
    });
    box.appendChild(list);
    if (hop.finished) {
      var ex = hop.connector.codeExchanges, rc = hop.connector.resourceChecks;
      box.appendChild(el('div', 'sso-connector', 'Meanwhile the provider ' +
        (ex.length ? 'exchanged a code at the fake connector (token endpoint → ' + ex.join(', ') + ')' : 'did not exchange the code at the fake connector') +
        (rc.length ? ' and read the resource (→ ' + rc.join(', ') + ').' : ' and did not read the resource there.')));
      var steps = hop.steps, last = steps[steps.length - 1];
      var verdict;
      if (!last) verdict = 'No request was made.';
      else if (last.error) verdict = 'Dashboard NOT CHECKED: ' + last.error + '.';
      else if (last.note) verdict = 'Dashboard NOT CHECKED: the simulator stopped at a redirect.';
      else if (steps.length === 1) verdict = '/v1/sso answered ' + last.status + ' without a redirect: that answer is what the browser shows.';
      else verdict = 'Dashboard ' + last.url + ' answered ' + last.status + '.';
      box.appendChild(el('div', 'sso-dashboard', verdict));
    }
    if (hop.browserSentAt) box.appendChild(el('div', 'muted sso-browser', 'At ' + clock(hop.browserSentAt) + ' your browser tab was sent to /v1/sso with a second code (a code works once; the hop above used its own). What that tab shows is the provider\\'s answer to it.'));
    return box;
  }

  function renderHeadline(entry) {
    var head = el('div', 'headline');
    head.appendChild(el('span', 'seq', '#' + entry.seq + ' '));
    head.appendChild(stamp(entry.at, 'sent '));
    head.appendChild(document.createTextNode(' · ' + entry.action + ' → '));
    head.appendChild(el('span', 'result', resultText(entry)));
    return head;
  }

  function renderExchange(entry) {
    var exchange = el('div', 'exchange');
    var req = el('div', '');
    req.appendChild(el('p', 'label', 'Request'));
    req.appendChild(el('pre', 'request', entry.request.method + ' ' + entry.request.url + (entry.request.headers && Object.keys(entry.request.headers).length ? NL + headerLines(entry.request.headers) : '') +
      (entry.request.body === undefined ? '' : NL + NL + bodyText(entry.request.body))));
    exchange.appendChild(req);
    var ans = el('div', '');
    if (entry.response) {
      ans.appendChild(el('p', 'label', 'Answer at ' + clock(entry.response.at) + ', ' + entry.response.latencyMs + ' ms after sending'));
      ans.appendChild(el('pre', 'response', entry.response.status + NL + headerLines(entry.response.headers) + (entry.response.body === undefined ? '' : NL + NL + bodyText(entry.response.body))));
    } else {
      ans.appendChild(el('p', 'label', 'Answer'));
      ans.appendChild(el('pre', 'response', entry.error ? entry.error : 'not yet'));
    }
    exchange.appendChild(ans);
    return exchange;
  }

  function renderSigning(entry) {
    var d = details(entry.seq + ':signing', 'signing', 'Canonical string and signature');
    d.appendChild(el('pre', 'canonical', entry.signing.canonical));
    d.appendChild(el('pre', 'signature', 'X-Signature: ' + entry.signing.signature));
    return d;
  }

  function renderCurl(entry) {
    var c = details(entry.seq + ':curl', 'curl', 'curl (valid 5 minutes)');
    c.appendChild(el('pre', 'curl-command', entry.curl));
    return c;
  }

  function renderTools(entry) {
    var tools = el('div', 'tools');
    if (entry.resendable) {
      var same = el('button', 'resend-same', 'Resend (same signature)');
      same.type = 'button';
      same.title = 'The same bytes and headers again: the provider should answer with its replay';
      same.addEventListener('click', function () { resend(entry.seq, 'same'); });
      tools.appendChild(same);
      var again = el('button', 'resend-resigned', 'Resend (re-signed)');
      again.type = 'button';
      again.title = 'The same request with a fresh Date and signature: a repeat, as the marketplace sends one';
      again.addEventListener('click', function () { resend(entry.seq, 'resigned'); });
      tools.appendChild(again);
    }
    if (entry.curl) {
      var copy = el('button', 'copy-curl', 'Copy as curl');
      copy.type = 'button';
      var curlText = entry.curl;
      copy.addEventListener('click', function () {
        if (navigator.clipboard) navigator.clipboard.writeText(curlText).then(function () { copy.textContent = 'Copied'; }, function () { copy.textContent = 'Open "curl" and select the command'; });
      });
      tools.appendChild(copy);
    }
    return tools.childNodes.length ? tools : null;
  }

  // Entries are kept by number and only the parts whose data changed are rebuilt: a button under
  // the pointer stays the same element while callback attempts keep arriving.
  var entries = {};
  var PARTS = [
    ['headline', function (e) { return [e.action, e.at, resultText(e)]; }, renderHeadline],
    ['callback', function (e) { return e.callback || null; }, function (e) { return e.callback ? renderCallback(e) : null; }],
    ['sso', function (e) { return e.sso || null; }, function (e) { return e.sso ? renderSso(e) : null; }],
    ['exchange', function (e) { return [e.request, e.response || null, e.error || null]; }, renderExchange],
    ['signing', function (e) { return !!e.signing; }, function (e) { return e.signing ? renderSigning(e) : null; }],
    ['curl', function (e) { return !!e.curl; }, function (e) { return e.curl ? renderCurl(e) : null; }],
    ['tools', function (e) { return [e.resendable, !!e.curl]; }, renderTools]
  ];

  function renderEntry(entry) {
    var kept = entries[entry.seq];
    if (!kept) {
      kept = { node: el('div', ''), parts: {} };
      kept.node.setAttribute('data-seq', String(entry.seq));
      entries[entry.seq] = kept;
    }
    kept.node.className = 'entry ' + outcomeClass(entry);
    PARTS.forEach(function (part) {
      var name = part[0], key = JSON.stringify(part[1](entry));
      var old = kept.parts[name];
      if (old && old.key === key) return;
      // An absent part holds its place with an empty comment, so parts keep their order.
      var fresh = part[2](entry) || document.createComment(name);
      if (old) kept.node.replaceChild(fresh, old.node);
      else kept.node.appendChild(fresh);
      kept.parts[name] = { key: key, node: fresh };
    });
    return kept.node;
  }

  function renderLog(state) {
    var log = $('log');
    var wanted = state.log.map(renderEntry);
    var live = {};
    state.log.forEach(function (entry) { live[entry.seq] = true; });
    Object.keys(entries).forEach(function (seq) { if (!live[seq]) delete entries[seq]; });
    if (wanted.length === 0) {
      log.textContent = '';
      log.appendChild(el('span', 'muted', 'Nothing sent yet.'));
      return;
    }
    // Newest first: move or insert only what is not in place yet.
    wanted.forEach(function (node, i) {
      if (log.childNodes[i] !== node) log.insertBefore(node, log.childNodes[i] || null);
    });
    while (log.childNodes.length > wanted.length) log.removeChild(log.lastChild);
  }

  var credentialsKey = '';
  function renderCredentials(state) {
    var creds = $('credentials');
    var key = JSON.stringify([state.credentials, reveal, busy()]);
    if (key === credentialsKey) return;
    credentialsKey = key;
    creds.textContent = '';
    if (state.credentials.length === 0) { creds.appendChild(el('span', 'muted', 'None.')); return; }
    state.credentials.forEach(function (set) {
      var box = el('div', 'credential-set');
      box.setAttribute('data-id', set.id);
      var head = el('div', 'set-head');
      head.appendChild(document.createTextNode('Set '));
      head.appendChild(el('code', 'set-id', set.id));
      head.appendChild(document.createTextNode(' · asked for at ' + clock(set.createdAt) + ' · '));
      var statusText = { pending: 'pending (values come with the callback)', active: 'active', deleting: 'deleting (waiting for the callback)' }[set.status];
      head.appendChild(el('span', 'set-status', statusText));
      var del = el('button', 'delete-set', 'Delete');
      del.type = 'button';
      del.setAttribute('aria-label', 'Delete credential set ' + set.id);
      del.disabled = busy() || set.status === 'deleting';
      del.addEventListener('click', function () { act('delete-credentials', { id: set.id }); });
      head.appendChild(document.createTextNode(' '));
      head.appendChild(del);
      box.appendChild(head);
      if (set.values) {
        Object.keys(set.values).forEach(function (k) {
          box.appendChild(el('div', 'credential', k + '=' + (reveal ? set.values[k] : '••••••••')));
        });
      } else if (set.status === 'active') {
        box.appendChild(el('div', 'muted', 'The provider sent no values.'));
      }
      creds.appendChild(box);
    });
  }

  function busy() { return sending || (current !== null && current.running !== null); }

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
    var r = state.resource, has = r !== null;
    var suffix = !has ? '' : r.status === 'pending' ? ' (waiting for its provisioning callback)' : r.status === 'deprovisioning' ? ' (deprovisioning: waiting for its callback)' : '';
    $('resource').textContent = has ? ('Resource ' + r.id + ' on plan ' + r.plan + suffix) : 'No resource yet.';
    var locked = busy();
    BUTTONS.forEach(function (id) { $(id).disabled = locked || !has; });
    $('provision').disabled = locked || has;
    $('sso').setAttribute('aria-disabled', has ? 'false' : 'true');
    renderCredentials(state);

    renderLog(state);
    tick();
  }

  // Countdowns run here, from the deadlines the backend gave: no traffic for them.
  function tick() {
    var now = Date.now();
    var nodes = document.querySelectorAll('.countdown');
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      var wait = n.getAttribute('data-wait-until');
      var deadline = Number(n.getAttribute('data-deadline'));
      var text = '';
      if (wait !== null) text = Number(wait) > now ? 'the button waits ' + duration(Number(wait) - now) + ' more; ' : 'the button stopped waiting, the page still watches; ';
      n.textContent = text + 'the provider has ' + duration(deadline - now) + ' left (24 h deadline)';
    }
    var p = $('pending');
    var pending = current && current.pending;
    p.textContent = pending ? pending.action + ': 202 accepted, waiting for callback ' + pending.callbackId + ' (' + duration(pending.deadline - now) + ' left)' : '';
  }
  setInterval(tick, 1000);

  function setStatus(text, error) {
    var s = $('status');
    s.textContent = text;
    s.className = error ? 'error' : '';
  }

  function post(path, body) {
    return fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body || {}) })
      .then(function (r) { return r.json(); });
  }

  function act(action, body) {
    setStatus(action + '…', false);
    sending = true;
    if (current) render(current);
    return post('/api/' + action, body)
      .then(function (answer) {
        sending = false;
        if (answer.state) render(answer.state);
        setStatus(answer.ok ? action + ': done' : action + ' failed: ' + answer.message, !answer.ok);
      })
      .catch(function (e) { sending = false; setStatus(action + ' failed: ' + e, true); if (current) render(current); });
  }

  function resend(seq, mode) {
    var what = 'resend #' + seq + (mode === 'same' ? ' (same signature)' : ' (re-signed)');
    setStatus(what + '…', false);
    return post('/api/resend', { seq: seq, mode: mode })
      .then(function (answer) {
        if (answer.state) render(answer.state);
        setStatus(answer.ok ? what + ': answered, see the newest entry' : what + ' failed: ' + answer.message, !answer.ok);
      })
      .catch(function (e) { setStatus(what + ' failed: ' + e, true); });
  }

  $('provision').addEventListener('click', function () { act('provision'); });
  $('resize').addEventListener('click', function () { act('resize', { plan: $('plan').value }); });
  $('rotate').addEventListener('click', function () { act('rotate'); });
  $('deprovision').addEventListener('click', function () { act('deprovision'); });
  $('usage').addEventListener('click', function () { act('usage'); });
  $('new-credentials').addEventListener('click', function () { act('new-credentials'); });
  $('clear-log').addEventListener('click', function () { act('clear-log'); });
  $('reveal').addEventListener('click', function () {
    reveal = !reveal;
    $('reveal').textContent = reveal ? 'Hide values' : 'Show values';
    $('reveal').setAttribute('aria-pressed', String(reveal));
    if (current) renderCredentials(current);
  });

  var live = $('live');
  if (typeof EventSource === 'function') {
    var events = new EventSource('/api/events');
    events.onmessage = function (e) { live.textContent = 'live'; live.className = 'muted'; render(JSON.parse(e.data)); };
    events.onerror = function () { live.textContent = 'disconnected from the simulator: retrying…'; live.className = 'down'; };
  } else {
    live.textContent = 'reading the state every second';
    var poll = function () { fetch('/api/state').then(function (r) { return r.json(); }).then(render).catch(function () {}); };
    poll();
    setInterval(poll, 1000);
  }
})();
</script>
</body>
</html>
`;
}
