// An endpoint's page: its Redeliver buttons post with the session's CSRF
// token, which a plain form cannot send, then show the page again with the
// outcome the server kept for it (queued again, or why not).
(function () {
  'use strict';
  const result = document.getElementById('result');
  function show(text) {
    result.textContent = text;
    result.className = 'error';
  }
  for (const form of document.querySelectorAll('form.redeliver')) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const button = form.querySelector('button');
      button.disabled = true;
      let res;
      try {
        res = await fetch(form.action, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': window.holdpoint.csrf() },
          body: '{}',
          redirect: 'manual',
        });
      } catch (e) {
        button.disabled = false;
        show('The redelivery failed: ' + e.message);
        return;
      }
      if (res.type === 'opaqueredirect' || res.ok) {
        location.reload();
        return;
      }
      const body = await res.json().catch(() => ({}));
      button.disabled = false;
      show(body.message || 'The redelivery failed (HTTP ' + res.status + ').');
    });
  }
})();
