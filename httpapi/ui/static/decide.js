// The decision page: its status badge follows the interrupt's events (a
// decision made here, on another page or by a resume), and its form, whose
// fields were generated from the interrupt's output schema, answers through
// the same route as any operator's, POST /api/v1/interrupts/{id}/respond.
(function () {
  'use strict';
  const badge = document.getElementById('status');
  if (!badge) return;
  const id = badge.dataset.id;
  const form = document.getElementById('decide');
  const result = document.getElementById('result');
  let decidedHere = false;
  function show(text, isError) {
    result.textContent = text;
    result.className = isError ? 'error' : '';
  }
  function disable(on) {
    if (!form) return;
    for (const b of form.querySelectorAll('button')) b.disabled = on;
  }
  function decidedBy(it) {
    return 'Already decided by ' + (it.resolvedBy || 'someone') + (it.resolvedAt ? ' at ' + new Date(it.resolvedAt).toISOString().slice(0, 19).replace('T', ' ') + ' UTC' : '') + '.';
  }
  // refresh reads the interrupt again and shows its status; a decision that
  // landed elsewhere closes the form.
  async function refresh() {
    const res = await fetch('/api/v1/interrupts/' + encodeURIComponent(id), { headers: { Accept: 'application/json' } }).catch(() => null);
    if (!res || !res.ok) return null;
    const it = await res.json().catch(() => null);
    if (!it || !it.status) return null;
    badge.textContent = it.status;
    badge.className = 'status status-' + it.status;
    badge.dataset.status = it.status;
    if (it.status !== 'pending' && form && !decidedHere) {
      disable(true);
      show(it.status === 'resolved' ? decidedBy(it) : 'It is ' + it.status + ' now: there is nothing to decide.', true);
    }
    return it;
  }
  if (badge.dataset.status === 'pending') {
    const events = new EventSource('/api/v1/events?type=interrupt.claimed,interrupt.released,interrupt.resolved,interrupt.expired,interrupt.cancelled');
    events.onopen = refresh;
    // A page left (or kept in the back-forward cache) gives its stream
    // back: the browser holds few connections per server.
    window.addEventListener('pagehide', () => events.close());
    for (const type of ['claimed', 'released', 'resolved', 'expired', 'cancelled']) {
      events.addEventListener('interrupt.' + type, (ev) => {
        let n = {};
        try { n = JSON.parse(ev.data); } catch (e) { return; }
        if (n.interruptId === id) refresh();
      });
    }
  }
  if (!form) return;
  let approved = null;
  for (const b of form.querySelectorAll('button[name=approved]')) {
    b.addEventListener('click', () => { approved = b.value === 'true'; });
  }
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const output = {};
    for (const el of form.querySelectorAll('[data-type]')) {
      const t = el.dataset.type;
      if (t === 'boolean') { output[el.name] = el.checked; continue; }
      if (el.value === '') continue;
      output[el.name] = t === 'number' || t === 'integer' ? Number(el.value) : el.value;
    }
    if (approved !== null) output.approved = approved;
    const note = form.querySelector('[name=__note]').value;
    disable(true);
    decidedHere = true;
    const res = await fetch('/api/v1/interrupts/' + encodeURIComponent(id) + '/respond', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': window.holdpoint.csrf() },
      body: JSON.stringify({ output, note }),
    });
    const body = await res.json().catch(() => ({}));
    if (res.ok && body.status === 'resumed') {
      const msg = body.output && body.output.message;
      const text = msg ? (msg.content || []).map((p) => p.text || '').join('') : '';
      show('Decided. The agent answered: ' + (text || '(' + (body.output && body.output.finishReason) + ')'));
      refresh();
      return;
    }
    if (res.ok && body.status === 'recorded') {
      show('Recorded. Waiting for ' + body.waitingFor.length + ' more decision(s) before the turn resumes.');
      refresh();
      return;
    }
    decidedHere = false;
    if (res.status === 409) {
      const cur = await refresh();
      show(decidedBy(cur || {}), true);
      return;
    }
    disable(false);
    show((body.message || 'The decision failed.') + (body.details && body.details.violations ? ' ' + body.details.violations.join('; ') : ''), true);
  });
})();
