// The sluice daemon's status page: reads /status.json and /history.json
// every two seconds and draws them. Everything it shows comes from the
// daemon; text from it is put in the page as text (never as HTML), and
// nothing here sends anything but those two GET requests.
'use strict';

(function () {
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
    '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#393b79'];
  const OTHER = '#555555';
  const IFACE = '#9a9a9a';
  const TOP = 10;
  const HASHCOUNT_NOTE = 'The daemon runs no hashcount filters: a daemon flow is a live source ' +
    'and at most one BPF, CSPF or DPF filter (hashcount and the other statistics classes run ' +
    'in the client), so this lists the flows with the most packets accepted instead.';

  function $(id) { return document.getElementById(id); }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function num(n) {
    if (n === undefined || n === null) return '';
    return Number(n).toLocaleString('en-US');
  }

  function duration(s) {
    s = Math.floor(Number(s) || 0);
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: 'no-store' });
    if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (await r.text()).trim());
    return r.json();
  }

  // Per-second rates of a running total: points {x: time, y: rate}.
  function rates(t, start, values) {
    const out = [];
    for (let j = 1; j < values.length; j++) {
      const t0 = t[start + j - 1];
      const t1 = t[start + j];
      if (t0 === undefined || t1 === undefined || t1 <= t0) continue;
      out.push({ x: t1, y: Math.max(0, values[j] - values[j - 1]) / (t1 - t0) });
    }
    return out;
  }

  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) {
      if (v <= m * p) return m * p;
    }
    return 10 * p;
  }

  function shortNum(v) {
    if (v >= 1e9) return (v / 1e9).toFixed(v % 1e9 ? 1 : 0) + 'G';
    if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
    if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
    return String(Math.round(v * 100) / 100);
  }

  // Draw lines [{color, dashed, points}] over times [xmin, xmax].
  function plot(canvas, lines, xmin, xmax) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 570;
    const h = canvas.clientHeight || 250;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = '#ffffff';
    g.fillRect(0, 0, w, h);
    const left = 56, right = 10, top = 10, bottom = 26;
    const pw = w - left - right, ph = h - top - bottom;
    let ymax = 0, npoints = 0;
    for (const l of lines) {
      for (const p of l.points) { ymax = Math.max(ymax, p.y); npoints++; }
    }
    ymax = niceCeil(ymax);
    if (xmax - xmin < 60) xmin = xmax - 60;
    const X = (x) => left + ((x - xmin) / (xmax - xmin)) * pw;
    const Y = (y) => top + ph - (y / ymax) * ph;
    // Grid and labels.
    g.font = '11px "DejaVu Sans", Arial, sans-serif';
    g.fillStyle = '#444444';
    g.strokeStyle = '#e4e4e4';
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = (ymax * i) / 4;
      g.beginPath();
      g.moveTo(left, Math.round(Y(y)) + 0.5);
      g.lineTo(left + pw, Math.round(Y(y)) + 0.5);
      g.stroke();
      g.fillText(shortNum(y) + '/s', left - 6, Y(y));
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    const span = xmax - xmin;
    const step = span > 300 ? 120 : span > 120 ? 60 : span > 60 ? 30 : 10;
    for (let ago = 0; ago <= span; ago += step) {
      const x = X(xmax - ago);
      g.beginPath();
      g.moveTo(Math.round(x) + 0.5, top);
      g.lineTo(Math.round(x) + 0.5, top + ph);
      g.stroke();
      g.fillText(ago === 0 ? 'now' : '-' + (ago >= 120 ? ago / 60 + ' min' : ago + ' s'), x, top + ph + 6);
    }
    g.strokeStyle = '#888888';
    g.strokeRect(left + 0.5, top + 0.5, pw, ph);
    // The lines.
    g.save();
    g.beginPath();
    g.rect(left, top, pw, ph);
    g.clip();
    for (const l of lines) {
      if (l.points.length === 0) continue;
      g.strokeStyle = l.color;
      g.fillStyle = l.color;
      g.lineWidth = l.dashed ? 1.5 : 2.5;
      g.setLineDash(l.dashed ? [6, 4] : []);
      g.beginPath();
      l.points.forEach((p, i) => {
        if (i === 0) g.moveTo(X(p.x), Y(p.y)); else g.lineTo(X(p.x), Y(p.y));
      });
      g.stroke();
      if (l.points.length === 1) {
        const p = l.points[0];
        g.beginPath();
        g.arc(X(p.x), Y(p.y), 3, 0, 2 * Math.PI);
        g.fill();
      }
    }
    g.restore();
    g.setLineDash([]);
    const r = canvas.getBoundingClientRect();
    canvas.dataset.lines = String(lines.filter((l) => l.points.length > 0).length);
    canvas.dataset.points = String(npoints);
    canvas.dataset.ymax = String(ymax);
    // Where the plotting area is, in page pixels (for tests that look at
    // a screenshot).
    canvas.dataset.area = [Math.round(r.left + window.scrollX + left), Math.round(r.top + window.scrollY + top),
      Math.round(pw), Math.round(ph)].join(',');
  }

  function clientLabel(c) {
    const who = (c.name && c.name !== c.command) ? c.command + ' (' + c.name + ')' : (c.command || '?');
    return 'pid ' + c.pid + ' ' + who + ', uid ' + c.uid;
  }

  function legend(ul, items) {
    ul.replaceChildren();
    for (const it of items) {
      const li = el('li');
      const sw = el('span', null, 'swatch' + (it.dashed ? ' dashed' : ''));
      if (it.dashed) sw.style.borderTopColor = it.color; else sw.style.background = it.color;
      li.append(sw, el('span', it.text));
      ul.append(li);
    }
  }

  function last(a) { return a.length ? a[a.length - 1] : 0; }

  function drawPlots(h) {
    const t = h.t || [];
    const xmax = t.length ? t[t.length - 1] : 0;
    const xmin = t.length ? t[0] : 0;
    const packets = [], losses = [], lp = [], ll = [];
    const series = (h.clients || []).map((c, i) => ({ c: c, color: COLORS[i % COLORS.length] }));
    if (h.other_clients) series.push({ c: h.other_clients, color: OTHER, other: true });
    for (const s of series) {
      const label = s.other ? 'other clients' : clientLabel(s.c) + (s.c.live ? '' : ' (gone)');
      packets.push({ color: s.color, points: rates(t, s.c.start, s.c.accepted) });
      losses.push({ color: s.color, points: rates(t, s.c.start, s.c.dropped) });
      lp.push({ color: s.color, text: label + ': ' + num(last(s.c.accepted)) + ' accepted, ' +
        num(last(s.c.read)) + ' read' });
      ll.push({ color: s.color, text: label + ': ' + num(last(s.c.dropped)) + ' lost' });
    }
    for (const i of h.interfaces || []) {
      packets.push({ color: IFACE, dashed: true, points: rates(t, 0, i.received) });
      lp.push({ color: IFACE, dashed: true, text: i.name + ': ' + num(last(i.received)) + ' received by filter' });
    }
    plot($('plot-packets'), packets, xmin, xmax);
    plot($('plot-losses'), losses, xmin, xmax);
    if (series.length === 0) {
      lp.unshift({ color: '#ffffff', text: 'No clients in the last ten minutes.' });
    }
    legend($('legend-packets'), lp);
    legend($('legend-losses'), ll);
  }

  function row(cells) {
    const tr = el('tr');
    for (const c of cells) {
      if (c instanceof Node) {
        const td = el('td');
        td.append(c);
        tr.append(td);
      } else if (typeof c === 'object' && c !== null) {
        tr.append(el('td', c.text, c.cls));
      } else {
        tr.append(el('td', c));
      }
    }
    return tr;
  }

  function sparkline(h, flowId) {
    const f = (h.flows || []).find((x) => x.id === flowId);
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('width', '120');
    svg.setAttribute('height', '18');
    if (!f) return svg;
    const pts = rates(h.t || [], f.start, f.accepted);
    const t = h.t || [];
    if (pts.length === 0 || t.length === 0) return svg;
    const xmax = t[t.length - 1], xmin = Math.min(t[0], xmax - 60);
    const ymax = niceCeil(Math.max(...pts.map((p) => p.y)));
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
    line.setAttribute('points', pts.map((p) =>
      (((p.x - xmin) / (xmax - xmin)) * 118 + 1).toFixed(1) + ',' + (17 - (p.y / ymax) * 16).toFixed(1)).join(' '));
    line.setAttribute('fill', 'none');
    line.setAttribute('stroke', COLORS[0]);
    line.setAttribute('stroke-width', '1.5');
    svg.append(line);
    return svg;
  }

  function drawTables(s, h) {
    const tb = (id) => $(id).querySelector('tbody');
    tb('interfaces').replaceChildren(...(s.interfaces || []).map((i) => row([
      { text: i.name, cls: 'text' }, i.linktype, num(i.received), num(i.dropped_by_kernel),
      num(i.packets_delivered), num(i.deliveries), num(i.filters), num(i.kernel_filter_instructions), num(i.groups)])));
    const flows = [];
    for (const c of s.clients || []) {
      for (const f of c.flows || []) flows.push({ c: c, f: f });
    }
    flows.sort((a, b) => (b.f.accepted - a.f.accepted) || (a.f.id - b.f.id));
    $('top-note').textContent = HASHCOUNT_NOTE;
    tb('top').replaceChildren(...flows.slice(0, TOP).map(({ c, f }) => row([
      f.id, 'pid ' + c.pid + ' ' + (c.command || ''), f.interface, { text: f.spec, cls: 'text' },
      num(f.accepted), num(f.read), num(f.dropped), num(f.waiting), sparkline(h, f.id),
      f.stalled ? { text: 'cut loose (stalled)', cls: 'stalled' } : 'open'])));
    if (flows.length === 0) {
      tb('top').replaceChildren(row([{ text: 'No flows open.', cls: 'text' }]));
    }
    tb('clients').replaceChildren(...(s.clients || []).map((c) => {
      const sum = (k) => (c.flows || []).reduce((a, f) => a + (f[k] || 0), 0);
      return row([c.client, c.pid, c.uid, { text: c.command, cls: 'text' }, { text: c.name, cls: 'text' },
        duration(c.connected_s), (c.flows || []).length, num(sum('accepted')), num(sum('read')), num(sum('dropped'))]);
    }));
  }

  function drawSummary(s) {
    const d = s.daemon || {};
    const parts = ['pid ' + d.pid, d.mode + ' mode', d.preference, 'up ' + duration(d.uptime_s),
      num(d.clients) + (d.clients === 1 ? ' client' : ' clients'), 'socket ' + d.socket,
      d.policy ? 'policy ' + d.policy : 'no policy file (root and the daemon\'s user only)',
      num(d.refused) + ' refused', num(d.bad_requests) + ' bad requests'];
    $('summary').textContent = parts.join(' \u00b7 ');
    const v = $('view');
    if (s.view === 'all') {
      v.hidden = true;
    } else {
      v.hidden = false;
      v.textContent = s.view === 'interfaces'
        ? 'The daemon could not tell who you are, so it shows its interfaces only.'
        : 'You see your own clients only (' + s.view + '), as with sluice daemon --status.';
    }
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const [s, h] = await Promise.all([getJSON('/status.json'), getJSON('/history.json')]);
      drawSummary(s);
      drawPlots(h);
      drawTables(s, h);
      $('error').hidden = true;
      document.body.dataset.samples = String(h.samples);
      document.body.dataset.ready = '1';
    } catch (e) {
      const err = $('error');
      err.hidden = false;
      err.textContent = 'The daemon is not answering: ' + e.message;
    } finally {
      busy = false;
    }
  }

  refresh();
  setInterval(refresh, 2000);
})();
