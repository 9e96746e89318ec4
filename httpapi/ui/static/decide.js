// The decision form: its fields were generated from the interrupt's output
// schema; the answer goes through the same route as any operator's,
// POST /api/v1/interrupts/{id}/respond.
(function () {
  'use strict';
  const form = document.getElementById('decide');
  if (!form) return;
  const result = document.getElementById('result');
  let approved = null;
  for (const b of form.querySelectorAll('button[name=approved]')) {
    b.addEventListener('click', () => { approved = b.value === 'true'; });
  }
  function show(text, isError) {
    result.textContent = text;
    result.className = isError ? 'error' : '';
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
    const id = form.dataset.id;
    for (const b of form.querySelectorAll('button')) b.disabled = true;
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
      return;
    }
    if (res.ok && body.status === 'recorded') {
      show('Recorded. Waiting for ' + body.waitingFor.length + ' more decision(s) before the turn resumes.');
      return;
    }
    if (res.status === 409) {
      const cur = await (await fetch('/api/v1/interrupts/' + encodeURIComponent(id))).json().catch(() => ({}));
      show('Already decided by ' + (cur.resolvedBy || 'someone') + (cur.resolvedAt ? ' at ' + cur.resolvedAt : '') + '.', true);
      return;
    }
    for (const b of form.querySelectorAll('button')) b.disabled = false;
    show((body.message || 'The decision failed.') + (body.details && body.details.violations ? ' ' + body.details.violations.join('; ') : ''), true);
  });
})();
