// One model (?id=): its status per mode across its sweeps, then for the newest sweep each mode's
// error, the ops that ran through the CPU fallback, the graph breaks, and the reference and
// device loss curves on one chart.
'use strict';

// A ratio as the references table prints it ("NaN" and absent: "-").
function ratio(v) {
  const n = Number(v);
  return v === undefined || v === null || !Number.isFinite(n) ? '-' : n.toPrecision(3);
}

// Where the references came from (a stored bundle or computed), and each mode against our
// reference and every reference from elsewhere (a GPU's), with whether they agree.
function referencesSection(result) {
  const sec = section('References');
  const use = result.references || {};
  sec.appendChild(TS.el('p', {id: 'references-source'},
      'Our CPU reference: ' + (use.source || 'none') +
      (use.contentDigest ? ' (bundle ' + use.contentDigest.slice(0, 12) + ')' : '')));
  if (use.warning) sec.appendChild(TS.el('pre', {class: 'error-text'}, use.warning));
  const modes = result.modes.filter(v => (v.references || []).length > 0);
  if (modes.length === 0) {
    sec.appendChild(TS.el('p', {class: 'muted'}, 'No reference from elsewhere for this run.'));
    return;
  }
  const t = TS.el('table', {id: 'references'}, TS.el('thead', {}, TS.el('tr', {},
      TS.el('th', {class: 'name'}, 'Mode'), TS.el('th', {class: 'name'}, 'Reference'),
      TS.el('th', {class: 'name'}, 'Device'), TS.el('th', {}, 'Verdict'),
      TS.el('th', {}, 'rmse ratio'), TS.el('th', {}, 'loss gap ratio'),
      TS.el('th', {class: 'name'}, 'Agrees with ours'))));
  const b = TS.el('tbody');
  for (const v of modes) {
    const mode = TS.enumName(v.mode) + (v.referenceInQuestion ? ' (reference in question)' : '');
    b.appendChild(TS.el('tr', {}, TS.el('td', {class: 'name'}, mode),
        TS.el('td', {class: 'name'}, 'cpu (ours)'), TS.el('td', {class: 'name'}, 'cpu'),
        TS.el('td', {}, TS.enumName(v.status)), TS.el('td', {}, ratio(v.rmseRatio)),
        TS.el('td', {}, ratio(v.maxLossGapRatio)), TS.el('td', {class: 'name'}, '')));
    for (const c of v.references) {
      const agrees = c.agrees ? 'yes' : 'no: ' + ratio(c.agreement) + ' > noise ' + ratio(c.noise);
      b.appendChild(TS.el('tr', {class: c.agrees ? '' : 'fail'}, TS.el('td', {class: 'name'}, ''),
          TS.el('td', {class: 'name'}, c.label + ' (' + (c.implementation || '') + ', ' +
                (c.dtype || '') + ')'),
          TS.el('td', {class: 'name'}, c.device || ''), TS.el('td', {}, TS.enumName(c.status)),
          TS.el('td', {}, ratio(c.rmseRatio)), TS.el('td', {}, ratio(c.maxLossGapRatio)),
          TS.el('td', {class: 'name'}, agrees)));
    }
  }
  t.appendChild(b);
  sec.appendChild(t);
}

function section(title) {
  const s = TS.el('section', {});
  s.appendChild(TS.el('h2', {}, title));
  TS.content().appendChild(s);
  return s;
}

function lossChart(box, mode) {
  const ref = mode.lossReference.map(Number), dev = mode.lossDevice.map(Number);
  const steps = Math.max(ref.length, dev.length);
  const labels = Array.from({length: steps}, (_, i) => i + 1);
  const canvas = TS.el('canvas', {id: 'loss-chart'});
  box.appendChild(TS.el('div', {class: 'chart'}, canvas));
  new Chart(canvas, {
    type: 'line',
    data: {labels: labels, datasets: [
      {label: 'reference (CPU fp32)', data: ref, borderColor: '#1f77b4', backgroundColor: '#1f77b4'},
      {label: 'device', data: dev, borderColor: '#d62728', backgroundColor: '#d62728'}]},
    options: {animation: false, maintainAspectRatio: false,
              scales: {x: {title: {display: true, text: 'step'}},
                       y: {title: {display: true, text: 'loss'}}}}
  });
}

