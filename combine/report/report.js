/* forktrace report page. Vanilla JS, no network. Every string from the
 * trace reaches the DOM through textContent only (never innerHTML). */
'use strict';
(function () {
const D = JSON.parse(document.getElementById('ft-data').textContent);
const S = D.names;
const M = D.meta;
const $ = (id) => document.getElementById(id);

/* ---- helpers -------------------------------------------------------- */
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function fmtDur(ns) {
  if (ns === null || ns === undefined || ns < 0 || !isFinite(ns)) return '?';
  if (ns < 1e3) return ns.toFixed(0) + ' ns';
  if (ns < 1e6) return (ns / 1e3).toPrecision(3) + ' \u00b5s';
  if (ns < 1e9) return (ns / 1e6).toPrecision(3) + ' ms';
  if (ns < 60e9) return (ns / 1e9).toPrecision(3) + ' s';
  const m = Math.floor(ns / 60e9), s = Math.round((ns - m * 60e9) / 1e9);
  if (m < 60) return m + 'm ' + s + 's';
  return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
}
/* A time from the start of the run, for people: "+12.3 s", "+350 ms". */
function fmtStart(ns) {
  if (ns === null || ns === undefined || ns < 0 || !isFinite(ns)) return '?';
  return ns < 1e3 ? '+0 s' : '+' + fmtDur(ns);
}
/* A size in KiB, for people: "1.2 GiB", "350 MiB", "12 KiB". */
function fmtKiB(kb) {
  if (kb === null || kb === undefined || kb < 0 || !isFinite(kb)) return '?';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = kb, u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (v >= 100 || u === 0 ? v.toFixed(0) : v.toPrecision(v >= 10 ? 3 : 2)) + ' ' + units[u];
}
function fmtInt(n) { return (n === null || n === undefined) ? '?' : Number(n).toLocaleString('en-US'); }
function hashStr(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); } return h >>> 0; }
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#edc948', '#ff9da7', '#9c755f',
  '#5b8ff9', '#86bcb6', '#b6992d', '#8cd17d', '#d37295', '#a0cbe8', '#ffbe7d', '#79706e'];
const colorOf = new Map();
function color(name) {
  let c = colorOf.get(name);
  if (!c) { c = 'hsl(' + (hashStr(name) % 360) + ',45%,62%)'; colorOf.set(name, c); }
  return c;
}

/* ---- data ----------------------------------------------------------- */
const EXIT = ['unknown', 'code', 'signal', 'running', 'host lost'];
/* A process's resource use (sink_html.c: [source, user_ns, sys_ns,
 * maxrss_kb, minflt, majflt, nvcsw, nivcsw, inblock, oublock], or 0): null
 * when nobody reported it; cpu is user + sys, -1 where unknown. */
function rusageOf(a) {
  if (!Array.isArray(a)) return null;
  const ru = { source: S[a[0]] || '', user: a[1], sys: a[2], maxrss: a[3], minflt: a[4], majflt: a[5], nvcsw: a[6], nivcsw: a[7], inblock: a[8], oublock: a[9] };
  ru.cpu = ru.user >= 0 && ru.sys >= 0 ? ru.user + ru.sys : -1;
  return ru;
}
const P = D.procs.map((r, i) => {
  const p = {
    i, pid: r[0], hpid: r[1], ppid: r[2], parent: r[3], name: S[r[4]] || ('pid ' + r[0]), label: S[r[5]] || '',
    start: r[6], end: r[7], ek: r[8], ev: r[9], sig: S[r[10]] || '', spawn: S[r[11]] || '', inst: !!r[12],
    lost: r[13], events: r[14], exe: S[r[15]] || '', cwd: S[r[16]] || '', sort: r[17], spawnTs: r[18],
    spawnTid: r[19], record: !!r[20], argv: r[21].map((k) => S[k]), segs: [], threads: [], marks: [],
    marksDropped: r[25], host: S[r[26]] || M.host || '', rank: r[27], localRank: r[28],
    interp: S[r[29]] || '', launcher: S[r[30]] || '', ru: rusageOf(r[31]), kids: [], depth: 0,
    collapsed: false, visible: true, slices: []
  };
  /* What people call it: "dh_installman (perl)". */
  p.title = p.name + (p.interp ? ' (' + p.interp + ')' : '');
  for (let k = 0; k < r[22].length; k += 4) p.segs.push({ s: r[22][k], e: r[22][k + 1], name: S[r[22][k + 2]] || p.name, inst: !!r[22][k + 3] });
  for (let k = 0; k < r[23].length; k += 4) p.threads.push({ tid: r[23][k], name: S[r[23][k + 1]] || '', sort: r[23][k + 2], n: r[23][k + 3], slices: [] });
  for (let k = 0; k < r[24].length; k += 4) p.marks.push({ tid: r[24][k], ts: r[24][k + 1], name: S[r[24][k + 2]], cat: S[r[24][k + 3]] });
  if (p.start < 0) p.start = p.segs.length ? p.segs[0].s : 0;
  if (p.end < p.start) p.end = Math.max(p.start, M.end);
  p.failed = p.ek === 1 && p.ev !== 0;
  p.killed = p.ek === 2;
  p.running = p.ek === 3;
  p.hostLost = p.ek === 4;
  return p;
});
/* The hosts of a multi-host trace, the head first (as the trace lists
 * them), then any host only a process names. */
const HOSTS = M.hosts.map((h) => h.name);
for (const p of P) if (p.host && !HOSTS.includes(p.host)) HOSTS.push(p.host);
const MULTI = HOSTS.length > 1;
const hostInfo = new Map(M.hosts.map((h) => [h.name, h]));
/* "rank 3 (Open MPI), local rank 1". */
function rankText(p) {
  if (p.rank < 0) return '';
  return 'rank ' + p.rank + (p.launcher ? ' (' + p.launcher + ')' : '') + (p.localRank >= 0 ? ', local rank ' + p.localRank : '');
}
/* A host's clock figures in a few words: "measured, offset +1000.0005 s,
 * drift +50.0 ppm, ±30 µs". */
function clockText(h) {
  if (!h) return '';
  if (h.clock === 'reference') return 'reference clock';
  if (h.clock === 'none') return 'clock not aligned';
  if (h.clock === 'not aligned') return 'not aligned: no head in this trace' + (h.anchor ? '; realtime anchor available' : '');
  const parts = [h.clock, 'offset ' + (h.offset_ns >= 0 ? '+' : '') + (h.offset_ns / 1e9).toFixed(6) + ' s',
    'drift ' + (h.drift_ppm >= 0 ? '+' : '') + h.drift_ppm.toFixed(2) + ' ppm'];
  parts.push(h.err_ns >= 0 ? '\u00b1' + fmtDur(h.err_ns) : 'error bound unknown');
  return parts.join(', ');
}
function stateText(h) {
  if (!h) return '';
  if (h.state === 'lost') return 'lost ' + fmtDur(h.lost) + ' into the run';
  if (h.state === 'incomplete') return 'incomplete: the head stopped waiting for it ' + fmtDur(h.lost) + ' into the run';
  if (h.state === 'missing') return 'missing: ' + (h.why || '?') + (h.where ? ' (its part: ' + h.where + ')' : '');
  return h.state;
}
for (const r of D.slices) {
  const p = P[r[0]];
  let t = p.threads.find((x) => x.tid === r[1]);
  if (!t) { t = { tid: r[1], name: '', sort: 1 << 30, n: r[2], slices: [] }; p.threads.push(t); }
  t.total = r[2];
  const d = r[3];
  for (let k = 0; k < d.length; k += 3) t.slices.push({ s: d[k], d: d[k + 1], name: S[d[k + 2]] });
}
const STATS = [];
for (let k = 0; k < D.stats.length; k += 6) {
  const a = D.stats;
  STATS.push({ p: a[k], name: S[a[k + 1]], calls: a[k + 2], total: a[k + 3], self: a[k + 4], max: a[k + 5] });
}
const OVERALL = [];
for (let k = 0; k < D.overall.length; k += 6) {
  const a = D.overall;
  OVERALL.push({ name: S[a[k]], calls: a[k + 1], total: a[k + 2], self: a[k + 3], max: a[k + 4], procs: a[k + 5] });
}
const statsByProc = new Map();
for (const s of STATS) { if (!statsByProc.has(s.p)) statsByProc.set(s.p, []); statsByProc.get(s.p).push(s); }

/* The critical path (sink_html.c write_critical_path): its steps in time
 * order with their share of the path, and per process on it its time on
 * the path (p.cpTime) and its steps; null when the trace has none. */
const CP = (function () {
  const c = M.critical_path;
  if (!c || !c.steps || !c.steps.length) return null;
  const total = Math.max(1, c.end - c.start), steps = [];
  for (let k = 0; k + 4 < c.steps.length; k += 5) {
    const a = c.steps;
    const st = { n: steps.length + 1, p: a[k] >= 0 && a[k] < P.length ? P[a[k]] : null, pid: a[k + 1], name: a[k + 2] || '?', s: a[k + 3], e: a[k + 4] };
    st.d = Math.max(0, st.e - st.s); st.share = st.d / total;
    if (st.p) { st.p.cpTime = (st.p.cpTime || 0) + st.d; (st.p.cpSteps = st.p.cpSteps || []).push(st); }
    steps.push(st);
  }
  return { start: c.start, end: c.end, total, steps };
})();

/* Whether any process has resource figures, or a rank: their columns,
 * panels and filters are there only then. */
const HAS_RU = P.some((p) => p.ru);
const HAS_RANKS = P.some((p) => p.rank >= 0);

/* Programs get palette colours by how many processes run them. */
(function () {
  const count = new Map();
  for (const p of P) for (const s of (p.segs.length ? p.segs : [{ name: p.name }])) count.set(s.name, (count.get(s.name) || 0) + 1);
  [...count.entries()].sort((a, b) => b[1] - a[1]).forEach(([n], k) => { if (k < PALETTE.length) colorOf.set(n, PALETTE[k]); });
})();

/* The tree: children under their parent, by start time. */
const roots = [];
for (const p of P) { if (p.parent >= 0 && p.parent < P.length && p.parent !== p.i) P[p.parent].kids.push(p); else roots.push(p); }
const byStart = (a, b) => (a.start - b.start) || (a.sort - b.sort) || (a.pid - b.pid);
roots.sort(byStart);
for (const p of P) p.kids.sort(byStart);
(function depths() {
  const st = roots.map((p) => [p, 0]);
  const seen = new Uint8Array(P.length);
  while (st.length) { const [p, d] = st.pop(); if (seen[p.i]) continue; seen[p.i] = 1; p.depth = d; for (const c of p.kids) st.push([c, d + 1]); }
})();
/* Big trees open in the packed view, with short processes folded
 * (report_timeline.js); the tree view starts expanded. */

let T0 = 0, T1 = Math.max(1, M.end);
for (const p of P) { if (p.end > T1) T1 = p.end; }

