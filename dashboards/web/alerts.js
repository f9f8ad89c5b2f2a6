// Regressions and alerts: the open alerts (Query.ListAlerts) with their models, accuracy and
// performance ones (kind; a performance alert names the op whose time grew most, and each model's
// device time step); an empty state when there are none. An alert's modes are a dimension of it:
// a suspect op's one alert spans every mode the op broke, and each model says which of them it
// regressed in.
'use strict';

// ["MODE_EAGER", "MODE_COMPILE"] -> "eager, compile".
function modes(list) { return (list || []).map(TS.enumName).join(', '); }

TS.run(async () => {
  const state = TS.param('state') || 'open';
  const data = await TS.api('alerts', {state: state});
  const c = TS.content();
  if (data.alerts.length === 0) {
    c.appendChild(TS.el('p', {id: 'empty', class: 'muted'}, 'No ' + state + ' alerts.'));
    TS.status('');
    return;
  }
  for (const a of data.alerts) {
    const kind = a.kind || 'accuracy';
    const s = TS.el('section', {class: 'alert', 'data-alert': a.alertId, 'data-kind': kind,
                                'data-op': a.op || '',
                                'data-modes': (a.modes || []).map(TS.enumName).join(' ')});
    s.appendChild(TS.el('h2', {}, '#' + a.alertId + ' ' + a.severity + ' · ' + kind + ' · line ' +
                                      a.line + ' · ' + (modes(a.modes) || TS.enumName(a.mode)) +
                                      ' · ' + a.causeKind + ': ' + a.causeText));
    s.appendChild(TS.el('p', {class: 'muted'}, a.state + '; sweeps ' + a.firstSweepId + '–' + a.lastSweepId +
                                                   '; classes ' + a.archs.join(', ') +
                                                   (a.ackNote ? '; acknowledged: ' + a.ackNote : '')));
    const t = TS.el('table', {}, TS.el('thead', {}, TS.el('tr', {}, TS.el('th', {class: 'name'}, 'Model'),
        TS.el('th', {class: 'name'}, 'Class'), TS.el('th', {class: 'name'}, 'Task'),
        TS.el('th', {class: 'name'}, 'Modes'), TS.el('th', {}, 'Sweep'),
        TS.el('th', {class: 'name'}, 'Detail'))));
    const b = TS.el('tbody');
    for (const m of a.models) {
      b.appendChild(TS.el('tr', {}, TS.el('td', {class: 'name'}, TS.link(TS.url('/model', {id: m.modelId}), m.modelId)),
                          TS.el('td', {class: 'name'}, m.arch), TS.el('td', {class: 'name'}, m.task),
                          TS.el('td', {class: 'name', 'data-modes': (m.modes || []).map(TS.enumName).join(' ')},
                                modes(m.modes)),
                          TS.el('td', {}, m.sweepId), TS.el('td', {class: 'name'}, m.detail || '')));
    }
    t.appendChild(b);
    s.appendChild(t);
    c.appendChild(s);
  }
  TS.status(data.alerts.length + ' ' + state + ' alerts.');
});
