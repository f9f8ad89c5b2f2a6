// Trends: per profile line, Eager % and Compile % per task (and the Total) across its last 30
// done sweeps as line charts, and the geomean compile speedup per task (a sweep without one is
// a gap); clicking a point opens that sweep's classes.
'use strict';

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
                 '#7f7f7f', '#bcbd22', '#17becf'];

// A row's value of `field`: a percentage, or a speedup (null, a gap, where none was measured).
function value(r, field) {
  if (!r) return null;
  if (field !== 'geomeanSpeedup') return TS.num(r[field]);
  const v = Number(r[field]);
  return TS.num(r.perfModels) > 0 && Number.isFinite(v) ? v : null;
}

function chart(box, line, field, title) {
  const labels = line.points.map(p => p.sweep.sweepId);
  const tasks = new Set();
  for (const p of line.points) p.summary.rows.forEach(r => tasks.add(r.group));
  const datasets = [];
  let i = 0;
  for (const t of ['Total'].concat(Array.from(tasks).sort())) {
    const data = line.points.map(p => {
      const r = t === 'Total' ? p.summary.total : p.summary.rows.find(x => x.group === t);
      return value(r, field);
    });
    const color = PALETTE[i++ % PALETTE.length];
    datasets.push({label: t, data: data, borderColor: color, backgroundColor: color,
                   borderWidth: t === 'Total' ? 4 : 1.5, spanGaps: true});
  }
  const canvas = TS.el('canvas', {class: 'trend', 'data-line': line.line, 'data-field': field});
  box.appendChild(TS.el('h2', {}, title + ' — line ' + line.line));
  box.appendChild(TS.el('div', {class: 'chart'}, canvas));
  new Chart(canvas, {
    type: 'line',
    data: {labels: labels, datasets: datasets},
    options: {
      animation: false, maintainAspectRatio: false,
      scales: {x: {title: {display: true, text: 'sweep'}},
               y: field === 'geomeanSpeedup' ? {min: 0, title: {display: true, text: title}}
                                             : {min: 0, max: 100, title: {display: true, text: title}}},
      plugins: {legend: {position: 'right'}},
      onClick: (evt, elements) => {
        if (elements.length === 0) return;
        const sweep = line.points[elements[0].index].sweep.sweepId;
        window.location.href = TS.url('/classes', {sweep: sweep});
      }
    }
  });
}

TS.run(async () => {
  const data = await TS.api('trends', {line: TS.param('line')});
  const c = TS.content();
  if (data.lines.length === 0) {
    TS.status('No finished sweep yet.');
    return;
  }
  for (const l of data.lines) {
    chart(c, l, 'eagerPct', 'Eager %');
    chart(c, l, 'compilePct', 'Compile %');
    chart(c, l, 'geomeanSpeedup', 'Geomean speedup (compiled over eager)');
  }
  TS.status('Click a point to open that sweep.');
});