/* ---- filters -------------------------------------------------------- */
const F = { inc: null, exc: null, ranges: null, hosts: null, ranks: null };
function parseRanges(s) {
  s = s.trim(); if (!s) return null;
  const out = [];
  for (const part of s.split(',')) {
    const m = /^\s*(\d*)\s*(-?)\s*(\d*)\s*$/.exec(part);
    if (!m || (m[1] === '' && m[3] === '') ) throw new Error('bad range');
    const lo = m[1] === '' ? 0 : +m[1];
    const hi = m[2] ? (m[3] === '' ? Infinity : +m[3]) : lo;
    if (hi < lo) throw new Error('bad range');
    out.push([lo, hi]);
  }
  return out;
}
function nameOk(n) { return (!F.exc || !F.exc.test(n)) && (!F.inc || F.inc.test(n)); }
function procOk(p) {
  if (F.ranges && !F.ranges.some(([a, b]) => p.pid >= a && p.pid <= b)) return false;
  if (F.hosts && !F.hosts.has(p.host)) return false;
  /* The rank filter keeps the ranks asked for: a process without a rank
   * (the launcher, a build step) is none of them. */
  if (F.ranks && !(p.rank >= 0 && F.ranks.some(([a, b]) => p.rank >= a && p.rank <= b))) return false;
  if (F.exc && F.exc.test(p.name)) return false;
  p.progMatch = !F.inc || F.inc.test(p.name) || F.inc.test(p.label);
  if (p.progMatch) return true;
  return (statsByProc.get(p.i) || []).some((s) => nameOk(s.name));
}
function sliceOk(p, n) { return (!F.exc || !F.exc.test(n)) && (p.progMatch || !F.inc || F.inc.test(n)); }
function applyFilters() {
  const inc = $('f-include'), exc = $('f-exclude'), pids = $('f-pids');
  let ok = true;
  for (const [box, key] of [[inc, 'inc'], [exc, 'exc']]) {
    box.classList.remove('invalid');
    try { F[key] = box.value.trim() ? new RegExp(box.value.trim()) : null; } catch (e) { box.classList.add('invalid'); ok = false; }
  }
  pids.classList.remove('invalid');
  try { F.ranges = parseRanges(pids.value); } catch (e) { pids.classList.add('invalid'); ok = false; }
  const ranks = $('f-ranks');
  ranks.classList.remove('invalid');
  try { F.ranks = parseRanges(ranks.value); } catch (e) { ranks.classList.add('invalid'); ok = false; }
  if (!ok) { $('f-status').textContent = 'invalid filter: nothing changed'; return; }
  const boxes = [...document.querySelectorAll('#f-hosts input')];
  F.hosts = boxes.length && boxes.some((b) => !b.checked) ? new Set(boxes.filter((b) => b.checked).map((b) => b.value)) : null;
  let n = 0;
  for (const p of P) { p.visible = procOk(p); n += p.visible; }
  $('f-status').textContent = 'showing ' + fmtInt(n) + ' of ' + fmtInt(P.length) + ' processes';
  rebuildRows(); tl.draw(); drawConc(); renderTable(); renderTop();
  if (selected && !selected.visible) closeDetail(); else if (selected) openDetail(selected);
}

/* ---- header --------------------------------------------------------- */
/* The run's exit status: {v, txt}; for files that do not carry it, the
 * root's (v 128 and the signal's name for a root killed by one); v null
 * when nothing says it. */
function runStatus() {
  const v = M.exit_status;
  if (v !== null && v !== undefined) return { v, txt: String(v) };
  if (roots.length === 1 && roots[0].ek === 1) return { v: roots[0].ev, txt: roots[0].ev + ' (root)' };
  if (roots.length === 1 && roots[0].ek === 2) return { v: 128, txt: roots[0].sig || 'signal' };
  return { v: null, txt: '?' };
}
function exitCard() {
  const r = runStatus();
  return ['Exit status', r.txt, r.v ? 'bad' : (r.v === 0 ? 'ok' : '')];
}
/* A failure on the critical path: a process on it killed by a signal, or
 * one that exited non-zero in a run that did not succeed (in a run that
 * did, the configure probes on the path exit 1 by design). */
function cpFailure(p) {
  if (!p.cpTime) return false;
  return p.killed || p.hostLost || (p.failed && runStatus().v !== 0);
}
function plural(n, one, many) { return fmtInt(n) + ' ' + (n === 1 ? one : (many || one + 's')); }
/* A few processes by name and pid: "cc1 (pid 113), ld (pid 7) and 3 more". */
function someProcs(list, what) {
  const shown = list.slice(0, 3).map((p) => p.title + ' (pid ' + p.pid + (what ? ', ' + what(p) : '') + ')');
  return shown.join(', ') + (list.length > 3 ? ' and ' + fmtInt(list.length - 3) + ' more' : '');
}
/* What the exits say, as sentences (docs/INSIGHT.md, "Exits"): non-zero
 * exits are what they are (configure probes exit 1 by design), so they are
 * neutral when the command succeeded; a failed run, killed processes and
 * failures on the critical path are what to look at, in red. [text, bad]. */
function verdictLines() {
  const r = runStatus(), out = [];
  const nonzero = P.filter((p) => p.failed), killed = P.filter((p) => p.killed);
  const nz = plural(nonzero.length, 'non-zero exit');
  if (r.v === 0) out.push([nz + '; the command succeeded', false]);
  else if (r.v !== null) out.push(['The command failed (exit status ' + r.txt + '); ' + nz, true]);
  else out.push([nz + '; the run\'s exit status is not in this trace', false]);
  if (killed.length) out.push([plural(killed.length, 'process', 'processes') + ' killed by a signal: ' + someProcs(killed, (p) => p.sig || 'signal ' + p.ev), true]);
  if (CP) {
    /* The latest first: the last failure on the path is the likeliest
     * to have ended the run. */
    const bad = [...new Set(CP.steps.map((st) => st.p).filter((p) => p && cpFailure(p)))].reverse();
    if (bad.length) out.push(['On the critical path: ' + someProcs(bad, exitText), true]);
  }
  return out;
}
function verdict() {
  const box = $('verdict'); box.replaceChildren();
  for (const [text, bad] of verdictLines()) box.appendChild(el('div', bad ? 'bad' : '', text));
}
function header() {
  const cmd = M.command && M.command.length ? M.command.join(' ') : (M.inputs.length ? 'forktrace report ' + M.inputs.join(' ') : '(unknown command)');
  $('command').textContent = cmd;
  const nonzero = P.filter((p) => p.failed).length, killed = P.filter((p) => p.killed).length;
  const failedRun = !!runStatus().v;
  const threads = M.threads;
  const cards = [
    MULTI ? ['Hosts', fmtInt(HOSTS.length)] : ['Host', M.host || '?'],
    ['Started', M.realtime_t0_ms ? new Date(M.realtime_t0_ms).toLocaleString() : '?'],
    ['Wall time', fmtDur(M.end - M.start)],
    ['Processes', fmtInt(M.processes) + (M.processes_shown !== M.processes ? ' (' + fmtInt(M.processes_shown) + ' shown)' : '')],
    ['Threads', fmtInt(threads)],
    ['Events', fmtInt(M.events)],
    ['Lost events', fmtInt(M.lost_events), M.lost_events ? 'bad' : ''],
    exitCard(),
    ['Non-zero exits', fmtInt(nonzero), nonzero && failedRun ? 'bad' : ''],
    ['Killed', fmtInt(killed), killed ? 'bad' : '']
  ];
  verdict();
  const box = $('cards');
  for (const [k, v, cls] of cards) {
    const c = el('div', 'card' + (cls ? ' ' + cls : ''));
    c.dataset.key = k.toLowerCase().replace(/ /g, '_');
    c.appendChild(el('div', 'k', k)); c.appendChild(el('div', 'v', v));
    box.appendChild(c);
  }
  const notes = $('notes');
  if (M.slices > M.slices_shown) notes.appendChild(el('div', null, 'Regions/functions: the ' + fmtInt(M.slices_shown) + ' longest of ' + fmtInt(M.slices) + ' slices are drawn; the tables count all of them.'));
  const f = M.filter;
  if (f.include || f.exclude || f.pids || f.hosts) notes.appendChild(el('div', null, 'Embedded with filters: ' + [f.include && ('--include ' + f.include), f.exclude && ('--exclude ' + f.exclude), f.pids && ('--pids ' + f.pids), f.hosts && ('--hosts ' + f.hosts)].filter(Boolean).join(', ')));
  if (M.hosts.length) hostsTable();
  if (M.inputs.length) notes.appendChild(el('div', null, 'Inputs: ' + M.inputs.join(', ')));
  $('footer').textContent = 'Written by forktrace ' + M.version + (M.origin ? ' (' + M.origin + ')' : '') + '. Times are relative to the start of the run.';
}

/* The run info of a multi-host run: each host's processes, clock figures
 * and state. */
function hostsTable() {
  const t = el('table', 'hosts'); t.id = 'hosts';
  const head = el('tr');
  for (const k of ['Host', 'Processes', 'Clock', 'Offset', 'Drift', 'Error bound', 'Samples', 'State']) head.appendChild(el('th', null, k));
  t.appendChild(head);
  for (const h of M.hosts) {
    const tr = el('tr', h.state === 'complete' ? '' : 'bad');
    tr.dataset.host = h.name;
    const aligned = h.clock !== 'reference' && h.clock !== 'none' && h.clock !== 'not aligned';
    const cells = [h.name + (h.role === 'head' ? ' (head)' : ''), fmtInt(h.processes), h.clock === 'not aligned' ? clockText(h) : h.clock,
      aligned ? (h.offset_ns >= 0 ? '+' : '') + (h.offset_ns / 1e9).toFixed(6) + ' s' : '\u2013',
      aligned ? (h.drift_ppm >= 0 ? '+' : '') + h.drift_ppm.toFixed(2) + ' ppm' : '\u2013',
      h.err_ns >= 0 ? (h.clock === 'reference' ? '\u2013' : '\u00b1' + fmtDur(h.err_ns)) : 'unknown',
      h.clock === 'measured' ? fmtInt(h.samples) : '\u2013', stateText(h)];
    for (const c of cells) tr.appendChild(el('td', null, c));
    t.appendChild(tr);
  }
  $('notes').appendChild(t);
}

