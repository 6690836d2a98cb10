/* forktrace report page: which rows the process timeline shows. Two views
 * of the same processes: the tree (a process per row, under its parent)
 * and the packed view (processes placed into as few lanes as their
 * lifetimes need, like a build's job slots); folds (many short processes
 * under one parent summarised in one row) in both; the search. Functions
 * of the page's process objects (report.js builds them and draws the
 * rows): no drawing, no DOM. */
'use strict';
const FT_LANES = (function () {
  /* The packed view is the default above this many processes. */
  const PACKED_ABOVE = 300;
  /* A fold holds at least FOLD_MIN processes, each shorter than
   * FOLD_SHORT of the run's duration (docs/INSIGHT.md, "The report at
   * build scale"). */
  const FOLD_MIN = 20, FOLD_SHORT = 0.01;

  /* The visible processes as a forest: p.vkids (visible children by start,
   * a hidden process's children moved up to its nearest visible ancestor),
   * p.vparent, and the roots of each group. o: byStart, multi, hosts (names
   * in order), hostInfo, hostFilter (a Set or null). With several hosts,
   * each host is a group under a heading, and a process whose nearest
   * visible ancestor is on another host (a node's root under its ssh)
   * starts its host's tree. */
  function forest(P, o) {
    const anc = new Int32Array(P.length).fill(-2), state = new Uint8Array(P.length);
    const parentOf = (p) => (p.parent >= 0 && p.parent < P.length && p.parent !== p.i ? P[p.parent] : null);
    /* Nearest visible proper ancestor's index, or -1; parent loops in a
     * broken file end the walk. */
    function nearest(p) {
      const chain = [];
      let q = parentOf(p), found = -1;
      while (q) {
        if (q.visible) { found = q.i; break; }
        if (anc[q.i] !== -2) { found = anc[q.i]; break; }
        if (state[q.i]) break;
        state[q.i] = 1; chain.push(q); q = parentOf(q);
      }
      for (const c of chain) anc[c.i] = found;
      return found;
    }
    const groups = o.multi
      ? o.hosts.filter((name) => !o.hostFilter || o.hostFilter.has(name)).map((name) => ({ hdr: true, host: name, info: o.hostInfo.get(name), roots: [], n: 0 }))
      : [{ roots: [], n: 0 }];
    const byHost = new Map(groups.map((g) => [g.host, g]));
    for (const p of P) { p.vkids = []; p.vparent = null; }
    for (const p of P) {
      if (!p.visible) continue;
      const g = o.multi ? byHost.get(p.host) : groups[0];
      if (!g) continue;
      g.n++;
      const a = nearest(p), q = a >= 0 ? P[a] : null;
      if (q && (!o.multi || q.host === p.host)) { q.vkids.push(p); p.vparent = q; } else g.roots.push(p);
    }
    for (const p of P) if (p.vkids.length > 1) p.vkids.sort(o.byStart);
    for (const g of groups) g.roots.sort(o.byStart);
    return groups;
  }

  /* Every visible process, parents before their children. */
  function preorder(groups) {
    const out = [];
    for (const g of groups) {
      const st = g.roots.slice().reverse();
      while (st.length) { const p = st.pop(); out.push(p); for (let k = p.vkids.length - 1; k >= 0; k--) st.push(p.vkids[k]); }
    }
    return out;
  }

  /* The folds. Under a process p, the children whose whole visible subtree
   * is short (every process in it under FOLD_SHORT of span) are one fold
   * when those subtrees hold FOLD_MIN processes or more; p's other
   * children keep their rows. Folds nest: a process inside a fold may have
   * a fold of its own, shown when the outer one is opened. p.fold is the
   * fold under p (or null), m.foldOf the fold that holds member m. Opened
   * folds are those whose parent's index is in open. */
  function folds(groups, span, open) {
    const limit = span * FOLD_SHORT, order = preorder(groups);
    for (const p of order) { p.fold = null; p.foldOf = null; }
    for (let k = order.length - 1; k >= 0; k--) {
      const p = order[k];
      let short = p.end - p.start < limit, n = 1, members = 0;
      for (const c of p.vkids) { n += c.subN; if (c.subShort) members += c.subN; else short = false; }
      p.subShort = short; p.subN = n;
      if (members < FOLD_MIN) continue;
      const f = { isFold: true, parent: p, members: p.vkids.filter((c) => c.subShort), n: members, open: open.has(p.i), start: Infinity, end: -Infinity, procs: null, stats: null };
      for (const m of f.members) {
        m.foldOf = f;
        if (m.start < f.start) f.start = m.start;
      }
      p.fold = f;
    }
    /* A fold's processes (for its bars and its summary), its end. */
    for (const p of order) {
      const f = p.fold;
      if (!f) continue;
      f.procs = [];
      const st = f.members.slice();
      while (st.length) { const q = st.pop(); f.procs.push(q); if (q.end > f.end) f.end = q.end; for (const c of q.vkids) st.push(c); }
      f.procs.sort((a, b) => a.start - b.start);
    }
  }

  /* A fold's figures: processes, wall span, CPU (when the trace has it),
   * non-zero exits, killed. cpuOf(p) gives a process's CPU time in ns or
   * undefined. */
  function foldStats(f, cpuOf) {
    if (f.stats) return f.stats;
    const s = { n: f.procs.length, wall: f.end - f.start, cpu: 0, hasCpu: false, nonzero: 0, killed: 0 };
    for (const p of f.procs) {
      const c = cpuOf(p);
      if (c !== undefined && c !== null) { s.cpu += c; s.hasCpu = true; }
      if (p.failed) s.nonzero++;
      if (p.killed) s.killed++;
    }
    f.stats = s;
    return s;
  }

  function clearPlacement(P) { for (const p of P) { p.row = -1; p.shown = false; } }

  /* Marks where each process of a fold is: the fold's row, not its own. */
  function placeFolded(f, row) {
    for (const q of f.procs) if (q.row < 0) q.row = row;
  }

  /* The tree view's rows: host headings, processes (p.vdepth set), and
   * fold rows ({isFold: true, ...}, f.vdepth) in place of their members; an
   * opened fold's row stays as the heading of its members. */
  function treeRows(P, groups) {
    clearPlacement(P);
    const rows = [];
    for (const g of groups) {
      if (g.hdr) { g.row = rows.length; rows.push(g); }
      const st = [];
      for (let k = g.roots.length - 1; k >= 0; k--) st.push([g.roots[k], 0]);
      while (st.length) {
        const [x, d] = st.pop();
        x.row = rows.length; x.vdepth = d; rows.push(x);
        if (x.isFold) {
          if (!x.open) { placeFolded(x, x.row); continue; }
          for (let k = x.members.length - 1; k >= 0; k--) st.push([x.members[k], d]);
          continue;
        }
        x.shown = true;
        if (x.collapsed) continue;
        const f = x.fold, kids = [];
        for (const c of x.vkids) {
          if (f && c.foldOf === f) { if (c === f.members[0]) kids.push(f); } else kids.push(c);
        }
        for (let k = kids.length - 1; k >= 0; k--) st.push([kids[k], d + 1]);
      }
    }
    return rows;
  }

  /* A binary heap of numbers, smallest first (lane ends, lane numbers). */
  function heap(less) {
    const a = [];
    return {
      get size() { return a.length; },
      top() { return a[0]; },
      push(v) { a.push(v); let i = a.length - 1; while (i > 0) { const j = (i - 1) >> 1; if (!less(a[i], a[j])) break; [a[i], a[j]] = [a[j], a[i]]; i = j; } },
      pop() {
        const top = a[0], last = a.pop();
        if (a.length) {
          a[0] = last; let i = 0;
          for (;;) { const l = 2 * i + 1, r = l + 1; let m = i; if (l < a.length && less(a[l], a[m])) m = l; if (r < a.length && less(a[r], a[m])) m = r; if (m === i) break; [a[i], a[m]] = [a[m], a[i]]; i = m; }
        }
        return top;
      }
    };
  }

  /* The packed view's rows: per group (host), its processes and closed
   * folds taken by start time, each into the lowest-numbered lane that is
   * free (its last item ended at or before this one's start), a new lane
   * when none is: as few lanes as the lifetimes need, the busiest at the
   * top. A lane is {lane: true, items: [...] by start, never overlapping}. */
  function packedRows(P, groups, byStart) {
    clearPlacement(P);
    const rows = [];
    for (const g of groups) {
      if (g.hdr) { g.row = rows.length; rows.push(g); }
      const items = [], st = g.roots.slice();
      while (st.length) {
        const p = st.pop();
        items.push(p);
        const f = p.fold;
        if (f && !f.open) items.push(f);
        for (const c of p.vkids) if (!f || f.open || c.foldOf !== f) st.push(c);
      }
      items.sort((a, b) => (a.start - b.start) || (a.isFold ? 1 : 0) - (b.isFold ? 1 : 0) || (a.isFold || b.isFold ? 0 : byStart(a, b)));
      const lanes = [], free = heap((x, y) => x < y), busy = heap((x, y) => x[0] < y[0]);
      for (const it of items) {
        while (busy.size && busy.top()[0] <= it.start) free.push(busy.pop()[1]);
        let k;
        if (free.size) k = free.pop(); else { k = lanes.length; lanes.push({ lane: true, host: g.host, num: k + 1, items: [] }); }
        lanes[k].items.push(it);
        busy.push([Math.max(it.start, it.end), k]);
      }
      for (const l of lanes) {
        l.row = rows.length;
        for (const it of l.items) {
          if (it.isFold) placeFolded(it, l.row); else { it.row = l.row; it.shown = true; }
        }
        rows.push(l);
      }
    }
    return rows;
  }

  /* The item of a lane at time t, or the nearest within slack ns. */
  function laneItemAt(lane, t, slack) {
    const a = lane.items;
    let lo = 0, hi = a.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (a[m].start <= t) lo = m + 1; else hi = m; }
    let best = null, bestD = slack;
    for (const k of [lo - 1, lo]) {
      if (k < 0 || k >= a.length) continue;
      const it = a[k], d = t < it.start ? it.start - t : (t > it.end ? t - it.end : 0);
      if (d <= bestD) { best = it; bestD = d; }
    }
    return best;
  }

  /* The first item of a lane that ends at or after t. */
  function laneFirst(lane, t) {
    const a = lane.items;
    let lo = 0, hi = a.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (a[m].end < t) lo = m + 1; else hi = m; }
    return lo;
  }

  /* The visible processes that match a query, in the order the search
   * visits them: a pid equal to the query first, then by start those whose
   * name (with its interpreter: p.title), label or argv holds it
   * (case-insensitive). */
  function search(P, query) {
    const q = query.trim().toLowerCase();
    if (!q) return { matches: [], hidden: 0 };
    const pid = /^\d+$/.test(q) ? Number(q) : -1;
    const exact = [], other = [];
    let hidden = 0;
    for (const p of P) {
      const isPid = p.pid === pid || p.hpid === pid;
      const hit = isPid || (p.title || p.name).toLowerCase().includes(q) || (p.label && p.label.toLowerCase().includes(q)) ||
        p.argv.some((a) => a && a.toLowerCase().includes(q));
      if (!hit) continue;
      if (!p.visible) { hidden++; continue; }
      (isPid ? exact : other).push(p);
    }
    other.sort((a, b) => (a.start - b.start) || (a.pid - b.pid));
    return { matches: exact.concat(other), hidden };
  }

  /* Opens what hides p: the folds that hold it and, in the tree, its
   * collapsed ancestors. Returns whether anything changed. */
  function reveal(p, open) {
    let changed = false;
    for (let q = p; q; q = q.vparent) {
      if (q.foldOf && !q.foldOf.open) { q.foldOf.open = true; open.add(q.foldOf.parent.i); changed = true; }
      if (q !== p && q.collapsed) { q.collapsed = false; changed = true; }
    }
    return changed;
  }

  return { PACKED_ABOVE, FOLD_MIN, FOLD_SHORT, forest, folds, foldStats, treeRows, packedRows, laneItemAt, laneFirst, search, reveal };
})();
