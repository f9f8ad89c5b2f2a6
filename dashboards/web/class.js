// One class of a sweep (?sweep=&arch=): its models with their status per mode and OpCov.
'use strict';

TS.run(async () => {
  const arch = TS.param('arch');
  const data = await TS.api('class', {sweep: TS.param('sweep'), arch: arch});
  document.getElementById('title').textContent = 'Class ' + arch + ' in sweep ' + data.sweepId;
  const modes = new Set();
  for (const r of data.rows) Object.keys(r.status).forEach(m => modes.add(m));
  const order = ['eager', 'compile', 'train'].filter(m => modes.has(m));
  const table = TS.el('table', {class: 'models'});
  const head = TS.el('tr', {}, TS.el('th', {class: 'name'}, 'Model'), TS.el('th', {class: 'name'}, 'Task'),
                     TS.el('th', {class: 'name'}, 'Family'));
  for (const m of order) head.appendChild(TS.el('th', {class: 'name'}, m));
  head.appendChild(TS.el('th', {}, 'OpCov %'));
  table.appendChild(TS.el('thead', {}, head));
  const body = TS.el('tbody');
  data.rows.sort((a, b) => a.modelId.localeCompare(b.modelId));
  for (const r of data.rows) {
    const tr = TS.el('tr', {'data-model': r.modelId});
    tr.appendChild(TS.el('td', {class: 'name'}, TS.link(TS.url('/model', {id: r.modelId}), r.modelId)));
    tr.appendChild(TS.el('td', {class: 'name'}, r.task));
    tr.appendChild(TS.el('td', {class: 'name'}, r.family));
    for (const m of order) {
      const s = r.status[m] || '';
      tr.appendChild(TS.el('td', {class: 'name ' + (s === 'pass' ? 'status-pass' : 'status-fail')}, s));
    }
    const oc = 100 * TS.num(r.opcovRatio);
    tr.appendChild(TS.el('td', {'data-value': oc}, TS.pct(oc)));
    body.appendChild(tr);
  }
  table.appendChild(body);
  TS.content().appendChild(table);
  TS.sortable(table);
  TS.status(data.rows.length + ' models.');
});