/* ---- time axis ------------------------------------------------------ */
function niceStep(span, px, minPx) {
  const raw = span * minPx / Math.max(1, px);
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
function fmtTick(t, step) {
  if (step >= 60e9) { const m = Math.floor(t / 60e9), s = Math.round((t - m * 60e9) / 1e9); return m + 'm' + (s ? s + 's' : ''); }
  const units = [[1e9, 's'], [1e6, 'ms'], [1e3, '\u00b5s'], [1, 'ns']];
  for (const [u, n] of units) if (step >= u) { const dec = Math.max(0, Math.min(3, -Math.floor(Math.log10(step / u) + 1e-9))); return (t / u).toFixed(dec) + ' ' + n; }
  return t.toFixed(0) + ' ns';
}

/* A horizontal time view on a canvas: zoom with the wheel, pan by dragging. */
class TimeView {
  constructor(canvas, opts) {
    this.c = canvas; this.ctx = canvas.getContext('2d'); this.o = opts;
    this.t0 = opts.t0; this.t1 = opts.t1; this.scrollY = 0; this.gutter = opts.gutter || 0;
    this.onchange = null;
    const c = canvas;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      if (e.shiftKey || e.offsetX < this.gutter) { this.scroll(e.deltaY); return; }
      const f = Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
      this.zoomAt(e.offsetX, f);
    }, { passive: false });
    let drag = null;
    c.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, t0: this.t0, t1: this.t1, sy: this.scrollY, moved: false }; });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; c.classList.add('dragging'); }
      if (!drag.moved) return;
      const w = this.plotW(), dt = -dx * (drag.t1 - drag.t0) / w;
      this.t0 = drag.t0 + dt; this.t1 = drag.t1 + dt; this.scrollY = drag.sy; this.scroll(-dy, true);
      this.changed();
    });
    window.addEventListener('mouseup', (e) => {
      if (!drag) return;
      const moved = drag.moved; drag = null; c.classList.remove('dragging');
      if (!moved && this.o.click) { const r = c.getBoundingClientRect(); this.o.click(e.clientX - r.left, e.clientY - r.top); }
    });
    c.addEventListener('mousemove', (e) => { if (!drag && this.o.hover) this.o.hover(e.offsetX, e.offsetY, e); });
    c.addEventListener('mouseleave', () => { if (this.o.hover) this.o.hover(-1, -1, null); });
    new ResizeObserver(() => this.draw()).observe(c.parentElement);
  }
  /* The plot's width, read from the layout once per draw (x() runs for
   * every bar, and each layout read costs). */
  plotW() { return this.pw || this.measure(); }
  measure() { this.pw = Math.max(10, this.c.clientWidth - this.gutter); return this.pw; }
  x(t) { return this.gutter + (t - this.t0) * this.plotW() / (this.t1 - this.t0); }
  t(x) { return this.t0 + (x - this.gutter) * (this.t1 - this.t0) / this.plotW(); }
  zoomAt(x, f) {
    const t = this.t(Math.max(this.gutter, x));
    let span = (this.t1 - this.t0) * f;
    span = Math.max(100, Math.min(span, (this.o.t1 - this.o.t0) * 20));
    const r = (t - this.t0) / (this.t1 - this.t0);
    this.t0 = t - r * span; this.t1 = this.t0 + span;
    this.changed();
  }
  scroll(dy, quiet) {
    const max = Math.max(0, this.o.contentH() - (this.c.clientHeight - this.o.top));
    this.scrollY = Math.max(0, Math.min(max, this.scrollY + dy));
    if (!quiet) this.changed();
  }
  fit(t0, t1) { this.t0 = t0; this.t1 = Math.max(t1, t0 + 1000); this.changed(); }
  changed() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); if (this.onchange) this.onchange(); });
  }
  size(h) {
    const dpr = window.devicePixelRatio || 1, w = this.c.parentElement.clientWidth;
    if (this.c.width !== Math.round(w * dpr) || this.c.height !== Math.round(h * dpr)) {
      this.c.width = Math.round(w * dpr); this.c.height = Math.round(h * dpr); this.c.style.height = h + 'px';
    }
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }
  axis(h) {
    const ctx = this.ctx, w = this.c.clientWidth;
    ctx.fillStyle = '#fafbfc'; ctx.fillRect(0, 0, w, h);
    ctx.strokeStyle = '#e2e5ea'; ctx.beginPath(); ctx.moveTo(0, h - 0.5); ctx.lineTo(w, h - 0.5); ctx.stroke();
    const step = niceStep(this.t1 - this.t0, this.plotW(), 90);
    ctx.fillStyle = '#687083'; ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
    const first = Math.ceil(this.t0 / step) * step;
    const ticks = [];
    for (let t = first; t <= this.t1 && ticks.length < 200; t += step) ticks.push(t);
    for (const t of ticks) {
      const x = Math.round(this.x(t)) + 0.5;
      if (x < this.gutter) continue;
      ctx.fillRect(x - 0.5, h - 5, 1, 5);
      ctx.fillText(fmtTick(t, step), x + 3, h / 2);
    }
    return ticks;
  }
  grid(ticks, y0, y1) {
    const ctx = this.ctx; ctx.fillStyle = 'rgba(0,0,0,0.045)';
    for (const t of ticks) { const x = Math.round(this.x(t)); if (x >= this.gutter) ctx.fillRect(x, y0, 1, y1 - y0); }
  }
  draw() { this.measure(); this.o.draw(this); }
}

/* ---- process timeline ----------------------------------------------- */
/* The rows come from report_timeline.js (FT_LANES): the tree or the packed
 * view, with folds; this part draws them and answers the mouse. */
const ROW = 20, AXIS = 24, GUT = 230;
let rows = [];
let hoverP = null, selected = null, found = null;
/* 'packed' or 'tree': the packed view is the default for big traces; the
 * choice stays through filtering. */
let view = P.length > FT_LANES.PACKED_ABOVE ? 'packed' : 'tree';
/* Folds the reader opened, by their parent's index: kept through
 * filtering and switching views. */
const foldOpen = new Set();
/* A process's CPU time in ns, when the trace has it. */
function cpuOf(p) { return p.ru && p.ru.cpu >= 0 ? p.ru.cpu : undefined; }
function rebuildRows() {
  const groups = FT_LANES.forest(P, { byStart, multi: MULTI, hosts: HOSTS, hostInfo, hostFilter: F.hosts });
  FT_LANES.folds(groups, T1 - T0, foldOpen);
  rows = view === 'packed' ? FT_LANES.packedRows(P, groups, byStart) : FT_LANES.treeRows(P, groups);
  const btn = $('tl-view');
  btn.textContent = view === 'packed' ? 'Tree view' : 'Packed view';
  btn.title = view === 'packed' ? 'one row per process, under its parent' : 'processes packed into as few lanes as they need, like job slots';
  $('tl-expand').textContent = view === 'packed' ? 'Unfold all' : 'Expand all';
  $('tl-fold').hidden = foldOpen.size === 0;
}
function setView(v) { view = v; rebuildRows(); tl.scrollY = 0; tl.changed(); }
/* The fold or process under (x, y) of the timeline: {row, item}. */
function hitAt(x, y) {
  const r = Math.floor((y - AXIS + tl.scrollY) / ROW);
  if (y <= AXIS || r < 0 || r >= rows.length || rows[r].hdr) return null;
  const row = rows[r];
  if (!row.lane) return { row, item: row };
  if (x < GUT) return { row, item: null };
  const it = FT_LANES.laneItemAt(row, tl.t(x), 4 * (tl.t1 - tl.t0) / tl.plotW());
  return { row, item: it };
}
function toggleFold(f) {
  f.open = !f.open;
  if (f.open) foldOpen.add(f.parent.i); else foldOpen.delete(f.parent.i);
  rebuildRows(); tl.scroll(0, true); tl.changed();
}
/* "412 processes under configure: 3.2 s CPU, 5 non-zero exits". */
function foldText(f) {
  const s = FT_LANES.foldStats(f, cpuOf);
  const parts = [fmtDur(s.wall) + ' wall'];
  if (s.hasCpu) parts.push(fmtDur(s.cpu) + ' CPU');
  parts.push(s.nonzero ? fmtInt(s.nonzero) + ' non-zero exit' + (s.nonzero === 1 ? '' : 's') : 'no non-zero exits');
  if (s.killed) parts.push(fmtInt(s.killed) + ' killed');
  return fmtInt(s.n) + ' processes under ' + f.parent.title + ': ' + parts.join(', ');
}

function hatch(ctx) {
  const c = document.createElement('canvas'); c.width = c.height = 6;
  const g = c.getContext('2d'); g.strokeStyle = 'rgba(255,255,255,0.75)'; g.lineWidth = 1.5;
  g.beginPath(); g.moveTo(0, 6); g.lineTo(6, 0); g.stroke();
  return ctx.createPattern(c, 'repeat');
}
let HATCH = null;

/* Rectangles gathered by fill style and drawn style by style: a canvas
 * pays for each change of fill style, and the packed view draws
 * thousands of bars a frame. Layers keep their order: bars, hatching of
 * what was not instrumented, the white cuts between images. */
function rectBatch() {
  const m = new Map();
  return {
    add(style, x, y, w, h) { let a = m.get(style); if (!a) { a = []; m.set(style, a); } a.push(x, y, w, h); },
    flush(ctx) {
      for (const [style, a] of m) {
        ctx.fillStyle = style;
        for (let k = 0; k < a.length; k += 4) ctx.fillRect(a[k], a[k + 1], a[k + 2], a[k + 3]);
      }
      m.clear();
    }
  };
}
const BARS = [rectBatch(), rectBatch(), rectBatch()];
/* One process's bar at y (its images, its exit, its marks) into BARS;
 * what goes on top (labels, outlines, marks) into deco, drawn after;
 * room: the pixels free after it for its exit text. */
function drawProc(ctx, v, p, y, bh, w, room, deco) {
  const segs = p.segs.length ? p.segs : [{ s: p.start, e: p.end, name: p.name, inst: p.inst }];
  const x0 = v.x(p.start), x1 = v.x(p.end);
  if (x1 < GUT || x0 > w) return;
  for (let k = 0; k < segs.length; k++) {
    const s = segs[k];
    let a = v.x(s.s), b = v.x(s.e);
    if (b < GUT || a > w) continue;
    a = Math.max(a, GUT - 2); b = Math.min(b, w + 2);
    const bw = Math.max(1.5, b - a);
    BARS[0].add(laneColor(p, s.name), a, y, bw, bh);
    if (!s.inst) BARS[1].add(HATCH, a, y, bw, bh);
    if (k > 0) BARS[2].add('#fff', a - 0.5, y - 1, 1.5, bh + 2);
    if (bw > 36) {
      /* The packed view's gutter names no process: the bar says its rank. */
      const label = k === 0 && p.rank >= 0 ? s.name + ' [rank ' + p.rank + ']' : s.name;
      const ink = labelInk(p);
      deco.push(() => {
        ctx.fillStyle = ink;
        ctx.save(); ctx.beginPath(); ctx.rect(a, y, bw, bh); ctx.clip();
        ctx.fillText(label, Math.max(a, GUT) + 4, y + bh / 2 + 0.5); ctx.restore();
      });
    }
  }
  const marked = p.marks.length && p.marks.some((m) => m.cat === 'exec' || m.cat === 'signal');
  if (p !== found && p !== selected && !p.failed && !p.killed && !p.running && !p.hostLost && !marked) return;
  deco.push(() => {
    if (p === found || p === selected) {
      ctx.strokeStyle = p === found ? '#e8590c' : '#2f6fdf'; ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(x0, GUT - 2) - 2, y - 2, Math.max(2, Math.min(x1, w + 2) - Math.max(x0, GUT - 2)) + 4, bh + 4);
      ctx.lineWidth = 1;
    }
    const text = room > 60;
    if (p.failed || p.killed) {
      ctx.strokeStyle = exitInk(p); ctx.lineWidth = 1.5;
      ctx.strokeRect(Math.max(x0, GUT - 2), y - 0.5, Math.max(2, Math.min(x1, w + 2) - Math.max(x0, GUT - 2)), bh + 1);
      ctx.lineWidth = 1;
      if (text) {
        const ex = Math.min(x1, w - 6) + 3;
        ctx.fillStyle = exitInk(p);
        ctx.font = 'bold 11px system-ui, sans-serif';
        ctx.fillText(p.killed ? '\u26a1 ' + (p.sig || 'signal ' + p.ev) : '\u2715 exit ' + p.ev, ex, y + bh / 2 + 0.5);
        ctx.font = '12px system-ui, sans-serif';
      }
    } else if (p.running && text) {
      ctx.fillStyle = '#c97a00'; ctx.fillText('\u2026 running', Math.min(x1, w - 60) + 3, y + bh / 2 + 0.5);
    } else if (p.hostLost && text) {
      ctx.fillStyle = '#d23b3b'; ctx.fillText('\u2716 host lost', Math.min(x1, w - 70) + 3, y + bh / 2 + 0.5);
    }
    for (const m of p.marks) {
      if (m.cat !== 'exec' && m.cat !== 'signal') continue;
      const mx = v.x(m.ts);
      if (mx < GUT || mx > w) continue;
      ctx.fillStyle = '#d23b3b'; ctx.beginPath(); ctx.moveTo(mx, y - 2); ctx.lineTo(mx + 4, y + bh / 2); ctx.lineTo(mx, y + bh + 2); ctx.lineTo(mx - 4, y + bh / 2); ctx.fill();
    }
  });
}
/* A closed fold: a band over its span, its processes' bars thin inside
 * it, its summary on it where there is room. */
