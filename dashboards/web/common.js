// Shared by every page: the header (links and model search), the API reader, and DOM helpers.
// Every value from the API goes into the page as text (textContent, attributes set one by
// one); no HTML is ever built from data.
'use strict';

const TS = {};

// el('td', {class: 'name', 'data-value': 3}, 'text' | node, ...) -> element.
TS.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  return e;
};

TS.link = function (href, text, attrs) {
  return TS.el('a', Object.assign({href: href}, attrs || {}), text);
};

// A URL with query parameters, each encoded.
TS.url = function (path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? path + '?' + s : path;
};

TS.param = function (name) {
  return new URLSearchParams(window.location.search).get(name) || '';
};

// GET /api/v1/<path>: the parsed JSON, or an Error carrying the API's message.
TS.api = async function (path, params) {
  const r = await fetch(TS.url('/api/v1/' + path, params), {credentials: 'same-origin'});
  if (r.status === 401) {
    window.location.href = '/login';
    throw new Error('not logged in');
  }
  const body = await r.json().catch(() => ({error: 'HTTP ' + r.status}));
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
};

// A percentage as the tables print it: one decimal.
TS.pct = function (v) { return Number(v || 0).toFixed(1); };
TS.num = function (v) { return Number(v || 0); };
// "MODE_EAGER" -> "eager", "VERDICT_FAIL_ACCURACY" -> "fail_accuracy".
TS.enumName = function (v) { return String(v || '').replace(/^(MODE|VERDICT)_/, '').toLowerCase(); };

TS.status = function (text, isError) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = isError ? 'error' : 'muted';
};

TS.content = function () { return document.getElementById('content'); };

TS.header = function () {
  const h = document.getElementById('nav');
  const page = document.body.getAttribute('data-page');
  h.appendChild(TS.el('span', {class: 'brand'}, 'Touchstone'));
  for (const [href, name, key] of [['/', 'Overview', 'overview'], ['/classes', 'Classes', 'classes'],
                                   ['/trends', 'Trends', 'trends'], ['/ops', 'Ops', 'ops'],
                                   ['/alerts', 'Alerts', 'alerts']]) {
    h.appendChild(TS.link(href, name, key === page ? {class: 'here'} : {}));
  }
  const form = TS.el('form', {action: '/model', method: 'get', id: 'search'},
                     TS.el('input', {name: 'id', type: 'search', placeholder: 'model id',
                                     'aria-label': 'model id'}));
  h.appendChild(form);
  h.appendChild(TS.link('/logout', 'log out'));
};

// Makes a table's header cells sort its body rows (numbers by data-value, text otherwise).
TS.sortable = function (table) {
  const heads = table.querySelectorAll('th');
  heads.forEach((th, col) => {
    th.classList.add('sortable');
    th.addEventListener('click', () => {
      const body = table.tBodies[0];
      const asc = th.getAttribute('data-sort') !== 'asc';
      heads.forEach(h => h.removeAttribute('data-sort'));
      th.setAttribute('data-sort', asc ? 'asc' : 'desc');
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = a.cells[col], y = b.cells[col];
        const xv = x.getAttribute('data-value'), yv = y.getAttribute('data-value');
        const c = xv !== null && yv !== null ? Number(xv) - Number(yv)
                                             : x.textContent.localeCompare(y.textContent);
        return asc ? c : -c;
      });
      rows.forEach(r => body.appendChild(r));
    });
  });
};

// Runs the page's main(), showing its error instead of a blank page.
TS.run = function (main) {
  document.addEventListener('DOMContentLoaded', () => {
    TS.header();
    main().then(() => {
      // When the data was drawn, in ms since the navigation started (bench/dashboard_bench).
      document.body.setAttribute('data-ready-ms', String(Math.round(performance.now())));
      document.body.setAttribute('data-ready', '1');
    }).catch(e => {
      TS.status(String(e.message || e), true);
      document.body.setAttribute('data-ready', 'error');
    });
  });
};
