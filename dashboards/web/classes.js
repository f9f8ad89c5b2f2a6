// Classes: one row per architecture class of a sweep (?sweep=, else the newest): models,
// Eager %, Compile %, Train %, OpCov, and device performance over the class's models whose
// compile passed (geomean compile speedup, median compiled MFU; '–' when none); sortable by any
// column (a class without perf sorts lowest), filtered by task, family and name.
'use strict';

const FIELDS = [['models', 'Models', 'count'], ['eagerPct', 'Eager %', 'pct'],
                ['compilePct', 'Compile %', 'pct'], ['trainPct', 'Train %', 'pct'],
                ['opcovPct', 'Mean OpCov %', 'pct'], ['geomeanSpeedup', 'Speedup', 'perf'],
                ['medianMfu', 'MFU', 'perf']];

// A cell's value and text: perf fields are measured only where a model's compile passed.
function cell(r, field, kind) {
  if (kind === 'perf') {
    const v = Number(r[field]);
    if (TS.num(r.perfModels) === 0 || !Number.isFinite(v)) return [-1, '–'];
    return [v, field === 'medianMfu' ? (100 * v).toPrecision(3) + '%' : v.toFixed(2) + '×'];
  }
  const v = TS.num(r[field]);
  return [v, kind === 'pct' ? TS.pct(v) : String(v)];
}

function options(select, values, chosen) {
  select.appendChild(TS.el('option', {value: ''}, 'any'));
  for (const v of values) {
    const o = TS.el('option', {value: v}, v);
    if (v === chosen) o.selected = true;
    select.appendChild(o);
  }
}

TS.run(async () => {
  const summary = await TS.api('summary', {sweep: TS.param('sweep'), group_by: 'arch', modes: '0'});
  const sweepId = summary.sweepId;
  document.getElementById('title').textContent = 'Classes of sweep ' + sweepId;
  const c = TS.content();
  const tasks = new Set(), families = new Set();
  for (const r of summary.rows) {
    r.tasks.forEach(t => tasks.add(t));
    r.families.forEach(f => families.add(f));
  }
  const task = TS.el('select', {id: 'task-filter', 'aria-label': 'task'});
  options(task, Array.from(tasks).sort(), TS.param('task'));
  const family = TS.el('select', {id: 'family-filter', 'aria-label': 'family'});
  options(family, Array.from(families).sort(), TS.param('family'));
  const name = TS.el('input', {id: 'name-filter', type: 'search', placeholder: 'class name contains',
                               'aria-label': 'class name'});
  name.value = TS.param('name');
  const count = TS.el('span', {id: 'shown', class: 'muted'});
  c.appendChild(TS.el('div', {class: 'filters'}, 'Task ', task, 'Family ', family, name, count));

  const table = TS.el('table', {class: 'classes', 'data-sweep': sweepId});
  const head = TS.el('tr', {}, TS.el('th', {class: 'name'}, 'Class'),
                     TS.el('th', {class: 'name'}, 'Task'), TS.el('th', {class: 'name'}, 'Family'));
  for (const [, title] of FIELDS) head.appendChild(TS.el('th', {}, title));
  table.appendChild(TS.el('thead', {}, head));
  const body = TS.el('tbody');
  for (const r of summary.rows) {
    const tr = TS.el('tr', {'data-group': r.group, 'data-tasks': r.tasks.join(' '),
                            'data-families': r.families.join(' ')});
    tr.appendChild(TS.el('td', {class: 'name'},
                         TS.link(TS.url('/class', {sweep: sweepId, arch: r.group}), r.group)));
    tr.appendChild(TS.el('td', {class: 'name'}, r.tasks.join(', ')));
    tr.appendChild(TS.el('td', {class: 'name'}, r.families.join(', ')));
    for (const [field, , kind] of FIELDS) {
      const [v, text] = cell(r, field, kind);
      tr.appendChild(TS.el('td', {'data-field': field, 'data-value': v}, text));
    }
    body.appendChild(tr);
  }
  table.appendChild(body);
  c.appendChild(table);
  TS.sortable(table);

  const apply = () => {
    const t = task.value, f = family.value, n = name.value.toLowerCase();
    let shown = 0;
    for (const tr of body.rows) {
      const ok = (!t || tr.getAttribute('data-tasks').split(' ').includes(t)) &&
                 (!f || tr.getAttribute('data-families').split(' ').includes(f)) &&
                 (!n || tr.getAttribute('data-group').toLowerCase().includes(n));
      tr.hidden = !ok;
      shown += ok ? 1 : 0;
    }
    count.textContent = shown + ' of ' + body.rows.length + ' classes';
  };
  task.addEventListener('change', apply);
  family.addEventListener('change', apply);
  name.addEventListener('input', apply);
  apply();
  TS.status('Sweep ' + sweepId + ' (' + summary.state + '): ' + TS.num(summary.total.models) +
            ' models in ' + TS.num(summary.classes) + ' classes. Click a header to sort.');
});