function drawFold(ctx, v, f, y, bh, w) {
  const x0 = Math.max(GUT - 2, v.x(f.start)), x1 = Math.min(w + 2, v.x(f.end));
  if (x1 < GUT || x0 > w) return;
  ctx.fillStyle = f.open ? '#f3f4f7' : '#e4e8f0'; ctx.fillRect(x0, y, Math.max(2, x1 - x0), bh);
  if (!f.open) {
    const a = f.procs, fb = rectBatch();
    let lastPx = -1;
    for (let k = 0; k < a.length; k++) {
      const p = a[k];
      if (p.start > v.t1) break;
      if (p.end < v.t0) continue;
      const xa = Math.max(GUT - 2, v.x(p.start)), xb = Math.min(w + 2, v.x(p.end));
      if (xb - xa < 1 && Math.floor(xa) === lastPx && !p.failed && !p.killed) continue;
      lastPx = Math.floor(xa);
      fb.add(laneColor(p, p.name), xa, y + 3, Math.max(1, xb - xa), bh - 6);
      if (p.failed || p.killed) fb.add(exitInk(p), xa, y + bh - 3, Math.max(1.5, xb - xa), 3);
    }
    fb.flush(ctx);
  }
  ctx.strokeStyle = '#9aa3b5'; ctx.setLineDash([3, 2]); ctx.strokeRect(x0 + 0.5, y + 0.5, Math.max(2, x1 - x0) - 1, bh - 1); ctx.setLineDash([]);
  if (x1 - x0 > 80) {
    ctx.save(); ctx.beginPath(); ctx.rect(x0, y, x1 - x0, bh); ctx.clip();
    const txt = (f.open ? '\u25bc ' : '\u25b6 ') + foldText(f), tx = Math.max(x0, GUT) + 4, tw = ctx.measureText(txt).width;
    ctx.fillStyle = 'rgba(255,255,255,0.85)'; ctx.fillRect(tx - 2, y + 2, tw + 4, bh - 4);
    ctx.fillStyle = '#1d2330'; ctx.fillText(txt, tx, y + bh / 2 + 0.5);
    ctx.restore();
  }
}

function drawTimeline(v) {
  const ctx = v.ctx, w = v.c.clientWidth;
  const h = Math.max(160, Math.min(560, AXIS + rows.length * ROW + 2));
  v.size(h);
  if (!HATCH) HATCH = hatch(ctx);
  ctx.clearRect(0, 0, w, h);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  const first = Math.max(0, Math.floor(v.scrollY / ROW)), last = Math.min(rows.length, Math.ceil((v.scrollY + h - AXIS) / ROW));
  ctx.save(); ctx.beginPath(); ctx.rect(0, AXIS, w, h - AXIS); ctx.clip();
  ctx.font = '12px system-ui, sans-serif'; ctx.textBaseline = 'middle';
  for (let r = first; r < last; r++) {
    const p = rows[r], y = AXIS + r * ROW - v.scrollY;
    if (p.hdr) { ctx.fillStyle = p.info && p.info.state !== 'complete' ? '#fdecec' : '#eef1f6'; ctx.fillRect(0, y, w, ROW); continue; }
    if (p === found || (found && found.row === r)) { ctx.fillStyle = '#fff1e6'; ctx.fillRect(0, y, w, ROW); }
    else if (p === selected) { ctx.fillStyle = '#e6eeff'; ctx.fillRect(0, y, w, ROW); }
    else if (p === hoverP) { ctx.fillStyle = '#f2f6ff'; ctx.fillRect(0, y, w, ROW); }
    else if (r % 2) { ctx.fillStyle = '#fafbfc'; ctx.fillRect(0, y, w, ROW); }
  }
  ctx.restore();
  const ticks = v.axis(AXIS);
  ctx.save(); ctx.beginPath(); ctx.rect(GUT, AXIS, w - GUT, h - AXIS); ctx.clip();
  v.grid(ticks, AXIS, h);
  const deco = [];
  for (let r = first; r < last; r++) {
    const p = rows[r], y = AXIS + r * ROW - v.scrollY + 3, bh = ROW - 6;
    if (p.hdr) {
      /* The host's figures along its heading. */
      const h = p.info;
      ctx.fillStyle = h && h.state !== 'complete' ? '#d23b3b' : '#687083'; ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(fmtInt(p.n) + ' process' + (p.n === 1 ? '' : 'es') + (h ? ' \u00b7 ' + clockText(h) + (h.state !== 'complete' ? ' \u00b7 ' + stateText(h) : '') : ''), GUT + 6, y + bh / 2 + 0.5);
      ctx.font = '12px system-ui, sans-serif';
      continue;
    }
    if (p.isFold) { drawFold(ctx, v, p, y - 2, bh + 4, w); continue; }
    if (!p.lane) { drawProc(ctx, v, p, y, bh, w, Infinity, deco); continue; }
    /* A lane: only its items in view; a run of items under one pixel
     * is drawn once. */
    const a = p.items;
    let lastPx = -1;
    for (let k = FT_LANES.laneFirst(p, v.t0); k < a.length; k++) {
      const it = a[k];
      if (it.start > v.t1) break;
      if (it.isFold) { drawFold(ctx, v, it, y - 2, bh + 4, w); lastPx = -1; continue; }
      const xa = v.x(it.start), xb = v.x(it.end);
      if (xb - xa < 1 && Math.floor(xa) === lastPx && !it.failed && !it.killed && it !== found && it !== selected) continue;
      lastPx = Math.floor(xa);
      const next = k + 1 < a.length ? v.x(a[k + 1].start) : w;
      drawProc(ctx, v, it, y, bh, w, next - xb, deco);
    }
  }
  for (const b of BARS) b.flush(ctx);
  /* Under the outlines of the found and selected processes and the exits. */
  drawCritPath(ctx, v, w);
  for (const d of deco) d();
  /* Fork arrows of the hovered (or selected) process: from its parent, to its children. */
  const fp = hoverP || selected;
  if (fp && fp.shown) {
    const arrows = [];
    if (fp.parent >= 0 && P[fp.parent].shown) arrows.push([P[fp.parent], fp]);
    for (const c of (fp.collapsed && view === 'tree' ? [] : fp.vkids || [])) if (c.shown && P[c.parent] === fp) arrows.push([fp, c]);
    /* Launches onto other hosts (ssh -> a node's root). */
    if (MULTI) for (const c of fp.kids) if (c.shown && c.host !== fp.host) arrows.push([fp, c]);
    ctx.strokeStyle = '#1d2330'; ctx.fillStyle = '#1d2330'; ctx.lineWidth = 1.2;
    for (const [a, b] of arrows) {
      const t = b.spawnTs >= 0 ? b.spawnTs : b.start;
      const xa = v.x(t), ya = AXIS + a.row * ROW - v.scrollY + ROW / 2;
      const xb = v.x(b.start), yb = AXIS + b.row * ROW - v.scrollY + ROW / 2;
      if (a.row === b.row) continue;
      ctx.beginPath(); ctx.moveTo(xa, ya); ctx.bezierCurveTo(xa, (ya + yb) / 2, xb, (ya + yb) / 2, xb, yb - (yb > ya ? 6 : -6)); ctx.stroke();
      const dir = yb > ya ? 1 : -1;
      ctx.beginPath(); ctx.moveTo(xb, yb - dir * 2); ctx.lineTo(xb - 3.5, yb - dir * 8); ctx.lineTo(xb + 3.5, yb - dir * 8); ctx.fill();
      ctx.beginPath(); ctx.arc(xa, ya, 2.5, 0, 6.3); ctx.fill();
    }
    ctx.lineWidth = 1;
  }
  ctx.restore();
  /* The gutter: tree of names, or the lanes' numbers. */
  ctx.save(); ctx.beginPath(); ctx.rect(0, AXIS, GUT, h - AXIS); ctx.clip();
  for (let r = first; r < last; r++) {
    const p = rows[r], y = AXIS + r * ROW - v.scrollY + ROW / 2;
    if (p.hdr) {
      const h = p.info;
      ctx.font = 'bold 12px system-ui, sans-serif'; ctx.fillStyle = h && h.state !== 'complete' ? '#d23b3b' : '#1d2330';
      ctx.fillText('\u25a0 ' + p.host + (h && h.role === 'head' ? ' (head)' : '') + (h && h.state !== 'complete' ? ' \u2014 ' + h.state : ''), 6, y + 0.5);
      continue;
    }
    if (p.lane) {
      ctx.font = '12px system-ui, sans-serif'; ctx.fillStyle = '#1d2330';
      const txt = 'lane ' + p.num;
      ctx.fillText(txt, 8, y + 0.5);
      const tw = ctx.measureText(txt).width;
      ctx.fillStyle = '#9aa3b5'; ctx.font = '11px system-ui, sans-serif';
      if (p.note === undefined) { const n = p.items.reduce((k, it) => k + (it.isFold ? it.procs.length : 1), 0); p.note = fmtInt(n) + (n === 1 ? ' process' : ' processes'); }
      ctx.fillText(p.note, 14 + tw, y + 0.5);
      continue;
    }
    const x = 6 + Math.min(p.vdepth, 14) * 12;
    if (p.isFold) {
      ctx.fillStyle = '#687083'; ctx.font = '10px system-ui, sans-serif'; ctx.fillText(p.open ? '\u25bc' : '\u25b6', x, y + 0.5);
      ctx.font = 'italic 12px system-ui, sans-serif'; ctx.fillStyle = '#1d2330';
      ctx.fillText(fmtInt(p.procs.length) + ' processes under ' + p.parent.title, x + 13, y + 0.5);
      continue;
    }
    if (p.vkids.length) { ctx.fillStyle = '#687083'; ctx.font = '10px system-ui, sans-serif'; ctx.fillText(p.collapsed ? '\u25b6' : '\u25bc', x, y + 0.5); }
    ctx.font = (p === selected ? 'bold ' : '') + '12px system-ui, sans-serif';
    ctx.fillStyle = p.failed || p.killed ? exitInk(p) : '#1d2330';
    const txt = p.name + (p.rank >= 0 ? ' [rank ' + p.rank + ']' : '') + (p.collapsed && p.vkids.length ? ' (+' + countDesc(p) + ')' : '');
    ctx.fillText(txt, x + 13, y + 0.5);
    const tw = ctx.measureText(txt).width;
    ctx.fillStyle = '#9aa3b5'; ctx.font = '11px system-ui, sans-serif';
    ctx.fillText(String(p.pid), x + 18 + tw, y + 0.5);
  }
  ctx.restore();
  ctx.fillStyle = '#e2e5ea'; ctx.fillRect(GUT - 1, 0, 1, h);
  ctx.fillStyle = '#687083'; ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
  ctx.fillStyle = '#fafbfc'; ctx.fillRect(0, 0, GUT - 1, AXIS - 1);
  const nLanes = rows.reduce((n, r) => n + !r.hdr, 0);
  ctx.fillStyle = '#687083'; ctx.fillText(fmtInt(nLanes) + (view === 'packed' ? ' lanes (packed)' : ' rows'), 8, AXIS / 2);
  /* A scroll thumb when the lanes do not fit. */
  const contentH = rows.length * ROW, viewH = h - AXIS;
  if (contentH > viewH) {
    const th = Math.max(20, viewH * viewH / contentH), ty = AXIS + (viewH - th) * v.scrollY / (contentH - viewH);
    ctx.fillStyle = 'rgba(29,35,48,0.25)'; ctx.fillRect(w - 6, ty, 4, th);
  }
}
function countDesc(p) { let n = 0; const st = [...p.vkids]; while (st.length) { const c = st.pop(); n++; for (const k of c.vkids || []) st.push(k); } return n; }

