// The terminal player of a human run's page: plays the run's recording (the asciicast v2 lines
// its transcript carries, segment by segment) on the run's own time axis. A small terminal of its
// own: printable text, line ends, cursor movement, erasing, scrolling regions, the alternate
// screen, colours and a resized window (as asciinema's own player shows them); every other
// escape sequence (titles, OSC 52 clipboard writes, hyperlinks, DCS and the like) is read and
// dropped, never acted on. Text reaches the screen only through textContent. The page tells it
// the transcript (sealrun:transcript) and where the reader went on the time axis (sealrun:seek,
// in milliseconds of the run).
(function () {
  'use strict';
  var PALETTE = ['#000000', '#cd3131', '#0dbc79', '#b58900', '#2472c8', '#bc3fbc', '#11a8cd', '#c0c0c0',
    '#666666', '#f14c4c', '#23d18b', '#d7ba7d', '#3b8eea', '#d670d6', '#29b8db', '#ffffff'];
  var CHECKPOINT = 2000, IDLE = 2; // events between saved states; longer pauses play as this (s)
  var SCROLLBACK = 100; // lines kept above the main screen, as asciinema's own player keeps

  function color(n) {
    if (n < 16) return PALETTE[n];
    if (n < 232) { n -= 16; var v = [0, 95, 135, 175, 215, 255]; return 'rgb(' + v[Math.floor(n / 36)] + ',' + v[Math.floor(n / 6) % 6] + ',' + v[n % 6] + ')'; }
    var g = 8 + (n - 232) * 10; return 'rgb(' + g + ',' + g + ',' + g + ')';
  }

  // --- the terminal ---

  function Term(cols, rows) { this.attrs = ['']; this.attrIx = { '': 0 }; this.reset(cols, rows); }
  Term.prototype.reset = function (cols, rows) {
    this.cols = Math.max(1, Math.min(cols || 80, 500)); this.rows = Math.max(1, Math.min(rows || 24, 200));
    this.main = this.blank(); this.alt = null; this.buf = this.main; this.sb = [];
    this.x = 0; this.y = 0; this.wrap = false; this.top = 0; this.bot = this.rows - 1;
    this.sgr = {}; this.cur = 0; this.saved = null; this.st = 0; this.seq = ''; this.hidden = false;
  };
  Term.prototype.blank = function () { return this.lines(this.rows); };
  Term.prototype.lines = function (n) { var b = []; for (var i = 0; i < n; i++) b.push(this.line()); return b; };
  // A line: its characters, their attributes, and w: the terminal wrapped it onto the next.
  Term.prototype.line = function (cols) { cols = cols || this.cols; return { c: new Array(cols).fill(' '), a: new Array(cols).fill(0), w: false }; };
  // resize gives the terminal a new size as asciinema's terminal does (so that the page shows what
  // asciinema's player shows): the screen in use and, for the main screen, the lines above it
  // are reflowed and fitted (refit); the other screen is fitted the same way.
  Term.prototype.resize = function (cols, rows) {
    cols = Math.max(1, Math.min(cols, 500)); rows = Math.max(1, Math.min(rows, 200));
    if (cols === this.cols && rows === this.rows) return;
    var inAlt = this.buf !== this.main, oc = this.cols, or = this.rows;
    var mainAt = inAlt ? (this.saved ? { x: this.saved.x, y: this.saved.y } : { x: 0, y: or - 1 }) : { x: this.x, y: this.y };
    var m = this.refit(this.sb.concat(this.main), oc, or, cols, rows, mainAt.x, mainAt.y);
    this.main = m.lines.slice(m.lines.length - rows); this.sb = m.lines.slice(Math.max(0, m.lines.length - rows - SCROLLBACK), m.lines.length - rows);
    if (inAlt) {
      if (this.saved) { this.saved.x = m.x; this.saved.y = m.y; }
      var a = this.refit(this.alt, oc, or, cols, rows, this.x, this.y);
      this.alt = a.lines.slice(a.lines.length - rows); this.buf = this.alt; this.x = a.x; this.y = a.y;
    } else {
      this.buf = this.main; this.x = m.x; this.y = m.y;
    }
    this.cols = cols; this.rows = rows; this.top = 0; this.bot = rows - 1;
    if (cols !== oc) this.wrap = false;
  };
  // refit: lines (those above the screen, then the screen's oldRows) at a new size, and where the
  // cursor (x, y on the screen) goes. A new width joins each line the terminal wrapped with the
  // next and cuts the whole again at the new width (a line's trailing blanks dropped); a taller
  // screen takes lines back from above it, then adds blank ones; a shorter one drops rows below
  // the cursor first, then lets lines go above it.
  Term.prototype.refit = function (lines, oldCols, oldRows, cols, rows, x, y) {
    var out = lines, i;
    if (cols !== oldCols) {
      var abs = lines.length - oldRows + y, lrow = 0, off = 0;
      for (i = 0; i < abs; i++) { if (lines[i].w) off += oldCols; else { off = 0; lrow++; } }
      var lcol = x + off, cs = [], as = [];
      out = [];
      var emit = function () {
        var n = cs.length, k = 0;
        while (n > 0 && cs[n - 1] === ' ' && as[n - 1] === 0) n--;
        do {
          var l = { c: cs.slice(k, k + cols), a: as.slice(k, k + cols), w: k + cols < n };
          while (l.c.length < cols) { l.c.push(' '); l.a.push(0); }
          out.push(l); k += cols;
        } while (k < n);
        cs = []; as = [];
      };
      for (i = 0; i < lines.length; i++) {
        cs = cs.concat(lines[i].c); as = as.concat(lines[i].a);
        if (!lines[i].w || i === lines.length - 1) emit();
      }
      while (out.length < oldRows) out.push(this.line(cols));
      var r = 0, row = 0;
      while (r < lrow && row < out.length - 1) { if (!out[row].w) r++; row++; }
      while (lcol >= cols && out[row].w) { lcol -= cols; row++; }
      x = Math.min(lcol, cols - 1); y = row - (out.length - oldRows);
      if (y < 0) { oldRows -= y; y = 0; }
    } else {
      out = lines.slice();
    }
    var d;
    if (rows < oldRows) {
      d = oldRows - rows;
      var ex = Math.min(d, oldRows - 1 - y);
      if (ex > 0) { out.length -= ex; out[out.length - 1].w = false; }
      y -= d - ex;
    } else if (rows > oldRows) {
      d = rows - oldRows;
      var back = Math.min(out.length - Math.min(oldRows, out.length), d);
      d -= back;
      if (y < oldRows) y += back;
      for (i = 0; i < d; i++) out.push(this.line(cols));
    }
    return { lines: out, x: Math.min(x, cols - 1), y: Math.max(0, Math.min(y, rows - 1)) };
  };
  Term.prototype.clone = function () {
    var c = Object.assign(Object.create(Term.prototype), this);
    function copy(b) { return b && b.map(function (l) { return { c: l.c.slice(), a: l.a.slice(), w: l.w }; }); }
    c.main = copy(this.main); c.alt = copy(this.alt); c.buf = this.buf === this.main ? c.main : c.alt; c.sb = copy(this.sb);
    c.sgr = Object.assign({}, this.sgr); c.saved = this.saved && Object.assign({}, this.saved);
    return c;
  };
  Term.prototype.restore = function (s) { var a = this.attrs, ix = this.attrIx; Object.assign(this, s.clone()); this.attrs = a; this.attrIx = ix; };
  Term.prototype.attr = function () {
    var s = this.sgr, k = (s.fg || '') + '|' + (s.bg || '') + '|' + (s.b ? 1 : 0) + (s.i ? 1 : 0) + (s.u ? 1 : 0) + (s.r ? 1 : 0) + (s.d ? 1 : 0);
    if (k === '||00000') return 0;
    if (this.attrIx[k] === undefined) { this.attrIx[k] = this.attrs.length; this.attrs.push(Object.assign({}, s)); }
    return this.attrIx[k];
  };
  // A line scrolled off the top of the main screen goes above it (SCROLLBACK kept), as in
  // asciinema's terminal; the lines at a scrolled region's edges no longer wrap across them.
  Term.prototype.scrollUp = function (n) {
    if (this.bot < this.rows - 1) this.buf[this.bot].w = false;
    if (this.top > 0) this.buf[this.top - 1].w = false;
    for (var i = 0; i < n; i++) {
      var gone = this.buf.splice(this.top, 1)[0];
      if (this.top === 0 && this.buf === this.main) { this.sb.push(gone); if (this.sb.length > SCROLLBACK) this.sb.shift(); }
      this.buf.splice(this.bot, 0, this.line());
    }
  };
  Term.prototype.scrollDown = function (n) {
    for (var i = 0; i < n; i++) { this.buf.splice(this.bot, 1); this.buf.splice(this.top, 0, this.line()); }
    if (this.top > 0) this.buf[this.top - 1].w = false;
    this.buf[this.bot].w = false;
  };
  Term.prototype.lf = function () { if (this.y === this.bot) this.scrollUp(1); else if (this.y < this.rows - 1) this.y++; };
  Term.prototype.put = function (ch) {
    if (this.wrap) { this.buf[this.y].w = true; this.x = 0; this.lf(); this.wrap = false; }
    var l = this.buf[this.y]; l.c[this.x] = ch; l.a[this.x] = this.cur;
    if (this.x === this.cols - 1) this.wrap = true; else this.x++;
  };
  Term.prototype.erase = function (l, from, to) { for (var i = from; i < to; i++) { l.c[i] = ' '; l.a[i] = 0; } if (to >= this.cols) l.w = false; };
  Term.prototype.write = function (s) {
    for (var i = 0; i < s.length; i++) {
      var ch = s[i], code = s.charCodeAt(i);
      switch (this.st) {
        case 0: // ground
          if (code >= 32 && code !== 127) { this.put(ch); continue; }
          if (code === 27) { this.st = 1; continue; }
          if (code === 13) { this.x = 0; this.wrap = false; } else if (code === 10 || code === 11 || code === 12) { this.lf(); this.wrap = false; } else if (code === 8) { this.x = Math.max(0, this.x - 1); this.wrap = false; } else if (code === 9) { this.x = Math.min(this.cols - 1, (Math.floor(this.x / 8) + 1) * 8); }
          continue;
        case 1: // ESC
          this.st = 0;
          if (ch === '[') { this.st = 2; this.seq = ''; } else if (ch === ']' || ch === 'P' || ch === '_' || ch === '^' || ch === 'X') { this.st = 3; } else if (ch === '(' || ch === ')' || ch === '*' || ch === '+' || ch === '#' || ch === '%') { this.st = 5; } else if (ch === '7') { this.saved = { x: this.x, y: this.y, sgr: Object.assign({}, this.sgr) }; } else if (ch === '8') { if (this.saved) { this.x = this.saved.x; this.y = this.saved.y; this.sgr = Object.assign({}, this.saved.sgr); this.cur = this.attr(); } } else if (ch === 'D') { this.lf(); } else if (ch === 'E') { this.x = 0; this.lf(); } else if (ch === 'M') { if (this.y === this.top) this.scrollDown(1); else if (this.y > 0) this.y--; } else if (ch === 'c') { this.reset(this.cols, this.rows); }
          continue;
        case 2: // CSI
          if (code >= 0x40 && code <= 0x7e) { this.st = 0; this.csi(ch, this.seq); } else if (this.seq.length < 64) { this.seq += ch; } else { this.st = 0; }
          continue;
        case 3: // a string (OSC, DCS, APC, PM, SOS): dropped up to BEL or ST
          if (code === 7) this.st = 0; else if (code === 27) this.st = 4;
          continue;
        case 4: this.st = ch === '\\' ? 0 : 3; continue; // ESC inside a string: ST ends it
        case 5: this.st = 0; continue; // a charset designation's last byte
      }
    }
  };
  Term.prototype.csi = function (f, seq) {
    var priv = seq[0] === '?', p = seq.replace(/^[?>=<]/, '').replace(/[ -\/]+$/, '').split(/[;:]/).map(function (v) { return v === '' ? NaN : parseInt(v, 10); });
    var n = isNaN(p[0]) || p[0] === 0 ? 1 : Math.min(p[0], 10000), l = this.buf[this.y], i;
    this.wrap = false;
    switch (f) {
      case 'A': this.y = Math.max(this.y < this.top ? 0 : this.top, this.y - n); break;
      case 'B': case 'e': this.y = Math.min(this.y > this.bot ? this.rows - 1 : this.bot, this.y + n); break;
      case 'C': case 'a': this.x = Math.min(this.cols - 1, this.x + n); break;
      case 'D': this.x = Math.max(0, this.x - n); break;
      case 'E': this.x = 0; this.y = Math.min(this.rows - 1, this.y + n); break;
      case 'F': this.x = 0; this.y = Math.max(0, this.y - n); break;
      case 'G': case '`': this.x = Math.min(this.cols - 1, n - 1); break;
      case 'd': this.y = Math.min(this.rows - 1, n - 1); break;
      case 'H': case 'f': this.y = Math.min(this.rows - 1, n - 1); this.x = Math.min(this.cols - 1, (isNaN(p[1]) || p[1] === 0 ? 1 : p[1]) - 1); break;
      case 'J':
        var m = p[0] || 0;
        if (m === 0) { this.erase(l, this.x, this.cols); for (i = this.y + 1; i < this.rows; i++) this.erase(this.buf[i], 0, this.cols); }
        else if (m === 1) { this.erase(l, 0, this.x + 1); for (i = 0; i < this.y; i++) this.erase(this.buf[i], 0, this.cols); }
        else { for (i = 0; i < this.rows; i++) this.erase(this.buf[i], 0, this.cols); }
        break;
      case 'K':
        var k = p[0] || 0;
        if (k === 0) this.erase(l, this.x, this.cols); else if (k === 1) this.erase(l, 0, this.x + 1); else this.erase(l, 0, this.cols);
        break;
      case 'X': this.erase(l, this.x, Math.min(this.cols, this.x + n)); break;
      case 'P': l.c.splice(this.x, n); l.a.splice(this.x, n); while (l.c.length < this.cols) { l.c.push(' '); l.a.push(0); } break;
      // insertions and deletions beyond the line or the region change nothing more: each is
      // one slice of the line or one splice of the region, whatever its count (a hostile CSI
      // 9999@ costs one line's work, not ten thousand splices)
      case '@':
        n = Math.min(n, this.cols - this.x);
        if (n > 0 && n === this.cols - this.x) { for (i = this.x; i < this.cols; i++) { l.c[i] = ' '; l.a[i] = 0; } break; } // all shifted out: the rest is blank
        if (n > 0) { l.c = l.c.slice(0, this.x).concat(new Array(n).fill(' '), l.c.slice(this.x, this.cols - n)); l.a = l.a.slice(0, this.x).concat(new Array(n).fill(0), l.a.slice(this.x, this.cols - n)); }
        break;
      case 'L':
        n = Math.min(n, this.bot - this.y + 1);
        if (n === this.bot - this.y + 1 && this.y >= this.top) { for (i = this.y; i <= this.bot; i++) this.erase(this.buf[i], 0, this.cols); break; } // all shifted out
        if (n > 0 && this.y >= this.top && this.y <= this.bot) { this.buf.splice(this.bot - n + 1, n); this.buf.splice.apply(this.buf, [this.y, 0].concat(this.lines(n))); }
        break;
      case 'M':
        n = Math.min(n, this.bot - this.y + 1);
        if (n === this.bot - this.y + 1 && this.y >= this.top) { for (i = this.y; i <= this.bot; i++) this.erase(this.buf[i], 0, this.cols); break; } // all shifted out
        if (n > 0 && this.y >= this.top && this.y <= this.bot) { this.buf.splice(this.y, n); this.buf.splice.apply(this.buf, [this.bot - n + 1, 0].concat(this.lines(n))); }
        break;
      case 'S': this.scrollUp(Math.min(n, this.rows)); break;
      case 'T': this.scrollDown(Math.min(n, this.rows)); break;
      case 'r':
        var t = (p[0] || 1) - 1, b = (isNaN(p[1]) || p[1] === 0 ? this.rows : p[1]) - 1;
        if (t < b && b < this.rows) { this.top = t; this.bot = b; this.x = 0; this.y = 0; }
        break;
      case 's': this.saved = { x: this.x, y: this.y, sgr: Object.assign({}, this.sgr) }; break;
      case 'u': if (this.saved) { this.x = this.saved.x; this.y = this.saved.y; } break;
      case 'h': case 'l':
        if (!priv) break;
        var on = f === 'h';
        p.forEach(function (v) {
          if (v === 25) this.hidden = !on;
          if (v === 47 || v === 1047 || v === 1049) {
            if (on && this.buf === this.main) { if (v === 1049) this.saved = { x: this.x, y: this.y, sgr: Object.assign({}, this.sgr) }; this.alt = this.blank(); this.buf = this.alt; }
            else if (!on && this.buf !== this.main) { this.buf = this.main; this.alt = null; if (v === 1049 && this.saved) { this.x = this.saved.x; this.y = this.saved.y; } }
          }
        }, this);
        break;
      case 'm': this.sgrSet(seq.indexOf('?') >= 0 || seq.indexOf('>') >= 0 ? [] : p); break;
    }
  };
  Term.prototype.sgrSet = function (p) {
    var s = this.sgr;
    if (p.length === 0) p = [0];
    for (var i = 0; i < p.length; i++) {
      var v = isNaN(p[i]) ? 0 : p[i];
      if (v === 0) { this.sgr = s = {}; }
      else if (v === 1) s.b = true; else if (v === 2) s.d = true; else if (v === 3) s.i = true; else if (v === 4) s.u = true; else if (v === 7) s.r = true;
      else if (v === 22) { s.b = false; s.d = false; } else if (v === 23) s.i = false; else if (v === 24) s.u = false; else if (v === 27) s.r = false;
      else if (v >= 30 && v <= 37) s.fg = PALETTE[v - 30]; else if (v >= 90 && v <= 97) s.fg = PALETTE[v - 82]; else if (v === 39) s.fg = '';
      else if (v >= 40 && v <= 47) s.bg = PALETTE[v - 40]; else if (v >= 100 && v <= 107) s.bg = PALETTE[v - 92]; else if (v === 49) s.bg = '';
      else if (v === 38 || v === 48) {
        var c = '';
        if (p[i + 1] === 5 && p[i + 2] >= 0 && p[i + 2] <= 255) { c = color(p[i + 2]); i += 2; }
        else if (p[i + 1] === 2) { c = 'rgb(' + [p[i + 2], p[i + 3], p[i + 4]].map(function (x) { return Math.max(0, Math.min(255, x || 0)); }).join(',') + ')'; i += 4; }
        if (v === 38) s.fg = c; else s.bg = c;
      }
    }
    this.cur = this.attr();
  };

  // --- the player ---

  var section = document.getElementById('term');
  if (!section) return;
  var screen = document.getElementById('tscreen'), playBtn = document.getElementById('tplay'), speedSel = document.getElementById('tspeed');
  var pos = document.getElementById('tpos'), timeEl = document.getElementById('ttime'), noteEl = document.getElementById('tnote');
  var events = [], marks = [], segs = new Set(), head = null, term = null, checkpoints = [], at = 0, done = 0;
  var playing = false, timer = 0, last = 0, clock = 0, cut = false;

  function fmt(sec) {
    sec = Math.max(0, Math.floor(sec));
    var h = Math.floor(sec / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
    return '+' + (h ? h + ':' + String(m).padStart(2, '0') : m) + ':' + String(s).padStart(2, '0');
  }

  function load(t) {
    var added = false, wasAtEnd = !term || clock >= end();
    (t.events || []).filter(function (e) { return e.terminal; }).sort(function (a, b) { return a.terminal.segment - b.terminal.segment; }).forEach(function (e) {
      var tm = e.terminal;
      if (segs.has(tm.segment)) return;
      if (tm.cast_cut || !tm.cast) { if (tm.cast_cut) cut = true; return; }
      if (tm.segment !== segs.size + 1) return; // the recording plays only as far as it is whole
      segs.add(tm.segment); added = true;
      tm.cast.split('\n').forEach(function (line) {
        if (!line) return;
        var v;
        try { v = JSON.parse(line); } catch (err) { return; }
        if (!Array.isArray(v)) { if (v && v.version === 2 && !head) head = v; return; }
        if (typeof v[0] !== 'number' || typeof v[1] !== 'string' || typeof v[2] !== 'string') return;
        if (v[1] === 'm') marks.push({ t: v[0], label: v[2] });
        if (v[1] === 'o' || v[1] === 'r') events.push(v);
      });
    });
    if (!added) return;
    section.hidden = false;
    if (!term) { term = new Term(head && head.width, head && head.height); checkpoints = [{ i: 0, s: term.clone() }]; at = 0; }
    pos.max = String(Math.max(1, Math.round(end() * 10)));
    noteEl.textContent = segs.size + ' segment' + (segs.size === 1 ? '' : 's') + ', ' + marks.length + ' attach and detach marks' + (cut ? '; the rest of the recording is too long for this page: play the segments beside it with asciinema' : '');
    // The screen as the recording left it (a live page's: as it is now), until the reader plays it.
    if (wasAtEnd && !playing) seek(end()); else render();
  }
  function end() { return events.length ? events[events.length - 1][0] : 0; }

  function apply(ev) { if (ev[1] === 'o') term.write(ev[2]); else { var m = /^(\d+)x(\d+)$/.exec(ev[2]); if (m) term.resize(+m[1], +m[2]); } }

  // seek shows the screen at sec seconds of the recording: from the last saved state before it.
  function seek(sec) {
    if (!term) return;
    var target = 0, lo = 0, hi = events.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (events[mid][0] <= sec) lo = mid + 1; else hi = mid; }
    target = lo;
    if (target < at || target - at > CHECKPOINT) {
      var cp = checkpoints[0];
      checkpoints.forEach(function (c) { if (c.i <= target) cp = c; });
      if (cp.i > at || target < at) { term.restore(cp.s); at = cp.i; }
    }
    for (; at < target; at++) {
      apply(events[at]);
      if ((at + 1) % CHECKPOINT === 0 && checkpoints[checkpoints.length - 1].i < at + 1) checkpoints.push({ i: at + 1, s: term.clone() });
    }
    clock = sec;
    render();
  }

  function render() {
    if (!term) return;
    var rows = term.buf, frag = document.createDocumentFragment();
    for (var y = 0; y < rows.length; y++) {
      var l = rows[y], div = document.createElement('div'), x = 0;
      while (x < l.c.length) {
        var a = l.a[x], s = x;
        while (x < l.c.length && l.a[x] === a) x++;
        var span = document.createElement('span');
        span.textContent = l.c.slice(s, x).join('');
        var st = term.attrs[a] || {};
        var fg = st.fg, bg = st.bg;
        if (st.r) { var tmp = fg || '#e6e6e6'; fg = bg || '#1e1e1e'; bg = tmp; }
        if (fg) span.style.color = fg;
        if (bg) span.style.backgroundColor = bg;
        if (st.b) span.style.fontWeight = '700';
        if (st.i) span.style.fontStyle = 'italic';
        if (st.u) span.style.textDecoration = 'underline';
        if (st.d) span.style.opacity = '0.7';
        if (!term.hidden && y === term.y && term.x >= s && term.x < x) {
          var before = span.textContent.slice(0, term.x - s), c = span.textContent[term.x - s], after = span.textContent.slice(term.x - s + 1);
          span.textContent = before;
          var cs = document.createElement('span'); cs.className = 'cursor'; cs.textContent = c;
          div.appendChild(span); div.appendChild(cs);
          span = document.createElement('span'); span.textContent = after;
          if (fg) span.style.color = fg;
          if (bg) span.style.backgroundColor = bg;
        }
        div.appendChild(span);
      }
      frag.appendChild(div);
    }
    screen.replaceChildren(frag);
    pos.value = String(Math.round(clock * 10));
    var mk = marks.filter(function (m) { return m.t <= clock; }).pop();
    timeEl.textContent = fmt(clock) + ' of ' + fmt(end()) + (mk ? ' · last: ' + mk.label : '');
  }

  function tick() {
    var now = performance.now(), dt = (now - last) / 1000 * Number(speedSel.value);
    last = now;
    // a pause longer than IDLE plays as IDLE
    var next = at < events.length ? events[at][0] : end();
    if (next - clock > IDLE) clock = next - IDLE;
    seek(Math.min(end(), clock + dt));
    if (clock >= end()) stop(); else timer = requestAnimationFrame(tick);
  }
  function start() { if (!term) return; if (clock >= end()) seek(0); playing = true; playBtn.textContent = 'pause'; last = performance.now(); timer = requestAnimationFrame(tick); }
  function stop() { playing = false; playBtn.textContent = 'play'; cancelAnimationFrame(timer); }

  playBtn.addEventListener('click', function () { if (playing) stop(); else start(); });
  pos.addEventListener('input', function () { seek(Number(pos.value) / 10); });
  document.addEventListener('sealrun:transcript', function (e) { load(e.detail); });
  document.addEventListener('sealrun:seek', function (e) { if (term) { seek(Math.max(0, e.detail / 1000)); } });
})();
