// Browser tests of the HTML report: `node test_report.mjs NAME` runs one
// scenario in a real headless Chromium driven by playwright-core.
//
// Environment (tests/CMakeLists.txt): FT_BIN (forktrace), FT_REPORT_TMP
// (where runs, reports and screenshots go: keep and look at them),
// FT_REPORT_HTML (a pre-made report, for the bench scenario).
// Exit 0 pass, 1 fail, 77 skipped (no chromium / playwright-core here);
// with CI set, a missing browser is a failure, never a skip.
import { createRequire } from 'module';
import { execFileSync, spawnSync } from 'child_process';
import fs from 'fs';
import path from 'path';
import zlib from 'zlib';
import { fileURLToPath } from 'url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.FT_CHROMIUM || '/usr/bin/chromium';
const SKIP = 77;
const name = process.argv[2];

function fail(msg) { console.error('FAIL: ' + msg); process.exit(1); }
function check(cond, msg) { if (!cond) fail(msg); }
function skipOrFail(why) {
  if (process.env.CI) fail(`${why} (CI is set: a missing browser is a failure)`);
  console.log(`SKIP report.${name}: ${why}`);
  process.exit(SKIP);
}

function loadPlaywright() {
  const req = createRequire(path.join(HERE, 'package.json'));
  try { return req('playwright-core'); } catch (e) { /* try npm ci below */ }
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--silent'], { cwd: HERE, stdio: 'inherit', timeout: 120000 });
  if (r.status !== 0) skipOrFail('playwright-core is not installed and `npm ci` in tests/report failed');
  try { return req('playwright-core'); } catch (e) { skipOrFail('playwright-core cannot be loaded: ' + e.message); }
}

if (!fs.existsSync(CHROMIUM)) skipOrFail(`${CHROMIUM} is missing (scripts/setup-deps installs Debian's chromium)`);
const { chromium } = loadPlaywright();

const TMP = path.join(process.env.FT_REPORT_TMP || '/tmp', name);
fs.rmSync(TMP, { recursive: true, force: true });
fs.mkdirSync(TMP, { recursive: true });

const XSS = '</script><script>alert(1)</script>';

// A tree with a bit of everything: children, a grandchild, exec images, a
// failing process, a killed one, and an argv that tries to close the script.
const SCRIPT = [
  'ls / >/dev/null',
  `/bin/echo '${XSS}' >/dev/null`,
  '(sleep 0.05; exit 4)',
  'sleep 0.02 & wait',
  'sh -c \'kill -9 $$\'',
  'exit 3'
].join('; ');

function runForktrace(extra) {
  const bin = process.env.FT_BIN;
  check(bin && fs.existsSync(bin), `FT_BIN=${bin} is not the forktrace executable`);
  const r = spawnSync(bin, ['run', '-q', '-o', 'trace.json', '--report', 'report.html', ...(extra || []), '--', 'sh', '-c', SCRIPT],
    { cwd: TMP, encoding: 'utf8', timeout: 60000 });
  check(r.status === 3, `forktrace exited ${r.status}, expected 3; stderr: ${r.stderr}`);
  check(fs.existsSync(path.join(TMP, 'report.html')), 'no report.html written');
  return { html: path.join(TMP, 'report.html'), trace: JSON.parse(fs.readFileSync(path.join(TMP, 'trace.json'), 'utf8')) };
}

async function openPage(file, opts) {
  // A fresh profile each time (playwright passes it as --user-data-dir).
  const profile = fs.mkdtempSync(path.join(TMP, 'profile-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic']
  });
  const page = browser.pages()[0] || await browser.newPage();
  const problems = [], requests = [], dialogs = [];
  // (Chromium's hint about repeated getImageData comes from the tests' own
  // pixel reads, not from the page.)
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !/willReadFrequently/.test(m.text())) problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('request', (r) => requests.push(r.url()));
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  // With opts.cpu, the renderer's CPU time of the load too (a blank page
  // first, so that the report loads into a renderer already started).
  let cdp = null, cpu0 = 0;
  const cpuNow = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'ProcessTime').value;
  if (opts && opts.cpu) {
    fs.writeFileSync(path.join(TMP, 'blank.html'), '<!doctype html><title>blank</title>');
    await page.goto('file://' + path.join(TMP, 'blank.html'));
    cdp = await browser.newCDPSession(page);
    await cdp.send('Performance.enable');
    cpu0 = await cpuNow();
  }
  const t = Date.now();
  await page.goto('file://' + file);
  await page.waitForSelector('body[data-ready="1"]', { timeout: (opts && opts.timeout) || 15000 });
  const loadMs = Date.now() - t;
  const loadCpuMs = cdp ? Math.round((await cpuNow() - cpu0) * 1000) : -1;
  return { browser, page, problems, requests, dialogs, loadMs, loadCpuMs, cdp, url: 'file://' + file };
}

function traceFacts(tr) {
  const ev = tr.traceEvents;
  const procs = ev.filter((e) => e.ph === 'M' && e.name === 'forktrace_process').map((e) => e.args);
  const ft = tr.otherData.forktrace;
  return {
    events: ev.length,
    threads: ev.filter((e) => e.ph === 'M' && e.name === 'thread_name').length,
    processes: ft.processes, lost: ft.lost_events, exit: ft.exit_status, host: ft.host,
    failed: procs.filter((a) => a.exit.kind === 'code' && a.exit.code !== 0).length,
    killed: procs.filter((a) => a.exit.kind === 'signal').length,
    procs
  };
}

async function card(page, key) {
  return page.$eval(`.card[data-key="${key}"] .v`, (e) => e.textContent);
}

// Pixel index of a process's lane, for clicking it.
async function laneXY(page, pid) {
  return page.evaluate((pid) => {
    const R = window.forktraceReport, rows = R.rows();
    const i = rows.findIndex((p) => p.pid === pid);
    if (i < 0) return null;
    const c = document.getElementById('timeline').getBoundingClientRect();
    return { x: c.left + 150, y: c.top + 24 + i * 20 + 10 - R.timeline.scrollY };
  }, pid);
}

// A build-like trace written by hand, whose every figure is known: a make
// that runs configure (a sh script, whose five compiler probes exit 1 by
// design), two compiles, a link, a job killed by SIGKILL and two MPI ranks.
// Each process has its resource use ("rusage", docs/INSIGHT.md) and make
// waits for each child when it ends, so the longest chain (configure, the
// first compile, the link) is what the run waited for. Times in seconds
// from the run's start; cpu in seconds, rss in MiB.
const BUILD_T0 = 5e12;
const BUILD = [
  // pid, parent, name, interpreter, start, end, exit, cpu user, cpu sys, rss MiB, rank, launcher
  [100, -1, 'make', null, 0, 10, 0, 0.04, 0.01, 8],
  [101, 100, 'configure', 'sh', 0, 2, 0, 0.3, 0.2, 4],
  [102, 101, 'cc', null, 0.1, 0.2, 1, 0.05, 0.01, 30],
  [103, 101, 'cc', null, 0.3, 0.4, 1, 0.05, 0.01, 31],
  [104, 101, 'cc', null, 0.5, 0.6, 1, 0.05, 0.01, 32],
  [105, 101, 'cc', null, 0.7, 0.8, 1, 0.05, 0.01, 33],
  [106, 101, 'cc', null, 0.9, 1.0, 1, 0.05, 0.01, 34],
  [110, 100, 'cc1', null, 2, 6, 0, 3.6, 0.3, 1536],
  [111, 100, 'cc1', null, 2, 4, 0, 1.7, 0.1, 300],
  [112, 100, 'ld', null, 6, 9.5, 0, 1.5, 0.5, 800],
  [113, 100, 'sleep', null, 2, 3, 'SIGKILL', 0, 0, 2],
  [120, 100, 'solver', null, 4, 5, 0, 0.9, 0.05, 120, 0, 'Open MPI'],
  [121, 100, 'solver', null, 4, 5.2, 0, 1.0, 0.05, 125, 1, 'Open MPI']
];
function buildTrace(exitStatus) {
  const ns = (s) => Math.round(BUILD_T0 + s * 1e9), us = (s) => ns(s) / 1e3, ev = [];
  for (const [pid, parent, name, interp, s, e, exit, user, sys, rss, rank, launcher] of BUILD) {
    const argv = interp ? [interp, './' + name] : [name, 'x' + pid];
    const ex = exit === 'SIGKILL' ? { kind: 'signal', signal: 9, name: 'SIGKILL' } : { kind: 'code', code: exit };
    const a = { pid, ppid: parent, parent, start_ticks: 0, name, exe: '/usr/bin/' + (interp || name), argv, cwd: '/src',
      start_ns: ns(s), end_ns: ns(e), spawn: parent < 0 ? null : 'fork', exit: ex, instrumented: true, images: 1, lost_events: 0, host: 'builder',
      rusage: { source: exit === 'SIGKILL' ? 'wait+descendants' : 'wait', user_ns: Math.round(user * 1e9), sys_ns: Math.round(sys * 1e9),
        maxrss_kb: rss * 1024, minflt: 1000 + pid, majflt: pid % 7, nvcsw: 10, nivcsw: 3, inblock: 0, oublock: 8 } };
    if (interp) a.interpreter = interp;
    if (rank !== undefined) { a.rank = rank; a.rank_var = 'OMPI_COMM_WORLD_RANK'; a.launcher = launcher; }
    ev.push({ ph: 'M', name: 'process_name', pid, tid: pid, args: { name: interp ? name + ' (' + interp + ')' : name } });
    ev.push({ ph: 'M', name: 'forktrace_process', pid, tid: pid, args: a });
    ev.push({ ph: 'X', name: interp ? name + ' (' + interp + ')' : name, cat: 'process', pid, tid: pid, ts: us(s), dur: (e - s) * 1e6,
      args: { image: 0, exe: a.exe, argv, cwd: '/src', instrumented: true, exit: ex } });
    // forktrace's own counters of the process's resource use, and one
    // counter of the program's own.
    ev.push({ ph: 'C', name: 'cpu', pid, tid: pid, ts: us(e), args: { user_ms: user * 1e3, sys_ms: sys * 1e3 } });
    ev.push({ ph: 'C', name: 'rss', pid, tid: pid, ts: us(e), args: { peak_mib: rss } });
    if (pid === 100) ev.push({ ph: 'C', name: 'jobs', pid, tid: pid, ts: us(1), args: { value: 4 } });
    if (parent >= 0) {
      ev.push({ ph: 's', name: 'fork', cat: 'fork', pid: parent, tid: parent, ts: us(s), id: pid });
      ev.push({ ph: 'f', name: 'fork', cat: 'fork', pid, tid: pid, ts: us(s), id: pid, bp: 'e' });
      ev.push({ ph: 'i', name: 'wait', cat: 'wait', pid: parent, tid: parent, ts: us(e), s: 't', args: { child: pid, status: 0, exit: ex } });
    }
  }
  return { traceEvents: ev, otherData: { forktrace: { version: '0.1.0', origin: 'forktrace run', host: 'builder', command: ['make', '-j4'],
    start_ns: ns(0), end_ns: ns(10), exit_status: exitStatus, processes: BUILD.length, lost_events: 0 } } };
}
// The report of buildTrace(exitStatus) written by `forktrace report`.
function buildReport(exitStatus, extra) {
  const trace = path.join(TMP, `build-${exitStatus}.json`), html = path.join(TMP, `build-${exitStatus}.html`);
  fs.writeFileSync(trace, JSON.stringify(buildTrace(exitStatus)));
  execFileSync(process.env.FT_BIN, ['report', '-q', trace, '-o', html, ...(extra || [])]);
  return html;
}
async function openProc(page, pid) {
  await page.evaluate((pid) => { const R = window.forktraceReport; R.open(R.procs.find((p) => p.pid === pid)); }, pid);
  return page.textContent('#d-info');
}