const tipEl = $('tip');
function showTip(x, y, lines) {
  tipEl.replaceChildren();
  for (const [cls, text] of lines) tipEl.appendChild(el('div', cls, text));
  tipEl.hidden = false;
  const r = tipEl.getBoundingClientRect();
  tipEl.style.left = Math.min(x + 14, window.innerWidth - r.width - 8) + 'px';
  tipEl.style.top = Math.min(y + 14, window.innerHeight - r.height - 8) + 'px';
}
function hideTip() { tipEl.hidden = true; }
function exitText(p) {
  if (p.ek === 1) return 'exit ' + p.ev;
  if (p.ek === 2) return 'killed by ' + (p.sig || 'signal ' + p.ev);
  if (p.ek === 3) return 'still running';
  if (p.ek === 4) return 'host lost ' + fmtDur(p.end) + ' into the run';
  return 'exit unknown';
}

const tl = new TimeView($('timeline'), {
  t0: T0, t1: T1, gutter: GUT, top: AXIS, contentH: () => rows.length * ROW,
  draw: drawTimeline,
  hover(x, y, e) {
    const hit = e ? hitAt(x, y) : null, it = hit && hit.item;
    const p = it && !it.isFold ? it : null;
    if (p !== hoverP) { hoverP = p; tl.changed(); }
    if (it && it.isFold) { showTip(e.clientX, e.clientY, [['t', foldText(it)], ['m', 'click to ' + (it.open ? 'fold them again' : 'show them')]]); return; }
    if (!p) { hideTip(); return; }
    showTip(e.clientX, e.clientY, [
      ['t', p.title + '  (pid ' + p.pid + (MULTI ? ' on ' + p.host : '') + (p.rank >= 0 ? ', rank ' + p.rank : '') + ')'],
      ['m', p.label || p.argv.join(' ')],
      [p.failed || p.killed ? 'bad' : '', fmtDur(p.end - p.start) + ' \u00b7 ' + exitText(p) + (p.segs.length > 1 ? ' \u00b7 ' + p.segs.length + ' images' : '')],
      ['m', 'started at ' + fmtStart(p.start) + (p.spawn ? ' by ' + p.spawn : '')]
    ]);
  },
  click(x, y) {
    const hit = hitAt(x, y), it = hit && hit.item;
    if (!it) return;
    if (it.isFold) { toggleFold(it); return; }
    const tx = 6 + Math.min(it.vdepth, 14) * 12;
    if (!hit.row.lane && x < GUT && it.vkids.length && x >= tx - 4 && x <= tx + 12) { it.collapsed = !it.collapsed; rebuildRows(); tl.changed(); return; }
    openDetail(it);
  }
});
tl.onchange = () => drawConc();

/* ---- legend --------------------------------------------------------- */
function legend() {
  const box = $('legend'); box.replaceChildren();
  const top = colourBy === 'program' ? [...colorOf.entries()].slice(0, PALETTE.length) : colourLegend();
  for (const [n, c] of top) {
    const s = el('span'); const sw = el('span', 'sw'); sw.style.background = c; s.appendChild(sw); s.appendChild(document.createTextNode(n)); box.appendChild(s);
  }
  if (CP && cpShown) { const s = el('span', 'cp-key'); s.appendChild(el('span', 'cp-sw')); s.appendChild(document.createTextNode('critical path')); box.appendChild(s); }
  box.appendChild(el('span', 'mark', '\u2715 non-zero exit  \u26a1 killed'));
  const hs = el('span', null, '\u2571 hatched: not instrumented');
  box.appendChild(hs);
}

/* ---- lane colouring -------------------------------------------------- */
/* Lanes coloured by program (each its colour), by CPU time or peak memory
 * (a ramp from light to dark over the processes' range, on a log scale:
 * builds span milliseconds to minutes), or by exit. Eight steps per ramp,
 * so the timeline batches few fill styles. */
let colourBy = 'program';
const RAMP_STEPS = 8;
const RAMPS = {
  cpu: ['#e3edf9', '#c4d9f1', '#9fc0e6', '#77a3d8', '#5186c6', '#336aae', '#1f508f', '#123a6c'],
  rss: ['#f6e8f3', '#ecd0e6', '#dcb0d4', '#c98dc0', '#b36aab', '#974d93', '#773677', '#552458']
};
const NO_FIGURE = '#d5d9e0';
const EXIT_INK = { ok: '#8cc9a0', nonzero: '#f0b65a', killed: '#d23b3b', other: '#b0b7c3' };
/* The log range of a figure over the processes that have it. */
const rampRange = {};
function rangeOf(key, get) {
  if (!rampRange[key]) {
    let lo = Infinity, hi = -Infinity;
    for (const p of P) { const v = get(p); if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }
    rampRange[key] = isFinite(lo) ? [Math.log(lo), Math.log(hi)] : null;
  }
  return rampRange[key];
}
function rampStep(key, get, v) {
  const r = rangeOf(key, get);
  if (!r || v <= 0) return 0;
  return r[1] > r[0] ? Math.min(RAMP_STEPS - 1, Math.floor((Math.log(v) - r[0]) / (r[1] - r[0]) * RAMP_STEPS)) : RAMP_STEPS - 1;
}
function exitKind(p) {
  if (p.killed) return 'killed';
  if (p.failed) return 'nonzero';
  return p.ek === 1 ? 'ok' : 'other';
}
/* The fill of a process's image named segName. */
function laneColor(p, segName) {
  if (colourBy === 'cpu') { const v = cpuOfP(p); return v < 0 ? NO_FIGURE : RAMPS.cpu[rampStep('cpu', cpuOfP, v)]; }
  if (colourBy === 'rss') { const v = rssOfP(p); return v < 0 ? NO_FIGURE : RAMPS.rss[rampStep('rss', rssOfP, v)]; }
  if (colourBy === 'exit') return EXIT_INK[exitKind(p)];
  return color(segName);
}
/* The ink of a bar's label: white on the dark half of a ramp. */
function labelInk(p) {
  if (colourBy === 'cpu' && rampStep('cpu', cpuOfP, cpuOfP(p)) >= RAMP_STEPS / 2 + 1) return '#fff';
  if (colourBy === 'rss' && rampStep('rss', rssOfP, rssOfP(p)) >= RAMP_STEPS / 2 + 1) return '#fff';
  return '#1d2330';
}
/* The ink of a non-zero exit or a kill on the lanes: red for what is to
 * look at (killed, a failure on the critical path, any non-zero exit of a
 * run that failed), amber for the rest (a probe's exit 1 in a build that
 * succeeded). */
function exitInk(p) {
  if (p.killed || p.hostLost || cpFailure(p) || (runStatus().v !== 0 && runStatus().v !== null)) return '#d23b3b';
  return '#c97a00';
}
/* The legend of a ramp: its ends and a middle step, as figures. */
function colourLegend() {
  if (colourBy === 'exit') return [['exit 0', EXIT_INK.ok], ['non-zero exit', EXIT_INK.nonzero], ['killed', EXIT_INK.killed], ['other', EXIT_INK.other]];
  const key = colourBy, get = key === 'cpu' ? cpuOfP : rssOfP, fmt = key === 'cpu' ? fmtDur : fmtKiB, r = rangeOf(key, get);
  if (!r) return [['no figures in this trace', NO_FIGURE]];
  const at = (k) => fmt(Math.exp(r[0] + (r[1] - r[0]) * k / RAMP_STEPS));
  return [[(key === 'cpu' ? 'CPU ' : 'peak memory ') + at(0), RAMPS[key][0]], [at(RAMP_STEPS / 2), RAMPS[key][RAMP_STEPS / 2]],
    [at(RAMP_STEPS), RAMPS[key][RAMP_STEPS - 1]], ['no figures', NO_FIGURE]];
}
function setColourBy(mode) {
  colourBy = mode;
  $('tl-colour').value = mode;
  legend(); tl.changed();
}

/* ---- critical path on the lanes -------------------------------------- */
/* Each step a thick line along the bottom of its process's row (the row
 * of its fold when folded), consecutive steps joined where the path goes
 * from one process to the next: the path reads as one line through the
 * lanes, in the tree view as in the packed one. */
let cpShown = true;
const CP_INK = '#6a2cc9';
function drawCritPath(ctx, v, w) {
  if (!CP || !cpShown) return;
  const yOf = (p) => AXIS + p.row * ROW - v.scrollY + ROW - 3;
  ctx.save();
  ctx.strokeStyle = CP_INK; ctx.lineWidth = 3; ctx.lineCap = 'butt';
  ctx.beginPath();
  let prev = null;
  for (const st of CP.steps) {
    const p = st.p;
    if (!p || p.row < 0) { prev = null; continue; }
    const y = yOf(p), a = Math.max(GUT, v.x(st.s)), b = Math.min(w, v.x(st.e));
    if (prev && prev.y !== y) { const x = Math.max(GUT, Math.min(w, v.x(st.s))); ctx.moveTo(x, prev.y); ctx.lineTo(x, y); }
    if (b >= GUT && a <= w) { ctx.moveTo(a, y); ctx.lineTo(Math.max(a + 1, b), y); }
    prev = { y };
  }
  ctx.stroke();
  ctx.restore();
}

/* ---- process detail ------------------------------------------------- */
let dv = null, dlanes = [];
function layoutThread(t, p) {
  const sl = t.slices.filter((s) => sliceOk(p, s.name)).sort((a, b) => (a.s - b.s) || (b.d - a.d));
  const st = []; let maxD = 0;
  for (const s of sl) {
    while (st.length && st[st.length - 1] <= s.s) st.pop();
    s.depth = st.length; if (s.depth > maxD) maxD = s.depth;
    st.push(s.s + s.d);
  }
  return { t, sl, depth: sl.length ? maxD + 1 : 0 };
}
function openDetail(p) {
  selected = p;
  const sec = $('detail'); sec.hidden = false;
  $('d-title').textContent = p.title + ' \u2014 pid ' + p.pid;
  const dl = $('d-info'); dl.replaceChildren();
  const add = (k, v, cls) => { dl.appendChild(el('dt', null, k)); const d = el('dd', cls); if (v instanceof Node) d.appendChild(v); else d.textContent = v; dl.appendChild(d); };
  const av = el('div', 'argv mono'); for (const a of p.argv) av.appendChild(el('span', null, a));
  add('argv', p.argv.length ? av : (p.label || '?'));
  if (p.interp) add('program', p.name + ', a script run by ' + p.interp);
  add('exe', p.exe || '?');
  add('cwd', p.cwd || '?');
  add('exit', exitText(p), p.failed || p.killed || p.hostLost ? 'bad' : '');
  if (MULTI || p.host !== M.host) add('host', p.host + (hostInfo.has(p.host) ? ' (' + clockText(hostInfo.get(p.host)) + ')' : ''));
  if (p.rank >= 0) add('rank', rankText(p));
  add('duration', fmtDur(p.end - p.start));
  add('start', fmtStart(p.start) + ' from the start of the run');
  rusageRows(p, add);
  add('pid', p.pid + (p.hpid !== p.pid ? ' (host pid ' + p.hpid + ')' : '') + (p.ppid >= 0 ? ', parent pid ' + p.ppid : ''));
  add('created by', p.spawn || (p.parent >= 0 ? '?' : 'root of the tree'));
  add('images', String(p.segs.length) + (p.segs.length > 1 ? ': ' + p.segs.map((s) => s.name).join(' \u2192 ') : ''));
  add('instrumented', p.inst ? 'yes' : 'no');
  add('threads', String(p.threads.length));
  add('events', fmtInt(p.events) + (p.lost ? ', ' + fmtInt(p.lost) + ' lost' : ''));
  if (p.kids.length) add('children', String(p.kids.length));
  dlanes = p.threads.slice().sort((a, b) => (a.sort - b.sort) || (a.tid - b.tid)).map((t) => layoutThread(t, p));
  const shown = dlanes.reduce((a, l) => a + l.sl.length, 0), total = dlanes.reduce((a, l) => a + (l.t.total || 0), 0);
  $('d-threads-note').textContent = dlanes.length + ' thread' + (dlanes.length === 1 ? '' : 's') + (total ? ' \u00b7 ' + fmtInt(shown) + ' of ' + fmtInt(total) + ' slices drawn (the longest)' : ' \u00b7 no regions or functions recorded');
  if (!dv) {
    dv = new TimeView($('threads'), {
      t0: p.start, t1: p.end, gutter: 150, top: AXIS, contentH: () => dContentH(), draw: drawThreads,
      hover: hoverThreads, click() {}
    });
  }
  dv.o.t0 = p.start; dv.o.t1 = Math.max(p.end, p.start + 1000);
  dv.scrollY = 0;
  const pad = (p.end - p.start) * 0.02;
  dv.fit(p.start - pad, p.end + pad);
  tl.changed();
  if (curTab !== 'programs') renderTable();
  renderTop();
}
/* The detail's rows of what a process used, and how exact the figures
 * are (docs/INSIGHT.md, "Resource use per process"). */
