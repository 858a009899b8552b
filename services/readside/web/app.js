// gridwire's web page: the job list (counts by state, filters, search, paging, groups as
// trees) and one job's page (summary, actions, a timeline of phases, attempts, live
// output, transfers, the description as submitted and as gridwire read it, the rendered
// scripts and every event). Plain JavaScript against the HTTP API; no build step. A
// token given as #token=... is kept in localStorage and sent with every request.
"use strict";

(function () {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) localStorage.setItem("gridwire-token", hash.get("token"));
  const token = localStorage.getItem("gridwire-token") || "";
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const STATES = ["SUBMITTED", "INCARNATED", "STAGING_IN", "QUEUED", "RUNNING", "HELD", "STAGING_OUT",
    "SUCCEEDED", "FAILED", "CANCELLED"];
  const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
  const PAGE_SIZE = 50; // jobs a page of the list shows (?limit= changes it)

  // --- plumbing ----------------------------------------------------------------------
  // A browser keeps six connections to a server; a page it keeps for going back to
  // (the back-forward cache) would hold its event stream and followed output open, and
  // a few of those leave none for the next page's requests. Leaving closes them.
  const open = new Set();
  function holding(c) { open.add(c); return c; }
  window.addEventListener("pagehide", function () {
    for (const c of open) c.close();
    open.clear();
  });
  function newEventSource(url) {
    const src = new EventSource(url);
    holding(src);
    return src;
  }

  function apiError(path, r) {
    return r.json().then(function (b) {
      const e = (b && b.error) || {};
      const err = new Error(e.detail || (path + ": HTTP " + r.status));
      err.code = e.code || "http_" + r.status;
      err.status = r.status;
      throw err;
    }, function () {
      const err = new Error(path + ": HTTP " + r.status);
      err.status = r.status;
      throw err;
    });
  }

  function api(path, opts) {
    const o = Object.assign({ headers: headers }, opts || {});
    return fetch(path, o).then(function (r) {
      if (!r.ok) return apiError(path, r);
      return r.json();
    });
  }

  function streamURL(query) {
    const q = new URLSearchParams(query);
    if (token) q.set("access_token", token);
    const s = q.toString();
    return "/v1/events" + (s ? "?" + s : "");
  }

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    }
    for (const c of children || []) if (c) e.appendChild(c);
    return e;
  }

  function showError(msg) {
    const p = document.getElementById("error");
    p.textContent = msg;
    p.hidden = false;
  }

  function setLive(on, text) {
    const l = document.getElementById("live");
    l.className = on ? "on" : "off";
    l.textContent = text || (on ? "live" : "reconnecting");
  }

  function time(t) {
    if (!t || t.startsWith("0001-")) return null;
    return new Date(t);
  }

  // when shows a moment in the viewer's local time, to the millisecond (the tooltip has UTC).
  function when(t) {
    const d = time(t);
    if (!d) return "";
    const p = function (n, w) { return String(n).padStart(w || 2, "0"); };
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" +
      p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
  }

  // span shows a duration in ms the way people read it: 850ms, 4.2s, 3m 5s, 2h 10m.
  function span(ms) {
    if (ms === null || ms === undefined || ms < 0 || isNaN(ms)) return "";
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + "s";
    const s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function duration(v) {
    const start = time(v.started_at) || time(v.submitted_at);
    if (!start) return "";
    const end = time(v.ended_at) || (TERMINAL.has(v.status) ? time(v.updated_at) : new Date());
    return span(end - start);
  }

  function stateCell(v) {
    return el("td", { class: "state " + v.status, text: v.status });
  }

  // --- who may do what ---------------------------------------------------------------
  let grant = { principal: "", allow: [] };
  const whoami = api("/v1/whoami").then(function (g) {
    grant = g;
    document.getElementById("whoami").textContent = g.principal;
    return g;
  }, function () { return grant; });

  function count(n, what) { return n + " " + what + (n === 1 ? "" : "s"); }

  // jobRow is one job's row in a table of jobs. A group's row shows how many jobs it has,
  // and a toggle that calls onToggle when one is given.
  function jobRow(v, depth, childCount, onToggle) {
    const link = el("a", { href: "?job=" + encodeURIComponent(v.id), text: v.id, class: "mono" });
    const first = el("td", { class: "id" }, []);
    first.style.paddingLeft = (0.5 + depth * 1.25) + "em";
    let tr = null;
    if (childCount && onToggle) {
      const t = el("button", { type: "button", class: "toggle", "aria-expanded": "false", title: "show its " + childCount + " jobs", text: "▸" });
      t.addEventListener("click", function () { onToggle(v, tr, t, depth); });
      first.appendChild(t);
    }
    first.appendChild(link);
    const name = v.name || (v.path || "");
    tr = el("tr", { "data-job": v.id, "data-depth": String(depth) }, [
      first,
      el("td", { class: "name", text: name + (childCount ? " (" + childCount + ")" : "") }),
      stateCell(v),
      el("td", { class: "wide", text: v.cluster || "" }),
      el("td", { class: "exit", text: v.exit_code === undefined || v.exit_code === null ? "" : String(v.exit_code) }),
      el("td", { class: "wide", text: duration(v) }),
      el("td", { class: "wide", text: when(v.submitted_at), title: v.submitted_at }),
      el("td", { class: "reason", text: v.reason || "", title: v.reason || "" }),
    ]);
    return tr;
  }

  function labelRow(cls, text, depth) {
    const r = el("tr", { class: cls, "data-depth": String(depth) }, [el("td", { colspan: "8", text: text })]);
    r.firstChild.style.paddingLeft = (0.5 + depth * 1.25) + "em";
    return r;
  }

  // removedFrom is the set of jobs a DDS topology update took out of a session: they
  // still name the session as their parent, but are no longer among its jobs.
  function removedFrom(evs) {
    const gone = new Set();
    for (const e of evs) {
      if (e.name === "session_updated") for (const id of (e.data && e.data.removed) || []) gone.add(id);
    }
    return gone;
  }

  // groupJobs reads the jobs of a group (one page of up to 1,000, in the description's
  // order) and, when it lists more than the group has, the group's events, to tell the
  // ones a topology update removed.
  function groupJobs(v, evs) {
    return api("/v1/jobs?" + new URLSearchParams({ parent: v.id, limit: "1000" })).then(function (p) {
      if (evs || (p.total || p.jobs.length) <= (v.children || 0)) return { page: p, gone: removedFrom(evs || []) };
      return api("/v1/jobs/" + encodeURIComponent(v.id) + "/events").then(function (all) {
        return { page: p, gone: removedFrom(all) };
      });
    });
  }

  // groupRows draws a group's jobs in the order the API lists them (the description's),
  // each collection (DDS) or job of the document (JRDL subjobs) under a row of its own,
  // then the jobs a topology update removed, apart, and how many more there are.
  function groupRows(p, gone, depth, rowFn) {
    const out = [];
    const branches = new Map();
    const removed = [];
    for (const c of p.jobs) {
      if (gone.has(c.id)) { removed.push(c); continue; }
      const n = c.name || c.path || ""; // a JRDL piece has only its place: job[1]/subjob[0]
      const b = c.collection || (n.includes("/") ? n.slice(0, n.lastIndexOf("/")) : "");
      if (!branches.has(b)) branches.set(b, []);
      branches.get(b).push(c);
    }
    const add = function (label, cls, kids) {
      let d = depth + 1;
      if (label) {
        out.push(labelRow(cls, "▾ " + label + " (" + kids.length + ")", d));
        d++;
      }
      for (const c of kids) out.push(rowFn(c, d));
    };
    for (const [b, kids] of branches) add(b, "branch", kids);
    if (removed.length) add("removed by a topology update", "branch removed", removed);
    const total = p.total || p.jobs.length;
    if (p.next && total > p.jobs.length) {
      out.push(labelRow("more", "… " + count(total - p.jobs.length, "more job") + " (gridwire status lists them all)", depth + 1));
    }
    return out;
  }

  // --- the job list ------------------------------------------------------------------
  function listView() {
    document.getElementById("table-view").hidden = false;
    const params = new URLSearchParams(location.search);
    const pageSize = Math.min(Math.max(Number(params.get("limit")) || PAGE_SIZE, 1), 1000);
    const search = document.getElementById("search");
    const stateSel = document.getElementById("state-filter");
    const clusterSel = document.getElementById("cluster-filter");
    const trees = document.getElementById("groups-only");
    for (const s of STATES) stateSel.appendChild(el("option", { value: s, text: s.toLowerCase() }));
    search.value = params.get("q") || "";
    stateSel.value = params.get("state") || "";
    trees.checked = params.get("flat") !== "1";
    const cursors = [""]; // the cursor of each page seen, for "newer"
    let page = 0;
    let rows = new Map(); // job ID -> its row, for live updates
    let src = null;

    function query() {
      const q = { order: "desc", limit: String(pageSize) };
      if (search.value.trim()) q.q = search.value.trim();
      if (stateSel.value) q.state = stateSel.value;
      if (clusterSel.value) q.cluster = clusterSel.value;
      if (trees.checked) q.root = "true";
      return q;
    }

    function remember() {
      const q = new URLSearchParams();
      if (search.value.trim()) q.set("q", search.value.trim());
      if (stateSel.value) q.set("state", stateSel.value);
      if (clusterSel.value) q.set("cluster", clusterSel.value);
      if (!trees.checked) q.set("flat", "1");
      if (pageSize !== PAGE_SIZE) q.set("limit", String(pageSize));
      const s = q.toString();
      history.replaceState(null, "", s ? "?" + s : "/");
    }

    function counts(c, total) {
      const box = document.getElementById("counts");
      box.textContent = "";
      box.appendChild(el("button", { type: "button", class: "count" + (stateSel.value ? "" : " on"), "data-state": "" }, [
        el("b", { text: String(total) }), document.createTextNode(" jobs")]));
      for (const s of STATES) {
        if (!c[s]) continue;
        box.appendChild(el("button", { type: "button", class: "count " + s + (stateSel.value === s ? " on" : ""), "data-state": s }, [
          el("b", { text: String(c[s]) }), document.createTextNode(" " + s.toLowerCase())]));
      }
    }

    function clusters(list) {
      const have = new Set(Array.from(clusterSel.options).map(function (o) { return o.value; }));
      for (const c of list || []) if (!have.has(c)) clusterSel.appendChild(el("option", { value: c, text: c }));
      clusterSel.value = params.get("cluster") || clusterSel.value;
    }

    function row(v, depth, childCount) {
      const tr = jobRow(v, depth, childCount, toggle);
      rows.set(v.id, tr);
      return tr;
    }

    // toggle shows a group's jobs under its row, nested by collection (DDS) or by
    // job of the document (JRDL subjobs).
    function toggle(v, tr, button, depth) {
      const open = button.getAttribute("aria-expanded") === "true";
      if (open) {
        let next = tr.nextSibling;
        while (next && Number(next.getAttribute("data-depth")) > depth) {
          const after = next.nextSibling;
          next.remove();
          next = after;
        }
        button.setAttribute("aria-expanded", "false");
        button.textContent = "▸";
        return;
      }
      button.setAttribute("aria-expanded", "true");
      button.textContent = "▾";
      groupJobs(v, null).then(function (g) {
        let at = tr;
        for (const r of groupRows(g.page, g.gone, depth, function (c, d) { return row(c, d, 0); })) {
          at.parentNode.insertBefore(r, at.nextSibling);
          at = r;
        }
      }, function (err) { showError(err.message); });
    }

    function load() {
      remember();
      const q = query();
      if (cursors[page]) q.after = cursors[page];
      api("/v1/jobs?" + new URLSearchParams(q)).then(function (p) {
        document.getElementById("error").hidden = true;
        const body = document.querySelector("#jobs tbody");
        body.textContent = "";
        rows = new Map();
        for (const v of p.jobs) body.appendChild(row(v, 0, v.children || 0));
        if (!p.jobs.length) body.appendChild(el("tr", { class: "empty" }, [el("td", { colspan: "8", text: "no job matches" })]));
        const all = Object.values(p.counts || {}).reduce(function (a, b) { return a + b; }, 0);
        counts(p.counts || {}, all);
        clusters(p.clusters);
        cursors[page + 1] = p.next || "";
        document.getElementById("older").disabled = !p.next;
        document.getElementById("newer").disabled = page === 0;
        document.getElementById("page-info").textContent = "page " + (page + 1) + " · " + p.jobs.length + " shown of " + (p.total || p.jobs.length);
        follow(p.seq);
      }, function (err) { showError(err.message); });
    }

    function follow(seq) {
      if (src) { src.close(); open.delete(src); }
      let pending = new Set();
      let timer = null;
      const refresh = function () {
        timer = null;
        const ids = Array.from(pending);
        pending = new Set();
        for (const id of ids) {
          const old = rows.get(id);
          if (!old) continue;
          api("/v1/jobs/" + encodeURIComponent(id)).then(function (v) {
            const depth = Number(old.getAttribute("data-depth"));
            const toggleBtn = old.querySelector(".toggle");
            const fresh = row(v, depth, toggleBtn ? (v.children || 0) : 0);
            if (toggleBtn && toggleBtn.getAttribute("aria-expanded") === "true") {
              fresh.replaceChild(old.firstChild, fresh.firstChild);
            }
            if (old.parentNode) old.parentNode.replaceChild(fresh, old);
          }).catch(function () {});
        }
      };
      src = newEventSource(streamURL(seq ? { after: String(seq) } : {}));
      src.onopen = function () { setLive(true); };
      src.onerror = function () { setLive(false); };
      const onEvent = function (m) {
        const e = JSON.parse(m.data);
        pending.add(e.job);
        if (!rows.has(e.job) && e.name === "submitted" && page === 0) {
          if (!timer) timer = setTimeout(function () { timer = null; load(); }, 500);
          return;
        }
        if (!timer) timer = setTimeout(refresh, 150);
      };
      for (const name of EVENT_NAMES) src.addEventListener(name, onEvent);
    }

    let typing = null;
    search.addEventListener("input", function () {
      clearTimeout(typing);
      typing = setTimeout(function () { page = 0; cursors.length = 1; load(); }, 250);
    });
    document.getElementById("filters").addEventListener("submit", function (ev) { ev.preventDefault(); });
    for (const s of [stateSel, clusterSel, trees]) s.addEventListener("change", function () { page = 0; cursors.length = 1; load(); });
    document.getElementById("counts").addEventListener("click", function (ev) {
      const b = ev.target.closest("button.count");
      if (!b) return;
      stateSel.value = b.getAttribute("data-state");
      page = 0;
      cursors.length = 1;
      load();
    });
    document.getElementById("older").addEventListener("click", function () { page++; load(); });
    document.getElementById("newer").addEventListener("click", function () { if (page > 0) page--; load(); });
    load();
  }

  const EVENT_NAMES = ["submitted", "incarnated", "staging_in", "transfer", "queued", "started",
    "status_changed", "status_unknown", "status_known", "held", "resumed", "exited", "staged_out",
    "succeeded", "failed", "cancelled", "cancel_requested", "hold_requested", "resume_requested",
    "action_failed", "property_set", "restarted", "session_updated", "directory_deleted"];

  // --- one job's page ----------------------------------------------------------------
  function summary(v) {
    document.title = (v.name || v.path || v.id) + " · gridwire";
    document.getElementById("job-name").textContent = v.name || v.path || (v.kind === "group" ? "group" : "job");
    const badge = document.getElementById("job-state");
    badge.textContent = v.status;
    badge.className = "badge " + v.status;
    document.getElementById("job-id").textContent = v.id;
    const dl = document.getElementById("job-summary");
    dl.textContent = "";
    const started = time(v.started_at);
    let took = ["waiting for", duration(v)];
    if (started && time(v.ended_at)) took = ["ran for", span(time(v.ended_at) - started)];
    else if (started) took = ["running for", duration(v)];
    else if (TERMINAL.has(v.status)) took = ["took", duration(v)];
    const fields = [["exit code", v.exit_code === undefined || v.exit_code === null ? "" : String(v.exit_code)],
      ["reason", v.reason], ["cluster", v.cluster], ["native id", v.native_id], ["native state", v.native_state],
      ["submitter", v.submitter], ["submitted", when(v.submitted_at)], ["started", when(v.started_at)],
      ["ended", when(v.ended_at)], took];
    for (const [k, val] of fields) {
      if (!val) continue;
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(el("dd", { id: "job-" + k.replace(/ /g, "-"), text: val }));
    }
    if (v.parent) {
      dl.appendChild(el("dt", { text: "part of" }));
      dl.appendChild(el("dd", {}, [el("a", { href: "?job=" + encodeURIComponent(v.parent), class: "mono", text: v.parent })]));
    }
    actions(v);
  }

  // actions shows the requests the caller may make of the job now; the buttons stay as
  // they are while that set does not change, so a refresh never takes one from under a
  // pointer.
  function actions(v) {
    const box = document.getElementById("actions");
    const can = {
      cancel: !TERMINAL.has(v.status),
      hold: v.status === "QUEUED" || v.status === "RUNNING",
      resume: v.status === "HELD",
    };
    const verbs = (grant.allow || []).includes("cancel") ? ["hold", "resume", "cancel"].filter(function (x) { return can[x]; }) : [];
    if (box.getAttribute("data-verbs") === verbs.join(",")) return;
    box.setAttribute("data-verbs", verbs.join(","));
    box.textContent = "";
    for (const verb of verbs) {
      const b = el("button", { type: "button", class: "action " + verb, id: "action-" + verb, text: verb });
      b.addEventListener("click", function () {
        if (verb === "cancel" && !confirm("Cancel job " + v.id + "?")) return;
        b.disabled = true;
        api("/v1/jobs/" + encodeURIComponent(v.id) + "/" + verb, {
          method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers),
          body: JSON.stringify({ reason: "from the web page" }),
        }).then(function (r) {
          note(verb + " requested (now " + r.status + ")");
        }, function (err) { note(verb + ": " + err.message); b.disabled = false; });
      });
      box.appendChild(b);
    }
  }

  function note(text) {
    const p = document.getElementById("action-result");
    p.textContent = text;
    p.hidden = false;
  }

  function detail(e) {
    const d = e.data || {};
    switch (e.name) {
      case "incarnated":
        return [el("div", { text: "on " + d.cluster + " (" + (d.lrms || d.profile) + "), in " + d.work_dir })];
      case "staging_in":
        return [el("div", { text: (d.files || []).length + " file(s) to stage " + d.direction })];
      case "transfer":
        return [el("div", { class: "attempt" + (d.error ? " failed" : ""), text: transferText(d) })];
      case "started":
        return [el("div", { text: "native id " + d.native_id + (d.host ? " on " + d.host : "") })];
      case "status_changed":
        return [el("div", { text: d.state + (d.native_state ? " (" + d.native_state + ")" : "") })];
      case "exited":
        return [el("div", { text: "exit code " + d.exit_code + (d.reason ? ": " + d.reason : "") })];
      case "staged_out":
        return [el("div", { text: d.ok ? "stage-out done" : "stage-out failed: " + (d.reason || "") })];
      case "session_updated":
        return [el("div", { text: "topology updated: " + count((d.added || []).length, "task") + " added, " +
          count((d.removed || []).length, "task") + " removed" })];
      case "directory_deleted":
        return [el("div", { text: (d.ok ? "removed " : "could not remove ") + (d.paths || []).join(", ") +
          (d.host ? " on " + d.host : "") + (d.ok ? "" : " (exit code " + d.exit_code + ")") })];
      default:
        return d.reason ? [el("div", { text: d.reason })] : (d.error ? [el("div", { text: d.error })] : []);
    }
  }

  function transferText(d) {
    return "attempt " + d.attempt + " of " + d.of + ": " + d.from + " → " + d.to +
      (d.error ? " failed: " + d.error : " (" + d.bytes + " bytes)");
  }

  // --- phases: the timeline drawn to scale ---------------------------------------------
  const PHASE_OF = {
    submitted: "submitted", incarnated: "incarnated", staging_in: "staging in", queued: "queued",
    started: "running", held: "held", resumed: "running", exited: "staging out", staged_out: "staging out",
  };

  function phases(evs) {
    const out = [];
    let cur = null;
    for (const e of evs) {
      const t = time(e.time);
      if (!t) continue;
      let name = PHASE_OF[e.name];
      if (e.name === "status_changed" && e.data && e.data.state === "QUEUED") name = "queued";
      if (e.name === "status_changed" && e.data && e.data.state === "RUNNING") name = "running";
      if (TERMINAL.has((e.name || "").toUpperCase())) {
        if (cur) cur.end = t;
        out.push({ name: e.name, start: t, end: t, terminal: true });
        cur = null;
        continue;
      }
      if (!name || (cur && cur.name === name)) continue;
      if (cur) cur.end = t;
      cur = { name: name, start: t, end: null };
      out.push(cur);
    }
    if (cur) cur.end = new Date();
    return out;
  }

  function drawPhases(evs) {
    const ps = phases(evs);
    const box = document.getElementById("phases");
    box.textContent = "";
    if (!ps.length) return;
    const t0 = ps[0].start;
    const total = Math.max(ps[ps.length - 1].end - t0, 1);
    const bar = el("div", { class: "bar" });
    const legend = el("ol", { class: "legend" });
    for (const p of ps) {
      const ms = p.end - p.start;
      const cls = "phase " + p.name.replace(/ /g, "_");
      if (!p.terminal) {
        const seg = el("div", { class: cls, title: p.name + " " + span(ms) });
        seg.style.width = Math.max(100 * ms / total, 0.8) + "%";
        bar.appendChild(seg);
      }
      legend.appendChild(el("li", { class: cls }, [
        el("span", { class: "swatch" }), el("span", { class: "pname", text: p.name }),
        el("span", { class: "pdur", text: p.terminal ? when(p.start.toISOString()).slice(11) : span(ms) })]));
    }
    box.appendChild(bar);
    box.appendChild(legend);
  }

  function drawAttempts(evs) {
    const body = document.querySelector("#attempts tbody");
    body.textContent = "";
    const runs = [];
    for (const e of evs) {
      const d = e.data || {};
      if (e.name === "started") runs.push({ start: time(e.time), host: d.host || "", native: d.native_id || "", end: null, exit: "" });
      if ((e.name === "exited" || TERMINAL.has(e.name.toUpperCase())) && runs.length && !runs[runs.length - 1].end) {
        const r = runs[runs.length - 1];
        r.end = time(e.time);
        r.exit = d.exit_code === undefined ? "" : String(d.exit_code);
      }
    }
    runs.forEach(function (r, i) {
      body.appendChild(el("tr", {}, [el("td", { text: String(i + 1) }), el("td", { text: r.host }),
        el("td", { class: "mono", text: r.native }), el("td", { text: when(r.start && r.start.toISOString()) }),
        el("td", { text: r.end ? span(r.end - r.start) : "running" }), el("td", { text: r.exit })]));
    });
    document.getElementById("attempts").hidden = runs.length === 0;
  }

  function drawTransfers(evs) {
    const body = document.querySelector("#transfers tbody");
    body.textContent = "";
    let n = 0;
    for (const e of evs) {
      if (e.name !== "transfer") continue;
      const d = e.data || {};
      n++;
      body.appendChild(el("tr", { class: d.error ? "failed" : "" }, [el("td", { text: d.direction }),
        el("td", { class: "mono", text: d.from }), el("td", { class: "mono", text: d.to }),
        el("td", { text: d.attempt + " of " + d.of }), el("td", { text: String(d.bytes || 0) }),
        el("td", { text: span((d.duration || 0) / 1e6) }), el("td", { text: d.error ? "failed: " + d.error : "ok" })]));
    }
    document.getElementById("transfers-section").hidden = n === 0;
  }

  function drawDescription(evs) {
    const sub = evs.find(function (e) { return e.name === "submitted"; });
    if (!sub || !sub.data) return;
    const job = sub.data.job || sub.data;
    const orig = job.original || {};
    if (orig.bytes) {
      let text = "";
      try { text = new TextDecoder().decode(Uint8Array.from(atob(orig.bytes), function (c) { return c.charCodeAt(0); })); }
      catch (err) { text = "(not text: " + err.message + ")"; }
      document.querySelector("#original pre").textContent = text;
      document.getElementById("original-format").textContent = "(" + [orig.format, orig.file].filter(Boolean).join(", ") + ")";
    }
    const canon = Object.assign({}, job);
    if (canon.original) canon.original = Object.assign({}, canon.original, { bytes: "(shown above)" });
    document.querySelector("#canonical pre").textContent = JSON.stringify(canon, null, 2);
  }

  function drawScripts(evs) {
    const box = document.getElementById("scripts");
    box.textContent = "";
    const inc = evs.filter(function (e) { return e.name === "incarnated"; }).pop();
    const scripts = (inc && inc.data && inc.data.scripts) || {};
    for (const name of Object.keys(scripts).sort()) {
      const s = scripts[name];
      if (!s.body) continue;
      box.appendChild(el("details", { class: "script", "data-script": name }, [
        el("summary", { text: name + " script (sha256 " + (s.sha256 || "").slice(0, 12) + ")" }),
        el("pre", { text: s.body }),
      ]));
    }
  }

  function addEvent(e, seen) {
    if (seen.has(e.seq)) return false;
    seen.add(e.seq);
    const li = el("li", { class: "event " + e.name, "data-seq": String(e.seq) }, [
      el("span", { class: "when", text: when(e.time), title: e.time }),
      el("span", { class: "what", text: e.name }),
      el("span", { class: "who", text: " by " + (e.principal || e.source) }),
    ].concat(detail(e)));
    document.getElementById("timeline").appendChild(li);
    return true;
  }

  // output follows the job's standard output or error as it grows, from the logs API.
  function output(id) {
    let which = "stdout";
    let ctrl = null;
    const pre = document.getElementById("output");
    const noteEl = document.getElementById("output-note");
    function start() {
      if (ctrl) { ctrl.abort(); open.delete(ctrl.closer); }
      ctrl = new AbortController();
      ctrl.closer = holding({ close: ctrl.abort.bind(ctrl) });
      const mine = ctrl;
      pre.textContent = "";
      noteEl.textContent = "loading…";
      const q = new URLSearchParams({ stream: which, follow: "true" });
      fetch("/v1/jobs/" + encodeURIComponent(id) + "/logs?" + q, { headers: headers, signal: mine.signal }).then(function (r) {
        if (!r.ok) return apiError("logs", r);
        noteEl.textContent = "following";
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        const pump = function () {
          return reader.read().then(function (c) {
            if (c.done) {
              noteEl.textContent = pre.textContent ? "complete" : "(empty)";
              return;
            }
            pre.appendChild(document.createTextNode(dec.decode(c.value, { stream: true })));
            pre.scrollTop = pre.scrollHeight;
            return pump();
          });
        };
        return pump();
      }).catch(function (err) {
        if (mine.signal.aborted) return;
        noteEl.textContent = err.message;
      });
    }
    for (const s of ["stdout", "stderr"]) {
      document.getElementById("tab-" + s).addEventListener("click", function () {
        which = s;
        document.getElementById("tab-stdout").className = "tab" + (s === "stdout" ? " on" : "");
        document.getElementById("tab-stderr").className = "tab" + (s === "stderr" ? " on" : "");
        start();
      });
    }
    start();
  }

  // children shows a group's jobs on its page and keeps them current: it follows every
  // job's events and reads the list again when one of its jobs, or the group, moves.
  function children(v, evs, after) {
    document.getElementById("output-section").hidden = true;
    const sec = document.getElementById("children-section");
    sec.hidden = false;
    const head = document.querySelector("#children thead");
    head.replaceWith(document.querySelector("#jobs thead").cloneNode(true)); // one header for both tables
    const body = document.querySelector("#children tbody");
    let mine = new Set();
    let timer = null;
    const draw = function () {
      timer = null;
      return groupJobs(v, evs).then(function (g) {
        body.textContent = "";
        mine = new Set(g.page.jobs.map(function (c) { return c.id; }));
        for (const r of groupRows(g.page, g.gone, -1, function (c, d) { return jobRow(c, d, c.children || 0, null); })) body.appendChild(r);
        if (!g.page.jobs.length) body.appendChild(el("tr", { class: "empty" }, [el("td", { colspan: "8", text: "no jobs yet" })]));
        return g.page.seq;
      }, function (err) { showError(err.message); });
    };
    draw().then(function (seq) {
      const src = newEventSource(streamURL(seq ? { after: String(seq) } : { after: String(after) }));
      const onEvent = function (m) {
        const e = JSON.parse(m.data);
        if (!mine.has(e.job) && !(e.job === v.id && e.name === "session_updated")) return;
        if (!timer) timer = setTimeout(draw, 150);
      };
      for (const name of EVENT_NAMES) src.addEventListener(name, onEvent);
    });
  }

  function jobView(id) {
    document.getElementById("job-view").hidden = false;
    document.getElementById("job-id").textContent = id;
    const seen = new Set();
    const all = [];
    const path = "/v1/jobs/" + encodeURIComponent(id);
    function redraw() {
      drawPhases(all);
      drawAttempts(all);
      drawTransfers(all);
      document.querySelector("#raw pre").textContent = JSON.stringify(all, null, 2);
    }
    Promise.all([api(path), api(path + "/events"), whoami]).then(function (r) {
      summary(r[0]);
      let last = 0;
      for (const e of r[1]) { if (addEvent(e, seen)) all.push(e); last = e.seq; }
      drawDescription(all);
      drawScripts(all);
      redraw();
      if (r[0].kind === "group") children(r[0], all, last);
      else output(id);
      const src = newEventSource(streamURL({ job: id, after: String(last) }));
      src.onopen = function () { setLive(true); };
      src.onerror = function () { setLive(false); };
      const onEvent = function (m) {
        const e = JSON.parse(m.data);
        if (!addEvent(e, seen)) return;
        all.push(e);
        if (e.name === "incarnated") drawScripts(all);
        redraw();
        api(path).then(summary);
      };
      for (const name of EVENT_NAMES) src.addEventListener(name, onEvent);
    }, function (err) {
      setLive(false, err.status === 404 ? "not found" : "error");
      document.getElementById("job-name").textContent = err.status === 404 ? "No such job" : "Cannot show this job";
      document.getElementById("job-state").hidden = true;
      for (const c of document.getElementById("job-view").children) if (!c.classList.contains("job-head")) c.hidden = true;
      document.getElementById("job-view").appendChild(el("p", {}, [el("a", { href: "/", text: "← every job" })]));
      showError(err.message);
    });
  }

  const job = new URLSearchParams(location.search).get("job");
  if (job) jobView(job); else listView();
})();
