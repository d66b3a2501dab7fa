// The transcript page: renders transcript.json (embedded in the page) as a list on one time
// axis, drawing only the rows on screen. Every byte of the transcript is hostile text: it only
// ever reaches the page through textContent, never as markup. With data-live set (sealrun
// view), it follows the run, asking the server for the entries after the last it has.
(function () {
  'use strict';
  var COLLAPSED_LINES = 14, COLLAPSED_CHARS = 2400, OVERSCAN = 900;
  var t = JSON.parse(document.getElementById('transcript').textContent);
  // The terminal player (player.js) hears of the transcript and of where the reader goes.
  function tell(name, detail) { document.dispatchEvent(new CustomEvent('sealrun:' + name, { detail: detail })); }
  var live = document.body.getAttribute('data-live');
  var listEl = document.getElementById('list');
  var spacer = document.createElement('div');
  listEl.appendChild(spacer);
  var axis = document.getElementById('axis');
  var searchEl = document.getElementById('q');
  var countEl = document.getElementById('count');
  var liveEl = document.getElementById('live');
  var show = { model: true, call: true, sub: true, clock: true, failed: false };
  var items = [], heights = [], offsets = new Float64Array(1), rendered = new Map();
  var expanded = new Set(), query = '', matches = [], matchAt = -1, failAt = -1, current = -1;
  var follow = false;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // Text from a run: ANSI escapes dropped, carriage returns as line ends, other control
  // characters shown as their Unicode control pictures.
  function clean(s) {
    if (!s) return '';
    s = s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, '').replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)?/g, '');
    s = s.replace(/\r\n?/g, '\n');
    return s.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, function (c) { return String.fromCharCode(c.charCodeAt(0) === 0x7f ? 0x2421 : 0x2400 + c.charCodeAt(0)); });
  }

  function dur(ms) {
    if (ms === undefined || ms === null) return '';
    var neg = ms < 0; ms = Math.abs(ms);
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
    var out = h ? h + ':' + String(m).padStart(2, '0') + ':' + String(r).padStart(2, '0') : m + ':' + String(r).padStart(2, '0');
    return (neg ? '-' : '+') + out + '.' + String(Math.floor(ms % 1000 / 100));
  }
  function secs(ms) { return ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s'; }
  function bytes(n) {
    if (n < 1024) return n + ' B';
    var u = ['KiB', 'MiB', 'GiB'], i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < 2);
    return n.toFixed(n < 10 ? 1 : 0) + ' ' + u[i];
  }
  function num(n) { return (n || 0).toLocaleString('en-US'); }
  function ms(iso) { return iso ? Date.parse(iso) : NaN; }
  function at(iso) { var s = ms(t.run.started), x = ms(iso); return isNaN(s) || isNaN(x) ? 0 : x - s; }

  // --- what a row holds ---

  function group(ev) {
    if (ev.kind === 'model') return 'model';
    if (ev.kind === 'call') return 'call';
    if (ev.clock) return 'clock';
    return 'sub';
  }

  function clockItems() {
    var r = t.run, out = [];
    if (r.started) out.push({ clock: true, kind: 'start', at_ms: 0, seq: -4, text: 'the clock starts' + (r.wall ? ': ' + r.wall + ' of wall time' : '') + (r.call_limit ? ', at most ' + r.call_limit + ' a compute call' : '') });
    if (r.reserve_at) out.push({ clock: true, kind: 'reserve', at_ms: at(r.reserve_at), seq: 1e12, text: 'the reserve window opens' + (r.reserve ? ' (' + r.reserve + ' before the deadline)' : '') + ': compute is refused from here; submit, promote and finalize still work' });
    if (r.deadline) out.push({ clock: true, kind: 'deadline', at_ms: at(r.deadline), seq: 1e12 + 1, text: 'the deadline' });
    if (r.finished || (r.state && !r.live)) {
      var bad = r.state === 'invalid' || r.state === 'failed';
      out.push({ clock: true, kind: 'end', at_ms: r.finished ? at(r.finished) : 0, seq: 1e12 + 2, failed: r.state === 'invalid',
        text: 'the end: ' + r.state + (r.reason ? ' — ' + r.reason : '') + (r.result ? '; ' + r.result : ''), bad: bad });
    }
    return out;
  }

  function rebuild() {
    var all = t.events.concat(clockItems());
    all.sort(function (a, b) { return a.at_ms - b.at_ms || a.seq - b.seq; });
    items = all.filter(function (ev) { return show[group(ev)] && (!show.failed || ev.failed); });
    heights = items.map(estimate);
    layout();
    for (var r of rendered.values()) r.remove();
    rendered.clear();
    if (query) find(query, false);
    draw();
    drawAxis();
  }

  function textsOf(ev) {
    var out = [];
    if (ev.text) out.push(ev.text);
    var x = ev.model;
    if (x) {
      (x.added || []).concat(x.output || []).forEach(function (m) { (m.parts || []).forEach(function (p) { out.push(p.name || '', p.text || '', p.tail || ''); }); });
      if (x.note) out.push(x.note);
      if (x.refused) out.push(x.refused);
    }
    if (ev.call) { out.push(ev.call.argv.join(' '), ev.call.text || '', ev.call.tail || '', ev.call.error || ''); }
    if (ev.submission) out.push(ev.submission.reason || '', ev.submission.candidate || '');
    return out;
  }
  function hay(ev) { if (ev._hay === undefined) ev._hay = textsOf(ev).join('\n').toLowerCase(); return ev._hay; }

  function lines(s) {
    if (!s) return 0;
    var n = 1, w = 0, max = Math.max(40, Math.floor((listEl.clientWidth || 900) / 7.6));
    for (var i = 0; i < s.length && n < 400; i++) {
      if (s.charCodeAt(i) === 10 || ++w > max) { n++; w = 0; }
    }
    return n;
  }
  function estimate(ev) {
    var h = 44, key = ev.seq;
    function blk(s, k) { var n = lines(s); h += 20 + 17.5 * (expanded.has(key + ':' + k) ? n : Math.min(n, COLLAPSED_LINES)) + (n > COLLAPSED_LINES ? 24 : 0); }
    if (ev.model) {
      var k = 0;
      (ev.model.added || []).concat(ev.model.output || []).forEach(function (m) { h += 22; (m.parts || []).forEach(function (p) { blk(p.text, k++); }); });
      h += 40;
    }
    if (ev.call) blk(ev.call.text, 'o');
    return h;
  }

  function layout() {
    offsets = new Float64Array(items.length + 1);
    for (var i = 0; i < items.length; i++) offsets[i + 1] = offsets[i] + heights[i] + 6;
    spacer.style.height = (offsets[items.length] || 0) + 'px';
    if (!items.length) {
      spacer.textContent = '';
      spacer.appendChild(el('div', 'empty', t.run.live ? 'Nothing has happened yet; this page follows the run.' : 'Nothing to show with these filters.'));
    } else if (spacer.firstChild) spacer.textContent = '';
  }

  function indexAt(y) {
    var lo = 0, hi = items.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (offsets[mid] <= y) lo = mid; else hi = mid - 1; }
    return Math.max(0, lo);
  }

  // --- drawing the rows on screen ---

  function listTop() { return listEl.getBoundingClientRect().top + window.scrollY; }

  function draw() {
    if (!items.length) return;
    var top = window.scrollY - listTop(), bottom = top + window.innerHeight;
    var first = indexAt(Math.max(0, top - OVERSCAN)), last = indexAt(bottom + OVERSCAN);
    for (var entry of rendered) {
      if (entry[0] < first || entry[0] > last) { entry[1].remove(); rendered.delete(entry[0]); }
    }
    var changed = false;
    for (var i = first; i <= last; i++) {
      var r = rendered.get(i);
      if (!r) { r = row(items[i], i); rendered.set(i, r); listEl.appendChild(r); }
      r.style.top = offsets[i] + 'px';
      var h = r.offsetHeight;
      if (h && Math.abs(h - heights[i]) > 1) { heights[i] = h; changed = true; }
    }
    if (changed) relayout(first);
  }

  // relayout keeps the row at the top of the screen where it was while heights above it change.
  function relayout(first) {
    var top = window.scrollY - listTop();
    var anchor = indexAt(Math.max(0, top)), delta = top - offsets[anchor];
    layout();
    for (var entry of rendered) entry[1].style.top = offsets[entry[0]] + 'px';
    if (top > 0 && !follow) window.scrollTo(0, listTop() + offsets[anchor] + delta);
    if (first !== undefined) {
      var bottom = window.scrollY - listTop() + window.innerHeight;
      if (indexAt(bottom + OVERSCAN) > Math.max.apply(null, Array.from(rendered.keys()))) requestAnimationFrame(draw);
    }
  }

  function rerow(i) {
    var old = rendered.get(i);
    if (!old) return;
    var r = row(items[i], i);
    r.style.top = old.style.top;
    old.replaceWith(r);
    rendered.set(i, r);
    heights[i] = r.offsetHeight;
    relayout();
    draw();
  }

  function highlight(parent, text) {
    if (!query) { parent.textContent = text; return; }
    var low = text.toLowerCase(), i = 0, j;
    while ((j = low.indexOf(query, i)) >= 0) {
      parent.appendChild(document.createTextNode(text.slice(i, j)));
      parent.appendChild(el('mark', null, text.slice(j, j + query.length)));
      i = j + query.length;
    }
    parent.appendChild(document.createTextNode(text.slice(i)));
  }

  // block is a text of the run, collapsed to its first lines until asked for more; a text the
  // transcript cut shows its head, the bytes between, and its tail.
  function block(parent, cls, key, text, tail, cut, where) {
    text = clean(text); tail = clean(tail);
    var open = expanded.has(key) || (query && (text + tail).toLowerCase().indexOf(query) >= 0);
    var shown = text, more = 0;
    if (!open) {
      var nl = -1, n = 0;
      while (n < COLLAPSED_LINES && (nl = text.indexOf('\n', nl + 1)) >= 0) n++;
      var end = n >= COLLAPSED_LINES ? nl : text.length;
      end = Math.min(end, COLLAPSED_CHARS);
      if (end < text.length || tail) { shown = text.slice(0, end); more = text.length - end + tail.length; }
    }
    var pre = el('pre', cls);
    highlight(pre, shown);
    parent.appendChild(pre);
    if (open && cut) parent.appendChild(el('div', 'pk', '… ' + num(cut) + ' bytes not shown here; the whole text is in ' + (where || 'the body beside this page') + ' …'));
    if (open && tail) { var p2 = el('pre', cls); highlight(p2, tail); parent.appendChild(p2); }
    if (more || open && text.length > COLLAPSED_CHARS) {
      var b = el('button', 'more', open ? 'show less' : 'show all (' + num(more) + ' more characters' + (cut ? ', and ' + num(cut) + ' bytes cut' : '') + ')');
      b.setAttribute('data-key', key);
      parent.appendChild(b);
    }
  }

  function pretty(s) {
    if (!s) return '';
    try {
      var v = JSON.parse(s);
      if (v && typeof v === 'object') {
        var cmd = v.command !== undefined ? v.command : v.cmd;
        var head = cmd !== undefined ? '$ ' + (Array.isArray(cmd) ? cmd.join(' ') : String(cmd)) + '\n' : '';
        return head + JSON.stringify(v, null, 2);
      }
    } catch (e) { /* not JSON: shown as it is */ }
    return s;
  }

  function message(parent, m, key, where) {
    var box = el('div', 'msg');
    box.appendChild(el('div', 'role ' + m.role, m.role));
    (m.parts || []).forEach(function (p, k) {
      var pk = key + ':' + k;
      switch (p.type) {
        case 'text':
          if (p.name) box.appendChild(el('div', 'pk', p.name));
          block(box, null, pk, p.text, p.tail, p.cut, where);
          break;
        case 'reasoning':
          box.appendChild(el('div', 'pk', 'reasoning' + (p.name ? ' (' + p.name + ', not readable)' : '')));
          if (p.text) block(box, 'reasoning', pk, p.text, p.tail, p.cut, where);
          break;
        case 'tool_call':
          box.appendChild(el('div', 'pk', 'calls ' + (p.name || 'a tool') + (p.id ? ' · ' + p.id : '')));
          block(box, 'call', pk, p.cut ? p.text : pretty(p.text), p.tail, p.cut, where);
          break;
        case 'tool_result':
          box.appendChild(el('div', 'pk' + (p.error ? ' bad' : ''), 'result' + (p.id ? ' of ' + p.id : '') + (p.error ? ' (an error)' : '')));
          block(box, p.error ? 'err' : null, pk, p.text, p.tail, p.cut, where);
          break;
        case 'image':
          box.appendChild(el('div', 'pk', '[' + (p.name || 'image') + ']'));
          break;
        default:
          box.appendChild(el('div', 'pk', p.name || p.type));
          block(box, null, pk, p.text, p.tail, p.cut, where);
      }
    });
    parent.appendChild(box);
  }

  function bodyLine(label, b) {
    if (!b || !b.path) return '';
    var s = label + ' ' + bytes(b.bytes) + ' ' + b.state;
    if (b.kept) s += ' (the log keeps the first ' + bytes(b.kept) + ')';
    return s;
  }

  function row(ev, i) {
    var g = group(ev), r = el('div', 'row k-' + g + (ev.failed || ev.bad ? ' failed' : '') + (i === current ? ' current' : ''));
    var hd = el('div', 'hd');
    r.appendChild(hd);
    var key = String(ev.seq);
    if (ev.model) {
      var x = ev.model;
      hd.appendChild(el('span', 'tag', 'model #' + x.n));
      hd.appendChild(el('span', 'at', dur(ev.at_ms)));
      hd.appendChild(el('span', x.status >= 400 || x.refused ? 'bad' : null, x.method + ' ' + x.path + ' → ' + x.status));
      hd.appendChild(el('span', null, secs(x.latency_ms)));
      if (x.usage && (x.usage.prompt || x.usage.completion)) hd.appendChild(el('span', null, num(x.usage.prompt) + (x.usage.cached_prompt ? ' (' + num(x.usage.cached_prompt) + ' cached)' : '') + ' → ' + num(x.usage.completion) + ' tokens' + (x.usage.reasoning ? ' (' + num(x.usage.reasoning) + ' reasoning)' : '') + (x.cost ? ', ' + money(x.cost) : '')));
      if (x.tries && x.tries.length > 1) hd.appendChild(el('span', 'bad', x.tries.length + ' tries, ' + secs(x.provider_lost_ms || 0) + ' lost to the provider'));
      if (x.refused) r.appendChild(el('div', 'bad', 'refused by the gateway: ' + x.refused));
      if (x.error) r.appendChild(el('div', 'bad', x.error));
      if (x.messages || (x.added && x.added.length)) {
        var s = 'request: ' + num(x.messages) + ' message' + (x.messages === 1 ? '' : 's');
        if (x.shared) s += '; the first ' + num(x.shared) + ' as in model #' + x.extends;
        if (x.kept) s += (x.shared ? ', then its' : '; model #' + x.extends + "'s") + ' last ' + num(x.kept) + ' (' + num(x.dropped) + ' before them left out)';
        if (x.shared || x.kept) s += ', then ' + (x.added.length ? 'these' : 'nothing new') + ':';
        r.appendChild(el('div', 'sub', s));
      }
      (x.added || []).forEach(function (m, k) { message(r, m, key + ':a' + k, x.request && x.request.path); });
      if (x.tools && x.tools.length) r.appendChild(el('div', 'sub', 'tools offered: ' + x.tools.join(', ')));
      if (x.output && x.output.length) {
        r.appendChild(el('div', 'sub', 'answer' + (x.stop ? ' (' + x.stop + ')' : '') + ':'));
        x.output.forEach(function (m, k) { message(r, m, key + ':o' + k, x.response && x.response.path); });
      }
      if (x.note) r.appendChild(el('div', 'sub bad', x.note));
      var bl = [bodyLine('request', x.request), bodyLine('response', x.response)].filter(Boolean).join(' · ');
      if (bl) r.appendChild(el('div', 'sub', bl));
    } else if (ev.call) {
      var c = ev.call;
      hd.appendChild(el('span', 'tag', 'call ' + c.n));
      hd.appendChild(el('span', 'at', dur(ev.at_ms)));
      var cmd = el('span', null);
      highlight(cmd, '$ ' + clean(c.argv.join(' ')));
      hd.appendChild(cmd);
      var st = c.status === 'exited' ? 'exit ' + c.exit : c.status + (c.exit ? ', exit ' + c.exit : '');
      if (c.limit_hit) st = 'killed at its limit of ' + c.limit;
      if (c.oom_killed) st += ', killed by the OOM killer';
      if (c.pids_limit_ended) st += ', ended at its pids limit';
      hd.appendChild(el('span', ev.failed ? 'bad' : null, st));
      hd.appendChild(el('span', null, secs(c.duration_ms)));
      if (c.memory_peak) hd.appendChild(el('span', 'at', bytes(c.memory_peak) + ' peak'));
      r.appendChild(el('div', 'sub', 'in ' + c.cwd + (c.limit ? ' · limit ' + c.limit : '')));
      if (c.error) r.appendChild(el('div', 'bad', c.error));
      if (c.text || c.tail) block(r, null, key + ':o', c.text, c.tail, c.cut, c.output.path);
      var ol = bodyLine('output', c.output);
      if (ol) r.appendChild(el('div', 'sub', ol));
    } else {
      var label = ev.clock ? ev.kind : ev.kind.replace('_', ' ');
      hd.appendChild(el('span', 'tag', label));
      hd.appendChild(el('span', 'at', dur(ev.at_ms)));
      var tx = el('span', ev.failed || ev.bad ? 'bad' : null);
      highlight(tx, clean(ev.text || ''));
      hd.appendChild(tx);
      if (ev.submission && ev.submission.best !== undefined && ev.failed) r.appendChild(el('div', 'sub bad', 'below the best validation score before it (' + ev.submission.best.toFixed(1) + '%)'));
    }
    return r;
  }

  // --- header, search, failures, the time axis ---

  // money writes an amount in the run's currency: four decimals, six below a hundredth.
  function money(v) {
    var c = t.run.price ? ' ' + t.run.price.currency : '';
    return (v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(6) : v.toFixed(4)) + c;
  }

  function header() {
    var h = document.getElementById('head'), r = t.run, tt = t.totals, b = t.bodies;
    h.textContent = '';
    h.appendChild(el('h1', null, 'Run ' + r.id));
    var f = el('div', 'facts');
    function fact(k, v, cls) { var s = el('span', cls); s.appendChild(el('span', null, k + ' ')); s.appendChild(el('b', null, v)); f.appendChild(s); }
    fact('track', r.track + (r.track_version ? ' ' + r.track_version : ''));
    fact('agent', r.agent);
    fact('seed', r.seed);
    if (r.scaffold && !/^human\//.test(r.agent || '')) fact('scaffold', r.scaffold); else if (r.scaffold) fact('at the terminal', 'a person (no scaffold)');
    fact('state', r.state + (r.reason ? ' — ' + r.reason : ''), 'state-' + r.state);
    if (r.result) fact('result', r.result);
    if (r.started) fact('started', new Date(r.started).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'));
    if (r.finished) fact('took', secs(ms(r.finished) - ms(r.started)));
    fact('model', num(tt.exchanges) + ' requests' + (tt.refused ? ', ' + tt.refused + ' refused' : '') + (tt.retries ? ', ' + tt.retries + ' retries' : '') + (tt.provider_lost_ms ? ', ' + secs(tt.provider_lost_ms) + ' lost' : ''));
    fact('tokens', num(tt.prompt_tokens) + ' in' + (tt.cached_tokens ? ' (' + num(tt.cached_tokens) + ' cached)' : '') + ', ' + num(tt.completion_tokens) + ' out' + (tt.reasoning_tokens ? ' (' + num(tt.reasoning_tokens) + ' reasoning)' : '') + (r.max_tokens ? ' of max ' + num(r.max_tokens) : ''));
    if (r.price) fact('cost', money(tt.cost || 0) + (r.max_cost ? ' of max ' + r.max_cost : '') + ' (prices of ' + r.price.taken + ')');
    fact('compute', num(tt.calls) + ' calls' + (tt.failed_calls ? ', ' + tt.failed_calls + ' failed' : ''));
    fact('submissions', num(tt.submissions));
    h.appendChild(f);
    var bl = 'bodies: ' + b.intact + ' intact' + (b.withheld ? ', ' + b.withheld + ' withheld' : '') + (b.missing ? ', ' + b.missing + ' missing' : '') + (b.altered ? ', ' + b.altered + ' ALTERED' : '') +
      ' — when this page was made, each against the SHA-256 its audit entry carries (audit head ' + (r.audit_head || '').slice(0, 16) + '…, signed in the attestation); check again with sealrun verify --transcript';
    h.appendChild(el('div', 'bodies' + (b.altered || b.missing ? ' bad' : ''), bl));
  }

  function find(q, jump) {
    query = q.toLowerCase();
    matches = [];
    if (query) items.forEach(function (ev, i) { if (hay(ev).indexOf(query) >= 0) matches.push(i); });
    matchAt = -1;
    countEl.textContent = query ? matches.length + ' match' + (matches.length === 1 ? '' : 'es') : '';
    for (var r of rendered.values()) r.remove();
    rendered.clear();
    heights = items.map(estimate);
    layout();
    if (jump && matches.length) step(1); else draw();
  }

  function step(dir) {
    if (!matches.length) return;
    matchAt = (matchAt + dir + matches.length) % matches.length;
    countEl.textContent = (matchAt + 1) + ' of ' + matches.length;
    goTo(matches[matchAt]);
  }

  function nextFailure() {
    var n = items.length;
    for (var k = 1; k <= n; k++) {
      var i = (failAt + k) % n;
      if (items[i].failed || items[i].bad) { failAt = i; goTo(i); return; }
    }
    countEl.textContent = 'no failures';
  }

  function goTo(i) {
    follow = false;
    var old = rendered.get(current);
    if (old) old.classList.remove('current');
    current = i;
    window.scrollTo(0, listTop() + offsets[i] - 110);
    draw();
    var r = rendered.get(i);
    if (r) { r.classList.add('current'); window.scrollTo(0, listTop() + offsets[i] - 110); }
    drawAxis();
  }

  function span() {
    var end = 0;
    t.events.forEach(function (ev) { end = Math.max(end, ev.at_ms + (ev.call ? ev.call.duration_ms : 0)); });
    if (t.run.deadline) end = Math.max(end, at(t.run.deadline));
    if (t.run.finished) end = Math.max(end, at(t.run.finished));
    return Math.max(end, 1000);
  }

  function drawAxis() {
    var w = axis.clientWidth, h = 64, dpr = window.devicePixelRatio || 1;
    axis.width = w * dpr; axis.height = h * dpr;
    var g = axis.getContext('2d');
    g.scale(dpr, dpr);
    g.fillStyle = '#fff'; g.fillRect(0, 0, w, h);
    var L = 70, W = w - L - 12, S = span();
    function x(v) { return L + W * Math.max(0, v) / S; }
    g.font = '11px system-ui, sans-serif'; g.fillStyle = '#666';
    g.fillText('model', 6, 16); g.fillText('calls', 6, 34); g.fillText('submits', 6, 50);
    if (t.run.reserve_at) { g.fillStyle = '#f2f3f4'; g.fillRect(x(at(t.run.reserve_at)), 4, x(at(t.run.deadline)) - x(at(t.run.reserve_at)), h - 8); }
    // Ticks: a round step giving at most eight labels.
    var steps = [1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600], step = 3600;
    for (var k = 0; k < steps.length; k++) { if (S / 1000 / steps[k] <= 8) { step = steps[k]; break; } }
    g.fillStyle = '#999'; g.strokeStyle = '#eee';
    for (var v = 0; v * 1000 <= S; v += step) {
      var tx = x(v * 1000);
      g.beginPath(); g.moveTo(tx, 2); g.lineTo(tx, h - 12); g.stroke();
      if (tx < w - 40) g.fillText(dur(v * 1000).replace(/\.\d$/, ''), tx + 2, h - 2);
    }
    t.events.forEach(function (ev) {
      var bad = ev.failed;
      if (ev.model) { g.fillStyle = bad ? '#c0392b' : '#7d3c98'; g.fillRect(x(ev.at_ms), 8, Math.max(1.5, x(ev.at_ms + ev.model.latency_ms) - x(ev.at_ms)), 10); }
      else if (ev.call) { g.fillStyle = bad ? '#c0392b' : '#1f5f8b'; g.fillRect(x(ev.at_ms), 26, Math.max(2, x(ev.at_ms + ev.call.duration_ms) - x(ev.at_ms)), 10); }
      else { g.fillStyle = bad ? '#c0392b' : '#1e8449'; g.beginPath(); g.arc(x(ev.at_ms), 46, 3.5, 0, 7); g.fill(); }
    });
    if (current >= 0 && items[current]) { g.fillStyle = '#f1c40f'; g.fillRect(x(items[current].at_ms) - 1, 2, 2, h - 4); }
  }

  axis.addEventListener('click', function (e) {
    var w = axis.clientWidth, L = 70, W = w - L - 12, v = (e.offsetX - L) / W * span(), best = -1, d = Infinity;
    items.forEach(function (ev, i) { var dd = Math.abs(ev.at_ms - v); if (dd < d) { d = dd; best = i; } });
    if (best >= 0) goTo(best);
    tell('seek', Math.max(0, v));
  });

  listEl.addEventListener('click', function (e) {
    var b = e.target.closest('button.more');
    if (!b) {
      var row = e.target.closest('.row');
      for (var en of rendered) if (row && en[1] === row && items[en[0]]) { tell('seek', items[en[0]].at_ms); break; }
      return;
    }
    var key = b.getAttribute('data-key'), r = b.closest('.row');
    if (expanded.has(key)) expanded.delete(key); else expanded.add(key);
    for (var entry of rendered) if (entry[1] === r) { rerow(entry[0]); break; }
  });

  var pending = 0;
  searchEl.addEventListener('input', function () { clearTimeout(pending); pending = setTimeout(function () { find(searchEl.value, true); }, 180); });
  searchEl.addEventListener('keydown', function (e) { if (e.key === 'Enter') { e.preventDefault(); clearTimeout(pending); if (searchEl.value.toLowerCase() !== query) find(searchEl.value, true); else step(e.shiftKey ? -1 : 1); } });
  document.getElementById('next').addEventListener('click', function () { step(1); });
  document.getElementById('prev').addEventListener('click', function () { step(-1); });
  document.getElementById('fail').addEventListener('click', nextFailure);
  document.querySelectorAll('#bar input[type=checkbox]').forEach(function (c) {
    c.addEventListener('change', function () { show[c.name] = c.checked; rebuild(); });
  });
  var ticking = false;
  window.addEventListener('scroll', function () {
    if (live) follow = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    if (!ticking) { ticking = true; requestAnimationFrame(function () { ticking = false; draw(); }); }
  }, { passive: true });
  window.addEventListener('resize', function () { heights = items.map(estimate); layout(); for (var r of rendered.values()) r.remove(); rendered.clear(); draw(); drawAxis(); });

  // --- following a live run ---

  function merge(d) {
    t.run = d.run; t.totals = d.totals; t.bodies = d.bodies; t.through = d.through;
    var have = new Set(t.events.map(function (e) { return e.seq; }));
    (d.events || []).forEach(function (e) { if (!have.has(e.seq)) t.events.push(e); });
  }

  function poll() {
    var url = live + (live.indexOf('?') >= 0 ? '&' : '?') + 'from=' + t.through + '&wait=25';
    fetch(url, { credentials: 'same-origin', cache: 'no-store' }).then(function (resp) {
      if (!resp.ok) throw new Error('the server answered ' + resp.status);
      return resp.json();
    }).then(function (d) {
      var atEnd = follow || window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
      merge(d);
      header();
      rebuild();
      tell('transcript', t);
      if (atEnd && items.length) { follow = true; window.scrollTo(0, listTop() + offsets[items.length]); draw(); }
      liveEl.className = 'live';
      liveEl.textContent = t.run.live ? 'live: following the run (' + t.run.state + ')' : 'the run has ended';
      if (t.run.live) setTimeout(poll, 0);
    }).catch(function (err) {
      liveEl.className = 'live lost';
      liveEl.textContent = 'connection lost (' + err.message + '); trying again';
      setTimeout(poll, 1000);
    });
  }

  header();
  rebuild();
  tell('transcript', t);
  if (live) {
    liveEl.textContent = t.run.live ? 'live: following the run (' + t.run.state + ')' : 'the run has ended';
    if (t.run.live) { follow = true; window.scrollTo(0, document.body.scrollHeight); poll(); }
  }
  document.body.setAttribute('data-ready', '1');
  if (window.performance && performance.mark) performance.mark('sealrun-ready');
})();