const RU_SOURCE = {
  wait: 'its reaper\'s wait4, less what it reaped itself: exact',
  exit: 'the process itself at exit: exact up to its exit call',
  'wait+descendants': 'its reaper\'s wait4: includes the descendants it reaped'
};
function rusageRows(p, add) {
  const ru = p.ru;
  if (!ru) { add('CPU', 'not reported (nobody reaped it and it said nothing)'); return; }
  add('CPU', fmtDur(ru.cpu) + ' (user ' + fmtDur(ru.user) + ', system ' + fmtDur(ru.sys) + ')');
  add('peak memory', fmtKiB(ru.maxrss) + ' resident');
  add('page faults', fmtInt(ru.majflt) + ' major, ' + fmtInt(ru.minflt) + ' minor');
  add('context switches', fmtInt(ru.nvcsw) + ' voluntary, ' + fmtInt(ru.nivcsw) + ' involuntary');
  add('block I/O', fmtInt(ru.inblock) + ' in, ' + fmtInt(ru.oublock) + ' out');
  add('figures from', RU_SOURCE[ru.source] || ru.source);
}
function closeDetail() { selected = null; $('detail').hidden = true; tl.changed(); if (curTab === 'functions') renderTable(); }
const SLICE_H = 16, IMG_H = 20;
function dContentH() { return IMG_H + 6 + dlanes.reduce((a, l) => a + Math.max(1, l.depth) * SLICE_H + 10, 0); }
function drawThreads(v) {
  const p = selected; if (!p) return;
  const ctx = v.ctx, w = v.c.clientWidth;
  const h = Math.max(120, Math.min(480, AXIS + dContentH() + 4));
  v.size(h);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  const ticks = v.axis(AXIS);
  ctx.save(); ctx.beginPath(); ctx.rect(0, AXIS, w, h - AXIS); ctx.clip();
  ctx.translate(0, -v.scrollY);
  v.grid(ticks, AXIS, AXIS + dContentH() + v.scrollY + h);
  ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
  let y = AXIS + 4;
  const hits = [];
  /* Images. */
  ctx.fillStyle = '#687083'; ctx.fillText('images', 8, y + IMG_H / 2);
  const segs = p.segs.length ? p.segs : [{ s: p.start, e: p.end, name: p.name, inst: p.inst }];
  ctx.save(); ctx.beginPath(); ctx.rect(v.gutter, 0, w - v.gutter, 1e6); ctx.clip();
  for (const s of segs) {
    const a = v.x(s.s), b = v.x(s.e), bw = Math.max(1.5, b - a);
    ctx.fillStyle = color(s.name); ctx.fillRect(a, y, bw, IMG_H - 4);
    if (!s.inst) { ctx.fillStyle = HATCH; ctx.fillRect(a, y, bw, IMG_H - 4); }
    if (bw > 30) { ctx.fillStyle = '#1d2330'; ctx.fillText(s.name, Math.max(a, v.gutter) + 4, y + (IMG_H - 4) / 2); }
    hits.push([a, y, bw, IMG_H - 4, s.name + ' (image)', s.e - s.s]);
  }
  ctx.restore();
  y += IMG_H + 2;
  for (const l of dlanes) {
    const lh = Math.max(1, l.depth) * SLICE_H + 10;
    ctx.fillStyle = '#e2e5ea'; ctx.fillRect(0, y, w, 1);
    ctx.fillStyle = '#1d2330';
    ctx.fillText((l.t.name || 'thread') + ' ' + l.t.tid, 8, y + 12);
    if (!l.sl.length) { ctx.fillStyle = '#9aa3b5'; ctx.fillText('no regions recorded', v.gutter + 6, y + 12); }
    ctx.save(); ctx.beginPath(); ctx.rect(v.gutter, y, w - v.gutter, lh); ctx.clip();
    const yTop = y + 5;
    for (const s of l.sl) {
      const a = v.x(s.s), b = v.x(s.s + s.d);
      if (b < v.gutter || a > w) continue;
      const sy = yTop + s.depth * SLICE_H, bw = Math.max(1, b - a);
      ctx.fillStyle = color(s.name); ctx.fillRect(a, sy, bw, SLICE_H - 2);
      if (bw > 28) { ctx.fillStyle = '#1d2330'; ctx.save(); ctx.beginPath(); ctx.rect(a, sy, bw, SLICE_H); ctx.clip(); ctx.fillText(s.name, Math.max(a, v.gutter) + 3, sy + (SLICE_H - 2) / 2); ctx.restore(); }
      hits.push([a, sy, bw, SLICE_H - 2, s.name, s.d]);
    }
    for (const m of p.marks) {
      if (m.tid !== l.t.tid) continue;
      const mx = v.x(m.ts);
      ctx.fillStyle = m.cat === 'exec' || m.cat === 'signal' ? '#d23b3b' : '#687083';
      ctx.beginPath(); ctx.moveTo(mx, y + 1); ctx.lineTo(mx + 3.5, y + 6); ctx.lineTo(mx - 3.5, y + 6); ctx.fill();
      hits.push([mx - 4, y, 8, 8, m.name + (m.cat ? ' [' + m.cat + ']' : ''), -1]);
    }
    ctx.restore();
    y += lh;
  }
  ctx.restore();
  ctx.fillStyle = '#e2e5ea'; ctx.fillRect(v.gutter - 1, AXIS, 1, h - AXIS);
  v.hits = hits;
}
function hoverThreads(x, y, e) {
  if (!e || !dv || !dv.hits) { hideTip(); return; }
  const yy = y + dv.scrollY;
  for (let k = dv.hits.length - 1; k >= 0; k--) {
    const [a, b, w, h, name, d] = dv.hits[k];
    if (x >= a && x <= a + Math.max(w, 3) && yy >= b && yy <= b + h) { showTip(e.clientX, e.clientY, [['t', name], ['m', d >= 0 ? fmtDur(d) : 'instant']]); return; }
  }
  hideTip();
}

/* ---- concurrency and counters --------------------------------------- */
function linePlot(canvas, pts, t0, t1, opts) {
  const dpr = window.devicePixelRatio || 1, w = canvas.parentElement.clientWidth, h = opts.h || 120;
  canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); canvas.style.height = h + 'px';
  const ctx = canvas.getContext('2d'); ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const L = 56, R = 10, Tp = 8, B = 20, pw = w - L - R, ph = h - Tp - B;
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  let lo = Infinity, hi = -Infinity;
  for (let k = 0; k < pts.length; k += 2) { const v = pts[k + 1]; if (v < lo) lo = v; if (v > hi) hi = v; }
  if (!isFinite(lo)) { lo = 0; hi = 1; }
  if (opts.zero) lo = Math.min(0, lo);
  if (hi === lo) hi = lo + 1;
  const X = (t) => L + (t - t0) * pw / (t1 - t0), Y = (v) => Tp + ph - (v - lo) * ph / (hi - lo);
  ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#687083'; ctx.textBaseline = 'middle'; ctx.textAlign = 'right';
  const vs = niceStep(hi - lo, ph, 28);
  for (let v = Math.ceil(lo / vs) * vs; v <= hi; v += vs) { const y = Math.round(Y(v)) + 0.5; ctx.fillStyle = '#eef0f3'; ctx.fillRect(L, y, pw, 1); ctx.fillStyle = '#687083'; ctx.fillText(+v.toPrecision(6) + '', L - 6, y); }
  ctx.textAlign = 'left';
  const ts = niceStep(t1 - t0, pw, 90);
  for (let t = Math.ceil(t0 / ts) * ts; t <= t1; t += ts) { const x = X(t); ctx.fillStyle = '#687083'; ctx.fillText(fmtTick(t, ts), x + 2, h - B / 2 + 2); ctx.fillRect(x, Tp + ph, 1, 4); }
  ctx.save(); ctx.beginPath(); ctx.rect(L, 0, pw, h); ctx.clip();
  ctx.beginPath();
  let started = false, prevY = Y(lo);
  for (let k = 0; k < pts.length; k += 2) {
    const x = X(pts[k]), y = Y(pts[k + 1]);
    if (!started) { ctx.moveTo(x, y); started = true; } else if (opts.step) { ctx.lineTo(x, prevY); ctx.lineTo(x, y); } else ctx.lineTo(x, y);
    prevY = y;
  }
  if (opts.step && started) ctx.lineTo(L + pw, prevY);
  ctx.strokeStyle = opts.color || '#2f6fdf'; ctx.lineWidth = 1.5; ctx.stroke();
  if (opts.fill && started) { ctx.lineTo(L + pw, Y(lo)); ctx.lineTo(X(pts[0]), Y(lo)); ctx.closePath(); ctx.fillStyle = opts.fill; ctx.fill(); }
  ctx.restore();
}
let concPts = null;
function concurrency() {
  const ev = [];
  for (const p of P) if (p.visible) { ev.push([p.start, 1]); ev.push([p.end, -1]); }
  ev.sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
  const pts = []; let n = 0;
  for (let k = 0; k < ev.length; k++) {
    n += ev[k][1];
    if (k + 1 < ev.length && ev[k + 1][0] === ev[k][0]) continue;
    pts.push(ev[k][0], n);
  }
  return pts;
}
function drawConc() {
  if (!concPts) concPts = concurrency();
  /* Only the points in view (plus one on each side) are drawn, found by
   * bisection; where there are more than the plot has pixels, each
   * pixel's column keeps its highest value (tens of thousands of
   * processes give as many steps). */
  const t0 = tl.t0, t1 = tl.t1, pts = [], a = concPts, n = a.length / 2;
  let lo = 0, hi = n;
  while (lo < hi) { const m = (lo + hi) >> 1; if (a[2 * m] < t0) lo = m + 1; else hi = m; }
  if (lo > 0) pts.push(t0, a[2 * (lo - 1) + 1]);
  const cols = Math.max(100, $('conc').clientWidth), dt = (t1 - t0) / cols;
  let last = lo;
  while (last < n && a[2 * last] <= t1) last++;
  if (last - lo <= 2 * cols) {
    for (let k = lo; k < Math.min(n, last + 1); k++) pts.push(a[2 * k], a[2 * k + 1]);
  } else {
    let col = -1, top = 0, tail = 0, ts = 0;
    for (let k = lo; k < last; k++) {
      const c = Math.floor((a[2 * k] - t0) / dt);
      if (c !== col) { if (col >= 0) pts.push(ts, top, ts + dt * 0.5, tail); col = c; ts = a[2 * k]; top = a[2 * k + 1]; }
      if (a[2 * k + 1] > top) top = a[2 * k + 1];
      tail = a[2 * k + 1];
    }
    if (col >= 0) pts.push(ts, top, ts + dt * 0.5, tail);
    if (last < n) pts.push(a[2 * last], a[2 * last + 1]);
  }
  linePlot($('conc'), pts, t0, t1, { step: true, zero: true, fill: 'rgba(47,111,223,0.12)', h: 110 });
}
function counters() {
  const box = $('counters');
  const list = D.counters.slice(0, 24);
  for (const c of list) {
    const p = P[c[0]];
    const wrap = el('div');
    wrap.appendChild(el('div', 'ctitle', S[c[1]] + ' \u2014 ' + p.name + ' ' + p.pid));
    const cw = el('div', 'canvas-wrap plot'); const cv = el('canvas'); cw.appendChild(cv); wrap.appendChild(cw);
    box.appendChild(wrap);
    const pts = c[2].slice();
    const pairs = []; for (let k = 0; k < pts.length; k += 2) pairs.push([pts[k], pts[k + 1]]);
    pairs.sort((a, b) => a[0] - b[0]);
    const flat = []; for (const q of pairs) flat.push(q[0], q[1]);
    const t0 = Math.min(p.start, flat.length ? flat[0] : p.start), t1 = Math.max(p.end, flat.length ? flat[flat.length - 2] : p.end);
    const draw = () => linePlot(cv, flat, t0, Math.max(t1, t0 + 1), { color: color(S[c[1]]), h: 100 });
    new ResizeObserver(draw).observe(cw);
  }
  if (D.counters.length > list.length) box.appendChild(el('div', 'hint', (D.counters.length - list.length) + ' more counter series not drawn.'));
}

