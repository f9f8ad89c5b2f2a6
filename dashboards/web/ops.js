// Ops: for a sweep (?sweep=, else the newest), the ops that keep models from running natively
// in eager and in compile (models blocked, and blocked by this op alone), and the graph-break
// reasons, as ranked bars with their tables.
'use strict';

function bars(box, id, labels, datasets) {
  const canvas = TS.el('canvas', {id: id});
  const div = TS.el('div', {class: 'chart'}, canvas);
  div.style.height = Math.max(160, 28 * labels.length + 80) + 'px';
  box.appendChild(div);
  new Chart(canvas, {type: 'bar', data: {labels: labels, datasets: datasets},
                     options: {indexAxis: 'y', animation: false, maintainAspectRatio: false}});
}

function table(box, heads, rows) {
  const t = TS.el('table', {});
  const h = TS.el('tr');
  heads.forEach((x, i) => h.appendChild(TS.el('th', {class: i === 0 || i === heads.length - 1 ? 'name' : null}, x)));
  t.appendChild(TS.el('thead', {}, h));
  const b = TS.el('tbody');
  for (const r of rows) {
    const tr = TS.el('tr');
    r.forEach((x, i) => tr.appendChild(TS.el('td', {class: i === 0 || i === r.length - 1 ? 'name' : null}, x)));
    b.appendChild(tr);
  }
  t.appendChild(b);
  box.appendChild(t);
}

function examples(ids) {
  const span = TS.el('span');
  ids.forEach((m, i) => {
    if (i) span.appendChild(document.createTextNode(', '));
    span.appendChild(TS.link(TS.url('/model', {id: m}), m));
  });
  return span;
}

async function demand(c, sweep, mode) {
  const d = await TS.api('ops', {sweep: sweep, mode: mode});
  const box = TS.el('section', {'data-mode': mode});
  box.appendChild(TS.el('h2', {}, 'Op demand, ' + mode + ': ' + TS.num(d.modelsNative) + ' of ' +
                                      TS.num(d.models) + ' models native'));
  const top = d.ops.slice(0, 25);
  if (top.length === 0) box.appendChild(TS.el('p', {class: 'muted'}, 'No op blocks a model.'));
  else {
    bars(box, 'ops-' + mode, top.map(o => o.op), [
      {label: 'models blocked', data: top.map(o => TS.num(o.modelsBlocked)), backgroundColor: '#d62728'},
      {label: 'blocked by this op alone', data: top.map(o => TS.num(o.blocksAlone)), backgroundColor: '#1f77b4'}]);
    table(box, ['Op', 'Models blocked', 'Alone', 'Fallback calls', 'Examples'],
          d.ops.map(o => [o.op, TS.num(o.modelsBlocked), TS.num(o.blocksAlone), TS.num(o.fallbackCalls),
                          examples(o.exampleModels)]));
  }
  c.appendChild(box);
  return d.sweepId;
}

TS.run(async () => {
  const c = TS.content();
  const sweep = await demand(c, TS.param('sweep'), 'eager');
  document.getElementById('title').textContent = 'Ops of sweep ' + sweep;
  await demand(c, sweep, 'compile');
  const g = await TS.api('graph-breaks', {sweep: sweep});
  const box = TS.el('section', {});
  box.appendChild(TS.el('h2', {}, 'Graph-break reasons: ' + TS.num(g.modelsWithBreaks) + ' models break'));
  const top = g.reasons.slice(0, 25);
  if (top.length === 0) box.appendChild(TS.el('p', {class: 'muted'}, 'No graph breaks.'));
  else {
    bars(box, 'breaks', top.map(r => r.reason.length > 60 ? r.reason.slice(0, 57) + '...' : r.reason),
         [{label: 'models', data: top.map(r => TS.num(r.models)), backgroundColor: '#ff7f0e'}]);
    table(box, ['Reason', 'Models', 'Breaks', 'Examples'],
          g.reasons.map(r => [r.reason, TS.num(r.models), TS.num(r.breaks), examples(r.exampleModels)]));
  }
  c.appendChild(box);
  TS.status('');
});