TS.run(async () => {
  const id = TS.param('id');
  if (!id) {
    TS.status('Search a model id above.');
    return;
  }
  const h = await TS.api('model', {id: id});
  document.getElementById('title').textContent = h.modelId;
  TS.content().appendChild(TS.el('p', {id: 'identity'}, 'Task ' + h.task + ' · class ',
      TS.link(TS.url('/class', {arch: h.arch}), h.arch), ' · family ' + h.family));

  const hist = section('Status per mode across sweeps');
  const modes = ['MODE_EAGER', 'MODE_COMPILE', 'MODE_TRAIN'];
  const table = TS.el('table', {id: 'history'});
  const head = TS.el('tr', {}, TS.el('th', {class: 'name'}, 'Sweep'), TS.el('th', {class: 'name'}, 'Profile'));
  for (const m of modes) head.appendChild(TS.el('th', {class: 'name'}, TS.enumName(m)));
  head.appendChild(TS.el('th', {}, 'OpCov %'));
  table.appendChild(TS.el('thead', {}, head));
  const body = TS.el('tbody');
  for (const rec of h.sweeps) {
    const tr = TS.el('tr', {'data-sweep': rec.sweep.sweepId});
    tr.appendChild(TS.el('td', {class: 'name'},
                         TS.link(TS.url('/classes', {sweep: rec.sweep.sweepId}), rec.sweep.sweepId + ' ' + rec.sweep.name)));
    tr.appendChild(TS.el('td', {class: 'name'}, rec.sweep.profile));
    for (const m of modes) {
      const v = rec.result.modes.find(x => x.mode === m);
      const s = v ? TS.enumName(v.status) : '';
      tr.appendChild(TS.el('td', {class: 'name ' + (s === 'pass' ? 'status-pass' : 'status-fail')}, s));
    }
    const oc = 100 * TS.num(rec.result.opcovRatio);
    tr.appendChild(TS.el('td', {'data-value': oc}, TS.pct(oc)));
    body.appendChild(tr);
  }
  table.appendChild(body);
  hist.appendChild(table);
  if (h.sweeps.length === 0) {
    TS.status('No sweep recorded this model.');
    return;
  }

  const newest = h.sweeps[0];
  const errs = section('Errors in sweep ' + newest.sweep.sweepId);
  let any = false;
  for (const v of newest.result.modes) {
    if (!v.error) continue;
    any = true;
    errs.appendChild(TS.el('h3', {}, TS.enumName(v.mode) + ': ' + TS.enumName(v.status)));
    errs.appendChild(TS.el('pre', {class: 'error-text'}, v.error));
  }
  if (!any) errs.appendChild(TS.el('p', {class: 'muted'}, 'No errors.'));

  const fb = section('Fallback ops');
  const fallback = newest.result.ops.filter(o => !o.native);
  if (fallback.length === 0) fb.appendChild(TS.el('p', {class: 'muted'}, 'Every op ran natively.'));
  else {
    const t = TS.el('table', {id: 'fallback'}, TS.el('thead', {}, TS.el('tr', {},
        TS.el('th', {class: 'name'}, 'Op'), TS.el('th', {}, 'Calls'), TS.el('th', {}, 'ms'))));
    const b = TS.el('tbody');
    for (const o of fallback) {
      b.appendChild(TS.el('tr', {}, TS.el('td', {class: 'name'}, o.op), TS.el('td', {}, TS.num(o.calls)),
                          TS.el('td', {}, TS.num(o.ms).toFixed(2))));
    }
    t.appendChild(b);
    fb.appendChild(t);
  }

  const gb = section('Graph breaks');
  const compile = newest.result.modes.find(x => x.mode === 'MODE_COMPILE');
  if (!compile || compile.breakReasons.length === 0) gb.appendChild(TS.el('p', {class: 'muted'}, 'None.'));
  else {
    const ul = TS.el('ul', {id: 'breaks'});
    for (const r of compile.breakReasons) ul.appendChild(TS.el('li', {}, r));
    gb.appendChild(ul);
  }

  referencesSection(newest.result);

  const lc = section('Loss curves (train)');
  const train = newest.result.modes.find(x => x.mode === 'MODE_TRAIN');
  if (!train || (train.lossReference.length === 0 && train.lossDevice.length === 0)) {
    lc.appendChild(TS.el('p', {class: 'muted'}, 'No training run recorded a loss curve.'));
  } else {
    lossChart(lc, train);
  }
  TS.status('');
});