/* ---- tables --------------------------------------------------------- */
let curTab = 'programs';
const sortState = { programs: [HAS_RU ? 'cpu' : 'count', -1], processes: ['start', 1], critpath: ['n', 1], critpathProcs: ['time', -1], functions: ['total', -1] };
const LIMIT = 300;
let showAll = false;
function table(cols, data, key, onRow) {
  const box = $('table'); box.replaceChildren();
  const [sk, dir] = sortState[key];
  const col = cols.find((c) => c.k === sk) || cols[0];
  data.sort((a, b) => { const x = a[col.k], y = b[col.k]; return (typeof x === 'string' ? x.localeCompare(y) : (x - y)) * dir; });
  const t = el('table'), thead = el('thead'), tr = el('tr');
  for (const c of cols) {
    const th = el('th', (c.num ? 'num' : '') + (c.k === sk ? ' sorted' : ''), c.h + (c.k === sk ? (dir > 0 ? ' \u25b2' : ' \u25bc') : ''));
    th.dataset.k = c.k;
    th.addEventListener('click', () => { sortState[key] = [c.k, c.k === sk ? -dir : (c.num ? -1 : 1)]; renderTable(); });
    tr.appendChild(th);
  }
  thead.appendChild(tr); t.appendChild(thead);
  const tb = el('tbody');
  const n = showAll ? data.length : Math.min(LIMIT, data.length);
  for (let r = 0; r < n; r++) {
    const row = data[r], tr2 = el('tr', onRow ? 'clickable' : '');
    if (row.p && row.p === selected) tr2.classList.add('selected');
    for (const c of cols) {
      const td = el('td', (c.num ? 'num' : '') + (c.cls ? ' ' + c.cls(row) : ''));
      if (c.sw) { const sw = el('span', 'sw'); sw.style.background = c.swc ? c.swc(row) : color(row[c.k]); td.appendChild(sw); }
      if (c.bar) { const bar = el('span', 'bar'); bar.style.width = Math.max(1, Math.round(60 * c.bar(row))) + 'px'; td.appendChild(bar); }
      td.appendChild(document.createTextNode(c.f ? c.f(row[c.k], row) : row[c.k]));
      if (c.title) td.title = c.title(row);
      tr2.appendChild(td);
    }
    if (onRow) tr2.addEventListener('click', () => onRow(row));
    tb.appendChild(tr2);
  }
  t.appendChild(tb); box.appendChild(t);
  if (data.length > n) {
    const b = el('button', 'ghost more', 'Show all ' + fmtInt(data.length) + ' rows');
    b.addEventListener('click', () => { showAll = true; renderTable(); });
    box.appendChild(b);
  }
  if (!data.length) box.appendChild(el('div', 'hint', key === 'functions' ? 'No regions or functions in this trace (instrument code with forktrace.h, or combine traces that have them).' : 'Nothing matches the filters.'));
}
function renderTable() {
  $('fn-scope-l').hidden = curTab !== 'functions';
  const vis = P.filter((p) => p.visible);
  if (curTab === 'programs') programsTable(vis);
  else if (curTab === 'processes') processesTable(vis);
  else if (curTab === 'critpath') critpathTable();
  else {
    const scope = $('fn-scope').value;
    let data;
    if (scope === 'sel' && selected) {
      data = (statsByProc.get(selected.i) || []).filter((s) => sliceOk(selected, s.name)).map((s) => ({ ...s, procs: 1 }));
    } else if (!F.inc && !F.exc && !F.ranges && !F.hosts && !F.ranks) {
      data = OVERALL.map((s) => ({ ...s }));
    } else {
      const g = new Map();
      for (const s of STATS) {
        const p = P[s.p]; if (!p.visible || !sliceOk(p, s.name)) continue;
        let r = g.get(s.name); if (!r) { r = { name: s.name, calls: 0, total: 0, self: 0, max: 0, procs: 0 }; g.set(s.name, r); }
        r.calls += s.calls; r.total += s.total; r.self += s.self; if (s.max > r.max) r.max = s.max; r.procs++;
      }
      data = [...g.values()];
    }
    for (const r of data) r.mean = r.calls ? r.total / r.calls : 0;
    table([
      { k: 'name', h: 'Region / function', sw: true, cls: () => 'mono' }, { k: 'calls', h: 'Calls', num: true, f: fmtInt },
      { k: 'total', h: 'Total', num: true, f: fmtDur }, { k: 'self', h: 'Self', num: true, f: fmtDur },
      { k: 'mean', h: 'Mean', num: true, f: fmtDur }, { k: 'max', h: 'Max', num: true, f: fmtDur },
      { k: 'procs', h: 'Processes', num: true, f: fmtInt }
    ], data, 'functions', null);
  }
}
/* ---- resource tables ------------------------------------------------ */
const cpuOfP = (p) => (p.ru && p.ru.cpu >= 0 ? p.ru.cpu : -1);
const rssOfP = (p) => (p.ru && p.ru.maxrss >= 0 ? p.ru.maxrss : -1);
const fmtOpt = (f) => (v) => (v >= 0 ? f(v) : '\u2013');
/* A process's exit in a table cell: killed, host lost and failures on the
 * critical path in red, other non-zero exits muted (they are what they
 * are: a probe that exits 1 is no failure of the run). */
function exitCls(p) {
  if (p.killed || p.hostLost || cpFailure(p)) return 'bad';
  return p.failed ? 'nonzero' : '';
}
function openFromTable(p) { openDetail(p); scrollToRow(p); }

/* Per program (grouped by name, docs/INSIGHT.md "Names"): processes, wall
 * time (total, max), CPU (total of those with figures), the largest peak
 * memory, non-zero exits and killed processes. */
