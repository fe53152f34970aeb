"use strict";
// fleetwave ui: draws the board the server streams (GET /events, "board" events) and posts approvals.
// Names and messages are hostile input: the DOM is built with createElement and textContent only.
(function () {
  const COLLAPSE_AT = 40; // a stage with more clusters shows counts until expanded
  const GROUP_COLLAPSE_AT = 50; // same for a fleet group
  const CAP = 200; // tiles or rows shown for a filter
  const ORDER = ["failed", "waiting", "inflight", "pending", "healthy"]; // most urgent first
  const SEP = "\u001f";
  const TONES = {
    Succeeded: "healthy", Failed: "failed", Stuck: "failed", RolledBack: "waiting", RollingBack: "waiting",
    Waiting: "waiting", Paused: "waiting", Progressing: "inflight", Pending: "pending", Stopped: "pending",
  };

  const $ = (id) => document.getElementById(id);
  const meta = document.querySelector('meta[name="fleetwave-token"]');
  const token = meta ? meta.getAttribute("content") || "" : "";

  const ui = {
    board: null, seq: 0, offset: 0, q: "",
    open: new Set(), // rollout ids whose details are open
    expanded: new Set(), // rollout id + SEP + stage shown in full
    groupsOpen: new Set(), // group-by key + SEP + value shown in full
    busy: new Set(), // rollout id + SEP + stage being approved
    groupBy: null, // null: the default (first label key)
    cache: new Map(), // rollout id -> {key, node}
    labels: new Map(), rollouts: new Map(), keys: null, fleetSig: "",
  };

  // ---- DOM helpers ----
  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid !== null && kid !== undefined && kid !== false && kid !== "") el.append(kid);
    }
    return el;
  }
  const swatch = (state) => h("span", { class: "swatch", "data-state": state, "aria-hidden": "true" });
  const tone = (phase) => TONES[phase] || "pending";
  const badge = (text, t) => h("span", { class: "badge", "data-tone": t, text: text || "unknown" });

  // ---- time (server clock: offset = server now - browser now at each board) ----
  const serverNow = () => Date.now() + ui.offset;
  const pad = (n) => String(n).padStart(2, "0");
  function span(seconds, coarse) {
    const s = Math.max(0, seconds), d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d) return `${d}d ${hr}h`;
    if (hr) return `${hr}h ${pad(m)}m`;
    if (m) return coarse ? `${m}m` : `${m}m ${pad(sec)}s`;
    return `${sec}s`;
  }
  function countdownText(until) {
    const ms = Date.parse(until) - serverNow();
    if (Number.isNaN(ms)) return "";
    return ms <= 0 ? "due now" : "opens in " + span(Math.ceil(ms / 1000), false);
  }
  function agoText(since) {
    const ms = serverNow() - Date.parse(since);
    if (Number.isNaN(ms)) return "";
    return ms < 5000 ? "just now" : span(Math.floor(ms / 1000), true) + " ago";
  }
  function fmtTime(iso) {
    const t = new Date(iso);
    if (!iso || Number.isNaN(t.getTime())) return iso ? String(iso) : "—";
    const s = t.toISOString(), today = new Date(serverNow()).toISOString().slice(0, 10);
    return (s.slice(0, 10) === today ? "" : s.slice(0, 10) + " ") + s.slice(11, 19) + " UTC";
  }
  function when(iso, withAgo) {
    if (!iso) return h("span", { class: "muted", text: "—" });
    const t = h("time", { datetime: iso, title: iso, text: fmtTime(iso) });
    if (!withAgo) return t;
    return h("span", {}, t, " (", h("span", { class: "ago", "data-since": iso, text: agoText(iso) }), ")");
  }
  function tick() {
    for (const el of document.querySelectorAll(".countdown")) {
      const text = countdownText(el.dataset.until);
      if (el.textContent !== text) el.textContent = text;
    }
    for (const el of document.querySelectorAll(".ago")) {
      const text = agoText(el.dataset.since);
      if (el.textContent !== text) el.textContent = text;
    }
  }

  // ---- filter ----
  function matches(name, labels, q) {
    if (!q) return true;
    if (String(name).toLowerCase().includes(q)) return true;
    return Object.entries(labels || {}).some(([k, v]) => `${k}=${v}`.toLowerCase().includes(q));
  }
  // Promotions name a tile namespace/name, staged runs by name alone; labels come from the fleet list.
  const labelsOf = (tile) => Object.assign({}, ui.labels.get(tile.name) || {}, tile.labels || {});
  function countStates(states) {
    const counts = {};
    for (const s of states) counts[s] = (counts[s] || 0) + 1;
    return counts;
  }
  function countsLine(counts, extra) {
    const out = h("div", { class: "counts" });
    for (const state of ORDER) {
      const n = counts[state] || 0;
      if (n) out.append(h("span", { class: "count", "data-state": state }, swatch(state), `${n} ${state}`));
    }
    if (extra) out.append(extra);
    return out;
  }
  const toggle = (key, scope, open, n) =>
    h("button", { class: "toggle", type: "button", "data-key": key, "data-scope": scope, "data-fkey": `toggle:${key}`,
      "aria-expanded": open ? "true" : "false", text: open ? "hide clusters" : `show ${n} clusters` });
  const more = (n) => h("p", { class: "more", text: `and ${n} more` });

  // ---- a rollout ----
  function tile(t, stage) {
    const label = `${t.name}: ${t.state}` + (t.message ? `, ${t.message}` : "");
    return h("span", { class: "tile", role: "img", tabindex: "0", "data-cluster": t.name, "data-state": t.state,
      "aria-label": label, title: label, "data-fkey": `tile:${stage}${SEP}${t.name}` });
  }

  function gate(g) {
    const li = h("li", { class: "gate", "data-kind": g.kind, "data-state": g.state },
      h("span", { class: "gate-mark", "aria-hidden": "true" }), `${g.kind} · ${g.state}`,
      g.message ? ` · ${g.message}` : "");
    if (g.state === "Waiting" && g.until) {
      li.append(" · ", h("span", { class: "countdown", "data-until": g.until, title: g.until, text: countdownText(g.until) }));
    }
    return li;
  }

  function stageEl(r, s, q) {
    const key = r.id + SEP + s.name, tiles = s.clusters || [], open = ui.expanded.has(key);
    const el = h("div", { class: "stage" + (s.name === r.currentStage ? " current" : ""),
      "data-stage": s.name, "data-state": s.state, "data-phase": s.phase });
    el.append(h("div", { class: "stage-head" }, h("h4", { class: "stage-name", text: s.name }), badge(s.phase, s.state)));
    if (s.description) el.append(h("p", { class: "desc", text: s.description }));
    if (s.startedAt || s.succeededAt) {
      el.append(h("p", { class: "times muted" }, s.startedAt ? ["started ", when(s.startedAt)] : null,
        s.succeededAt ? [s.startedAt ? " · done " : "done ", when(s.succeededAt)] : null));
    }
    el.append(countsLine(s.counts || countStates(tiles.map((t) => t.state)),
      tiles.length ? null : h("span", { class: "muted", text: "no clusters" })));
    if ((s.gates || []).length) el.append(h("ul", { class: "gates", "aria-label": `gates of ${s.name}` }, s.gates.map(gate)));
    let shown = tiles, note = null, hidden = 0;
    if (q) {
      shown = tiles.filter((t) => matches(t.name, labelsOf(t), q));
      if (tiles.length) note = h("p", { class: "match muted", text: shown.length ? `${shown.length} of ${tiles.length} match` : "no matching clusters" });
      hidden = Math.max(0, shown.length - CAP);
      shown = shown.slice(0, CAP);
    } else if (tiles.length > COLLAPSE_AT && !open) {
      shown = [];
    }
    if (note) el.append(note);
    if (shown.length) {
      el.append(h("div", { class: "tiles", role: "group", "aria-label": `clusters of ${s.name}` }, shown.map((t) => tile(t, s.name))));
    }
    if (hidden) el.append(more(hidden));
    if (!q && tiles.length > COLLAPSE_AT) el.append(toggle(key, "stage", open, tiles.length));
    el.append(h("p", { class: "tile-info", "aria-hidden": "true" }));
    if (s.approve) {
      const stage = s.approve.stage, busy = ui.busy.has(r.id + SEP + stage);
      const btn = h("button", { class: "approve", type: "button", "data-stage": stage, "data-fkey": `approve:${stage}`,
        "aria-busy": busy ? "true" : null, text: `Approve ${stage}` });
      btn.disabled = busy;
      el.append(btn);
    }
    return el;
  }

  function table(cols, rows) {
    return h("table", {}, h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))));
  }

  function detail(r) {
    const d = h("details", { class: "detail", "data-id": r.id });
    d.open = ui.open.has(r.id);
    d.append(h("summary", { "data-fkey": "summary" }, "Details"));
    const body = h("div", { class: "detail-body" });
    body.append(h("dl", { class: "facts" },
      h("dt", { text: "Revision" }), h("dd", {}, r.revision ? h("code", { text: r.revision }) : "—"),
      h("dt", { text: "Started" }), h("dd", {}, when(r.startedAt, true)),
      h("dt", { text: "Current stage" }), h("dd", { text: r.currentStage || "—" })));
    const conds = r.conditions || [];
    body.append(h("h4", { text: "Conditions" }), conds.length
      ? table(["Type", "Status", "Reason", "Message", "Since"], conds.map((c) =>
        [c.type || "", c.status || "", c.reason || "", c.message || "", when(c.lastTransitionTime)]))
      : h("p", { class: "muted", text: "none reported" }));
    const said = [];
    for (const s of r.stages || []) for (const t of s.clusters || []) if (t.message) said.push([s.name, t]);
    if (said.length) {
      body.append(h("h4", { text: "Cluster messages" }), h("ul", { class: "messages" }, said.map(([stage, t]) =>
        h("li", { "data-state": t.state }, swatch(t.state), h("span", { class: "mono", text: t.name }),
          ` · ${stage} · ${t.state}: `, h("span", { class: "msg", text: t.message })))));
    }
    const hist = r.history || [];
    body.append(h("h4", { text: "History" }), hist.length
      ? h("ol", { class: "history" }, hist.map((e) => h("li", {}, badge(e.outcome || "unknown", tone(e.outcome)), " ",
        h("code", { text: e.revision || "—" }), " · ", when(e.startedAt), " → ", when(e.endedAt),
        e.note ? h("span", { class: "note", text: ` · ${e.note}` }) : null)))
      : h("p", { class: "muted", text: "no earlier revisions" }));
    d.append(body);
    return d;
  }

  function rolloutEl(r, q) {
    const title = r.namespace ? `${r.namespace}/${r.name}` : r.name;
    const sec = h("section", { class: "rollout", id: `r-${r.id}`, "data-rollout-id": r.id, "data-phase": r.phase,
      "aria-labelledby": `h-${r.id}` });
    sec.append(h("div", { class: "rollout-head" },
      h("h3", { id: `h-${r.id}` }, h("span", { class: "kind", text: r.kind }), h("span", { class: "rname", text: title })),
      badge(r.phase, tone(r.phase)),
      r.startedAt ? h("span", { class: "muted started" }, "started ", h("span", { class: "ago", "data-since": r.startedAt, title: r.startedAt, text: agoText(r.startedAt) })) : null));
    if (r.waitingFor) sec.append(h("p", { class: "waiting-for", text: r.waitingFor }));
    const pipe = h("div", { class: "pipeline" });
    (r.stages || []).forEach((s, i) => {
      if (i) pipe.append(h("div", { class: "arrow", "aria-hidden": "true" }));
      pipe.append(stageEl(r, s, q));
    });
    if (!(r.stages || []).length) pipe.append(h("p", { class: "muted", text: "no stages yet" }));
    sec.append(pipe, detail(r));
    return sec;
  }

  // A redrawn part keeps the focus on the same control (by data-fkey) when the old one had it.
  function focusKey(root) {
    const a = document.activeElement;
    return a && a !== document.body && root.contains(a) ? a.getAttribute("data-fkey") || "" : null;
  }
  function refocus(root, key) {
    if (key === null) return;
    for (const el of root.querySelectorAll("[data-fkey]")) {
      if (el.getAttribute("data-fkey") === key && !el.disabled) { el.focus({ preventScroll: true }); return; }
    }
  }

  function renderRollouts() {
    const box = $("rollouts"), rs = ui.board.rollouts || [], q = ui.q;
    if (!rs.length) {
      ui.cache.clear();
      box.replaceChildren(h("p", { class: "empty", text: "no rollouts yet (ClusterPromotions or staged update runs)" }));
      return;
    }
    for (const el of box.querySelectorAll(":scope > :not(section)")) el.remove();
    const wanted = [], restore = [];
    for (const r of rs) {
      const mine = [...ui.expanded].filter((k) => k.startsWith(r.id + SEP)).sort().join(SEP);
      const busy = [...ui.busy].filter((k) => k.startsWith(r.id + SEP)).sort().join(SEP);
      const key = [JSON.stringify(r), q, q ? ui.seq : 0, mine, busy].join("\u0000");
      const old = ui.cache.get(r.id);
      if (old && old.key === key) { wanted.push(old.node); continue; }
      const node = rolloutEl(r, q);
      if (old) {
        restore.push([node, focusKey(old.node)]);
        old.node.remove();
      }
      ui.cache.set(r.id, { key, node });
      wanted.push(node);
    }
    const ids = new Set(rs.map((r) => r.id));
    for (const [id, c] of ui.cache) if (!ids.has(id)) { c.node.remove(); ui.cache.delete(id); }
    wanted.forEach((node, i) => {
      const at = box.children[i];
      if (at !== node) box.insertBefore(node, at || null);
    });
    while (box.children.length > wanted.length) box.lastElementChild.remove();
    for (const [node, key] of restore) refocus(node, key);
  }

  // ---- the fleet ----
  const worst = (c) => ORDER.find((s) => (c.runs || []).some((run) => run.state === s)) || "idle";
  const clusterName = (c) => (c.namespace ? `${c.namespace}/${c.name}` : c.name);

  function runLine(run) {
    const r = ui.rollouts.get(run.rollout);
    const name = r ? (r.namespace ? `${r.namespace}/${r.name}` : r.name) : String(run.rollout).split("/").pop();
    return h("li", { "data-state": run.state }, swatch(run.state),
      h("a", { href: `#r-${run.rollout}`, text: name }), ` · ${run.stage} · ${run.state}`);
  }

  function clusterRow(c) {
    const labels = Object.entries(c.labels || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return [
      h("span", { class: "mono", "data-cluster": clusterName(c) }, clusterName(c)),
      labels.length ? h("ul", { class: "chips" }, labels.map(([k, v]) => h("li", { class: "chip", text: `${k}=${v}` })))
        : h("span", { class: "muted", text: "no labels" }),
      (c.runs || []).length ? h("ul", { class: "runs" }, c.runs.map(runLine)) : h("span", { class: "muted", text: "not in a rollout" }),
    ];
  }

  function renderFleet() {
    const clusters = ui.board.clusters || [], q = ui.q, select = $("group-by");
    const keys = [...new Set(clusters.flatMap((c) => Object.keys(c.labels || {})))].sort();
    if (keys.join(SEP) !== ui.keys) {
      ui.keys = keys.join(SEP);
      select.replaceChildren(...keys.map((k) => h("option", { value: k, text: k })), h("option", { value: "", text: "(none)" }));
    }
    const by = ui.groupBy !== null && (ui.groupBy === "" || keys.includes(ui.groupBy)) ? ui.groupBy : keys[0] || "";
    if (select.value !== by) select.value = by;
    const rnames = [...ui.rollouts.values()].map((r) => r.id).join(SEP);
    const sig = [JSON.stringify(clusters), q, by, [...ui.groupsOpen].sort().join(SEP), rnames].join("\u0000");
    if (sig === ui.fleetSig) return;
    ui.fleetSig = sig;
    const box = $("fleet-groups"), fkey = focusKey(box);
    const groups = new Map();
    for (const c of clusters) {
      const value = by ? (c.labels || {})[by] : "";
      const k = value === undefined ? null : value;
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(c);
    }
    const order = [...groups.keys()].sort((a, b) => (a === null) - (b === null) || (a < b ? -1 : a > b ? 1 : 0));
    const out = [];
    let matched = 0;
    for (const value of order) {
      const all = groups.get(value), gkey = by + SEP + value, open = ui.groupsOpen.has(gkey);
      let rows = q ? all.filter((c) => matches(clusterName(c), c.labels, q)) : all;
      if (q && !rows.length) continue;
      matched += rows.length;
      const title = !by ? "all clusters" : value === null ? `no ${by} label` : `${by}=${value}`;
      const g = h("section", { class: "group", "aria-label": title },
        h("div", { class: "group-head" }, h("h3", { class: "mono", text: title }),
          h("span", { class: "muted", text: q ? `${rows.length} of ${all.length} clusters match` : `${all.length} cluster${all.length === 1 ? "" : "s"}` })));
      const counts = countStates(all.map(worst));
      g.append(countsLine(counts, counts.idle ? h("span", { class: "count", "data-state": "idle" }, swatch("idle"), `${counts.idle} not in a rollout`) : null));
      const collapsed = !q && all.length > GROUP_COLLAPSE_AT && !open;
      const hidden = q ? Math.max(0, rows.length - CAP) : 0;
      if (q) rows = rows.slice(0, CAP);
      if (!collapsed) g.append(table(["Cluster", "Labels", "Runs"], rows.map(clusterRow)));
      if (hidden) g.append(more(hidden));
      if (!q && all.length > GROUP_COLLAPSE_AT) g.append(toggle(gkey, "group", open, all.length));
      out.push(g);
    }
    if (!clusters.length) out.push(h("p", { class: "empty", text: "no member clusters" }));
    else if (q && !matched) out.push(h("p", { class: "empty", text: `no clusters match “${ui.q}”` }));
    box.replaceChildren(...out);
    $("fleet-summary").textContent = `${clusters.length} cluster${clusters.length === 1 ? "" : "s"}`;
    refocus(box, fkey);
  }

  // ---- the board ----
  function render() {
    if (!ui.board) return;
    renderRollouts();
    renderFleet();
    tick();
  }

  function onBoard(b) {
    if (!b || typeof b !== "object") return;
    ui.board = b;
    ui.seq += 1;
    const now = Date.parse(b.now);
    if (!Number.isNaN(now)) ui.offset = now - Date.now();
    ui.labels = new Map();
    for (const c of b.clusters || []) {
      if (c.namespace) ui.labels.set(`${c.namespace}/${c.name}`, c.labels || {});
      if (!ui.labels.has(c.name)) ui.labels.set(c.name, c.labels || {});
    }
    ui.rollouts = new Map((b.rollouts || []).map((r) => [r.id, r]));
    $("server").textContent = b.server || "";
    const problems = b.problems || [];
    $("problems").hidden = !problems.length;
    $("problems").replaceChildren(...(problems.length ? [h("ul", {}, problems.map((p) => h("li", { text: p })))] : []));
    const bad = (b.rollouts || []).filter((r) => tone(r.phase) === "failed").length;
    const waiting = (b.rollouts || []).filter((r) => r.phase === "Waiting").length;
    const flags = [bad ? `${bad} failed` : "", waiting ? `${waiting} waiting` : ""].filter(Boolean).join(", ");
    document.title = flags ? `fleetwave (${flags})` : "fleetwave";
    favicon(overall(b.rollouts || []));
    render();
  }

  // The tab icon, drawn here as a data: URL (img-src allows it): it spares the browser a request for
  // /favicon.ico, and its colour says whether a rollout failed or waits.
  const ICON = { failed: "#cf222e", waiting: "#b07d00", inflight: "#1f6feb", healthy: "#1a7f37", pending: "#57606a" };
  let iconTone = "";
  function favicon(t) {
    const canvas = document.createElement("canvas"), g = canvas.getContext && canvas.getContext("2d");
    if (t === iconTone || !g) return;
    iconTone = t;
    canvas.width = canvas.height = 32;
    g.fillStyle = ICON[t] || ICON.pending;
    g.fillRect(0, 0, 32, 32);
    g.fillStyle = "#ffffff";
    for (const [x, y] of [[5, 18], [13, 12], [21, 6]]) g.fillRect(x, y, 6, 26 - y); // three stages, rising
    let link = document.querySelector('link[rel="icon"]');
    if (!link) document.head.append((link = h("link", { rel: "icon", type: "image/png" })));
    link.href = canvas.toDataURL("image/png");
  }
  function overall(rollouts) {
    const tones = new Set(rollouts.map((r) => tone(r.phase)));
    return ["failed", "waiting", "inflight"].find((t) => tones.has(t)) || (tones.has("healthy") ? "healthy" : "pending");
  }

  function live(ok) {
    const el = $("live");
    el.textContent = ok ? "live" : "reconnecting…";
    el.className = "live " + (ok ? "live-ok" : "live-lost");
  }

  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("open", () => live(true));
    es.addEventListener("board", (e) => {
      let b;
      try { b = JSON.parse(e.data); } catch (_) { return; }
      live(true);
      onBoard(b);
    });
    es.addEventListener("error", () => {
      live(false);
      if (es.readyState === EventSource.CLOSED) { // refused outright: EventSource gives up, so retry here
        es.close();
        setTimeout(connect, 5000);
      }
    });
  }

  // ---- actions ----
  function notice(text, ok) {
    const el = $("notice");
    el.textContent = text;
    el.className = ok === true ? "notice-ok" : ok === false ? "notice-error" : text ? "notice-busy" : "";
    $("notice-dismiss").hidden = !text;
  }

  async function approve(btn) {
    const sec = btn.closest("section.rollout"), r = sec && ui.rollouts.get(sec.getAttribute("data-rollout-id"));
    const stage = btn.getAttribute("data-stage");
    if (!r || !stage) return;
    const key = r.id + SEP + stage;
    if (ui.busy.has(key)) return;
    ui.busy.add(key);
    btn.disabled = true;
    btn.setAttribute("aria-busy", "true");
    notice(`approving stage ${stage} of ${r.namespace ? r.namespace + "/" : ""}${r.name}…`, null);
    try {
      const res = await fetch("/api/approve", {
        method: "POST", credentials: "same-origin", cache: "no-store",
        headers: { "Content-Type": "application/json", "X-Fleetwave-Token": token },
        body: JSON.stringify({ kind: r.kind, namespace: r.namespace, name: r.name, stage }),
      });
      let body = null;
      try { body = await res.json(); } catch (_) { body = null; }
      if (res.ok) notice(body && typeof body.message === "string" ? body.message : `stage ${stage} approved`, true);
      else notice(body && typeof body.error === "string" ? body.error : `approval failed: HTTP ${res.status}`, false);
    } catch (err) {
      notice(`could not reach fleetwave ui: ${err && err.message ? err.message : err}`, false);
    } finally {
      ui.busy.delete(key);
      const wasFocused = document.activeElement === btn || document.activeElement === document.body;
      btn.disabled = false; // this very button when no board redrew its rollout meanwhile
      btn.removeAttribute("aria-busy");
      render();
      const again = ui.cache.get(r.id);
      if (wasFocused && again) refocus(again.node, `approve:${stage}`);
    }
  }

  function start() {
    document.addEventListener("click", (e) => {
      const btn = e.target.closest && e.target.closest("button");
      if (!btn || btn.disabled) return;
      if (btn.classList.contains("approve")) approve(btn);
      else if (btn.classList.contains("toggle")) {
        const set = btn.getAttribute("data-scope") === "group" ? ui.groupsOpen : ui.expanded, k = btn.getAttribute("data-key");
        if (set.has(k)) set.delete(k); else set.add(k);
        render();
      } else if (btn.id === "notice-dismiss") notice("", null);
    });
    document.addEventListener("toggle", (e) => {
      const d = e.target;
      if (!(d instanceof HTMLDetailsElement) || !d.classList.contains("detail")) return;
      if (d.open) ui.open.add(d.getAttribute("data-id")); else ui.open.delete(d.getAttribute("data-id"));
    }, true);
    const showTile = (e) => {
      const t = e.target.closest && e.target.closest(".tile");
      const info = t && t.closest(".stage") && t.closest(".stage").querySelector(".tile-info");
      if (info) info.textContent = t.getAttribute("aria-label");
    };
    const hideTile = (e) => { // the next tile, if any, shows itself right after
      const t = e.target.closest && e.target.closest(".tile"), stage = t && t.closest(".stage");
      const info = stage && stage.querySelector(".tile-info");
      if (info) info.textContent = "";
    };
    document.addEventListener("focusin", showTile);
    document.addEventListener("mouseover", showTile);
    document.addEventListener("focusout", hideTile);
    document.addEventListener("mouseout", hideTile);
    let timer = 0;
    const filter = $("filter");
    filter.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => { ui.q = filter.value.trim().toLowerCase(); render(); }, 120);
    });
    document.addEventListener("keydown", (e) => {
      const typing = e.target.closest && e.target.closest("input, textarea, select");
      if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); filter.focus(); }
    });
    $("group-by").addEventListener("change", (e) => { ui.groupBy = e.target.value; render(); });
    favicon("pending");
    setInterval(tick, 1000);
    connect();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
