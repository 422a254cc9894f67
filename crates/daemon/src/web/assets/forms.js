// The config form (one card per interface, and the whole file as TOML), test and tune runs, and
// the lab reports. The daemon validates every change with the CLI's own validator before it
// writes anything; an error comes back with the interface and key it is about, and is shown
// beside that field.
"use strict";

let configView = null;

async function loadConfig() {
  const { status, json } = await api("GET", "/api/config");
  if (status !== 200) {
    $("#config-error").textContent = json.error || `HTTP ${status}`;
    return;
  }
  configView = json;
  $("#config-path").textContent = json.path;
  $("#config-error").textContent = json.error ? `${json.error.line ? `line ${json.error.line}: ` : ""}${json.error.message}` : "";
  $("#toml").value = json.text;
  $("#config-cards").replaceChildren(...json.interfaces.map((t) => configCard(t.name, t.values)));
  const tuneIface = $("#run-iface");
  tuneIface.replaceChildren(...json.interfaces.map((t) => el("option", { value: t.name }, t.name)));
}

function fieldInput(iface, f, value, fromDefaults) {
  const name = `${iface}/${f.key}`;
  let input;
  if (f.kind === "choice" || f.kind === "bool") {
    input = el("select", { name },
      el("option", { value: "" }, fromDefaults !== undefined ? `— ([defaults]: ${fromDefaults})` : "— (default)"),
      ...f.choices.map((c) => el("option", { value: c }, c)));
    // A value the list does not have (written by hand) stays visible, to be judged by the daemon.
    if (value && !f.choices.includes(value)) input.appendChild(el("option", { value }, value));
    input.value = value || "";
  } else {
    input = el("input", {
      type: "text", name, value: value || "", spellcheck: "false", autocomplete: "off",
      placeholder: fromDefaults !== undefined ? `[defaults]: ${fromDefaults}` : (f.kind === "rate" ? "e.g. 50mbit" : ""),
    });
  }
  return el("label", { class: "field" },
    el("span", { class: "key" }, f.key),
    input,
    el("span", { class: "help" }, f.help),
    el("span", { class: "field-error", "data-error": name }));
}

function configCard(iface, values) {
  const defaults = configView.defaults || {};
  const field = (f) => fieldInput(iface, f, values[f.key], defaults[f.key]);
  const form = el("form", { class: "card config-card", "data-iface": iface },
    el("header", {}, el("h3", {}, `[interface.${iface}]`)),
    el("div", { class: "fields" }, ...configView.fields.filter((f) => !f.more).map(field)),
    el("details", {}, el("summary", {}, "more options"),
      el("div", { class: "fields" }, ...configView.fields.filter((f) => f.more).map(field))),
    el("p", { class: "card-error" }),
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "secondary", onclick: () => submitCard(form, true) }, "Check"),
      el("button", { type: "submit" }, "Apply")),
    el("div", { class: "result", "data-result": iface }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    submitCard(form, false);
  });
  return form;
}

function clearErrors(root) {
  for (const e of root.querySelectorAll(".field-error, .card-error")) e.textContent = "";
  for (const e of root.querySelectorAll(".invalid")) e.classList.remove("invalid");
}

// Shows each error beside its field in `root` when it has one, else in `fallback`.
function showErrors(root, errors, fallback) {
  for (const e of errors) {
    const slot = e.iface && e.key && root.querySelector(`[data-error="${CSS.escape(`${e.iface}/${e.key}`)}"]`);
    if (slot) {
      slot.textContent = e.message;
      const input = root.querySelector(`[name="${CSS.escape(`${e.iface}/${e.key}`)}"]`);
      if (input) {
        input.classList.add("invalid");
        input.focus();
      }
    } else {
      fallback.textContent = `${e.line ? `line ${e.line}: ` : ""}${e.key ? `${e.key}: ` : ""}${e.message}`;
    }
  }
}

function describe(out) {
  if (out.applied && out.reloaded) {
    const r = out.reloaded;
    const parts = [["changed", r.changed], ["unchanged", r.unchanged], ["removed", r.removed], ["waiting for their device", r.waiting]]
      .filter(([, v]) => v.length).map(([k, v]) => `${k}: ${v.join(", ")}`);
    return `Applied. ${parts.join("; ")}`;
  }
  if (out.refused) return `The daemon refused the change: ${out.refused}${out.restored ? " (the file was put back as it was)" : ""}`;
  if (out.ok) return `Valid. ${out.plans.map((p) => `${p.iface}: ${p.summary.join("; ")}`).join(" | ")}`;
  return "";
}

async function submitCard(form, check) {
  const iface = form.dataset.iface;
  const values = {};
  for (const input of form.querySelectorAll("[name]")) values[input.name.slice(iface.length + 1)] = input.value;
  await submitChange(form, { interface: iface, values, check }, $(".card-error", form), $(".result", form));
}

async function submitToml(check) {
  const box = $("#toml-box");
  await submitChange(box, { text: $("#toml").value, check }, $("#toml-error"), $("#toml-result"));
}

