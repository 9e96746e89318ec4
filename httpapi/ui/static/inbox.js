// The inbox follows the tenant's interrupt events: on each one it reloads
// the pending list from the API and renders it (as text: nothing an
// interrupt carries is ever parsed as HTML).
(function () {
  'use strict';
  const body = document.querySelector('#inbox tbody');
  const live = document.getElementById('live');

  function cell(text, cls) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }
  function link(href, text) {
    const a = document.createElement('a');
    a.href = href;
    a.textContent = text;
    return a;
  }
  // What the server's pages do too (uivisible.go): a character a reader
  // could not see, or that reorders the text around it, is shown as its
  // code point (⟨U+202E⟩) in a style of its own, and the value is flagged.
  const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Default_Ignorable_Code_Point}]/u;
  function isHidden(ch) {
    return ch !== '\n' && ch !== '\t' && hidden.test(ch);
  }
  function appendVisible(el, text) {
    let plain = '';
    for (const ch of text) {
      if (!isHidden(ch)) {
        plain += ch;
        continue;
      }
      const esc = document.createElement('span');
      esc.className = 'hidden-char';
      esc.title = 'invisible or direction-changing character';
      esc.textContent = '\u27e8U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '\u27e9';
      el.append(plain, esc);
      plain = '';
    }
    el.append(plain);
  }
  function flagHidden(el, text) {
    if (!Array.from(text).some(isHidden)) return;
    const warn = document.createElement('span');
    warn.className = 'warn-hidden';
    warn.setAttribute('role', 'note');
    warn.textContent = '\u26a0 this value contains invisible or direction-changing characters';
    el.append(warn);
  }
  function age(iso) {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    // As the server says it (roughDuration): whole units, hours up to 48.
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    if (s < 172800) return Math.floor(s / 3600) + 'h';
    return Math.floor(s / 86400) + 'd';
  }
  function summary(input) {
    if (input === undefined || input === null) return '';
    if (typeof input !== 'object') return String(input);
    return Object.entries(input).map(([k, v]) => k + ': ' + (typeof v === 'string' ? v : JSON.stringify(v))).join('\n');
  }
  // A gated call's approvals, scope and escalation, as the gatebadges
  // template draws them (policy.html).
  function gateBadges(it) {
    const out = document.createDocumentFragment();
    if (!it.policy) return out;
    const gate = document.createElement('span');
    gate.className = 'gate';
    const tag = (cls, text) => {
      const s = document.createElement('span');
      s.className = 'tag ' + cls;
      s.textContent = text;
      return s;
    };
    const needed = it.approvalsNeeded || 0;
    gate.append(tag('votes', (it.approvals || 0) + ' of ' + needed + ' approval' + (needed === 1 ? '' : 's')));
    if (it.scope) gate.append(' ', tag('scope', 'needs ' + it.scope));
    if (it.escalatedAt) gate.append(' ', tag('escalated', 'escalated'));
    out.append(gate);
    return out;
  }
  function render(items) {
    body.replaceChildren();
    if (items.length === 0) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = cell('Nothing is waiting.');
      td.colSpan = 7;
      tr.append(td);
      body.append(tr);
      return;
    }
    for (const it of items) {
      const tr = document.createElement('tr');
      tr.dataset.id = it.id;
      const tool = document.createElement('td');
      tool.append(link('/ui/interrupts/' + encodeURIComponent(it.id), it.tool));
      tool.append(gateBadges(it));
      const sess = document.createElement('td');
      const sessLink = link('/ui/sessions/' + encodeURIComponent(it.sessionId) + '?agent=' + encodeURIComponent(it.agent), '');
      // Eight characters, as the server cuts it, not UTF-16 units.
      appendVisible(sessLink, Array.from(it.sessionId).slice(0, 8).join(''));
      sess.append(sessLink);
      flagHidden(sess, it.sessionId);
      const input = document.createElement('td');
      input.className = 'input';
      appendVisible(input, summary(it.input));
      flagHidden(input, summary(it.input));
      const user = document.createElement('td');
      user.className = 'end-user';
      appendVisible(user, it.endUser || '');
      flagHidden(user, it.endUser || '');
      let deadline = '';
      let cls = '';
      if (it.expiresAt) {
        const left = Date.parse(it.expiresAt) - Date.now();
        deadline = left <= 0 ? 'overdue' : age(new Date(Date.now() - left).toISOString()) + ' left';
        cls = left <= 0 ? 'overdue' : '';
      }
      tr.append(cell(it.agent), tool, input, user, sess, cell(age(it.createdAt)), cell(deadline, cls));
      body.append(tr);
    }
  }
  // The counts lines, as the server draws them: "Pending per agent: a 1 ·
  // b 2", a separator between items only.
  function renderCounts(el, label, param, totals) {
    el.replaceChildren(label + ': ');
    if (totals.length === 0) {
      el.append('none');
      return;
    }
    totals.forEach((c, i) => {
      if (i > 0) el.append(' \u00b7 ');
      el.append(link('/ui/?' + param + '=' + encodeURIComponent(c.key), c.key), ' ' + c.pending);
    });
  }
  async function reloadCounts() {
    const agent = document.getElementById('count-agent');
    const tool = document.getElementById('count-tool');
    if (!agent || !tool) return;
    const res = await fetch('/ui/counts', { headers: { Accept: 'application/json' } }).catch(() => null);
    if (!res || !res.ok) return;
    const counts = await res.json().catch(() => null);
    if (!counts) return;
    renderCounts(agent, 'Pending per agent', 'agent', counts.byAgent || []);
    renderCounts(tool, 'Pending per tool', 'tool', counts.byTool || []);
  }
  // The list reloads with the page's own filters (its query string).
  async function reload() {
    reloadCounts();
    const params = new URLSearchParams(location.search);
    params.delete('age');
    params.delete('cursor');
    if (!params.has('limit')) params.set('limit', '50');
    const age = new URLSearchParams(location.search).get('age');
    const hours = { '1h': 1, '6h': 6, '24h': 24 }[age];
    if (hours) params.set('createdBefore', new Date(Date.now() - hours * 3600e3).toISOString());
    const res = await fetch('/api/v1/interrupts?' + params.toString(), { headers: { Accept: 'application/json' } });
    if (res.ok) render((await res.json()).items);
  }
  const events = new EventSource('/api/v1/events');
  // A page left (or kept in the back-forward cache) gives its stream back:
  // the browser holds few connections per server.
  window.addEventListener('pagehide', () => events.close());
  events.onopen = () => { live.textContent = 'live'; live.dataset.state = 'live'; reload(); };
  events.onerror = () => { live.textContent = 'reconnecting…'; live.dataset.state = 'reconnecting'; };
  for (const type of ['created', 'claimed', 'released', 'resolved', 'expired', 'voted', 'escalated']) {
    events.addEventListener('interrupt.' + type, reload);
  }
})();
