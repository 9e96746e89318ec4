// Approval policies on the dashboard (uipolicy.go): the decision page's
// Approve, Deny and Retry, which post with the session's CSRF token (a
// plain form cannot send it) and then show the page again with the
// outcome the server kept for it; a refusal (a missing scope, the
// requester, a second vote) is shown on the page as the server said it.
(function () {
  'use strict';
  async function post(path, body) {
    let res;
    try {
      res = await fetch(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': window.holdpoint.csrf() },
        body: JSON.stringify(body),
        redirect: 'manual',
      });
    } catch (e) {
      return 'The request failed: ' + e.message;
    }
    if (res.type === 'opaqueredirect' || res.ok) {
      location.reload();
      return '';
    }
    const answer = await res.json().catch(() => ({}));
    return (answer.message || 'The request failed (HTTP ' + res.status + ').') +
      (answer.details && answer.details.violations ? ' ' + answer.details.violations.join('; ') : '');
  }

  function denial(form, approval) {
    const output = {};
    for (const el of form.querySelectorAll('[data-type]')) {
      const t = el.dataset.type;
      if (t === 'boolean') { output[el.name] = el.checked; continue; }
      if (el.value === '') continue;
      output[el.name] = t === 'number' || t === 'integer' ? Number(el.value) : el.value;
    }
    if (approval) output.approved = false;
    if (Object.keys(output).length === 0) output.denied = true;
    return output;
  }

  const form = document.getElementById('gate-decide');
  const problem = document.getElementById('gate-problem');
  if (form && problem) {
    let action = null;
    for (const b of form.querySelectorAll('button[data-action]')) {
      b.addEventListener('click', () => { action = b; });
    }
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!action) return;
      const body = { note: form.querySelector('[name=note]').value };
      const id = encodeURIComponent(form.dataset.id);
      const edit = form.querySelector('[name=input]');
      if (action.dataset.action === 'approve' && edit && edit.value !== edit.defaultValue) {
        try {
          body.input = JSON.parse(edit.value);
        } catch (e) {
          problem.textContent = 'The edited input must be JSON.';
          problem.hidden = false;
          return;
        }
      }
      if (action.dataset.action === 'deny') body.output = denial(form, action.dataset.approval === 'true');
      for (const b of form.querySelectorAll('button')) b.disabled = true;
      const msg = await post('/ui/interrupts/' + id + '/' + action.dataset.action, body);
      if (!msg) return;
      for (const b of form.querySelectorAll('button')) b.disabled = false;
      problem.textContent = msg;
      problem.hidden = false;
    });
  }

  for (const retry of document.querySelectorAll('form.policy-retry')) {
    const result = retry.querySelector('.result');
    retry.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const button = retry.querySelector('button');
      button.disabled = true;
      const gate = document.getElementById('gate');
      const from = gate ? '?from=' + encodeURIComponent(gate.dataset.id) : '';
      const msg = await post('/ui/tool-calls/' + encodeURIComponent(retry.dataset.id) + '/retry' + from, { note: retry.querySelector('[name=note]').value });
      if (!msg) return;
      button.disabled = false;
      result.textContent = msg;
      result.className = 'result problem';
      result.setAttribute('role', 'alert');
    });
  }
})();
