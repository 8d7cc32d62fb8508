// The inspector's page: reads the embedded model (a single file) or asks the server that sent it
// (api/index, api/question, api/diff: benchmarks.inspection.server), routes on the URL's
// hash (so links work from file:// and can be shared), and builds every element with
// textContent: data never becomes markup.
"use strict";

const EMBEDDED = document.getElementById("data");
let DATA = null;
let RUNS = [];
let RUN_BY_ID = {};
let F1 = null; // the F1 the flags, the list and the diff read (benchmarks.inspection.diff)

async function fetchJson(path) {
  const response = await fetch(path);
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function setRuns(runs) {
  RUNS = runs;
  RUN_BY_ID = Object.fromEntries(RUNS.map((run) => [run.id, run]));
}

// The title, notes, metric and runs: every view needs them (a served page asks api/runs).
async function load() {
  if (DATA) return;
  DATA = EMBEDDED ? JSON.parse(EMBEDDED.textContent) : await fetchJson("api/runs");
  setRuns(DATA.runs);
  F1 = DATA.metric;
}

// The questions and every run's cell for each: the list and the run views need them. A served
// list asks again each time it is shown (a run still being written has grown).
async function loadListing(fresh) {
  if (EMBEDDED || (DATA.questions && !fresh)) return;
  Object.assign(DATA, await fetchJson("api/index"));
  setRuns(DATA.runs);
}

// One question with every run's full result: from the embedded model, or from the server.
async function questionData(id) {
  if (EMBEDDED) {
    const question = DATA.questions[id];
    if (!question) return null;
    const results = {};
    for (const run of RUNS) if (DATA.results[run.id][id]) results[run.id] = DATA.results[run.id][id];
    return { question, results };
  }
  return fetchJson("api/question?id=" + encodeURIComponent(id));
}

// The diff of runs a and b (null when they share no question).
async function diffData(a, b) {
  if (EMBEDDED) return DATA.diffs[`${a}|${b}`] ?? null;
  return fetchJson(`api/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
}
const OUTCOMES = {
  correct: ["judged correct", "judged_correct"],
  wrong: ["judged wrong", "judged_wrong"],
  f1pos: ["F1 > 0", "f1_positive"],
  f1zero: ["F1 = 0", "f1_zero"],
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function params() {
  return new URLSearchParams(location.hash.slice(1));
}

function href(changes, keep) {
  const next = keep ? params() : new URLSearchParams();
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === "" || value === false) next.delete(key);
    else next.set(key, value);
  }
  return "#" + next.toString();
}

function go(changes) {
  location.hash = href(changes, true);
}

// A filter changed: the list starts again at its first page.
function filter(changes) {
  go({ ...changes, page: null });
}

function num(value, digits = 2) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}

function verdictText(verdict) {
  return verdict === true ? "correct" : verdict === false ? "wrong" : "—";
}

function shownRuns(p) {
  const chosen = (p.get("runs") || "").split(",").filter((id) => id in RUN_BY_ID);
  return chosen.length ? chosen : RUNS.map((run) => run.id);
}

function questionIds() {
  return Object.keys(DATA.questions).sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
}

function distinct(values) {
  return new Set(values.filter((value) => value !== null && value !== undefined)).size;
}

function keep(question, runs, p) {
  const results = runs.map((id) => DATA.results[id][question.question_id]).filter(Boolean);
  if (!results.length) return false;
  if (p.get("dataset") && question.dataset !== p.get("dataset")) return false;
  if (p.get("category") && question.category !== p.get("category")) return false;
  if (p.get("errata") && !question.audit) return false;
  const outcome = OUTCOMES[p.get("outcome")];
  if (outcome && !results.some((result) => result.flags[outcome[1]])) return false;
  if (p.get("missed") && !results.some((result) => result.flags.evidence_missed)) return false;
  if (p.get("disagree")) {
    const verdicts = results.map((r) => (r.flags.judged_correct ? 1 : r.flags.judged_wrong ? 0 : null));
    const answered = results.map((r) => (r.scores[F1] === undefined ? null : r.flags.f1_positive));
    if (distinct(verdicts) < 2 && distinct(answered) < 2) return false;
  }
  const search = (p.get("search") || "").toLowerCase();
  if (search) {
    const text = [question.question_id, question.question, question.answer].join(" ").toLowerCase();
    if (!text.includes(search)) return false;
  }
  return true;
}

function select(name, label, options, p) {
  const node = el("select", { name, "data-filter": name }, el("option", { value: "" }, "any " + label));
  for (const [value, text] of options) {
    node.append(el("option", { value, selected: p.get(name) === value ? "selected" : null }, text));
  }
  node.addEventListener("change", () => filter({ [name]: node.value }));
  return el("label", {}, label + " ", node);
}

function checkbox(name, label, p) {
  const box = el("input", { type: "checkbox", "data-filter": name, checked: p.get(name) ? "checked" : null });
  box.addEventListener("change", () => filter({ [name]: box.checked ? "1" : null }));
  return el("label", {}, box, " " + label);
}

function filters(p, runs) {
  const questions = Object.values(DATA.questions);
  const values = (key) => [...new Set(questions.map((q) => q[key]))].sort().map((v) => [v, v]);
  const search = el("input", { type: "search", placeholder: "search question, answer, id", value: p.get("search") || "" });
  search.addEventListener("change", () => filter({ search: search.value }));
  const runBoxes = RUNS.map((run) => {
    const box = el("input", { type: "checkbox", checked: runs.includes(run.id) ? "checked" : null });
    box.addEventListener("change", () => {
      const next = box.checked ? [...runs, run.id] : runs.filter((id) => id !== run.id);
      filter({ runs: next.length === RUNS.length ? null : next.join(",") });
    });
    return el("label", { class: "run-choice" }, box, " " + run.label);
  });
  return el(
    "section",
    { class: "filters" },
    el(
      "div",
      {},
      select("dataset", "dataset", values("dataset"), p),
      select("category", "category", values("category"), p),
      select("outcome", "outcome", Object.entries(OUTCOMES).map(([k, v]) => [k, v[0]]), p),
      checkbox("disagree", "methods disagree", p),
      checkbox("missed", "evidence missed", p),
      checkbox("errata", "audited-key errata", p),
      search,
    ),
    el("details", {}, el("summary", {}, `methods (${runs.length} of ${RUNS.length})`), ...runBoxes),
  );
}

function scoreCell(result) {
  if (!result) return el("td", { class: "none" }, "—");
  const f1 = result.scores[F1];
  const judged = result.flags.judged_correct ? " ✓" : result.flags.judged_wrong ? " ✗" : "";
  const cls = result.flags.evidence_missed ? "missed" : "found";
  return el("td", { class: cls, title: `evidence recall ${num(result.evidence_recall)}` }, num(f1) + judged);
}

// Questions a page of the list shows: a full table's thousands of rows times its runs would take
// the browser seconds to lay out (page=N in the URL; page=all shows every one).
const PAGE_SIZE = 200;

function pager(p, total) {
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  if (p.get("page") === "all" || pages === 1) return { first: 0, last: total, nav: null };
  const page = Math.min(pages, Math.max(1, Number(p.get("page")) || 1));
  const link = (label, target) => el("a", { href: href({ page: target }, true) }, label);
  const nav = el("p", { class: "pager" },
    page > 1 ? link("‹ previous", String(page - 1)) : null, ` page ${page} of ${pages} `,
    page < pages ? link("next ›", String(page + 1)) : null, " · ", link("show all", "all"));
  return { first: (page - 1) * PAGE_SIZE, last: Math.min(total, page * PAGE_SIZE), nav };
}

function listView(p) {
  const runs = shownRuns(p);
  const matching = questionIds().filter((id) => keep(DATA.questions[id], runs, p));
  const { first, last, nav } = pager(p, matching.length);
  const ids = matching.slice(first, last);
  const head = el("tr", {}, el("th", {}, "question"), el("th", {}, "category"), el("th", {}, "text"), el("th", {}, "gold"),
    ...runs.map((id) => el("th", { class: "run-head" }, el("a", { href: href({ run: id }) }, RUN_BY_ID[id].label))));
  const rows = ids.map((id) => {
    const q = DATA.questions[id];
    return el("tr", { class: "question-row", "data-question": id },
      el("td", {}, el("a", { href: href({ q: id, runs: p.get("runs") }) }, id)),
      el("td", {}, q.category), el("td", {}, q.question), el("td", {}, q.answer),
      ...runs.map((run) => scoreCell(DATA.results[run][id])));
  });
  return [
    filters(p, runs),
    el("p", { id: "count" }, `${matching.length} of ${questionIds().length} questions · cells: F1 (${F1}), ✓/✗ the judge, red where evidence was missed`),
    nav,
    el("table", { class: "questions" }, el("thead", {}, head), el("tbody", {}, rows)),
    nav ? nav.cloneNode(true) : null,
  ];
}

function turnList(ids, question) {
  return el("ul", { class: "turns" }, ids.map((id) => {
    const turn = question.turns[id];
    return el("li", { "data-turn": id }, el("code", {}, id), " ", turn ?? "(text not loaded)");
  }));
}

function questionBlock(q) {
  const rows = [
    ["question", q.question],
    ["gold answer", q.answer],
    ["adversarial answer", q.adversarial_answer],
  ].filter(([, value]) => value !== null && value !== undefined);
  const block = el("section", { class: "question" },
    el("h2", {}, q.question_id), el("p", { class: "meta" }, `${q.dataset} · conversation ${q.conversation_id} · ${q.category}`),
    el("dl", {}, rows.map(([key, value]) => [el("dt", {}, key), el("dd", {}, String(value))])),
    el("h3", {}, "gold evidence turns"), q.evidence.length ? turnList(q.evidence, q) : el("p", {}, "none"));
  if (q.audit) {
    block.append(el("div", { class: "audit" },
      el("h3", {}, `audited reading: ${q.audit.error_type}`),
      el("p", {}, "audited answer: ", q.audit.answer === null ? "none (ambiguous)" : q.audit.answer),
      turnList(q.audit.evidence, q)));
  }
  return block;
}

function judgeList(judges) {
  return el("ul", { class: "judges" }, judges.map((j) =>
    el("li", {}, `${j.protocol}: ${verdictText(j.verdict)}`,
      j.error ? ` (error: ${j.error})` : "",
      ` · ${j.attempts} attempt(s), ${j.prompt_tokens}+${j.completion_tokens} tokens, ${num(j.latency_s, 3)} s`,
      j.reply !== undefined ? el("pre", { class: "reply" }, j.reply) : el("span", { class: "muted" }, " · reply not kept in the record"))));
}

function runColumn(runId, q, result) {
  const run = RUN_BY_ID[runId];
  const evidence = new Set(q.evidence);
  const table = [
    ["answer", result.prediction ?? result.failure ?? "—"],
    ["F1 (set / LoCoMo)", `${num(result.scores.f1_set)} / ${num(result.scores.f1_locomo)}`],
    ["BLEU-1", num(result.scores.bleu1)],
    ["evidence recall", num(result.evidence_recall)],
    ["answer coverage", num(result.answer_coverage)],
    ["context tokens", result.context_tokens ?? "—"],
    ["tokens (prompt + completion)", `${result.tokens.prompt ?? "—"} + ${result.tokens.completion ?? "—"}`],
    ["latency (s)", Object.entries(result.latency_s).map(([k, v]) => `${k} ${num(v, 3)}`).join(", ")],
  ];
  const derived = result.lines.some((line) => line.mark === "derived");
  return el("section", { class: "run-column", "data-run": runId },
    el("h3", {}, el("a", { href: href({ run: runId }) }, run.label)),
    el("table", { class: "facts" }, table.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v))))),
    judgeList(result.judges),
    el("h4", {}, "context the reader got"),
    el("div", { class: "context" }, result.lines.map((line) =>
      el("div", { class: `line ${line.mark}`, "data-turn": line.turn },
        line.turn ? el("code", { class: "tid" }, line.turn) : null, line.text))),
    el("h4", {}, derived ? "turns the context came from (its lines are not verbatim turns)" : "turns shown"),
    el("p", { class: "chips" }, result.retrieved.map((id) =>
      el("span", { class: evidence.has(id) ? "chip evidence" : "chip" }, id))));
}

async function questionView(p) {
  const found = await questionData(p.get("q"));
  if (!found) return [el("p", {}, "no such question: ", p.get("q"))];
  const q = found.question;
  const runs = shownRuns(p).filter((id) => found.results[id]);
  return [
    el("p", {}, el("a", { href: href({ runs: p.get("runs") }) }, "← questions")),
    questionBlock(q),
    el("div", { class: "columns" }, runs.map((id) => runColumn(id, q, found.results[id]))),
  ];
}

function runsView() {
  const keys = ["f1_set", "f1_locomo", "bleu1", "judge_acc", "evidence_recall", "answer_coverage", "context_tokens"];
  return [el("table", { class: "runs" },
    el("tr", {}, ["run", "dataset", "subset", "questions", ...keys].map((k) => el("th", {}, k))),
    RUNS.map((run) => el("tr", { "data-run": run.id },
      el("td", {}, el("a", { href: href({ run: run.id }) }, run.label)), el("td", {}, run.dataset), el("td", {}, run.subset),
      el("td", {}, run.questions), keys.map((k) => el("td", {}, num(run.summary[k], k === "context_tokens" ? 0 : 3))))))];
}

function runView(p) {
  const run = RUN_BY_ID[p.get("run")];
  if (!run) return [el("p", {}, "no such run: ", p.get("run"))];
  const results = DATA.results[run.id];
  return [
    el("h2", {}, run.label),
    el("p", { class: "meta" }, `${run.id} · ${run.path} · ${run.dataset} / ${run.subset}${run.finished ? "" : " · unfinished"}`),
    ...runsView().map((table) => { table.querySelectorAll("tr[data-run]").forEach((row) => { if (row.dataset.run !== run.id) row.remove(); }); return table; }),
    el("table", { class: "questions" },
      el("tr", {}, ["question", "category", "answer", "F1", "judge", "evidence recall"].map((k) => el("th", {}, k))),
      Object.entries(results).map(([id, r]) => el("tr", {},
        el("td", {}, el("a", { href: href({ q: id }) }, id)), el("td", {}, DATA.questions[id].category),
        el("td", {}, r.prediction ?? "—"), el("td", {}, num(r.scores[F1])),
        el("td", {}, verdictText(r.flags.judged_correct ? true : r.flags.judged_wrong ? false : null)), el("td", {}, num(r.evidence_recall))))),
    el("details", {}, el("summary", {}, "config.yaml"), el("pre", {}, JSON.stringify(run.config, null, 2))),
  ];
}

async function diffView(p) {
  let a = p.get("a") || RUNS[0]?.id;
  let b = p.get("b") || RUNS[1]?.id;
  if (EMBEDDED && !(`${a}|${b}` in DATA.diffs) && `${b}|${a}` in DATA.diffs) [a, b] = [b, a];
  const pick = (name, value) => {
    const node = el("select", { "data-filter": name }, RUNS.map((run) => el("option", { value: run.id, selected: run.id === value ? "selected" : null }, run.label)));
    node.addEventListener("change", () => go({ [name]: node.value }));
    return el("label", {}, `${name.toUpperCase()} `, node);
  };
  const found = await diffData(a, b);
  const out = [el("p", { class: "filters" }, pick("a", a), " → ", pick("b", b))];
  if (!found) return [...out, el("p", {}, "these two runs share no question")];
  const columns = Object.values(found.columns);
  out.push(
    el("p", {}, `A: ${found.a} → B: ${found.b} · F1 is ${found.metric} · ${found.only_a} questions only in A, ${found.only_b} only in B`),
    el("table", { class: "diff-counts" }, el("tr", {}, el("th", {}, "category"), columns.map((c) => el("th", {}, c))),
      Object.entries(found.counts).map(([category, row]) => el("tr", {}, el("td", {}, category), Object.keys(found.columns).map((key) => el("td", {}, row[key]))))),
    el("h3", {}, `${found.changed.length} questions changed, most changed first`),
    el("ol", { class: "diff-questions" }, found.changed.map((d) =>
      el("li", {}, el("a", { href: href({ q: d.question_id, runs: `${a},${b}` }) }, d.question_id), " ", d.summary))));
  return out;
}

// Each render's number: a view whose data came back after a newer render started is dropped
// (a click on question A, then B: A's slower reply must not replace B).
let renders = 0;

async function render() {
  const mine = ++renders;
  const started = performance.now();
  const p = params();
  await load();
  const listing = !p.get("q") && !["runs", "diff"].includes(p.get("view"));
  if (listing) await loadListing(!p.get("run"));
  document.getElementById("title").textContent = DATA.title;
  const nav = document.getElementById("nav");
  nav.replaceChildren(el("a", { href: "#" }, "questions"), " · ", el("a", { href: "#view=runs" }, "runs"), " · ", el("a", { href: "#view=diff" }, "diff"),
    ...DATA.notes.map((note) => el("p", { class: "note" }, note)));
  let view;
  if (p.get("q")) view = await questionView(p);
  else if (p.get("run")) view = runView(p);
  else if (p.get("view") === "runs") view = runsView();
  else if (p.get("view") === "diff") view = await diffView(p);
  else view = listView(p);
  if (mine !== renders) return; // a newer view is on its way
  document.getElementById("view").replaceChildren(...view.filter(Boolean));
  // How long this view took, from the page's start (first view) or the click (later ones).
  document.body.dataset.renderMs = String(Math.round(performance.now() - (document.body.dataset.rendered ? started : 0)));
  document.body.dataset.rendered = "1";
}

function show() {
  render().catch((error) => {
    document.getElementById("view").replaceChildren(el("p", { class: "note" }, "error: " + error.message));
    document.body.dataset.rendered = "error";
  });
}

window.addEventListener("hashchange", show);
show();
