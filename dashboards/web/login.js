// The login page: says a refused token was refused (a fixed text; nothing from the URL is
// shown).
'use strict';
document.addEventListener('DOMContentLoaded', () => {
  if (new URLSearchParams(window.location.search).has('refused')) {
    document.getElementById('refused').hidden = false;
  }
});
