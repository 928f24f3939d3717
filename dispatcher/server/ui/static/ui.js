// Sluice's web UI: each page's HTML is a shell; this script fills it from
// the JSON API with the token the user signed in with (kept in this tab's
// sessionStorage, sent as a bearer token), follows the watch stream to
// redraw what changed, and re-reads node and round figures every few
// seconds. Every value is written as text, never as markup.
'use strict';
(() => {
  const body = document.body;
  const P = {
    jobs: body.dataset.apiJobs, job: body.dataset.apiJob, tasks: body.dataset.apiTasks,
    nodes: body.dataset.apiNodes, node: body.dataset.apiNode, queues: body.dataset.apiQueues, watch: body.dataset.apiWatch,
    cluster: body.dataset.apiCluster, whoami: body.dataset.apiWhoami, ui: body.dataset.ui,
  };
  const page = body.dataset.page;
  const arg = body.dataset.arg;
  const TOKEN = 'sluice.token';
  const POLL_MS = 2000;
  const $ = (sel) => document.querySelector(sel);

  let who = null;
  // session counts sign-ins: loops of an earlier one stop.
  let session = 0;
  let pollTimer = null;
  let watchAbort = null;

  class HTTPError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  function authHeaders() {
    const h = new Headers();
    const tok = sessionStorage.getItem(TOKEN);
    if (tok) h.set('Authorization', 'Bearer ' + tok);
    return h;
  }

  // api fetches path and returns its JSON (or text); opts.body, when
  // set, is sent as JSON. A 401 signs out;
  // a redirect (a write that reached a follower) is an error, as the
  // leader is another origin. An answer that arrives after its session
  // ended is thrown away (status 0), so that nothing read with one token
  // shows after another signs in.
  async function api(path, opts = {}) {
    const mine = session;
    const stale = () => new HTTPError(0, 'signed out');
    const headers = authHeaders();
    if (opts.body !== undefined) headers.set('Content-Type', 'application/json');
    const r = await fetch(path, {
      method: opts.method || 'GET', headers, cache: 'no-store', credentials: 'omit', redirect: 'manual',
      signal: opts.signal, body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    if (mine !== session) throw stale();
    if (r.type === 'opaqueredirect' || r.status === 307) {
      throw new HTTPError(307, 'this replica does not lead: open the UI on the leader to do this');
    }
    if (r.status === 401) {
      signedOut();
      throw new HTTPError(401, 'sign in');
    }
    if (!r.ok) {
      let msg = 'HTTP ' + r.status;
      try { const e = await r.json(); if (e.error) msg = e.error; } catch (_) { /* not JSON */ }
      throw new HTTPError(r.status, msg);
    }
    const out = await (opts.text ? r.text() : r.json());
    if (mine !== session) throw stale();
    return out;
  }

  // el makes an element: attrs are properties (dataset for data-*),
  // children strings (as text) or nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) e.append(c instanceof Node ? c : String(c ?? ''));
    return e;
  }
  const link = (href, text) => el('a', { href }, text);
  const state = (s) => el('span', { className: 'state ' + s }, s);
  const num = (v) => el('td', { className: 'num' }, v ?? '');

  // fill replaces a table's rows; a cell is a td, a node or text.
  function fill(table, rows, empty) {
    const tb = table.tBodies[0];
    const trs = rows.map((cells) => {
      const tr = el('tr');
      for (const c of cells) tr.append(c instanceof HTMLTableCellElement ? c : el('td', {}, c));
      return tr;
    });
    if (trs.length === 0 && empty) {
      trs.push(el('tr', {}, el('td', { colSpan: table.tHead.rows[0].cells.length, className: 'hint' }, empty)));
    }
    tb.replaceChildren(...trs);
  }

  // facts fills a dl with [label, value, key] rows; key names the dd
  // (data-k) for tests and styles.
  function facts(dl, rows) {
    const out = [];
    for (const [label, value, key] of rows) {
      out.push(el('dt', {}, label));
      out.push(el('dd', key ? { 'data-k': key } : {}, value));
    }
    dl.replaceChildren(...out);
  }

  const cores = (m) => (m === undefined || m === null) ? '—' : (m / 1000).toFixed(m % 1000 === 0 ? 0 : 2);
  function bytes(b) {
    if (b === undefined || b === null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (Math.abs(b) >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b : b.toFixed(b >= 100 ? 0 : 1)) + ' ' + units[i];
  }
  function when(t) {
    if (!isSet(t)) return '';
    return new Date(t).toLocaleString(undefined, { hour12: false });
  }
  // ago is how long before now t was, with t itself; — when unset. A
  // time ahead of the browser's clock (another host's) reads as now.
  function ago(t) {
    if (!isSet(t)) return '—';
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    const rel = s < 90 ? s + ' s' : s < 90 * 60 ? Math.round(s / 60) + ' min' : Math.round(s / 3600) + ' h';
    return rel + ' ago (' + when(t) + ')';
  }
  const ms = (s) => (s * 1000).toFixed(s < 0.01 ? 2 : 1);
  const enc = encodeURIComponent;
  const queueName = (q) => q || 'default';
  const isSet = (t) => !!t && !t.startsWith('0001-');
  // drainText says whether an operator drained node n, and its deadline.
  const drainText = (n) => !n.drained ? '' : (isSet(n.drain_deadline) ? 'drained, deadline ' + when(n.drain_deadline) : 'drained, no deadline');
  // capped is "held / cap", the cap — when there is none; the cell is
  // marked full when the queue holds its cap or more.
  function capped(key, held, cap, fmt) {
    return el('td', { className: 'num' + (cap && held >= cap ? ' full' : ''), 'data-k': key }, fmt(held) + ' / ' + (cap ? fmt(cap) : '—'));
  }

  // confirmButton makes b act on a second click within five seconds:
  // the first shows label() in place of its text. act runs on the
  // second; the button is disabled while it runs.
  function confirmButton(b, label, act) {
    let armed = null;
    const text = b.textContent;
    const disarm = () => { clearTimeout(armed); armed = null; b.textContent = text; };
    b.addEventListener('click', async () => {
      if (!armed) {
        b.textContent = label();
        armed = setTimeout(disarm, 5000);
        return;
      }
      disarm();
      b.disabled = true;
      try {
        await act();
      } finally {
        b.disabled = false;
      }
    });
  }

  function showError(msg) {
    const e = $('#error');
    e.textContent = msg || '';
    e.hidden = !msg;
  }

  // setLive marks the page as following the cluster (the watch stream,
  // or for pages without one, the last poll) or not.
  function setLive(on) {
    const l = $('#live');
    l.textContent = on ? '● live' : '○';
    l.classList.toggle('on', on);
  }

  // ---- charts -------------------------------------------------------

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  // chart draws values (one per bucket, oldest first) as a line over
  // the last five minutes.
  function chart(box, values, fmt) {
    const W = 600, H = 160, L = 44, B = 18, T = 8;
    const top = Math.max(...values, 0);
    const scale = top > 0 ? top * 1.1 : 1;
    const x = (i) => L + (W - L - 4) * i / Math.max(values.length - 1, 1);
    const y = (v) => T + (H - T - B) * (1 - v / scale);
    const pts = values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
    const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img' });
    s.append(svg('line', { x1: L, y1: H - B, x2: W, y2: H - B, class: 'axis' }));
    s.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
    s.append(svg('polygon', { points: `${x(0)},${H - B} ${pts} ${x(values.length - 1)},${H - B}`, class: 'area' }));
    s.append(svg('polyline', { points: pts, class: 'line' }));
    const label = (tx, ty, text, anchor) => {
      const t = svg('text', { x: tx, y: ty, 'text-anchor': anchor });
      t.textContent = text;
      s.append(t);
    };
    label(L - 4, T + 8, fmt(top), 'end');
    label(L - 4, H - B, '0', 'end');
    label(L, H - 4, '−5 min', 'start');
    label(W - 2, H - 4, 'now', 'end');
    box.replaceChildren(s);
    box.dataset.max = String(top);
  }

  // drawRoundCharts buckets the rounds of the last five minutes by 5 s:
  // placements per second, and the slowest round of each bucket.
  function drawRoundCharts(rounds) {
    const N = 60, STEP = 5000;
    const now = Date.now();
    const rate = new Array(N).fill(0), lat = new Array(N).fill(0);
    for (const r of rounds) {
      const age = now - Date.parse(r.at);
      const b = N - 1 - Math.floor(age / STEP);
      if (b < 0 || b >= N) continue;
      rate[b] += r.placed / (STEP / 1000);
      lat[b] = Math.max(lat[b], r.latency * 1000);
    }
    chart($('#chart-rate'), rate, (v) => v.toFixed(v < 10 ? 1 : 0));
    chart($('#chart-latency'), lat, (v) => v.toFixed(v < 10 ? 1 : 0));
  }

  // ---- pages --------------------------------------------------------

  // paged gives a list page its filter form (#filter, of the fields
  // names) and pager (#first, #prev, #next): the filters and the page's
  // after are the address's query, and refresh sets this.next, the after
  // of the next page ('' for none).
  function paged(names) {
    return {
      prev: [],
      next: '',
      init() {
        const form = $('#filter');
        const q = new URLSearchParams(location.search);
        for (const name of names) {
          if (!q.has(name)) continue;
          const f = form.elements[name];
          if (f.tagName === 'SELECT' && ![...f.options].some((o) => o.value === q.get(name))) {
            f.append(el('option', {}, q.get(name))); // a page size or state of the address not in the list
          }
          f.value = q.get(name);
        }
        form.addEventListener('submit', (e) => {
          e.preventDefault();
          this.prev = [];
          this.go('');
        });
        $('#next').addEventListener('click', () => {
          if (!this.next) return;
          this.prev.push(new URLSearchParams(location.search).get('after') || '');
          this.go(this.next);
        });
        $('#prev').addEventListener('click', () => this.go(this.prev.pop() || ''));
        $('#first').addEventListener('click', () => { this.prev = []; this.go(''); });
      },
      // go shows the page after after, with the form's filters, and puts
      // both in the address.
      go(after) {
        const form = $('#filter');
        const q = new URLSearchParams();
        for (const name of names) {
          const v = form.elements[name].value.trim();
          if (v && !(name === 'history' && v === 'include')) q.set(name, v);
        }
        if (after) q.set('after', after);
        history.replaceState(null, '', location.pathname + (q.toString() ? '?' + q : ''));
        refreshSoon(0);
      },
      // page reads path with the address's query, limit 50 by default,
      // and sets the pager from the answer's next.
      async page(path) {
        const q = new URLSearchParams(location.search);
        if (!q.has('limit')) q.set('limit', '50');
        const list = await api(path + '?' + q);
        this.next = list.next || '';
        $('#next').disabled = !this.next;
        $('#prev').disabled = this.prev.length === 0;
        return list;
      },
    };
  }

  const pages = {
    overview: {
      poll: true,
      watch: () => true,
      debounce: 1000,
      async refresh() {
        const c = await api(P.cluster);
        const n = c.nodes, by = (s) => n.states[s] || 0;
        facts($('#ov-nodes'), [['total', n.total, 'nodes-total'], ['ready', by('ready'), 'nodes-ready'],
          ['draining', by('draining'), 'nodes-draining'], ['down', by('down'), 'nodes-down']]);
        const j = c.jobs || {};
        facts($('#ov-jobs'), ['pending', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => [s, j[s] || 0, 'jobs-' + s]));
        const t = c.tasks;
        facts($('#ov-tasks'), [['total', t.total, 'tasks-total'], ['pending', t.pending, 'tasks-pending'],
          ['active', t.active, 'tasks-active'], ['succeeded', t.succeeded, 'tasks-succeeded'],
          ['failed', t.failed, 'tasks-failed'], ['killed', t.killed, 'tasks-killed']]);
        facts($('#ov-replica'), [['replica', c.replica], ['leader', c.leader || 'none known'], ['term', c.term],
          ['applied index', c.applied], ['rounds', c.round_totals.rounds], ['placed', c.round_totals.placed, 'placed-total']]);
        // Usage is the leader's, from heartbeats: none elsewhere.
        const used = (tier, k) => (n.usage ? n.usage[tier][k] : null);
        fill($('#ov-tiers'), ['online', 'offline'].map((tier) => [tier,
          num(cores(n.allocatable[tier].cpu)), num(cores(n.used[tier].cpu)), num(cores(used(tier, 'cpu'))),
          num(bytes(n.allocatable[tier].memory)), num(bytes(n.used[tier].memory)), num(bytes(used(tier, 'memory')))]));
        $('#ov-tiers').tBodies[0].rows[0].cells[1].dataset.k = 'online-cpu';
        drawRoundCharts(c.rounds);
      },
    },

    jobs: {
      watch: () => true,
      ...paged(['state', 'history', 'queue', 'label', 'limit']),
      async refresh() {
        const list = await this.page(P.jobs);
        fill($('#jobs'), list.jobs.map((j) => [
          el('td', { 'data-job': j.id }, link(P.ui + 'jobs/' + enc(j.id), j.id)), j.spec.name, queueName(j.spec.queue),
          el('td', {}, state(j.state), ...(j.history ? [' ', el('span', { className: 'history', 'data-k': 'history' }, '(history)')] : [])),
          num(j.tasks.total), num(j.tasks.pending), num(j.tasks.active),
          num(j.tasks.succeeded), num(j.tasks.failed), num(j.tasks.killed), when(j.submitted),
        ]), 'No jobs match.');
      },
    },

    job: {
      watch: (ev) => ev.job.id === arg,
      init() {
        const b = $('#cancel');
        let armed = null;
        b.addEventListener('click', async () => {
          if (!armed) {
            b.textContent = 'Confirm: cancel ' + arg;
            armed = setTimeout(() => { armed = null; b.textContent = 'Cancel job'; }, 5000);
            return;
          }
          clearTimeout(armed);
          armed = null;
          b.disabled = true;
          try {
            const r = await api(P.job + enc(arg), { method: 'DELETE' });
            showError('');
            $('#cancel').textContent = `Cancelled: ${r.stopping} stopping, ${r.dropped} dropped`;
          } catch (e) {
            b.disabled = false;
            b.textContent = 'Cancel job';
            showError('cancel: ' + e.message);
          }
          refreshSoon(0);
        });
      },
      async refresh() {
        let j = await api(P.job + enc(arg)), tl = null;
        if (!j.history) {
          try {
            tl = await api(P.job + enc(arg) + '/tasks?limit=1000');
          } catch (e) {
            // Forgotten between the two reads, the job has a summary and
            // no tasks.
            if (e.status !== 404) throw e;
            j = await api(P.job + enc(arg));
            if (!j.history) throw e;
          }
        }
        const st = $('#job-state');
        st.className = 'state ' + j.state;
        st.textContent = j.state;
        $('#job-history').hidden = !j.history;
        $('#history-note').hidden = !j.history;
        $('#job-live').hidden = !!j.history;
        const labels = Object.entries(j.spec.labels || {}).map(([k, v]) => k + '=' + v).join(', ');
        if (j.history) {
          $('#cancel').hidden = true;
          $('#capboxes-link').hidden = true;
          this.summary(j, labels);
          return;
        }
        const rows = [['name', j.spec.name], ['queue', queueName(j.spec.queue)], ['priority', j.spec.priority || 0],
          ['tier', j.spec.qos || ''], ['labels', labels], ['submitted', when(j.submitted)], ['tasks', j.tasks.total]];
        if (j.appmaster) rows.push(['capbox set of', link(P.ui + 'capboxes/' + enc(j.appmaster), j.appmaster)]);
        facts($('#job-facts'), rows);
        const open = j.state === 'pending' || j.state === 'running';
        const cancel = $('#cancel');
        cancel.hidden = !(open && mayCancel(j));
        const cb = $('#capboxes-link');
        cb.hidden = !j.spec.appmaster;
        cb.href = P.ui + 'capboxes/' + enc(j.id);
        const pend = j.pending_diagnosis || [];
        $('#pending-section').hidden = pend.length === 0;
        fill($('#pending'), pend.map((p) => [p.group, num(p.tasks), el('td', { className: 'wrap', 'data-k': 'reason' }, p.reason)]));
        fill($('#groups'), j.groups.map((g) => [g.name, num(g.total), num(g.pending), num(g.retrying || 0), num(g.active),
          num(g.succeeded), num(g.failed), num(g.killed)]));
        fill($('#tasks'), tl.tasks.map((t) => [t.id, t.group, num(t.index), num(t.attempt), el('td', {}, state(t.state)),
          el('td', {}, t.node ? link(P.ui + 'nodes/' + enc(t.node), t.node) : ''),
          num(['succeeded', 'failed'].includes(t.state) ? (t.exit_code || 0) : ''), t.reason || '', when(t.updated),
          el('td', {}, t.node ? link(P.ui + 'logs/' + enc(t.id), 'log') : '')]), 'No task placed yet.');
      },
      // summary shows a forgotten job's summary: its times, its tasks'
      // final counts and its first failure.
      summary(j, labels) {
        const f = j.first_failure;
        let failure = 'none';
        if (f) {
          failure = f.task + ' ' + f.state + (f.reason ? ' (' + f.reason + ')' : '') +
            (f.exit_code ? ', exit code ' + f.exit_code : '') + ' at ' + when(f.at);
        }
        const t = j.tasks;
        facts($('#job-facts'), [['name', j.spec.name], ['queue', queueName(j.spec.queue)], ['labels', labels],
          ['submitted', when(j.submitted), 'submitted'], ['started', isSet(j.started) ? when(j.started) : 'never placed', 'started'],
          ['ended', when(j.ended), 'ended'], ['tasks', t.total, 'tasks-total'], ['succeeded', t.succeeded || 0, 'tasks-succeeded'],
          ['failed', t.failed || 0, 'tasks-failed'], ['killed', t.killed || 0, 'tasks-killed'], ['first failure', failure, 'first-failure']]);
      },
    },

    nodes: {
      poll: true,
      ...paged(['state', 'limit']),
      async refresh() {
        const nl = await this.page(P.nodes);
        fill($('#nodes'), nl.nodes.map((n) => [
          el('td', {}, link(P.ui + 'nodes/' + enc(n.spec.name), n.spec.name)), el('td', {}, state(n.state)),
          el('td', { 'data-k': 'drain' }, drainText(n)), n.spec.pool || 'default', num(n.tasks),
          num(cores(n.used.online.cpu) + ' / ' + cores(n.spec.allocatable.online.cpu)),
          num(cores(n.used.offline.cpu) + ' / ' + cores(n.spec.allocatable.offline.cpu)),
          num(bytes(n.used.online.memory + n.used.offline.memory) + ' / ' + bytes(n.spec.capacity.memory)),
          num(n.usage ? cores(n.usage.total.cpu) : '—'), when(n.last_heartbeat),
        ]), 'No nodes match.');
      },
    },

    node: {
      poll: true,
      init() {
        // An admin drains (with the deadline given as a wait, or none)
        // and undrains; each on a second click.
        const act = async (what, opts) => {
          try {
            const r = await api(P.node + enc(arg) + '/drain', opts);
            showError('');
            $('#drain-timeout').value = '';
            return r;
          } catch (e) {
            showError(what + ': ' + e.message);
          } finally {
            refreshSoon(0);
          }
        };
        confirmButton($('#drain'), () => {
          const t = $('#drain-timeout').value.trim();
          return 'Confirm: drain ' + arg + (t ? ', deadline in ' + t : ', no deadline');
        }, () => {
          const t = $('#drain-timeout').value.trim();
          return act('drain', t ? { method: 'POST', body: { timeout: t } } : { method: 'POST' });
        });
        confirmButton($('#undrain'), () => 'Confirm: undrain ' + arg, () => act('undrain', { method: 'DELETE' }));
      },
      async refresh() {
        const n = await api(P.node + enc(arg));
        const st = $('#node-state');
        st.className = 'state ' + n.state;
        st.textContent = n.state;
        const admin = !!who && who.role === 'admin';
        $('#drain-controls').hidden = !admin;
        $('#drain-hint').hidden = !admin;
        $('#undrain').hidden = !n.drained;
        const labels = Object.entries(n.spec.labels || {}).map(([k, v]) => k + '=' + v).join(', ');
        facts($('#node-facts'), [['drain', drainText(n) || 'not drained', 'drain'], ['pool', n.spec.pool || 'default'], ['address', n.spec.address || ''],
          ['labels', labels], ['CPU capacity', cores(n.spec.capacity.cpu) + ' cores'], ['memory capacity', bytes(n.spec.capacity.memory)],
          ['tasks', n.tasks], ['target generation', n.generation], ['last heartbeat', when(n.last_heartbeat) || 'none (known to the leader only)']]);
        fill($('#node-tiers'), ['online', 'offline'].map((tier) => [tier,
          num(cores(n.spec.allocatable[tier].cpu)), num(cores(n.used[tier].cpu)), num(cores(n.free[tier].cpu)),
          num(n.usage ? cores(n.usage[tier].cpu) : '—'),
          num(bytes(n.spec.allocatable[tier].memory)), num(bytes(n.used[tier].memory)), num(bytes(n.free[tier].memory)),
          num(n.usage ? bytes(n.usage[tier].memory) : '—')]));
        // The offline tier's quota from the node's last heartbeat.
        const oc = n.usage && n.usage.overcommit;
        facts($('#node-overcommit'), [
          ['offline CPU quota (floor–ceiling)', oc ? cores(oc.cpu_quota) + ' cores (' + cores(oc.cpu_min) + '–' + cores(oc.cpu_max) + ')' : '—', 'oc-cpu'],
          ['offline memory limit', oc ? bytes(oc.memory_limit) : '—', 'oc-memory-limit'],
          ['offline memory guaranteed', oc ? bytes(oc.memory_guaranteed) : '—', 'oc-memory-guaranteed'],
          ['decided', oc ? ago(oc.decided) : '—', 'oc-decided']]);
        fill($('#pods'), n.pods.map((p) => [p.task_id, el('td', {}, link(P.ui + 'jobs/' + enc(p.job), p.job)), p.group, p.qos,
          el('td', {}, p.state ? state(p.state) : ''), num(cores(p.resources.cpu)), num(bytes(p.resources.memory)),
          p.capbox ? 'capbox' : (p.in_capbox ? 'in ' + p.in_capbox : 'task'),
          el('td', {}, p.capbox ? '' : link(P.ui + 'logs/' + enc(p.task_id), 'log'))]), 'No pods.');
      },
    },

    capboxes: {
      watch: (ev) => ev.job.id === arg || ev.job.appmaster === arg,
      async refresh() {
        $('#am-link').href = P.ui + 'jobs/' + enc(arg);
        const l = await api(P.job + enc(arg) + '/capboxes');
        fill($('#capboxes'), l.capboxes.map((b) => [b.id, b.set, b.request, el('td', {}, state(b.state)),
          el('td', {}, b.node ? link(P.ui + 'nodes/' + enc(b.node), b.node) : ''),
          num(cores(b.resources.cpu)), num(bytes(b.resources.memory)),
          el('td', { className: 'wrap' }, ...(b.tasks || []).flatMap((t, i) => [i ? ', ' : '',
            link(P.ui + 'logs/' + enc(t.id), t.name), ' ', state(t.state)]))]), 'No capboxes.');
      },
    },

    queues: {
      poll: true,
      watch: () => true,
      debounce: 1000,
      // refresh shows every queue of either list: the caps, weights and
      // what active tasks hold from the queues', the job and task counts
      // from the cluster's summary.
      async refresh() {
        const [c, ql] = await Promise.all([api(P.cluster), api(P.queues)]);
        const sums = new Map(c.queues.map((q) => [q.name, q]));
        const sets = new Map(ql.queues.map((q) => [q.name, q]));
        const names = [...new Set([...sums.keys(), ...sets.keys()])].sort();
        const none = { cpu: 0, memory: 0, gpus: 0 };
        fill($('#queues'), names.map((name) => {
          const q = sums.get(name) || { weight: 1, jobs: {}, used: none, tasks: {} };
          const s = sets.get(name) || { effective_weight: q.weight, caps: {}, running: q.used, tasks: q.tasks.active || 0, pending: q.tasks.pending || 0 };
          const j = q.jobs || {}, t = q.tasks, cap = s.caps || {};
          const id = (v) => String(v);
          return [el('td', { 'data-queue': name }, link(P.ui + 'jobs?queue=' + enc(name), queueName(name))), num(s.effective_weight),
            capped('cpu', s.running.cpu || 0, cap.cpu, cores), capped('memory', s.running.memory || 0, cap.memory, bytes),
            capped('gpus', s.running.gpus || 0, cap.gpus, id), capped('tasks', s.tasks || 0, cap.tasks, id), num(s.pending || 0),
            num(j.pending || 0), num(j.running || 0), num((j.succeeded || 0) + (j.failed || 0) + (j.cancelled || 0)),
            num(t.succeeded || 0), num(t.failed || 0), num(t.killed || 0)];
        }), 'No queue holds a job or has settings.');
      },
    },

    rounds: {
      poll: true,
      async refresh() {
        const c = await api(P.cluster);
        const t = c.round_totals;
        facts($('#round-totals'), [['rounds', t.rounds], ['placed', t.placed], ['rejected as stale', t.rejected],
          ['preempted', t.preempted], ['this replica leads', c.is_leader ? 'yes' : 'no (only the leader schedules)']]);
        drawRoundCharts(c.rounds);
        fill($('#rounds'), c.rounds.slice().reverse().map((r) => [when(r.at), num(r.tasks), num(r.groups), num(r.nodes),
          num(r.placed), num(r.unplaced), num(r.rejected), num(r.preempted), num(r.flow_nodes), num(r.flow_arcs),
          num(r.cost), num(ms(r.build)), num(ms(r.solve)), num(ms(r.commit)), num(ms(r.latency)), r.error || '']),
        'No round with pending work since this replica started.');
      },
    },

    log: {
      async refresh() {
        $('#log-text').textContent = await api(P.tasks + enc(arg) + '/logs?tail=1000', { text: true });
      },
    },

    notfound: { async refresh() {} },
  };

  function mayCancel(j) {
    if (!who) return false;
    switch (who.role) {
      case 'admin': return true;
      case 'submitter': return !who.queues || who.queues.length === 0 || who.queues.includes(j.spec.queue);
      case 'job': return who.job === j.id;
    }
    return false;
  }

  // ---- refresh, poll and watch --------------------------------------

  let refreshTimer = null, refreshing = false, again = false;
  function refreshSoon(delay) {
    if (refreshTimer !== null) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; runRefresh(); }, delay ?? 200);
  }
  async function runRefresh() {
    if (!who) return;
    if (refreshing) { again = true; return; }
    refreshing = true;
    const p = pages[page];
    try {
      await p.refresh();
      showError('');
      if (p.poll && !p.watch) setLive(true);
    } catch (e) {
      if (e.status === 0) return; // of an ended session
      if (e.status !== 401) showError(e.message);
      if (p.poll && !p.watch) setLive(false);
    } finally {
      refreshing = false;
      if (again) { again = false; refreshSoon(); }
    }
  }

  const sleep = (t) => new Promise((r) => setTimeout(r, t));

  // follow reads the watch stream from the applied index of now, and
  // refreshes the page on the events it cares for (at most once in the
  // page's debounce: the summaries read every job); it reconnects with
  // backoff until the session ends.
  async function follow(mine, accept) {
    let from = 0, backoff = 500;
    try { from = (await api(P.cluster)).applied; } catch (_) { /* a job token reads no summary: from 0 */ }
    while (mine === session) {
      watchAbort = new AbortController();
      try {
        const r = await fetch(P.watch + '?brief=1&from=' + from, {
          headers: authHeaders(), cache: 'no-store', credentials: 'omit', redirect: 'manual', signal: watchAbort.signal,
        });
        if (r.status === 401) { signedOut(); return; }
        if (!r.ok || !r.body) throw new Error('watch: HTTP ' + r.status);
        setLive(true);
        backoff = 500;
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (!line) continue; // keep-alive
            const ev = JSON.parse(line);
            from = Math.max(from, ev.index);
            if (accept(ev)) refreshSoon(pages[page].debounce);
          }
        }
      } catch (_) { /* reconnect below */ }
      setLive(false);
      if (mine !== session) return;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 10000);
    }
  }

  function signedIn() {
    session++;
    $('#login').hidden = true;
    $('#main').hidden = false;
    $('#logout').hidden = !who.auth;
    const scope = who.queues && who.queues.length ? ' (' + who.queues.join(', ') + ')' : '';
    $('#who').textContent = who.auth ? 'signed in as ' + who.role + scope : 'no authentication: acting as admin';
    $('#who').dataset.role = who.role;
    const p = pages[page];
    runRefresh();
    if (p.poll) {
      pollTimer = setInterval(() => { if (!document.hidden) refreshSoon(0); }, POLL_MS);
    }
    if (p.watch) follow(session, p.watch);
  }

  function signedOut() {
    session++;
    who = null;
    if (pollTimer) clearInterval(pollTimer);
    pollTimer = null;
    if (watchAbort) watchAbort.abort();
    setLive(false);
    // What the last token could read goes with it.
    document.querySelectorAll('main tbody, main dl, main pre, main .state, .chart').forEach((e) => e.replaceChildren());
    for (const id of ['#cancel', '#capboxes-link', '#pending-section', '#drain-controls', '#drain-hint', '#job-history', '#history-note']) {
      if ($(id)) $(id).hidden = true;
    }
    showError('');
    $('#main').hidden = true;
    $('#logout').hidden = true;
    $('#who').textContent = '';
    $('#login').hidden = false;
    $('#token').focus();
  }

  async function signIn() {
    try {
      who = await api(P.whoami);
    } catch (e) {
      if (e.status !== 401) {
        $('#main').hidden = false;
        showError('cannot reach the dispatcher: ' + e.message);
      }
      return false;
    }
    signedIn();
    return true;
  }

  function start() {
    for (const a of document.querySelectorAll('nav a')) {
      a.classList.toggle('current', a.dataset.nav.split(' ').includes(page));
    }
    $('#login').addEventListener('submit', async (e) => {
      e.preventDefault();
      const tok = $('#token').value.trim();
      $('#token').value = '';
      if (!tok) return;
      sessionStorage.setItem(TOKEN, tok);
      $('#login-error').textContent = '';
      if (!(await signIn())) {
        sessionStorage.removeItem(TOKEN);
        $('#login-error').textContent = 'The dispatcher does not know this token.';
      }
    });
    $('#logout').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN);
      signedOut();
    });
    if (pages[page].init) pages[page].init();
    signIn();
  }

  start();
})();