// The most processes alive at once in a trace (ends before starts at a tie).
function maxAlive(procs) {
  const ev = [];
  for (const a of procs) { ev.push([a.start_ns, 1]); ev.push([a.end_ns, -1]); }
  ev.sort((x, y) => (x[0] - y[0]) || (x[1] - y[1]));
  let n = 0, most = 0;
  for (const [, d] of ev) { n += d; if (n > most) most = n; }
  return most;
}

function framesText(f) {
  const t = (x) => `median ${x.median.toFixed(1)} ms, 90th percentile ${x.p90.toFixed(1)} ms, max ${x.max.toFixed(1)} ms`;
  return `frames ${t(f)}` + (f.cpu ? `; CPU ${t(f.cpu)}` : '');
}

// A run with one fold: under one sh, 30 true (argv needle-6 .. needle-180:
// only one holds needle-42), 3 false and seq, with a sleep 0.3 beside
// them; under another, 10 true; the root sleeps 2.5 s, so that the short
// ones are well under 1% of the run. Also: the processes under the loop
// that the fold rule (docs/INSIGHT.md) folds, computed from the trace
// (whole subtrees each of whose processes is under 1% of the run: on a
// busy machine a true may take longer).
function runFolds() {
  const script = "sh -c 'for i in $(seq 30); do /bin/true needle-$((i * 6)); done; " +
    "/bin/false; /bin/false; /bin/false; sleep 0.3; exit 0'; sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done'; sleep 2.5";
  const r = spawnSync(process.env.FT_BIN, ['run', '-q', '-o', 'trace.json', '--report', 'report.html', '--', 'sh', '-c', script],
    { cwd: TMP, encoding: 'utf8', timeout: 60000 });
  check(r.status === 0, `forktrace exited ${r.status}: ${r.stderr}`);
  const f = traceFacts(JSON.parse(fs.readFileSync(path.join(TMP, 'trace.json'), 'utf8')));
  const run = Math.max(...f.procs.map((a) => a.end_ns)) - Math.min(...f.procs.map((a) => a.start_ns));
  const kids = (a) => f.procs.filter((c) => c.parent === a.pid);
  const shortTree = (a) => a.end_ns - a.start_ns < run / 100 && kids(a).every(shortTree);
  const loop = f.procs.find((a) => a.argv && a.argv.length === 3 && a.argv[2].startsWith('for i in $(seq 30)'));
  check(loop, 'no loop sh in the trace');
  const folded = [];
  for (const m of kids(loop).filter(shortTree)) { const st = [m]; while (st.length) { const q = st.pop(); folded.push(q); st.push(...kids(q)); } }
  check(folded.length >= 20, `only ${folded.length} of the 34 processes under the loop took under 1% of the run: too few to fold`);
  return { ...f, html: path.join(TMP, 'report.html'), loop, folded };
}

// Mouse over (hover) or onto (click) the first row of the timeline that
// pick(row) accepts, at the left of its bars.
async function rowXY(page, pick) {
  return page.evaluate((src) => {
    const pick = eval(src), R = window.forktraceReport, rows = R.rows();
    const i = rows.findIndex(pick);
    if (i < 0) return null;
    const v = R.timeline, r = rows[i], c = document.getElementById('timeline').getBoundingClientRect();
    v.scroll(i * 20 - v.scrollY - 40, true); v.pending = false; v.draw();
    const x = r.isFold ? v.x(r.start) + 2 : 150;
    return { x: c.left + x, y: c.top + 24 + i * 20 + 10 - v.scrollY };
  }, pick.toString());
}
async function clickRow(page, pick) {
  const xy = await rowXY(page, pick);
  check(xy, 'no row for ' + pick);
  await page.mouse.click(xy.x, xy.y);
  await page.waitForTimeout(50);
}
async function hoverText(page, pick) {
  const xy = await rowXY(page, pick);
  check(xy, 'no row for ' + pick);
  await page.mouse.move(xy.x, xy.y);
  await page.waitForTimeout(50);
  return page.textContent('#tip');
}

// Pixels of colour rgb (within 40) in timeline row `row` as drawn now.
async function rowInk(page, row, rgb) {
  return page.evaluate(([row, rgb]) => {
    const R = window.forktraceReport, v = R.timeline; v.pending = false; v.draw();
    const c = document.getElementById('timeline'), g = c.getContext('2d'), r = devicePixelRatio;
    const y = Math.round((24 + row * 20 - v.scrollY) * r);
    const d = g.getImageData(Math.round(230 * r), Math.max(0, y), c.width - Math.round(230 * r), Math.round(20 * r)).data;
    let n = 0;
    for (let k = 0; k < d.length; k += 4) if (Math.abs(d[k] - rgb[0]) < 40 && Math.abs(d[k + 1] - rgb[1]) < 40 && Math.abs(d[k + 2] - rgb[2]) < 40) n++;
    return n;
  }, [row, rgb]);
}

// 30 frames of zooming, panning and scrolling the timeline, each drawn
// and rastered: the median, 90th percentile and slowest in ms of wall
// time, and with a CDP session (openPage's cdp) the same of the renderer's
// main thread CPU time.
async function measureFrames(page, cdp) {
  const wall = [], cpu = [];
  const thread = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'ThreadTime').value;
  for (let k = 0; k < 30; k++) {
    const c0 = cdp ? await thread() : 0;
    wall.push(await page.evaluate((k) => {
      const R = window.forktraceReport, v = R.timeline, c = document.getElementById('timeline');
      const t = performance.now();
      if (k % 3 === 0) v.zoomAt(600, k < 15 ? 0.7 : 1.4); else { const s = (v.t1 - v.t0) * 0.05; v.t0 += s; v.t1 += s; v.scroll(40, true); }
      v.pending = false; v.draw(); R.timeline.onchange();
      c.getContext('2d').getImageData(0, 0, 1, 1);
      return performance.now() - t;
    }, k));
    if (cdp) cpu.push((await thread() - c0) * 1000);
  }
  const stats = (f) => { f.sort((a, b) => a - b); return { median: f[15], p90: f[26], max: f[f.length - 1] }; };
  return { ...stats(wall), cpu: cdp ? stats(cpu) : null };
}

