// The decisions on a tool call whose outcome is unknown (it may have run):
// the same routes as any operator's, POST /api/v1/tool-calls/{id}/confirm,
// /cancel and /retry. Each works once; a call decided meanwhile is
// answered 409 and the page says so.
(function () {
  'use strict';
  for (const form of document.querySelectorAll('form.toolcall-decide')) {
    const result = form.querySelector('.result');
    let action = null;
    for (const b of form.querySelectorAll('button[data-action]')) {
      b.addEventListener('click', () => { action = b.dataset.action; });
    }
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const body = { note: form.querySelector('[name=note]').value };
      if (action === 'confirm') {
        try {
          body.output = JSON.parse(form.querySelector('[name=output]').value);
        } catch (e) {
          result.textContent = 'The output must be JSON, e.g. {"success": true}.';
          result.className = 'result error';
          return;
        }
      }
      for (const b of form.querySelectorAll('button')) b.disabled = true;
      const res = await fetch('/api/v1/tool-calls/' + encodeURIComponent(form.dataset.id) + '/' + action, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': window.holdpoint.csrf() },
        body: JSON.stringify(body),
      });
      const answer = await res.json().catch(() => ({}));
      if (res.ok) {
        result.textContent = 'Recorded: the call is ' + answer.status + '. The turn stays failed; the conversation goes on with a new message.';
        result.className = 'result';
        return;
      }
      if (res.status !== 409) {
        for (const b of form.querySelectorAll('button')) b.disabled = false;
      }
      result.textContent = answer.message || 'The decision failed.';
      result.className = 'result error';
    });
  }
})();
