// Exchanges an admin key for a session cookie, then opens the inbox.
(function () {
  'use strict';
  const form = document.getElementById('signin');
  const result = document.getElementById('result');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const res = await fetch('/ui/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ key: form.querySelector('[name=key]').value.trim() }),
    });
    if (res.ok) {
      location.assign('/ui/');
      return;
    }
    const body = await res.json().catch(() => ({}));
    result.textContent = 'Sign-in refused: ' + (body.message || res.status);
    result.className = 'error';
  });
})();
