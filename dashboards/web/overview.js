// Overview: the newest sweep of each profile line as the seed's table (task, models, Eager %,
// Mean OpCov %, Compile %, then Total and the class-weighted total), each cell with its change
// since the line's previous sweep, each task linking to the class view.
'use strict';

const COLUMNS = [['models', 'Models', false], ['eagerPct', 'Eager %', true],
                 ['opcovPct', 'Mean OpCov %', true], ['compilePct', 'Compile %', true]];

function deltaSpan(now, before, pct) {
  if (before === undefined) return null;
  const d = now - before;
  const text = pct ? (d >= 0 ? '+' : '') + d.toFixed(1) : (d >= 0 ? '+' : '') + String(d);
  const cls = Math.abs(d) < (pct ? 0.05 : 0.5) ? 'delta' : (d > 0 ? 'delta up' : 'delta down');
  return TS.el('span', {class: cls, 'data-delta': d}, text);
}

function row(r, prev, sweepId, kind) {
  const tr = TS.el('tr', {'data-group': r.group, class: kind ? 'total' : null});
  const name = kind ? TS.el('td', {class: 'name'}, r.group)
                    : TS.el('td', {class: 'name'},
                            TS.link(TS.url('/classes', {sweep: sweepId, task: r.group}), r.group));
  tr.appendChild(name);
  for (const [field, , pct] of COLUMNS) {
    const v = TS.num(r[field]);
    const td = TS.el('td', {'data-field': field, 'data-value': v},
                     TS.el('span', {class: 'value'}, pct ? TS.pct(v) : String(v)));
    const d = deltaSpan(v, prev ? TS.num(prev[field]) : undefined, pct);
    if (d) td.appendChild(d);
    tr.appendChild(td);
  }
  return tr;
}

function lineTable(l) {
  const box = TS.el('section', {class: 'line', 'data-line': l.line, 'data-sweep': l.sweep.sweepId});
  const prevNote = l.previous ? 'changes since sweep ' + l.previous.sweepId + ' (' + l.previous.name + ')'
                              : 'no previous sweep of this line';
  box.appendChild(TS.el('h2', {}, 'Line ' + l.line + ' — sweep ' + l.sweep.sweepId + ' (' +
                                      l.sweep.name + ', ' + l.sweep.profile + ', ' + l.sweep.state + ')'));
  box.appendChild(TS.el('p', {class: 'muted'}, TS.num(l.sweep.modelsRecorded) + ' models recorded; ' +
                                                    prevNote + '. ',
                        TS.link(TS.url('/classes', {sweep: l.sweep.sweepId}), 'All classes')));
  const prevRows = {};
  if (l.previousSummary) {
    for (const r of l.previousSummary.rows) prevRows[r.group] = r;
  }
  const table = TS.el('table', {class: 'summary'});
  const head = TS.el('tr', {}, TS.el('th', {class: 'name'}, 'Task'));
  for (const [, title] of COLUMNS) head.appendChild(TS.el('th', {}, title));
  table.appendChild(TS.el('thead', {}, head));
  const body = TS.el('tbody');
  for (const r of l.summary.rows) body.appendChild(row(r, prevRows[r.group], l.sweep.sweepId, null));
  table.appendChild(body);
  const foot = TS.el('tfoot');
  foot.appendChild(row(l.summary.total, l.previousSummary ? l.previousSummary.total : null, 0, 'total'));
  foot.appendChild(row(l.summary.classWeighted,
                       l.previousSummary ? l.previousSummary.classWeighted : null, 0, 'total'));
  table.appendChild(foot);
  box.appendChild(table);
  box.appendChild(TS.el('p', {class: 'muted'}, 'Class-weighted: the mean over ' +
                                                   TS.num(l.summary.classes) + ' classes.'));
  return box;
}

TS.run(async () => {
  const data = await TS.api('overview');
  const c = TS.content();
  if (data.lines.length === 0) {
    TS.status('No sweep yet.');
    return;
  }
  for (const l of data.lines) c.appendChild(lineTable(l));
  TS.status('');
});
