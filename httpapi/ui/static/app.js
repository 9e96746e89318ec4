// What every dashboard page shares: the CSRF token its requests echo, and
// the sign-out button.
window.holdpoint = {
  csrf: () => (document.querySelector('meta[name=csrf-token]') || {}).content || '',
};
document.addEventListener('DOMContentLoaded', () => {
  const out = document.getElementById('signout');
  if (!out) return;
  out.addEventListener('click', async () => {
    await fetch('/ui/session/end', { method: 'POST', headers: { 'X-CSRF-Token': window.holdpoint.csrf() } });
    location.assign('/ui/login');
  });
});
