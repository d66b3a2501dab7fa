// The runs list of sealrun view: sealrund's records (GET /api/runs), filtered here, refreshed
// every two seconds. Every field is shown as text only.
(function () {
  'use strict';
  var rows = document.getElementById('rows'), count = document.getElementById('count'), status = document.getElementById('status');
  var sel = { track: document.getElementById('f-track'), agent: document.getElementById('f-agent'), state: document.getElementById('f-state') };
  var q = document.getElementById('f-q'), all = [];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function score(r) {
    if (r.metric) return r.value !== undefined && r.value !== null ? r.metric + ' ' + Number(r.value).toPrecision(4) : r.metric + ': none';
    if (r.passed !== undefined && r.passed !== null) return r.passed + '/' + r.questions;
    return '';
  }
  function took(r) {
    if (!r.started) return '';
    var end = r.finished ? Date.parse(r.finished) : Date.now(), s = Math.max(0, Math.round((end - Date.parse(r.started)) / 1000));
    return Math.floor(s / 60) + 'm ' + String(s % 60).padStart(2, '0') + 's' + (r.finished ? '' : ' so far');
  }
  function fill(s, values) {
    var have = Array.prototype.map.call(s.options, function (o) { return o.value; });
    values.forEach(function (v) { if (have.indexOf(v) < 0) { var o = el('option', null, v); o.value = v; s.appendChild(o); } });
  }
  function render() {
    var text = q.value.toLowerCase(), shown = 0;
    rows.textContent = '';
    all.forEach(function (r) {
      if ((sel.track.value && r.track !== sel.track.value) || (sel.agent.value && r.agent !== sel.agent.value) || (sel.state.value && r.state !== sel.state.value)) return;
      if (text && [r.id, r.user, r.reason, r.dispatcher].join(' ').toLowerCase().indexOf(text) < 0) return;
      shown++;
      var tr = el('tr'), a = el('a', null, r.id);
      a.href = '/runs/' + encodeURIComponent(r.id);
      var td = el('td'); td.appendChild(a); tr.appendChild(td);
      var st = el('td', 's-' + r.state, r.state);
      if (r.reason) { st.appendChild(el('div', 'reason', r.reason)); }
      if (r.waiting) { st.appendChild(el('div', 'reason', r.waiting)); }
      tr.appendChild(st);
      tr.appendChild(el('td', 'num', score(r)));
      tr.appendChild(el('td', null, r.track));
      tr.appendChild(el('td', null, r.agent));
      tr.appendChild(el('td', 'num', r.seed));
      tr.appendChild(el('td', 'num', r.queued ? new Date(r.queued).toISOString().replace('T', ' ').replace(/\.\d+Z$/, '') : ''));
      tr.appendChild(el('td', 'num', took(r)));
      tr.appendChild(el('td', null, r.user));
      rows.appendChild(tr);
    });
    if (!all.length) rows.appendChild(el('tr')).appendChild(el('td', 'muted', 'No runs yet: sealrun run queues one.')).colSpan = 9;
    count.textContent = shown + ' of ' + all.length + ' runs';
  }
  function load() {
    fetch('/api/runs', { credentials: 'same-origin', cache: 'no-store' }).then(function (resp) {
      if (!resp.ok) throw new Error('the viewer answered ' + resp.status);
      return resp.json();
    }).then(function (d) {
      all = Array.isArray(d) ? d : [];
      fill(sel.track, Array.from(new Set(all.map(function (r) { return r.track; }))).sort());
      fill(sel.agent, Array.from(new Set(all.map(function (r) { return r.agent; }))).sort());
      fill(sel.state, ['queued', 'preparing', 'running', 'grading', 'graded', 'failed', 'invalid']);
      status.className = 'muted';
      status.textContent = '';
      render();
    }).catch(function (err) {
      status.className = 'lost';
      status.textContent = ' — ' + err.message + '; trying again';
    }).then(function () { setTimeout(load, 2000); });
  }
  [sel.track, sel.agent, sel.state].forEach(function (s) { s.addEventListener('change', render); });
  q.addEventListener('input', render);
  load();
})();