const tests = {
  // Loads with no console errors and no requests but the page itself; the
  // header says what the JSON trace of the same run says.
  async load() {
    const { html, trace } = runForktrace();
    const f = traceFacts(trace);
    const o = await openPage(html);
    try {
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      const others = o.requests.filter((u) => u !== o.url);
      check(others.length === 0, 'network requests besides the page: ' + others.join(', '));
      const num = (s) => Number(String(s).replace(/[^0-9]/g, ''));
      check(num(await card(o.page, 'processes')) === f.processes, `processes card ${await card(o.page, 'processes')} != ${f.processes}`);
      check(num(await card(o.page, 'events')) === f.events, `events card ${await card(o.page, 'events')} != ${f.events} events in the trace`);
      check(num(await card(o.page, 'threads')) === f.threads, `threads card ${await card(o.page, 'threads')} != ${f.threads}`);
      check(num(await card(o.page, 'lost_events')) === f.lost, 'lost events differ');
      check(num(await card(o.page, 'exit_status')) === f.exit, `exit status card != ${f.exit}`);
      check(num(await card(o.page, 'non-zero_exits')) === f.failed && f.failed >= 2, `non-zero exits card ${await card(o.page, 'non-zero_exits')} != ${f.failed}`);
      // The run exits 3: it failed, in red, with its non-zero exits and
      // its killed process.
      const verdict = await o.page.$$eval('#verdict div', (ds) => ds.map((d) => [d.textContent, d.className]));
      check(verdict[0][0] === `The command failed (exit status 3); ${f.failed} non-zero exits` && verdict[0][1] === 'bad', 'verdict: ' + JSON.stringify(verdict));
      check(/^1 process killed by a signal: sh \(pid \d+, SIGKILL\)$/.test(verdict[1][0]) && verdict[1][1] === 'bad', 'killed: ' + JSON.stringify(verdict));
      check(num(await card(o.page, 'killed')) === f.killed && f.killed === 1, `killed card ${await card(o.page, 'killed')} != ${f.killed}`);
      check((await card(o.page, 'host')) === f.host, 'host differs');
      const cmd = await o.page.textContent('#command');
      check(cmd.includes('exit 3'), 'the command is not shown: ' + cmd);
      const lanes = await o.page.evaluate(() => window.forktraceReport.rows().length);
      check(lanes === f.processes, `${lanes} lanes for ${f.processes} processes`);
    } finally { await o.browser.close(); }
  },

  // A gzip trace: `forktrace run -o trace.json.gz --report` and `forktrace
  // report trace.json.gz` of a tree with a function-heavy program
  // (ev_funcs: 100,001 function slices, some 10 MB of JSON compressed in
  // many blocks) both load with no console errors and no requests, say
  // what node's zlib reads in the trace (processes, events, threads, exit
  // status, non-zero exits) and draw the timeline (screenshots kept: look
  // at them).
  async gzip() {
    const bin = process.env.FT_BIN, progs = process.env.FT_PROGS;
    check(bin && fs.existsSync(bin), `FT_BIN=${bin} is not the forktrace executable`);
    check(progs && fs.existsSync(path.join(progs, 'ev_funcs')), `FT_PROGS=${progs} has no ev_funcs`);
    const script = `ls / >/dev/null; (sleep 0.05; exit 4); ${path.join(progs, 'ev_funcs')} calls 20000 >/dev/null; sleep 0.02 & wait`;
    let r = spawnSync(bin, ['run', '-q', '-o', 'trace.json.gz', '--report', 'run.html', '--', 'sh', '-c', script],
      { cwd: TMP, encoding: 'utf8', timeout: 60000 });
    check(r.status === 0, `forktrace run exited ${r.status}; stderr: ${r.stderr}`);
    const raw = fs.readFileSync(path.join(TMP, 'trace.json.gz'));
    check(raw[0] === 0x1f && raw[1] === 0x8b, 'trace.json.gz is not gzip');
    const text = zlib.gunzipSync(raw).toString('utf8');
    check(text.length > 4e6, `the trace is ${text.length} bytes of JSON: too small to span the writer's blocks`);
    const f = traceFacts(JSON.parse(text));
    check(f.failed === 1 && f.processes >= 5, `trace facts: ${f.processes} processes, ${f.failed} failed`);
    r = spawnSync(bin, ['report', '-q', 'trace.json.gz', '-o', 'report.html'], { cwd: TMP, encoding: 'utf8', timeout: 60000 });
    check(r.status === 0, `forktrace report exited ${r.status}; stderr: ${r.stderr}`);
    for (const html of ['run.html', 'report.html']) {
      const o = await openPage(path.join(TMP, html));
      try {
        check(o.problems.length === 0, `${html}: console errors: ` + o.problems.join('; '));
        const others = o.requests.filter((u) => u !== o.url);
        check(others.length === 0, `${html}: network requests besides the page: ` + others.join(', '));
        const num = (s) => Number(String(s).replace(/[^0-9]/g, ''));
        check(num(await card(o.page, 'processes')) === f.processes, `${html}: processes card ${await card(o.page, 'processes')} != ${f.processes}`);
        check(num(await card(o.page, 'events')) === f.events, `${html}: events card ${await card(o.page, 'events')} != ${f.events} events in the trace`);
        check(num(await card(o.page, 'threads')) === f.threads, `${html}: threads card ${await card(o.page, 'threads')} != ${f.threads}`);
        check(num(await card(o.page, 'exit_status')) === f.exit, `${html}: exit status card != ${f.exit}`);
        check(num(await card(o.page, 'non-zero_exits')) === f.failed, `${html}: non-zero exits card != ${f.failed}`);
        const lanes = await o.page.evaluate(() => window.forktraceReport.rows().length);
        check(lanes === f.processes, `${html}: ${lanes} lanes for ${f.processes} processes`);
        const png = html.replace('.html', '');
        await o.page.screenshot({ path: path.join(TMP, png + '.png'), fullPage: true });
        await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, png + '-timeline.png') });
        const ink = await o.page.evaluate(() => {
          const c = document.getElementById('timeline'), g = c.getContext('2d'), r = devicePixelRatio;
          const x0 = Math.round(232 * r), y0 = Math.round(26 * r);
          const d = g.getImageData(x0, y0, c.width - x0, c.height - y0).data;
          let n = 0; for (let k = 0; k < d.length; k += 4) if (d[k] < 235 || d[k + 1] < 235 || d[k + 2] < 235) n++;
          return { n, total: d.length / 4 };
        });
        console.log(`${html}: ${f.events} events, ${f.processes} processes; timeline ${ink.n} of ${ink.total} plot pixels inked; screenshots in ${TMP}`);
        check(ink.n > ink.total * 0.01, `${html}: the timeline looks blank: ${ink.n} of ${ink.total} pixels inked`);
      } finally { await o.browser.close(); }
    }
  },

  // Clicking a process lane opens its details and its threads.
  async click() {
    const { html, trace } = runForktrace();
    const f = traceFacts(trace);
    const sleeper = f.procs.find((a) => a.name === 'sleep');
    check(sleeper, 'no sleep process in the trace');
    const o = await openPage(html);
    try {
      check(await o.page.isHidden('#detail'), 'details are open before any click');
      const xy = await laneXY(o.page, sleeper.pid);
      check(xy, 'no lane for pid ' + sleeper.pid);
      await o.page.mouse.click(xy.x, xy.y);
      await o.page.waitForSelector('#detail:not([hidden])', { timeout: 3000 });
      const title = await o.page.textContent('#d-title');
      check(title.includes(String(sleeper.pid)) && title.includes('sleep'), 'detail title: ' + title);
      const info = await o.page.textContent('#d-info');
      check(info.includes(sleeper.cwd), 'cwd not in the details: ' + info);
      check(/exit \d/.test(info), 'exit status not in the details');
      const note = await o.page.textContent('#d-threads-note');
      check(/^1 thread/.test(note), 'threads note: ' + note);
      const ink = await o.page.evaluate(() => {
        const c = document.getElementById('threads'), g = c.getContext('2d');
        const d = g.getImageData(Math.round(160 * devicePixelRatio), Math.round(28 * devicePixelRatio), c.width - Math.round(170 * devicePixelRatio), Math.round(16 * devicePixelRatio)).data;
        let n = 0; for (let k = 0; k < d.length; k += 4) if (d[k] < 235 || d[k + 1] < 235 || d[k + 2] < 235) n++;
        return n;
      });
      check(ink > 200, `the threads canvas has no image bar (${ink} inked pixels)`);
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The page's filters hide what they should; the CLI's filters leave the
  // rest out of the file.
  async filter() {
    const { html, trace } = runForktrace();
    const f = traceFacts(trace);
    const nSleep = f.procs.filter((a) => a.name === 'sleep').length;
    check(nSleep === 2, `${nSleep} sleep processes`);
    const o = await openPage(html);
    try {
      await o.page.fill('#f-exclude', '^sleep$');
      await o.page.click('#f-apply');
      const names = await o.page.evaluate(() => window.forktraceReport.rows().map((p) => p.name));
      check(!names.includes('sleep'), 'sleep lanes still shown: ' + names.join(','));
      check(names.length === f.processes - nSleep, `${names.length} lanes after excluding sleep`);
      const status = await o.page.textContent('#f-status');
      check(status.includes(`${f.processes - nSleep} of ${f.processes}`), 'status: ' + status);
      await o.page.click('#tabs .tab[data-tab="processes"]');
      const cells = await o.page.$$eval('#table tbody tr td:nth-child(2)', (tds) => tds.map((t) => t.textContent));
      check(!cells.includes('sleep') && cells.length === f.processes - nSleep, 'processes table: ' + cells.join(','));
      await o.page.fill('#f-exclude', '');
      const root = f.procs.find((a) => a.parent === -1);
      await o.page.fill('#f-pids', `${root.pid}`);
      await o.page.click('#f-apply');
      const only = await o.page.evaluate(() => window.forktraceReport.rows().map((p) => p.pid));
      check(only.length === 1 && only[0] === root.pid, 'pid filter shows ' + only.join(','));
      await o.page.fill('#f-include', '(');
      await o.page.click('#f-apply');
      check(await o.page.$eval('#f-include', (e) => e.classList.contains('invalid')), 'a bad regex is not flagged');
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    // The same through the command line: nothing of sleep is embedded.
    const r2 = runForktrace(['--exclude', '^sleep$']);
    const text = fs.readFileSync(r2.html, 'utf8');
    check(!text.includes('/usr/bin/sleep') && !text.includes('"sleep 0.05"'), '--exclude left sleep in the file');
    const o2 = await openPage(r2.html);
    try {
      const names = await o2.page.evaluate(() => window.forktraceReport.rows().map((p) => p.name));
      check(!names.includes('sleep') && names.length === f.processes - nSleep, '--exclude lanes: ' + names.join(','));
      const notes = await o2.page.textContent('#notes');
      check(notes.includes('--exclude ^sleep$'), 'the page does not say it was filtered: ' + notes);
    } finally { await o2.browser.close(); }
  },

  // A process whose argv holds a closing script tag: the text is shown, and
  // nothing runs.
  async xss() {
    const { html, trace } = runForktrace();
    const f = traceFacts(trace);
    const echo = f.procs.find((a) => a.argv && a.argv.includes(XSS));
    check(echo, 'the trace has no process with the XSS argv');
    const raw = fs.readFileSync(html, 'utf8');
    check(!raw.includes('<script>alert(1)'), 'the raw XSS text is in the HTML file');
    const o = await openPage(html);
    try {
      await o.page.evaluate((pid) => { const R = window.forktraceReport; R.open(R.procs.find((p) => p.pid === pid)); }, echo.pid);
      const info = await o.page.textContent('#d-info');
      check(info.includes(XSS), 'the argv text is not shown as text: ' + info);
      const cmd = await o.page.textContent('#command');
      check(cmd.includes(XSS), 'the command line is not shown as text');
      await o.page.click('#tabs .tab[data-tab="processes"]');
      const cells = await o.page.$$eval('#table tbody td.cmd', (tds) => tds.map((t) => t.textContent));
      check(cells.some((c) => c.includes(XSS)), 'the processes table does not show the argv');
      const scripts = await o.page.$$eval('script', (s) => s.length);
      check(scripts === 2, `${scripts} script elements in the page (expected 2)`);
      await o.page.waitForTimeout(200);
      check(o.dialogs.length === 0, 'a dialog fired: ' + o.dialogs.join(','));
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The timeline is drawn: a screenshot is kept (look at it), and the
  // canvas's plot area must hold enough non-background pixels.
  async screenshot() {
    const { html } = runForktrace();
    const o = await openPage(html);
    try {
      await o.page.screenshot({ path: path.join(TMP, 'report.png'), fullPage: true });
      const tl = await o.page.$('#timeline');
      await tl.screenshot({ path: path.join(TMP, 'timeline.png') });
      const sleeper = await o.page.evaluate(() => window.forktraceReport.procs.findIndex((p) => p.name === 'sleep'));
      await o.page.evaluate((i) => window.forktraceReport.open(window.forktraceReport.procs[i]), sleeper);
      await o.page.waitForTimeout(100);
      await (await o.page.$('#detail')).screenshot({ path: path.join(TMP, 'detail.png') });
      const ink = await o.page.evaluate(() => {
        const c = document.getElementById('timeline'), g = c.getContext('2d'), r = devicePixelRatio;
        const x0 = Math.round(232 * r), y0 = Math.round(26 * r);
        const d = g.getImageData(x0, y0, c.width - x0, c.height - y0).data;
        let n = 0; for (let k = 0; k < d.length; k += 4) if (d[k] < 235 || d[k + 1] < 235 || d[k + 2] < 235) n++;
        return { n, total: d.length / 4 };
      });
      console.log(`timeline: ${ink.n} of ${ink.total} plot pixels inked; screenshots in ${TMP}`);
      check(ink.n > ink.total * 0.03, `the timeline looks blank: ${ink.n} of ${ink.total} pixels inked`);
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // A multi-host trace (FT_MULTIHOST_TOOL writes the head's model and two
  // nodes' parts merged, tests/unit/model_fixture.c): the tree is grouped
  // by host under a heading each, the head first; the run info lists each
  // host's clock figures; the host filter of the page and --hosts leave
  // out the other hosts' processes; ranks and host lost are shown.
  async hosts() {
    const tool = process.env.FT_MULTIHOST_TOOL;
    check(tool && fs.existsSync(tool), `FT_MULTIHOST_TOOL=${tool} is not test_multihost`);
    const trace = path.join(TMP, 'trace.json'), html = path.join(TMP, 'report.html');
    execFileSync(tool, ['--write', trace]);
    execFileSync(process.env.FT_BIN, ['report', '-q', trace, '-o', html]);
    const o = await openPage(html);
    try {
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      const layout = await o.page.evaluate(() => window.forktraceReport.rows().map((r) => r.hdr ? 'H:' + r.host : r.host + ':' + r.name));
      const heads = layout.filter((r) => r.startsWith('H:'));
      check(JSON.stringify(heads) === JSON.stringify(['H:head', 'H:node2', 'H:node3', 'H:node4']), 'host headings: ' + heads.join(', '));
      let cur = null;
      for (const r of layout) {
        if (r.startsWith('H:')) { cur = r.slice(2); continue; }
        check(r.startsWith(cur + ':'), `row ${r} under the heading of ${cur}: ${layout.join(', ')}`);
      }
      check(layout.indexOf('node2:sh') === layout.indexOf('H:node2') + 1, 'node2\'s root does not open its host: ' + layout.join(', '));
      // The packed view keeps the hosts apart: the same headings, each
      // host's lanes under its own, as many as its processes need.
      await o.page.click('#tl-view');
      const packed = await o.page.evaluate(() => window.forktraceReport.rows().map((r) => r.hdr ? { host: r.host } : { lane: r.num, hosts: r.items.map((p) => p.host), spans: r.items.map((p) => [p.start, p.end]) }));
      check(JSON.stringify(packed.filter((r) => !r.lane).map((r) => r.host)) === JSON.stringify(['head', 'node2', 'node3', 'node4']), 'packed headings: ' + JSON.stringify(packed));
      let host = null;
      const lanesOf = new Map();
      for (const r of packed) {
        if (!r.lane) { host = r.host; lanesOf.set(host, []); continue; }
        check(r.hosts.every((h) => h === host), `a lane under ${host} holds ${r.hosts.join(', ')}`);
        lanesOf.get(host).push(r);
      }
      const procs = await o.page.evaluate(() => window.forktraceReport.procs.map((p) => ({ host: p.host, start_ns: p.start, end_ns: p.end })));
      for (const [h, lanes] of lanesOf) {
        const need = maxAlive(procs.filter((p) => p.host === h));
        check(lanes.length === need, `${h}: ${lanes.length} lanes for ${need} processes alive at once`);
      }
      await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, 'timeline-packed.png') });
      await o.page.click('#tl-view');
      const hostRows = await o.page.$$eval('#hosts tr[data-host]', (trs) => trs.map((t) => t.dataset.host + ' ' + t.textContent));
      check(hostRows.length === 4, 'hosts table: ' + hostRows.join(' | '));
      check(/^node2 .*measured.*\+1000\.000500 s.*\+50\.00 ppm.*30\.0 \u00b5s/.test(hostRows[1]), 'node2 clock figures: ' + hostRows[1]);
      check(/^node3 .*realtime anchor.*lost 15.0 s into the run/.test(hostRows[2]), 'node3: ' + hostRows[2]);
      check(/^node4 .*missing: no node collector joined/.test(hostRows[3]), 'node4: ' + hostRows[3]);
      check((await card(o.page, 'hosts')).startsWith('4'), 'hosts card: ' + await card(o.page, 'hosts'));
      await o.page.screenshot({ path: path.join(TMP, 'report.png'), fullPage: true });
      await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, 'timeline.png') });
      // Rank and host in the detail of rank 0; host lost on node3's worker.
      await o.page.evaluate(() => { const R = window.forktraceReport; R.open(R.procs.find((p) => p.rank === 0)); });
      const info = await o.page.textContent('#d-info');
      check(info.includes('rank 0') && info.includes('node2 (measured'), 'detail of rank 0: ' + info);
      await o.page.evaluate(() => { const R = window.forktraceReport; R.open(R.procs.find((p) => p.rank === 2)); });
      const lost = await o.page.textContent('#d-info');
      check(lost.includes('host lost 15.0 s into the run'), 'detail of node3\'s worker: ' + lost);
      // The page's host filter: node2 unticked.
      await o.page.click('#f-hosts input[value="node2"]');
      const left = await o.page.evaluate(() => window.forktraceReport.rows().filter((r) => !r.hdr).map((r) => r.host));
      check(left.length === 6 && !left.includes('node2'), 'after unticking node2: ' + left.join(', '));
      check((await o.page.textContent('#f-status')).includes('showing 6 of 9'), 'status: ' + await o.page.textContent('#f-status'));
      await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, 'timeline-no-node2.png') });
      await o.page.click('#f-reset');
      check((await o.page.evaluate(() => window.forktraceReport.rows().filter((r) => !r.hdr).length)) === 9, 'reset does not bring node2 back');
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    // A part alone (combined without its head): nothing to align it to,
    // and the table says so instead of an offset.
    const part = path.join(TMP, 'part.json'), partHtml = path.join(TMP, 'part.html');
    execFileSync(tool, ['--write-part', part]);
    execFileSync(process.env.FT_BIN, ['report', '-q', part, '-o', partHtml]);
    const o3 = await openPage(partHtml);
    try {
      const rows = await o3.page.$$eval('#hosts tr[data-host]', (trs) => trs.map((t) => t.textContent));
      check(rows.length === 1 && rows[0].includes('not aligned: no head in this trace; realtime anchor available') && !/[+-]\d+\.\d{6} s/.test(rows[0]),
        'a part alone: ' + rows.join(' | '));
      check(o3.problems.length === 0, 'console errors: ' + o3.problems.join('; '));
    } finally { await o3.browser.close(); }
    // --hosts in forktrace report: only node3's processes are embedded.
    const only = path.join(TMP, 'node3.html');
    execFileSync(process.env.FT_BIN, ['report', '-q', trace, '--hosts', 'node3', '-o', only]);
    const o2 = await openPage(only);
    try {
      const hosts = await o2.page.evaluate(() => window.forktraceReport.procs.map((p) => p.host));
      check(hosts.length === 2 && hosts.every((h) => h === 'node3'), '--hosts node3 kept: ' + hosts.join(', '));
      check((await o2.page.textContent('#notes')).includes('--hosts node3'), 'the notes do not say --hosts');
      check(o2.problems.length === 0, 'console errors: ' + o2.problems.join('; '));
    } finally { await o2.browser.close(); }
    // --hosts in forktrace run --report (report_opts.c, shared): a host
    // the run does not have leaves nothing, its own host everything.
    const bin = process.env.FT_BIN, host = fs.readFileSync('/proc/sys/kernel/hostname', 'utf8').trim();
    for (const [h, want] of [[host, 1], ['no-such-host', 0]]) {
      const r = spawnSync(bin, ['run', '-q', '-o', 'run.json', '--report', 'run.html', '--hosts', h, '--', 'true'], { cwd: TMP, encoding: 'utf8', timeout: 60000 });
      check(r.status === 0, `run --hosts ${h}: exit ${r.status}: ${r.stderr}`);
      const raw = fs.readFileSync(path.join(TMP, 'run.html'), 'utf8');
      const data = JSON.parse(/<script type="application\/json" id="ft-data">([^]*?)<\/script>/.exec(raw)[1]);
      check(data.procs.length === want, `run --hosts ${h}: ${data.procs.length} processes in the report, want ${want}`);
    }
    const bad = spawnSync(bin, ['report', trace, '--hosts', 'a,,b', '-o', path.join(TMP, 'x.html')], { encoding: 'utf8' });
    check(bad.status === 2 && /--hosts takes host names/.test(bad.stderr), `--hosts a,,b: ${bad.status} ${bad.stderr}`);
  },

  // What each process used and who it is, from the trace's process
  // records: the detail of a compile, of configure (a sh script) and of an
  // MPI rank says CPU, peak memory and their source, the interpreter and
  // the launcher, with times for people.
  async resources() {
    const o = await openPage(buildReport(0));
    try {
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      const cc1 = await openProc(o.page, 110);
      check(cc1.includes('CPU3.90 s (user 3.60 s, system 300 ms)'), 'cc1 CPU: ' + cc1);
      check(cc1.includes('peak memory1.5 GiB resident'), 'cc1 peak memory: ' + cc1);
      check(cc1.includes('page faults5 major, 1,110 minor'), 'cc1 faults: ' + cc1);
      check(cc1.includes('block I/O0 in, 8 out') && cc1.includes('context switches10 voluntary, 3 involuntary'), 'cc1 counts: ' + cc1);
      check(cc1.includes('figures fromits reaper\'s wait4, less what it reaped itself: exact'), 'cc1 source: ' + cc1);
      check(cc1.includes('start+2.00 s from the start of the run') && cc1.includes('duration4.00 s'), 'cc1 times: ' + cc1);
      const killed = await openProc(o.page, 113);
      check(killed.includes('includes the descendants it reaped'), 'the killed sleep\'s source: ' + killed);
      const conf = await openProc(o.page, 101);
      check(conf.includes('programconfigure, a script run by sh'), 'configure: ' + conf);
      check((await o.page.textContent('#d-title')) === 'configure (sh) \u2014 pid 101', 'title: ' + await o.page.textContent('#d-title'));
      const rank = await openProc(o.page, 121);
      check(rank.includes('rank 1 (Open MPI)') && rank.includes('peak memory125 MiB'), 'rank 1: ' + rank);
      const page = await o.page.evaluate(() => window.forktraceReport.data);
      // The counters of resource use are in the process records: only
      // the program's own counter is a series of the page.
      const series = page.counters.map((c) => page.names[c[1]]);
      check(series.length === 1 && series[0] === 'jobs', 'counter series in the page: ' + series.join(', '));
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The packed view on a real run: processes in waves of known
  // concurrency take exactly as many lanes as the most alive at once (a
  // sweep over the trace's start/end), each process once, no two
  // overlapping in a lane; the view survives filtering and the tree is
  // one click away. The default switches at 300 processes.
  async packed() {
    const script = 'for i in 1 2 3 4; do sleep 0.3 & done; wait; for i in 1 2; do sleep 0.2 & done; wait; ls / >/dev/null';
    const r = spawnSync(process.env.FT_BIN, ['run', '-q', '-o', 'trace.json', '--report', 'report.html', '--', 'sh', '-c', script],
      { cwd: TMP, encoding: 'utf8', timeout: 60000 });
    check(r.status === 0, `forktrace exited ${r.status}: ${r.stderr}`);
    const f = traceFacts(JSON.parse(fs.readFileSync(path.join(TMP, 'trace.json'), 'utf8')));
    const need = maxAlive(f.procs);
    check(need === 5, `the trace has ${need} processes alive at once, expected 5 (sh and 4 sleeps)`);
    const o = await openPage(path.join(TMP, 'report.html'));
    try {
      check(await o.page.evaluate(() => window.forktraceReport.view()) === 'tree', 'a small trace does not open in the tree view');
      await o.page.click('#tl-view');
      const lanes = await o.page.evaluate(() => window.forktraceReport.rows().map((l) => l.items.map((p) => [p.pid, p.start, p.end])));
      check(lanes.length === need, `${lanes.length} lanes for at most ${need} processes at once`);
      const pids = lanes.flat().map((x) => x[0]).sort((a, b) => a - b);
      check(JSON.stringify(pids) === JSON.stringify(f.procs.map((a) => a.pid).sort((a, b) => a - b)), 'lanes do not hold each process once: ' + pids.join(','));
      for (const l of lanes) for (let k = 1; k < l.length; k++) check(l[k][1] >= l[k - 1][2], 'two processes overlap in a lane: ' + JSON.stringify(l));
      check(lanes[0].length === 1 && lanes[0][0][0] === f.procs.find((a) => a.parent === -1).pid, 'the root does not have the first lane to itself');
      await o.page.screenshot({ path: path.join(TMP, 'packed.png') });
      // A click on a bar of a lane opens that process.
      const sleep = f.procs.find((a) => a.name === 'sleep');
      const xy = await o.page.evaluate((pid) => {
        const R = window.forktraceReport, v = R.timeline, rows = R.rows(), i = rows.findIndex((l) => l.items.some((p) => p.pid === pid));
        const p = rows[i].items.find((q) => q.pid === pid), c = document.getElementById('timeline').getBoundingClientRect();
        return { x: c.left + v.x((p.start + p.end) / 2), y: c.top + 24 + i * 20 + 10 - v.scrollY };
      }, sleep.pid);
      await o.page.mouse.click(xy.x, xy.y);
      await o.page.waitForSelector('#detail:not([hidden])', { timeout: 3000 });
      check((await o.page.textContent('#d-title')).includes(String(sleep.pid)), 'a click on the bar of ' + sleep.pid + ' opened ' + await o.page.textContent('#d-title'));
      await o.page.fill('#f-exclude', '^ls$');
      await o.page.click('#f-apply');
      check(await o.page.evaluate(() => window.forktraceReport.view()) === 'packed', 'filtering left the packed view');
      const n = await o.page.evaluate(() => window.forktraceReport.rows().reduce((k, l) => k + l.items.length, 0));
      check(n === f.processes - 1, `${n} processes in the lanes after excluding ls`);
      await o.page.click('#tl-view');
      const tree = await o.page.evaluate(() => window.forktraceReport.rows().map((p) => p.pid));
      check(tree.length === f.processes - 1 && tree.every((x) => typeof x === 'number'), 'the tree view: ' + tree.join(','));
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    const bench = process.env.FT_BENCH_REPORT;
    for (const [n, want] of [[300, 'tree'], [301, 'packed']]) {
      const html = path.join(TMP, `bench${n}.html`);
      execFileSync(bench, ['bench', html, String(n), String(n * 10)]);
      const ob = await openPage(html);
      try {
        const v = await ob.page.evaluate(() => window.forktraceReport.view());
        check(v === want, `${n} processes open in the ${v} view, expected ${want}`);
      } finally { await ob.browser.close(); }
    }
  },

  // Folds on a real run: 34 short processes under one sh (30 true, 3
  // false, seq) are one row that says so, a long sleep beside them keeps
  // its own row, 10 short ones under another sh are not folded; the row
  // opens in place and folds again; in the packed view the fold is one
  // item.
  async fold() {
    const f = runFolds(), short = f.folded, n = short.length;
    const nonzero = short.filter((a) => a.exit.kind === 'code' && a.exit.code !== 0).length;
    const o = await openPage(f.html);
    try {
      const folds = await o.page.evaluate(() => window.forktraceReport.rows().filter((r) => r.isFold).map((r) => ({ parent: r.parent.pid, pids: r.procs.map((p) => p.pid) })));
      check(folds.length === 1 && folds[0].parent === f.loop.pid, 'folds: ' + JSON.stringify(folds));
      check(JSON.stringify(folds[0].pids.sort()) === JSON.stringify(short.map((a) => a.pid).sort()), 'the fold holds ' + folds[0].pids.join(','));
      const tip = await hoverText(o.page, (r) => r.isFold);
      check(tip.includes(`${n} processes under sh`) && tip.includes(`${nonzero} non-zero exit`), 'the fold says: ' + tip);
      // Its CPU time: the sum of its processes' (3 significant digits).
      const cpu = short.reduce((t, a) => t + (a.rusage ? a.rusage.user_ns + a.rusage.sys_ns : 0), 0);
      if (short.some((a) => a.rusage)) {
        const m = /([0-9.]+) (ns|\u00b5s|ms|s) CPU/.exec(tip);
        const said = m ? +m[1] * { ns: 1, '\u00b5s': 1e3, ms: 1e6, s: 1e9 }[m[2]] : -1;
        check(Math.abs(said - cpu) <= cpu * 0.006, `the fold says ${m && m[0]}, its processes used ${cpu} ns of CPU`);
      }
      const rows0 = await o.page.evaluate(() => window.forktraceReport.rows().map((r) => r.isFold ? 'fold' : r.pid));
      const sleep = f.procs.find((a) => a.parent === f.loop.pid && a.name === 'sleep');
      check(rows0.includes(sleep.pid), 'the long sleep under the loop has no row of its own');
      check(!rows0.some((x) => short.some((a) => a.pid === x)), 'a folded process has a row of its own');
      await o.page.screenshot({ path: path.join(TMP, 'folded.png') });
      await clickRow(o.page, (r) => r.isFold);
      const rows1 = await o.page.evaluate(() => window.forktraceReport.rows().map((r) => r.isFold ? 'fold' : r.pid));
      check(rows1.length === rows0.length + n && rows1.includes('fold'), `opened: ${rows1.length} rows, was ${rows0.length}`);
      check(short.every((a) => rows1.includes(a.pid)), 'an opened fold does not show its processes');
      await o.page.screenshot({ path: path.join(TMP, 'unfolded.png') });
      await clickRow(o.page, (r) => r.isFold);
      const rows2 = await o.page.evaluate(() => window.forktraceReport.rows().length);
      check(rows2 === rows0.length, 'the fold does not close again');
      await o.page.click('#tl-view');
      const items = await o.page.evaluate(() => window.forktraceReport.rows().flatMap((l) => l.items.map((it) => it.isFold ? 'fold' : it.pid)));
      check(items.filter((x) => x === 'fold').length === 1 && items.length === f.processes - n + 1, 'packed items: ' + items.join(','));
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The search box: a pid, a name with many matches (Enter goes to the
  // next, the status counts them), an argv word of a folded process
  // (unfolds it and brings its row into view, highlighted), no match.
  async search() {
    const f = runFolds();
    const needle = f.procs.find((a) => a.argv && a.argv.includes('needle-42'));
    const sleep = f.procs.find((a) => a.name === 'sleep');
    check(needle && sleep, 'the trace lacks the needle or the sleep');
    const o = await openPage(f.html);
    try {
      const box = '#tl-search', status = '#tl-search-status';
      await o.page.fill(box, String(sleep.pid));
      await o.page.press(box, 'Enter');
      check(await o.page.evaluate(() => window.forktraceReport.found().pid) === sleep.pid, 'a pid does not find its process');
      check((await o.page.textContent(status)).startsWith('1 of '), 'status: ' + await o.page.textContent(status));
      await o.page.fill(box, 'needle-42');
      await o.page.press(box, 'Enter');
      const at = await o.page.evaluate(() => { const R = window.forktraceReport, p = R.found(), v = R.timeline;
        return { pid: p.pid, row: p.row, own: R.rows()[p.row] === p, top: v.scrollY, h: v.c.clientHeight }; });
      check(at.pid === needle.pid && at.own, 'the needle is not found in a row of its own: ' + JSON.stringify(at));
      check(at.row * 20 >= at.top && (at.row + 1) * 20 <= at.top + at.h - 24, 'the found row is out of view: ' + JSON.stringify(at));
      const ink = await rowInk(o.page, at.row, [232, 89, 12]);
      check(ink > 20, `the found process is not highlighted (${ink} highlight pixels)`);
      await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, 'found.png') });
      // "FALSE": the three false and the two sh whose argv runs them, by start.
      const want = f.procs.filter((a) => a.name === 'false' || (a.argv || []).some((x) => x.includes('false')))
        .sort((a, b) => (a.start_ns - b.start_ns) || (a.pid - b.pid)).map((a) => a.pid);
      check(want.length === 5, 'processes that say false: ' + want.join(','));
      await o.page.fill(box, 'FALSE');
      const seen = [];
      for (let k = 1; k <= 6; k++) {
        await o.page.press(box, 'Enter');
        seen.push(await o.page.evaluate(() => window.forktraceReport.found().pid));
        const st = await o.page.textContent(status);
        check(st === `${(k - 1) % 5 + 1} of 5 matches`, `after ${k} Enter: status ${st}`);
      }
      check(JSON.stringify(seen) === JSON.stringify([...want, want[0]]), `Enter visits ${seen.join(',')}, expected ${want.join(',')} then the first again`);
      await o.page.fill(box, 'no-such-thing');
      await o.page.press(box, 'Enter');
      check((await o.page.textContent(status)) === 'no match', 'status: ' + await o.page.textContent(status));
      await o.page.fill('#f-exclude', '^sleep$');
      await o.page.click('#f-apply');
      await o.page.fill(box, String(sleep.pid));
      await o.page.press(box, 'Enter');
      check((await o.page.textContent(status)) === 'no match (1 hidden by the filters)', 'a filtered-out match: ' + await o.page.textContent(status));
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The scale bars: 10,000 processes / 10 M events written in under 3 s,
  // under 10 MB, open in under 2 s, frames under 50 ms; 40,000 processes
  // open in the packed view in as few lanes as they need, drawn fast.
  // The page's times are held to their bars when FT_REPORT_TIMED is 1 (an
  // optimised build without sanitizers), in the renderer's CPU time, a
  // frame's at the 90th percentile of 30: on a machine shared with other
  // builds, wall time and the slowest frame measure the machine. The
  // write of 10 M events (2 s of CPU, the sink's work) only with
  // FT_REPORT_FULL=1; by default 1 M events, the same page size (the
  // slices embedded are capped); fewer in a sanitizer build.
  async scale() {
    const bench = process.env.FT_BENCH_REPORT, timed = process.env.FT_REPORT_TIMED === '1', full = process.env.FT_REPORT_FULL === '1';
    const big = path.join(TMP, 'big.html');
    const out = execFileSync(bench, ['bench', big, '10000', full ? '10000000' : timed ? '1000000' : '200000'], { encoding: 'utf8' });
    const wr = /written in ([0-9.]+) s, ([0-9.]+) MB, ([0-9.]+) s CPU/.exec(out);
    console.log(out.trim());
    check(wr && +wr[2] < 10, 'the 10,000-process report: ' + out);
    check(!full || +wr[3] < 3, 'the 10,000-process report took over 3 s of CPU: ' + out);
    // The load likewise: the renderer's CPU time from the start of the
    // navigation to the page being ready.
    let o = await openPage(big, { timeout: 60000, cpu: true });
    try {
      const frames = await measureFrames(o.page, o.cdp);
      console.log(`10,000 processes: load ${o.loadMs} ms (${o.loadCpuMs} ms CPU), ${framesText(frames)}`);
      check(!timed || o.loadCpuMs < 2000, `load took ${o.loadCpuMs} ms of CPU`);
      check(!timed || frames.cpu.p90 < 50, 'frames took over 50 ms of CPU');
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    // 40,000 processes cost a sanitizer build's sink half a minute: there
    // the lanes are checked on the 10,000 (the page is the same code).
    const wide = timed ? path.join(TMP, 'wide.html') : big;
    if (timed) console.log(execFileSync(bench, ['bench', wide, '40000', '400000'], { encoding: 'utf8' }).trim());
    const many = timed ? '40,000' : '10,000';
    o = await openPage(wide, { timeout: 60000, cpu: true });
    try {
      // Lanes needed: the most spans alive at once, of the processes and
      // of the closed folds (a fold takes its processes' whole span).
      const lanesFacts = () => o.page.evaluate(() => {
        const R = window.forktraceReport, ev = [], seen = new Set();
        for (const l of R.rows()) for (const it of l.items) {
          ev.push([it.start, 1]); ev.push([Math.max(it.start, it.end), -1]);
          for (const p of it.isFold ? it.procs : [it]) seen.add(p.i);
        }
        ev.sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
        let n = 0, most = 0; for (const [, d] of ev) { n += d; if (n > most) most = n; }
        return { view: R.view(), lanes: R.rows().length, most, placed: seen.size, procs: R.procs.length, folds: R.rows().reduce((k, l) => k + l.items.filter((it) => it.isFold).length, 0) };
      });
      const folded = await lanesFacts();
      const frames = await measureFrames(o.page, o.cdp);
      await o.page.screenshot({ path: path.join(TMP, 'wide.png') });
      console.log(`${many} processes: load ${o.loadMs} ms (${o.loadCpuMs} ms CPU), ${folded.lanes} lanes (${folded.folds} folds), ${framesText(frames)}`);
      check(folded.view === 'packed' && folded.lanes === folded.most && folded.placed === folded.procs,
        `${many} processes: ${folded.view} view, ${folded.lanes} lanes for ${folded.most} alive at once, ${folded.placed} of ${folded.procs} placed`);
      check(!timed || frames.cpu.p90 < 50, 'frames of the packed view took over 50 ms of CPU');
      await o.page.click('#tl-expand');
      const open = await lanesFacts();
      const alive = await o.page.evaluate(() => {
        const ev = [];
        for (const p of window.forktraceReport.procs) { ev.push([p.start, 1]); ev.push([p.end, -1]); }
        ev.sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
        let n = 0, most = 0; for (const [, d] of ev) { n += d; if (n > most) most = n; }
        return most;
      });
      console.log(`unfolded: ${open.lanes} lanes, ${alive} processes alive at once at most`);
      check(open.folds === 0 && open.lanes === alive, `unfolded: ${open.lanes} lanes (${open.folds} folds) for ${alive} processes alive at once`);
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
  },

  // The tables of the build trace: what the exits say (neutral when the
  // command succeeded, red when it failed or a process was killed), the
  // top processes by CPU and by peak memory, the per-program totals
  // (sortable) and the processes with times and sizes for people.
  async tables() {
    const o = await openPage(buildReport(0));
    const rows = (sel) => o.page.$$eval(sel + ' tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const cls = (sel) => o.page.$$eval(sel + ' tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.className)));
    try {
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      const verdict = await o.page.$$eval('#verdict div', (ds) => ds.map((d) => [d.textContent, d.className]));
      check(JSON.stringify(verdict) === JSON.stringify([['5 non-zero exits; the command succeeded', ''], ['1 process killed by a signal: sleep (pid 113, SIGKILL)', 'bad']]),
        'verdict of a run that succeeded: ' + JSON.stringify(verdict));
      check(!(await o.page.$eval('.card[data-key="non-zero_exits"]', (e) => e.classList.contains('bad'))), 'the non-zero exits card is red on a run that succeeded');
      // Top by CPU: cc1 110, ld, cc1 111, then the two ranks.
      const cpu = await rows('#top-cpu');
      check(JSON.stringify(cpu.slice(0, 5).map((r) => r[1] + ' ' + r[2])) === JSON.stringify(['110 3.90 s', '112 2.00 s', '111 1.80 s', '121 1.05 s', '120 950 ms']), 'top CPU: ' + JSON.stringify(cpu));
      check(cpu.length === 10 && cpu[0][0] === 'cc1' && cpu[0][3] === '98%' && cpu[0][4] === '4.00 s', 'top CPU row: ' + JSON.stringify(cpu[0]));
      const mem = await rows('#top-mem');
      check(JSON.stringify(mem.slice(0, 4).map((r) => r[1] + ' ' + r[2])) === JSON.stringify(['110 1.5 GiB', '112 800 MiB', '111 300 MiB', '121 125 MiB']), 'top memory: ' + JSON.stringify(mem));
      const note = await o.page.textContent('#top-note');
      check(note === '10.6 s of CPU over 13 processes with figures: 1.05 CPUs busy on average over the 10.0 s run', 'top note: ' + note);
      // A click on a row opens its process.
      await o.page.click('#top-mem tbody tr[data-pid="112"]');
      check((await o.page.textContent('#d-title')).startsWith('ld'), 'a click on ld in the top list opened ' + await o.page.textContent('#d-title'));
      // Per program, by CPU by default; the probes' exits muted, the
      // killed sleep red.
      const progs = await rows('#table');
      check(JSON.stringify(progs[0]) === JSON.stringify(['cc1', '2', '6.00 s', '4.00 s', '5.70 s', '1.5 GiB', '\u2013', '\u2013']), 'cc1 totals: ' + JSON.stringify(progs[0]));
      const cc = progs.findIndex((r) => r[0] === 'cc'), sleep = progs.findIndex((r) => r[0] === 'sleep');
      check(JSON.stringify(progs[cc]) === JSON.stringify(['cc', '5', '500 ms', '100 ms', '300 ms', '34.0 MiB', '5', '\u2013']), 'cc totals: ' + JSON.stringify(progs[cc]));
      const pc = await cls('#table');
      check(pc[cc][6].includes('nonzero') && !pc[cc][6].includes('bad') && pc[sleep][7].includes('bad'), 'exit classes: ' + JSON.stringify([pc[cc], pc[sleep]]));
      check(progs.some((r) => r[0] === 'configure (sh)'), 'configure is not named with its interpreter: ' + progs.map((r) => r[0]).join(', '));
      // Sortable: peak memory, largest first, then smallest first.
      await o.page.click('#table th[data-k="rss"]');
      check((await rows('#table'))[0][0] === 'cc1', 'by peak memory: ' + (await rows('#table'))[0]);
      await o.page.click('#table th[data-k="rss"]');
      check((await rows('#table'))[0][0] === 'sleep', 'by peak memory, ascending: ' + (await rows('#table'))[0]);
      // The processes: start as an offset from the run's start, durations,
      // CPU and sizes for people; a probe's exit 1 muted, the kill red.
      await o.page.click('#tabs .tab[data-tab="processes"]');
      const procs = await rows('#table'), pcls = await cls('#table');
      const head = await o.page.$$eval('#table th', (ths) => ths.map((t) => t.dataset.k));
      const row = (pid) => procs.findIndex((r) => r[0] === String(pid));
      const at = (pid, k) => procs[row(pid)][head.indexOf(k)];
      check(at(110, 'start') === '+2.00 s' && at(110, 'dur') === '4.00 s' && at(110, 'cpu') === '3.90 s' && at(110, 'rss') === '1.5 GiB', 'cc1 110: ' + procs[row(110)]);
      check(at(103, 'start') === '+300 ms' && at(100, 'start') === '+0 s' && at(121, 'rank') === '1', 'starts and rank: ' + JSON.stringify(procs));
      check(pcls[row(103)][head.indexOf('exit')].includes('nonzero') && pcls[row(113)][head.indexOf('exit')].includes('bad'), 'exit cells: ' + JSON.stringify(pcls));
      // The critical path (the merge's, docs/TRACE_FORMAT.md): configure
      // and its probes, the first compile, the link, make's own end.
      await o.page.click('#tabs .tab[data-tab="critpath"]');
      // By process first: each process's own time on the path, its share
      // and its steps, most first; the 14 steps are one click away.
      const cpp = await rows('#table');
      check(JSON.stringify(cpp.slice(0, 3).map((r) => r.slice(0, 5))) === JSON.stringify([['cc1', '110', '4.00 s', '40.0%', '1'], ['ld', '112', '3.50 s', '35.0%', '1'],
        ['configure (sh)', '101', '1.50 s', '15.0%', '6']]), 'the critical path by process: ' + JSON.stringify(cpp));
      check(cpp.length === 9 && cpp.reduce((n, r) => n + Number(r[4]), 0) === 14, 'processes on the path and their steps: ' + JSON.stringify(cpp));
      const shares = cpp.map((r) => parseFloat(r[3]));
      check(shares.every((v, k) => k === 0 || v <= shares[k - 1]) && Math.abs(shares.reduce((a, b) => a + b, 0) - 100) < 0.5, 'shares by process: ' + shares);
      check(await o.page.textContent('#table .cp-view') === 'Show the 14 steps in time order', 'the switch to the steps: ' + await o.page.textContent('#table .cp-view'));
      await o.page.click('#table .cp-view');
      const cp = await rows('#table');
      check(cp.length === 14, 'critical path steps: ' + JSON.stringify(cp));
      check(JSON.stringify(cp[0]) === JSON.stringify(['1', 'configure (sh)', '101', '+0 s', '100 ms', '1.0%', 'exit 0']), 'step 1: ' + JSON.stringify(cp[0]));
      check(JSON.stringify(cp[1]) === JSON.stringify(['2', 'cc', '102', '+100 ms', '100 ms', '1.0%', 'exit 1']), 'step 2: ' + JSON.stringify(cp[1]));
      check(JSON.stringify(cp.slice(11).map((r) => r.slice(1, 6))) === JSON.stringify([['cc1', '110', '+2.00 s', '4.00 s', '40.0%'], ['ld', '112', '+6.00 s', '3.50 s', '35.0%'], ['make', '100', '+9.50 s', '500 ms', '5.0%']]),
        'the last steps: ' + JSON.stringify(cp.slice(11)));
      const sum = await o.page.textContent('#table .cp-summary');
      check(sum === 'The run waited 10.0 s: 14 steps over 9 processes; most of it in cc1 (pid 110) 40%, ld (pid 112) 35%, configure (sh) (pid 101) 15%', 'summary: ' + sum);
      // A probe's exit 1 on the path of a run that succeeded is no failure.
      check(!(await cls('#table'))[1][6].includes('bad'), 'the probe on the path is red in a run that succeeded');
      await o.page.click('#table .cp-view');
      check((await rows('#table'))[0][0] === 'cc1' && await o.page.textContent('#table .cp-view') === 'Show the 14 steps in time order', 'back by process: ' + JSON.stringify((await rows('#table'))[0]));
      await o.page.screenshot({ path: path.join(TMP, 'tables.png'), fullPage: true });
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    // The same build failing: the page says so in red.
    const o2 = await openPage(buildReport(2));
    try {
      const verdict = await o2.page.$$eval('#verdict div', (ds) => ds.map((d) => [d.textContent, d.className]));
      check(verdict[0][0] === 'The command failed (exit status 2); 5 non-zero exits' && verdict[0][1] === 'bad', 'verdict of a failed run: ' + JSON.stringify(verdict));
      check(await o2.page.$eval('.card[data-key="non-zero_exits"]', (e) => e.classList.contains('bad')), 'the non-zero exits card of a failed run is not red');
      // In a failed run the non-zero exits on the critical path are called
      // out, the latest first.
      check(verdict[2][0] === 'On the critical path: cc (pid 106, exit 1), cc (pid 105, exit 1), cc (pid 104, exit 1) and 2 more' && verdict[2][1] === 'bad', 'critical path failures: ' + JSON.stringify(verdict));
    } finally { await o2.browser.close(); }
  },

  // The lanes of the build trace: coloured by program, CPU time, peak
  // memory or exit (read back as pixels), the critical path drawn along
  // its steps' rows (and gone when unticked), and the rank filter.
  async lanes() {
    const o = await openPage(buildReport(0));
    // The colour of the timeline at time t (s from the start) on pid's
    // row, dy pixels below the row's top.
    const px = (pid, t, dy) => o.page.evaluate(([pid, t, dy]) => {
      const R = window.forktraceReport, v = R.timeline, p = R.procs.find((q) => q.pid === pid);
      v.pending = false; v.draw();
      const c = document.getElementById('timeline'), r = devicePixelRatio;
      const x = v.x(t * 1e9), y = 24 + p.row * 20 - v.scrollY + dy;
      const d = c.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), 1, 1).data;
      return '#' + [d[0], d[1], d[2]].map((k) => k.toString(16).padStart(2, '0')).join('');
    }, [pid, t, dy]);
    const mode = async (m) => { await o.page.selectOption('#tl-colour', m); await o.page.waitForTimeout(50); };
    try {
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      await o.page.uncheck('#tl-cp');
      // By CPU: the largest (cc1 110, 3.9 s) darkest, a probe (60 ms) light.
      await mode('cpu');
      check(await px(110, 4, 8) === '#123a6c', 'cc1 110 by CPU: ' + await px(110, 4, 8));
      const probe = await px(102, 0.15, 8);
      check(['#e3edf9', '#c4d9f1'].includes(probe), 'a probe by CPU: ' + probe);
      await mode('rss');
      // (a log scale from 2 MiB to 1.5 GiB: a probe's 30 MiB in step 3)
      check(await px(110, 4, 8) === '#552458' && await px(102, 0.15, 8) === '#c98dc0', 'by peak memory: ' + await px(110, 4, 8) + ' ' + await px(102, 0.15, 8));
      await mode('exit');
      check(await px(102, 0.15, 8) === '#f0b65a' && await px(113, 2.5, 8) === '#d23b3b' && await px(110, 4, 8) === '#8cc9a0',
        'by exit: ' + [await px(102, 0.15, 8), await px(113, 2.5, 8), await px(110, 4, 8)].join(' '));
      const legendText = await o.page.textContent('#legend');
      check(legendText.includes('non-zero exit') && legendText.includes('killed'), 'legend by exit: ' + legendText);
      await mode('program');
      check(await px(110, 4, 8) === await px(111, 3, 8) && await px(110, 4, 8) !== await px(112, 8, 8), 'by program: the two cc1 differ or equal ld');
      // The critical path: along the bottom of ld's row and cc1 110's, not
      // along cc1 111 (the shorter compile).
      check(await px(112, 8, 17) !== '#6a2cc9', 'the path is drawn while unticked');
      await o.page.check('#tl-cp');
      await o.page.waitForTimeout(50);
      check(await px(112, 8, 17) === '#6a2cc9' && await px(110, 4, 17) === '#6a2cc9', 'the critical path on ld / cc1 110: ' + await px(112, 8, 17) + ' ' + await px(110, 4, 17));
      check(await px(111, 3, 17) !== '#6a2cc9', 'the critical path on cc1 111');
      check((await o.page.textContent('#legend')).includes('critical path'), 'no critical path in the legend');
      await (await o.page.$('#timeline')).screenshot({ path: path.join(TMP, 'timeline.png') });
      // The rank filter: rank 1 alone, then a bad range.
      check(await o.page.isVisible('#f-ranks'), 'no rank filter on a trace with ranks');
      await o.page.fill('#f-ranks', '1');
      await o.page.click('#f-apply');
      const left = await o.page.evaluate(() => window.forktraceReport.rows().map((p) => p.pid));
      check(JSON.stringify(left) === '[121]', 'rank 1 shows ' + left.join(','));
      check((await o.page.textContent('#f-status')).includes('showing 1 of 13'), 'status: ' + await o.page.textContent('#f-status'));
      await o.page.fill('#f-ranks', '0-');
      await o.page.click('#f-apply');
      check((await o.page.evaluate(() => window.forktraceReport.rows().map((p) => p.pid).sort().join(','))) === '120,121', 'ranks 0-');
      await o.page.fill('#f-ranks', 'x');
      await o.page.click('#f-apply');
      check(await o.page.$eval('#f-ranks', (e) => e.classList.contains('invalid')), 'a bad rank range is not flagged');
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
    } finally { await o.browser.close(); }
    // No ranks, no rank filter.
    const { html } = runForktrace();
    const o2 = await openPage(html);
    try { check(!(await o2.page.isVisible('#f-ranks')), 'a rank filter on a trace without ranks'); } finally { await o2.browser.close(); }
  },

  // Opening a big report (FT_REPORT_HTML, from bench_report) and panning
  // and zooming it: prints the numbers docs/BENCHMARKS.md quotes.
  async bench() {
    const html = process.env.FT_REPORT_HTML;
    if (!html || !fs.existsSync(html)) skipOrFail('FT_REPORT_HTML does not name a report');
    const o = await openPage(html, { timeout: 60000 });
    try {
      const frames = await o.page.evaluate(async () => {
        const R = window.forktraceReport, v = R.timeline, out = [];
        const c = document.getElementById('timeline');
        for (let k = 0; k < 30; k++) {
          const t = performance.now();
          if (k % 3 === 0) v.zoomAt(600, 0.7); else { const s = (v.t1 - v.t0) * 0.05; v.t0 += s; v.t1 += s; v.scroll(40, true); }
          v.pending = false; v.draw(); R.timeline.onchange();
          c.getContext('2d').getImageData(0, 0, 1, 1); // wait for the raster
          out.push(performance.now() - t);
        }
        return out;
      });
      await o.page.screenshot({ path: path.join(TMP, 'bench.png') });
      frames.sort((a, b) => a - b);
      const size = fs.statSync(html).size;
      console.log(`bench: size ${(size / 1e6).toFixed(2)} MB, load ${o.loadMs} ms, pan/zoom frame median ${frames[15].toFixed(1)} ms, max ${frames[frames.length - 1].toFixed(1)} ms`);
      check(o.problems.length === 0, 'console errors: ' + o.problems.join('; '));
      check(size < 10e6, 'report over 10 MB');
      check(o.loadMs < 2000, `load took ${o.loadMs} ms`);
      check(frames[frames.length - 1] < 50, 'a frame took over 50 ms');
    } finally { await o.browser.close(); }
  }
};

if (!tests[name]) fail(`unknown test '${name}'; known: ${Object.keys(tests).join(', ')}`);
try {
  await tests[name]();
  console.log(`PASS report.${name}`);
  process.exit(0);
} catch (e) {
  fail(e.stack || String(e));
}
