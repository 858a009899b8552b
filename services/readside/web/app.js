// gridwire's web page: the job table with live state, and one job's timeline. Plain
// JavaScript against the HTTP API; no build step. A token given as #token=... is kept
// in localStorage and sent with every request.
"use strict";

(function () {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) localStorage.setItem("gridwire-token", hash.get("token"));
  const token = localStorage.getItem("gridwire-token") || "";
  const headers = token ? { Authorization: "Bearer " + token } : {};

  function api(path) {
    return fetch(path, { headers }).then(function (r) {
      if (!r.ok) throw new Error(path + ": HTTP " + r.status);
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
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of children || []) e.appendChild(c);
    return e;
  }

  function when(t) {
    return t && !t.startsWith("0001-") ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
  }

  function setLive(on) {
    const l = document.getElementById("live");
    l.className = on ? "on" : "off";
    l.textContent = on ? "live" : "reconnecting";
  }

  // --- the job table ---------------------------------------------------------------
  const rows = new Map();

  function renderRow(v) {
    const link = el("a", { href: "?job=" + encodeURIComponent(v.id), text: v.id });
    const tr = el("tr", { "data-job": v.id }, [
      el("td", {}, [link]),
      el("td", { text: v.name || "" }),
      el("td", { class: "state " + v.status, text: v.status }),
      el("td", { text: v.native_state || "" }),
      el("td", { text: v.cluster || "" }),
      el("td", { text: v.exit_code === undefined || v.exit_code === null ? "" : String(v.exit_code) }),
      el("td", { text: v.submitter || "" }),
      el("td", { text: when(v.submitted_at) }),
      el("td", { text: when(v.updated_at) }),
    ]);
    const body = document.querySelector("#jobs tbody");
    const old = rows.get(v.id);
    if (old) body.replaceChild(tr, old);
    else body.insertBefore(tr, body.firstChild);
    rows.set(v.id, tr);
  }

  function tableView() {
    let pending = new Set();
    let timer = null;
    function refresh() {
      timer = null;
      const ids = Array.from(pending);
      pending = new Set();
      for (const id of ids) api("/v1/jobs/" + encodeURIComponent(id)).then(renderRow).catch(function () {});
    }
    api("/v1/jobs?order=desc&limit=500").then(function (page) {
      for (const v of page.jobs.slice().reverse()) renderRow(v);
      const src = new EventSource(streamURL(page.seq ? { after: String(page.seq) } : {}));
      src.onopen = function () { setLive(true); };
      src.onerror = function () { setLive(false); };
      src.onmessage = function () {};
      const onEvent = function (m) {
        const e = JSON.parse(m.data);
        pending.add(e.job);
        if (!timer) timer = setTimeout(refresh, 100);
      };
      for (const name of EVENT_NAMES) src.addEventListener(name, onEvent);
    });
  }

  const EVENT_NAMES = ["submitted", "incarnated", "staging_in", "transfer", "queued", "started",
    "status_changed", "status_unknown", "status_known", "held", "resumed", "exited", "staged_out",
    "succeeded", "failed", "cancelled", "cancel_requested", "hold_requested", "resume_requested",
    "action_failed"];

  // --- one job's page --------------------------------------------------------------
  function summary(v) {
    const dl = document.getElementById("job-summary");
    dl.textContent = "";
    const fields = [["state", v.status], ["native state", v.native_state], ["cluster", v.cluster],
      ["native id", v.native_id], ["exit code", v.exit_code === undefined ? "" : String(v.exit_code)],
      ["reason", v.reason], ["submitter", v.submitter], ["submitted", when(v.submitted_at)],
      ["started", when(v.started_at)], ["ended", when(v.ended_at)]];
    for (const [k, val] of fields) {
      if (!val) continue;
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(el("dd", { id: "job-" + k.replace(/ /g, "-"), text: val }));
    }
  }

  function detail(e) {
    const d = e.data || {};
    switch (e.name) {
      case "incarnated": {
        const parts = [el("div", { text: "on " + d.cluster + " (" + (d.lrms || d.profile) + "), in " + d.work_dir })];
        for (const name of Object.keys(d.scripts || {}).sort()) {
          const s = d.scripts[name];
          if (!s.body) continue;
          parts.push(el("details", { class: "script", "data-script": name, open: "" }, [
            el("summary", { text: name + " script (sha256 " + (s.sha256 || "").slice(0, 12) + ")" }),
            el("pre", { text: s.body }),
          ]));
        }
        return parts;
      }
      case "staging_in":
        return [el("div", { text: (d.files || []).length + " file(s) to stage " + d.direction })];
      case "transfer":
        return [el("div", {
          class: "attempt" + (d.error ? " failed" : ""),
          text: "attempt " + d.attempt + " of " + d.of + ": " + d.from + " → " + d.to +
            (d.error ? " failed: " + d.error : " (" + d.bytes + " bytes)"),
        })];
      case "started":
        return [el("div", { text: "native id " + d.native_id + (d.host ? " on " + d.host : "") })];
      case "status_changed":
        return [el("div", { text: d.state + (d.native_state ? " (" + d.native_state + ")" : "") })];
      case "exited":
        return [el("div", { text: "exit code " + d.exit_code + (d.reason ? ": " + d.reason : "") })];
      case "staged_out":
        return [el("div", { text: d.ok ? "stage-out done" : "stage-out failed: " + (d.reason || "") })];
      default:
        return d.reason ? [el("div", { text: d.reason })] : [];
    }
  }

  function addEvent(e, seen) {
    if (seen.has(e.seq)) return;
    seen.add(e.seq);
    const li = el("li", { class: "event " + e.name, "data-seq": String(e.seq) }, [
      el("span", { class: "when", text: when(e.time) }),
      el("span", { class: "what", text: e.name }),
      el("span", { class: "who", text: " by " + (e.principal || e.source) }),
    ].concat(detail(e)));
    document.getElementById("timeline").appendChild(li);
  }

  function jobView(id) {
    document.getElementById("table-view").hidden = true;
    document.getElementById("job-view").hidden = false;
    document.getElementById("job-id").textContent = id;
    const seen = new Set();
    const path = "/v1/jobs/" + encodeURIComponent(id);
    api(path).then(summary);
    api(path + "/events").then(function (evs) {
      let last = 0;
      for (const e of evs) { addEvent(e, seen); last = e.seq; }
      const src = new EventSource(streamURL({ job: id, after: String(last) }));
      src.onopen = function () { setLive(true); };
      src.onerror = function () { setLive(false); };
      const onEvent = function (m) { addEvent(JSON.parse(m.data), seen); api(path).then(summary); };
      for (const name of EVENT_NAMES) src.addEventListener(name, onEvent);
    });
  }

  const job = new URLSearchParams(location.search).get("job");
  if (job) jobView(job); else tableView();
})();