function programRows(vis) {
  const g = new Map();
  for (const p of vis) {
    let r = g.get(p.name);
    if (!r) { r = { name: p.name, title: p.title, count: 0, total: 0, max: 0, cpu: -1, rss: -1, nonzero: 0, killed: 0 }; g.set(p.name, r); }
    const d = p.end - p.start, c = cpuOfP(p), m = rssOfP(p);
    r.count++; r.total += d; if (d > r.max) r.max = d;
    if (c >= 0) r.cpu = Math.max(0, r.cpu) + c;
    if (m > r.rss) r.rss = m;
    r.nonzero += p.failed; r.killed += p.killed;
  }
  return [...g.values()];
}
function programsTable(vis) {
  table([
    { k: 'title', h: 'Program', sw: true, swc: (r) => color(r.title) }, { k: 'count', h: 'Processes', num: true, f: fmtInt },
    { k: 'total', h: 'Total wall', num: true, f: fmtDur }, { k: 'max', h: 'Longest', num: true, f: fmtDur },
    { k: 'cpu', h: 'CPU', num: true, f: fmtOpt(fmtDur) }, { k: 'rss', h: 'Peak memory', num: true, f: fmtOpt(fmtKiB) },
    { k: 'nonzero', h: 'Non-zero exits', num: true, f: (v) => v ? fmtInt(v) : '\u2013', cls: (r) => r.nonzero ? 'nonzero' : '' },
    { k: 'killed', h: 'Killed', num: true, f: (v) => v ? fmtInt(v) : '\u2013', cls: (r) => r.killed ? 'bad' : '' }
  ], programRows(vis), 'programs', (r) => { $('f-include').value = '^' + r.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'; applyFilters(); });
}
function processesTable(vis) {
  const data = vis.map((p) => ({ p, pid: p.pid, name: p.title, host: p.host, rank: p.rank >= 0 ? p.rank : -1, cmd: p.label || p.argv.join(' '),
    start: p.start, dur: p.end - p.start, cpu: cpuOfP(p), rss: rssOfP(p), exit: exitText(p), threads: p.threads.length, events: p.events }));
  table([
    { k: 'pid', h: 'PID', num: true }, { k: 'name', h: 'Program', sw: true, swc: (r) => color(r.p.name) },
    ...(MULTI ? [{ k: 'host', h: 'Host' }] : []),
    ...(HAS_RANKS ? [{ k: 'rank', h: 'Rank', num: true, f: (v) => v >= 0 ? String(v) : '\u2013' }] : []),
    { k: 'cmd', h: 'Command', cls: () => 'cmd mono', title: (r) => r.cmd },
    { k: 'start', h: 'Start', num: true, f: fmtStart }, { k: 'dur', h: 'Duration', num: true, f: fmtDur },
    ...(HAS_RU ? [{ k: 'cpu', h: 'CPU', num: true, f: fmtOpt(fmtDur) }, { k: 'rss', h: 'Peak memory', num: true, f: fmtOpt(fmtKiB) }] : []),
    { k: 'exit', h: 'Exit', cls: (r) => exitCls(r.p) }, { k: 'threads', h: 'Threads', num: true }, { k: 'events', h: 'Events', num: true, f: fmtInt }
  ], data, 'processes', (r) => openFromTable(r.p));
}

/* The top processes by CPU and by peak memory, side by side: the
 * processes shown, the first TOP_N of each. */
const TOP_N = 10;
function miniTable(box, title, cols, data, onRow) {
  box.replaceChildren(el('h3', null, title));
  const t = el('table', 'mini'), tr = el('tr');
  for (const c of cols) tr.appendChild(el('th', c.num ? 'num' : '', c.h));
  t.appendChild(el('thead')).appendChild(tr);
  const tb = el('tbody');
  for (const row of data) {
    const r = el('tr', 'clickable');
    if (row.p === selected) r.classList.add('selected');
    r.dataset.pid = row.p.pid;
    for (const c of cols) {
      const td = el('td', (c.num ? 'num' : '') + (c.cls ? ' ' + c.cls(row) : ''));
      if (c.sw) { const sw = el('span', 'sw'); sw.style.background = color(row.p.name); td.appendChild(sw); }
      td.appendChild(document.createTextNode(c.f(row)));
      r.appendChild(td);
    }
    r.addEventListener('click', () => openFromTable(row.p));
    tb.appendChild(r);
  }
  t.appendChild(tb); box.appendChild(t);
  if (!data.length) box.appendChild(el('div', 'hint', 'No process shown has figures.'));
}
function renderTop() {
  const sec = $('toplist');
  sec.hidden = !HAS_RU;
  if (!HAS_RU) return;
  const vis = P.filter((p) => p.visible);
  const byCpu = vis.filter((p) => cpuOfP(p) >= 0).sort((a, b) => cpuOfP(b) - cpuOfP(a)).slice(0, TOP_N);
  const byRss = vis.filter((p) => rssOfP(p) >= 0).sort((a, b) => rssOfP(b) - rssOfP(a)).slice(0, TOP_N);
  const name = { h: 'Program', sw: true, f: (r) => r.p.title }, pid = { h: 'PID', num: true, f: (r) => String(r.p.pid) };
  const wall = { h: 'Wall', num: true, f: (r) => fmtDur(r.p.end - r.p.start) };
  miniTable($('top-cpu'), 'Top by CPU time', [name, pid, { h: 'CPU', num: true, f: (r) => fmtDur(cpuOfP(r.p)) },
    { h: 'Busy', num: true, f: (r) => r.p.end > r.p.start ? Math.round(100 * cpuOfP(r.p) / (r.p.end - r.p.start)) + '%' : '\u2013' }, wall],
    byCpu.map((p) => ({ p })));
  miniTable($('top-mem'), 'Top by peak memory', [name, pid, { h: 'Peak memory', num: true, f: (r) => fmtKiB(rssOfP(r.p)) },
    { h: 'CPU', num: true, f: (r) => fmtDur(cpuOfP(r.p)) }, wall], byRss.map((p) => ({ p })));
  let cpu = 0, n = 0;
  for (const p of vis) if (cpuOfP(p) >= 0) { cpu += cpuOfP(p); n++; }
  const span = Math.max(1, M.end - M.start);
  $('top-note').textContent = fmtDur(cpu) + ' of CPU over ' + plural(n, 'process', 'processes') + ' with figures: ' + (cpu / span).toFixed(2) + ' CPUs busy on average over the ' + fmtDur(span) + ' run';
}

/* ---- critical path table -------------------------------------------- */
/* By process (the default): each process on the path with its own time on
 * it, its share of the path's duration and its steps, most first; a real
 * build's path has hundreds of steps, a few processes hold most of it.
 * The steps in time order are one click away. */
let cpView = 'procs';
function critpathTable() {
  const box = $('table');
  if (!CP) {
    box.replaceChildren(el('div', 'hint', 'No critical path in this trace (it needs the process tree of a forktrace trace).'));
    return;
  }
  const groups = new Map();
  for (const st of CP.steps) {
    const k = st.p ? st.p : st.pid + ' ' + st.name;
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { p: st.p, name: st.p ? st.p.title : st.name, pid: st.pid, time: 0, steps: 0, first: st.n }));
    g.time += st.d; g.steps++;
  }
  const byProc = [...groups.values()].sort((a, b) => (b.time - a.time) || (a.first - b.first));
  if (cpView === 'procs') {
    const data = byProc.map((g) => ({ ...g, share: g.time / CP.total, exit: g.p ? exitText(g.p) : '' }));
    table([
      { k: 'name', h: 'Program', sw: true, swc: (r) => color(r.p ? r.p.name : r.name) }, { k: 'pid', h: 'PID', num: true },
      { k: 'time', h: 'Own time on the path', num: true, f: fmtDur },
      { k: 'share', h: 'Share', num: true, f: (v) => (100 * v).toFixed(1) + '%', bar: (r) => r.share },
      { k: 'steps', h: 'Steps', num: true, f: fmtInt },
      { k: 'exit', h: 'Exit', cls: (r) => r.p ? exitCls(r.p) : '' }
    ], data, 'critpathProcs', (r) => { if (r.p) openFromTable(r.p); });
  } else {
    const data = CP.steps.map((st) => ({ st, p: st.p, n: st.n, name: st.p ? st.p.title : st.name, pid: st.pid, start: st.s, dur: st.d, share: st.share,
      exit: st.p ? exitText(st.p) : '' }));
    table([
      { k: 'n', h: 'Step', num: true }, { k: 'name', h: 'Program', sw: true, swc: (r) => color(r.p ? r.p.name : r.name) }, { k: 'pid', h: 'PID', num: true },
      { k: 'start', h: 'Start', num: true, f: fmtStart }, { k: 'dur', h: 'Own time', num: true, f: fmtDur },
      { k: 'share', h: 'Share', num: true, f: (v) => (100 * v).toFixed(1) + '%', bar: (r) => r.share },
      { k: 'exit', h: 'Exit', cls: (r) => r.p ? exitCls(r.p) : '' }
    ], data, 'critpath', (r) => { if (r.p) openFromTable(r.p); });
  }
  const head = el('div', 'hint cp-summary', 'The run waited ' + fmtDur(CP.total) + ': ' + plural(CP.steps.length, 'step') + ' over ' + plural(byProc.length, 'process', 'processes') +
    (byProc.length ? '; most of it in ' + byProc.slice(0, 3).map((g) => g.name + ' (pid ' + g.pid + ') ' + (100 * g.time / CP.total).toFixed(0) + '%').join(', ') : ''));
  const other = cpView === 'procs' ? 'steps' : 'procs';
  const sw = el('button', 'ghost cp-view', other === 'steps' ? 'Show the ' + plural(CP.steps.length, 'step') + ' in time order' : 'Show by process');
  sw.dataset.view = other;
  sw.addEventListener('click', () => { cpView = other; showAll = false; renderTable(); });
  box.insertBefore(sw, box.firstChild);
  box.insertBefore(head, box.firstChild);
}

function scrollToRow(p) { goTo(p, false); }
/* Brings p into view: opens the folds and collapsed ancestors that hide
 * it, scrolls to its row, pans the time axis to it when it is out of
 * view; found: marks it as the search's current match. */
function goTo(p, isFound) {
  if (FT_LANES.reveal(p, foldOpen)) rebuildRows();
  if (isFound) found = p;
  if (p.row >= 0) { const viewH = tl.c.clientHeight - AXIS; tl.scrollY = 0; tl.scroll(p.row * ROW - Math.max(0, viewH / 2 - ROW), true); }
  if (p.end < tl.t0 || p.start > tl.t1) {
    const span = tl.t1 - tl.t0, mid = (p.start + p.end) / 2;
    tl.t0 = mid - span / 2; tl.t1 = mid + span / 2;
  }
  tl.changed();
  $('timeline').scrollIntoView({ block: 'nearest' });
}

/* ---- search ----------------------------------------------------------- */
/* The search box: pid, name or argv; Enter goes to the next match. */
const SR = { q: null, matches: [], at: -1, hidden: 0 };
let searchTimer = 0;
function searchStatus() {
  const st = $('tl-search-status');
  if (!SR.q) { st.textContent = ''; st.classList.remove('bad'); return; }
  st.classList.toggle('bad', !SR.matches.length);
  st.textContent = SR.matches.length
    ? (SR.at >= 0 ? (SR.at + 1) + ' of ' : '') + fmtInt(SR.matches.length) + ' match' + (SR.matches.length === 1 ? '' : 'es')
    : 'no match' + (SR.hidden ? ' (' + fmtInt(SR.hidden) + ' hidden by the filters)' : '');
}
function searchRun(q) {
  const r = FT_LANES.search(P, q);
  SR.q = q.trim(); SR.matches = r.matches; SR.hidden = r.hidden; SR.at = -1;
  if (!SR.q && found) { found = null; tl.changed(); }
  searchStatus();
}
function searchNext(back) {
  clearTimeout(searchTimer);
  const q = $('tl-search').value;
  if (q.trim() !== SR.q) searchRun(q);
  if (!SR.matches.length) { searchStatus(); return null; }
  SR.at = (SR.at + (back ? -1 : 1) + SR.matches.length) % SR.matches.length;
  goTo(SR.matches[SR.at], true);
  searchStatus();
  return SR.matches[SR.at];
}
/* Counting matches as one types waits for a pause: at 40,000 processes a
 * pass over every argv takes tens of ms. */
$('tl-search').addEventListener('input', (e) => { clearTimeout(searchTimer); searchTimer = setTimeout(() => { if (e.target.value.trim() !== SR.q) searchRun(e.target.value); }, 150); });
$('tl-search').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); searchNext(e.shiftKey); } else if (e.key === 'Escape') { e.target.value = ''; searchRun(''); } });

/* ---- wiring --------------------------------------------------------- */
for (const b of document.querySelectorAll('#tabs .tab')) {
  b.addEventListener('click', () => {
    for (const x of document.querySelectorAll('#tabs .tab')) x.classList.toggle('active', x === b);
    curTab = b.dataset.tab; showAll = false; renderTable();
  });
}
$('fn-scope').addEventListener('change', renderTable);
$('f-apply').addEventListener('click', () => { concPts = null; applyFilters(); });
$('f-reset').addEventListener('click', () => { $('f-include').value = ''; $('f-exclude').value = ''; $('f-pids').value = ''; $('f-ranks').value = ''; for (const b of document.querySelectorAll('#f-hosts input')) b.checked = true; concPts = null; applyFilters(); });
/* The host filter: one box per host of a multi-host trace. */
(function hostBoxes() {
  const box = $('f-hosts');
  box.hidden = !MULTI;
  if (!MULTI) return;
  box.appendChild(el('span', 'k', 'Hosts'));
  for (const name of HOSTS) {
    const l = el('label', 'host-box'), cb = document.createElement('input');
    cb.type = 'checkbox'; cb.value = name;
    cb.checked = !M.filter.hosts || M.filter.hosts.split(',').includes(name);
    cb.addEventListener('change', () => { concPts = null; applyFilters(); });
    l.appendChild(cb); l.appendChild(document.createTextNode(name)); box.appendChild(l);
  }
})();
for (const id of ['f-include', 'f-exclude', 'f-pids', 'f-ranks']) $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter') { concPts = null; applyFilters(); } });
$('d-close').addEventListener('click', closeDetail);
$('tl-fit').addEventListener('click', () => tl.fit(T0, T1));
$('tl-expand').addEventListener('click', () => { for (const p of P) { p.collapsed = false; if (p.fold) foldOpen.add(p.i); } rebuildRows(); tl.changed(); });
$('tl-fold').addEventListener('click', () => { foldOpen.clear(); rebuildRows(); tl.scroll(0, true); tl.changed(); });
$('tl-view').addEventListener('click', () => setView(view === 'packed' ? 'tree' : 'packed'));

header();
/* The rank filter beside the hosts' (a trace with ranks only); the
 * colouring and the critical path's line on the lanes. */
$('f-ranks-l').hidden = !HAS_RANKS;
$('tl-cp-l').hidden = !CP;
$('tl-colour').addEventListener('change', () => setColourBy($('tl-colour').value));
$('tl-cp').addEventListener('change', () => { cpShown = $('tl-cp').checked; legend(); tl.changed(); });
legend();
for (const p of P) p.visible = true;
const f = M.filter;
if (f.include) $('f-include').value = f.include;
if (f.exclude) $('f-exclude').value = f.exclude;
if (f.pids) $('f-pids').value = f.pids;
applyFilters();
tl.fit(T0 - (T1 - T0) * 0.01, T1 + (T1 - T0) * 0.01);
counters();
/* For tests and for the curious: the page's own view of the data. */
window.forktraceReport = { data: D, procs: P, rows: () => rows, timeline: tl, open: openDetail, apply: applyFilters,
  view: () => view, setView, search: (q) => { $('tl-search').value = q; searchRun(q); return searchNext(false); }, found: () => found };
document.body.dataset.ready = '1';
})();