async function submitChange(root, body, fallback, result) {
  clearErrors(root);
  result.textContent = body.check ? "checking…" : "applying…";
  result.className = "result";
  const { status, json } = await api("POST", "/api/config", body);
  if (status === 401) {
    result.textContent = "Nothing was changed: give the token first (top of the page).";
    result.className = "result bad";
    return;
  }
  showErrors(root, json.errors || [], fallback);
  if (json.error) fallback.textContent = json.error;
  result.textContent = describe(json) || (json.errors && json.errors.length ? "Nothing was written or applied." : "");
  result.className = `result ${json.ok ? "good" : "bad"}`;
  if (json.applied) {
    refreshStatus(); // app.js: the cards show the new plan at once
    await loadConfig();
    // The new card replaced the old one: say it there too.
    const again = document.querySelector(`[data-result="${CSS.escape(body.interface || "")}"]`);
    if (again) {
      again.textContent = describe(json);
      again.className = "result good";
    }
    if (!body.interface) {
      $("#toml-result").textContent = describe(json);
      $("#toml-result").className = "result good";
    }
  }
}

function addInterface(ev) {
  ev.preventDefault();
  const name = $("#new-iface").value.trim();
  if (!name || !configView) return;
  $("#config-cards").appendChild(configCard(name, {}));
  $("#new-iface").value = "";
}

// ---- test and tune runs ----

function runKindChanged() {
  const tune = $("#run-kind").value === "tune";
  for (const e of document.querySelectorAll(".for-test")) e.hidden = tune;
  for (const e of document.querySelectorAll(".for-tune")) e.hidden = !tune;
}

async function startRun(ev) {
  ev.preventDefault();
  const kind = $("#run-kind").value;
  const body = { kind, server: $("#run-server").value };
  if (kind === "test") {
    body.profile = $("#run-profile").value;
    if ($("#run-duration").value.trim()) body.duration = $("#run-duration").value.trim();
  } else {
    body.iface = $("#run-iface").value;
    if ($("#run-maxtime").value.trim()) body.max_time = $("#run-maxtime").value.trim();
  }
  const { status, json } = await api("POST", "/api/runs", body);
  $("#run-error").textContent = status === 202 ? "" : (json.error || `HTTP ${status}`);
  pollRuns();
}

async function stopRun() {
  const { status, json } = await api("POST", "/api/runs/stop");
  $("#run-error").textContent = status === 202 ? "" : (json.error || `HTTP ${status}`);
}

let runsTimer = null;

async function pollRuns() {
  const { status, json } = await api("GET", "/api/runs");
  if (status === 200) renderRuns(json);
  const running = status === 200 && json.some((r) => r.state === "running");
  $("#run-stop").disabled = !running;
  clearTimeout(runsTimer);
  runsTimer = setTimeout(pollRuns, running ? 1000 : 5000);
}

function runFile(run, name) {
  return `/runs/${encodeURIComponent(run.id)}/${encodeURIComponent(name)}`;
}

// Each run's item, rebuilt only when the run changed: the plots are not fetched again at each
// poll, and a progress pane keeps its scroll position.
const runItems = new Map();

function renderRuns(runs) {
  let changed = runs.length !== $("#run-list").children.length;
  const items = runs.map((r) => {
    const key = JSON.stringify(r);
    const old = runItems.get(r.id);
    if (old && old.key === key) return old.item;
    changed = true;
    const item = runItem(r);
    runItems.set(r.id, { key, item });
    return item;
  });
  if (!changed) return;
  $("#run-list").replaceChildren(...items);
  if (!runs.length) $("#run-list").appendChild(el("li", { class: "muted" }, "No run yet."));
}

function runItem(r) {
  const state = r.state === "running" ? "running…" : r.state === "done" ? "done"
    : r.exit_code === null ? "ended by a signal (stopped)" : `failed (exit ${r.exit_code})`;
  const pre = el("pre", { class: "progress" }, r.lines.join("\n"));
  requestAnimationFrame(() => { pre.scrollTop = pre.scrollHeight; });
  return el("li", { class: `run ${r.state}`, "data-run": r.id },
    el("div", {}, el("strong", {}, r.kind), ` ${r.id} · `, el("span", { class: "run-state" }, state)),
    el("code", {}, r.command),
    pre,
    r.files.length ? el("p", { class: "links" }, ...r.files.map((f) => el("a", { href: runFile(r, f), target: "_blank", rel: "noopener" }, f))) : null,
    // The run's plots, drawn here (an <img> runs no script the SVG might hold).
    el("div", { class: "plots" }, ...r.files.filter((f) => f.endsWith(".svg")).map((f) =>
      el("a", { href: runFile(r, f), target: "_blank", rel: "noopener" }, el("img", { src: runFile(r, f), alt: f, loading: "lazy" })))));
}

// ---- lab reports ----

async function loadReports() {
  const { status, json } = await api("GET", "/api/reports");
  const list = $("#report-list");
  if (status !== 200) {
    list.replaceChildren(el("li", {}, json.error || `HTTP ${status}`));
    return;
  }
  list.replaceChildren(...json.map((r) => el("li", {},
    el("a", { href: `/reports/${r.name.split("/").map(encodeURIComponent).join("/")}/`, target: "_blank", rel: "noopener" }, r.name || "(the reports directory)"),
    el("span", { class: "muted" }, ` · ${new Date(r.modified_unix * 1000).toLocaleString()}`))));
  if (!json.length) list.appendChild(el("li", { class: "muted" }, "No reports (start the daemon with --reports DIR to list a lab's reports)."));
}

function startForms() {
  loadConfig();
  $("#add-iface").addEventListener("submit", addInterface);
  $("#toml-check").addEventListener("click", () => submitToml(true));
  $("#toml-apply").addEventListener("click", () => submitToml(false));
  $("#run-kind").addEventListener("change", runKindChanged);
  $("#run-form").addEventListener("submit", startRun);
  $("#run-stop").addEventListener("click", stopRun);
  runKindChanged();
  pollRuns();
  loadReports();
}
