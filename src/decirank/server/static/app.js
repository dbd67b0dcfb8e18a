// decirank's page: a playground for the tools and a reader for the run log.
// Plain JavaScript, no build step, nothing loaded from elsewhere. Every value shown is set as text.
"use strict";
(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
  const SVG = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
  const KEY = "decirank.apiKey"; // kept in sessionStorage only: gone when the tab closes
  const MAX_OPTIONS = 254; // items one choice carries; longer lists go in chunks and a final round

  function h(tag, attrs, ...kids) {
    const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") el.textContent = value;
      else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? "" : value);
    }
    for (const kid of kids.flat()) if (kid !== null && kid !== undefined && kid !== false) el.append(kid);
    return el;
  }

  // --- numbers and texts -------------------------------------------------------------------
  const pct = (p) => (p === null || p === undefined ? "—" : (p * 100).toFixed(p >= 0.995 || p < 0.001 ? 2 : 1) + "%");
  const ms = (v) => (v === null || v === undefined ? "—" : v < 1000 ? Math.round(v) + " ms" : (v / 1000).toFixed(2) + " s");
  const int = (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"));
  const money = (v, cur) => (v === null || v === undefined ? "—" : (cur && cur !== "USD" ? cur + " " : "$") + (v === 0 ? "0" : v < 0.01 ? v.toFixed(5) : v.toFixed(4)));
  const when = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" }) : "—");
  const text = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  function path(item, dots) {
    let value = item;
    for (const part of dots.split(".")) value = value === null || value === undefined ? undefined : value[/^\d+$/.test(part) && Array.isArray(value) ? Number(part) : part];
    return value;
  }

  // --- the API, with the key asked once per session ------------------------------------------
  class ApiError extends Error {
    constructor(status, data) {
      super(describeError(status, data));
      this.status = status;
      this.data = data;
    }
  }
  function describeError(status, data) {
    if (data && data.error && data.error.message) return `${data.error.type}: ${data.error.message}`;
    if (data && Array.isArray(data.detail)) return data.detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("\n");
    if (data && typeof data.detail === "string") return data.detail;
    return `HTTP ${status}`;
  }
  let keyAsked = null;
  function askKey(message) {
    keyAsked = keyAsked || new Promise((resolve) => {
      const dialog = $("#key-dialog");
      $("#key-error").textContent = message;
      $("#key-input").value = "";
      dialog.oncancel = (event) => event.preventDefault();
      $("#key-form").onsubmit = (event) => {
        event.preventDefault();
        const key = $("#key-input").value.trim();
        if (!key) return;
        sessionStorage.setItem(KEY, key);
        dialog.close();
        keyAsked = null;
        $("#forget-key").hidden = false;
        resolve();
      };
      dialog.showModal();
    });
    return keyAsked;
  }
  async function api(url, body, meta) {
    for (;;) {
      const key = sessionStorage.getItem(KEY);
      const headers = {};
      if (key) headers.authorization = "Bearer " + key;
      if (body !== undefined) headers["content-type"] = "application/json";
      const response = await fetch(url, { method: body === undefined ? "GET" : "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
      if (response.status === 401) {
        if (key) sessionStorage.removeItem(KEY);
        await askKey(key ? "That key was refused; try again." : "");
        continue;
      }
      let data = null;
      try { data = await response.json(); } catch (_) { /* not JSON */ }
      if (!response.ok) throw new ApiError(response.status, data);
      if (meta) meta.headers = response.headers;
      return data;
    }
  }

  // --- the playground ----------------------------------------------------------------------
  let server = { model: "decider", allow_exec: false, evaluators: ["score", "validate"], validation_types: ["json"], runlog: true };
  let tool = "rank";
  const EXAMPLES = {
    rank: { question: "Which page answers the question?", items: "Flea life cycle: adult fleas live two to three months\nSourdough starter feeding schedule\nHow to bathe a cat without tears\nDog flea treatments compared\nBicycle chain maintenance", state: '{"question": "How long do fleas live?"}', none: "none of these" },
    rerank: { question: "how long do fleas live", items: "Flea life cycle: adult fleas live two to three months\nSourdough starter feeding schedule\nDog flea treatments compared\nBicycle chain maintenance" },
    filter: { question: "Is this page about pets?", items: "How to bathe a cat without tears\nSourdough starter feeding schedule\nDog flea treatments compared\nBicycle chain maintenance", state: '{"site": "a vet clinic"}' },
    choice: { question: "What does the customer want?", items: "refund: asks for their money back\ndelivery: asks where the order is\ncancel: wants to cancel the order", state: "My parcel has not arrived yet. Where is it?" },
    noul: { question: "Is this movie review positive?", state: "A warm, funny film; I would see it again tomorrow.", true: "a positive review", false: "a negative review" },
    levels: { question: "How urgent is this ticket?", items: "not urgent\nsomewhat urgent\nurgent\ncritical", state: "The production database is down and no customer can log in." },
    classify: { question: "What does the customer want?", items: "My parcel has not arrived yet. Where is it?\nI want my money back for the broken kettle\nPlease cancel my order", options: "refund: asks for their money back\ndelivery: asks where the order is\ncancel: wants to cancel the order", none: "something else" },
    score: { question: "Is this movie review positive?", items: "A warm, funny film; I would see it again tomorrow.\nTwo hours I will never get back.", true: "a positive review", false: "a negative review" },
  };
  const LABELS = {
    rank: ["Instructions", "Items", "one per line, or a JSON array"],
    rerank: ["Query", "Documents", "one per line, or a JSON array of strings or {text} objects"],
    filter: ["Question (yes/no, asked of each item)", "Items", "one per line, or a JSON array"],
    choice: ["Instructions", "Options", "one per line, as key: description, or a JSON object"],
    noul: ["Statement (how likely is it true of the state?)", "", ""],
    levels: ["Instructions", "Levels", "lowest first, one per line (2 to 10)"],
    classify: ["Question (a choice, asked of each text)", "Texts", "one per line, or a JSON array"],
    score: ["Question (yes/no, asked of each text)", "Texts", "one per line, or a JSON array"],
    score_list: ["", "Refs", "run_id/agent_id of stored artifacts, one per line"],
    calibrate: ["Question (asked of each labelled row)", "Labelled rows", 'JSON Lines or a JSON array of {"item" or "state", "answer"}; paste, or choose a file'],
  };
  // Each tab keeps its own draft: switching tabs never carries one tool's question to another.
  const DRAFT = ["#question", "#items", "#state", "#options", "#none", "#examples", "#noul-true", "#noul-false", "#levels", "#describe", "#evaluator-arg"];
  const drafts = {};
  let shownMode = null;
  // A decision's type is its mode; a score decision's is "levels", apart from the score tool.
  const mode = () => (tool === "decision" ? $("#decision-type").value.replace(/^score$/, "levels") : tool);

  function setTool(name) {
    tool = name;
    $$("#tool-tabs button").forEach((b) => b.classList.toggle("on", b.dataset.tool === name));
    const m = mode();
    if (shownMode !== null && shownMode !== m) {
      drafts[shownMode] = DRAFT.map((sel) => $(sel).value);
      DRAFT.forEach((sel, i) => ($(sel).value = drafts[m] ? drafts[m][i] : ""));
    }
    shownMode = m;
    const active = new Set([tool, m, tool === "calibrate" && "cal-" + $("#cal-tool").value]);
    $("#run").textContent = tool === "calibrate" ? "Calibrate" : "Run";
    $$("[data-for]").forEach((el) => (el.hidden = !el.dataset.for.split(" ").some((t) => active.has(t))));
    $$("[data-not]").forEach((el) => (el.hidden = el.dataset.not.split(" ").some((t) => active.has(t))));
    const [question, items, hint] = LABELS[m];
    $("#question-name").textContent = question;
    $("#items-name").textContent = items;
    $("#items-hint").textContent = hint;
    showGraded();
    countItems();
    refreshCode();
  }

  // score with levels asks which level each text is at, not a yes/no question: what true and false
  // mean has no place then (the server refuses them), so those fields go while the levels field has text.
  const graded = () => tool === "score" && $("#levels").value.trim() !== "";
  function showGraded() {
    $("#yes-no").hidden = graded();
    if (tool === "score") $("#question-name").textContent = graded() ? "Question (asked of each text, answered with a level)" : LABELS.score[0];
  }
  /** score's levels, lowest first: one per line or a JSON array; none given is a yes/no question. */
  function parseLevels() {
    const levels = parseList($("#levels").value).map(text);
    return levels.length ? levels : undefined;
  }

  async function fillExample() {
    if (mode() === "score_list") {
      // Refs that exist: the server stores its two example artifacts (fixed texts) and names them.
      let stored;
      try { stored = await api("v1/example-artifacts", {}); } catch (error) { return showError(error.message); }
      const [kind, arg] = stored.evaluator.split(/:(.*)/);
      EXAMPLES.score_list = { items: stored.refs.join("\n"), evaluatorKind: kind, evaluatorArg: arg };
    }
    const example = EXAMPLES[mode()];
    $("#question").value = example.question || "";
    $("#items").value = example.items || "";
    $("#state").value = example.state || "";
    $("#none").value = example.none || "";
    $("#options").value = example.options || "";
    $("#examples").value = "";
    $("#noul-true").value = example.true || "";
    $("#noul-false").value = example.false || "";
    $("#levels").value = example.levels || "";
    showGraded();
    if (example.evaluatorKind) $("#evaluator-kind").value = example.evaluatorKind;
    $("#evaluator-arg").value = example.evaluatorArg || "";
    countItems();
    refreshCode();
  }

  function parseList(raw) {
    const t = raw.trim();
    if (!t) return [];
    if (t[0] === "[") {
      let value;
      try { value = JSON.parse(t); } catch (error) { throw new Error("The list starts like JSON but is not: " + error.message); }
      if (!Array.isArray(value)) throw new Error("The list must be a JSON array");
      return value;
    }
    const lines = t.split("\n").map((line) => line.trim()).filter(Boolean);
    // JSON Lines: every line an object
    if (lines.every((line) => line[0] === "{")) {
      try { return lines.map((line) => JSON.parse(line)); } catch (_) { /* plain lines after all */ }
    }
    return lines;
  }
  function parseState(raw) {
    const t = raw.trim();
    if (!t) return null;
    try { return JSON.parse(t); } catch (_) { return t; }
  }
  function parseOptions(raw, labels) {
    const t = raw.trim();
    if (t[0] === "{" || (labels && t[0] === "[")) {
      try { return JSON.parse(t); } catch (error) { throw new Error("The options start like JSON but are not: " + error.message); }
    }
    const options = {};
    parseList(raw).forEach((line, index) => {
      const match = typeof line === "string" && line.match(/^([\w.-]{1,40}):\s+(.+)$/);
      const key = match ? match[1] : labels ? text(line) : String(index + 1);
      if (key in options) throw new Error(`The option key ${key} is given twice`);
      options[key] = match ? match[2] : text(line);
    });
    return options;
  }
  function parseExamples() {
    const t = $("#examples").value.trim();
    if (!t) return undefined;
    if (t[0] !== "[") return t; // a stored set's name
    try { return JSON.parse(t); } catch (error) { throw new Error("The examples start like JSON but are not: " + error.message); }
  }
  const number = (sel) => ($(sel).value.trim() === "" ? undefined : Number($(sel).value));
  const optional = (sel) => $(sel).value.trim() || undefined;

  /** The labelled rows: the first ones fit the map (100, or half of a smaller file), the rest are held out. */
  function calRows() {
    const rows = parseList($("#items").value);
    rows.forEach((r, i) => {
      if (!r || typeof r !== "object" || !("answer" in r) || !("item" in r || "state" in r)) throw new Error(`Row ${i + 1} is not {"item" or "state", "answer"}`);
    });
    const fit = Math.min(rows.length, number("#cal-fit") ?? Math.min(100, Math.floor(rows.length / 2)));
    return { rows, fit: rows.slice(0, fit), held: rows.slice(fit) };
  }

  function countItems() {
    let note = "";
    try {
      if (tool === "calibrate") {
        const { rows, fit, held } = calRows();
        $("#cal-fit").placeholder = Math.min(100, Math.floor(rows.length / 2));
        if (rows.length) note = `${rows.length} labelled rows · ${fit.length} to fit, ${held.length} held out`;
        return ($("#items-count").textContent = note);
      }
      const n = parseList($("#items").value).length;
      if (n) note = `${n} ${LABELS[mode()][1].toLowerCase()}`;
      if (tool === "rank" && n > MAX_OPTIONS) note += ` · over ${MAX_OPTIONS}: ranked in chunks, then a final round`;
    } catch (error) { note = error.message; }
    $("#items-count").textContent = note;
  }

  /** The request the form describes: {url, body} plus what code generation needs. */
  function buildRequest() {
    const m = mode();
    const model = $("#model").value || undefined;
    const question = $("#question").value.trim();
    const timeout = number("#timeout");
    const state = parseState($("#state").value);
    const list = tool === "decision" ? null : parseList($("#items").value);
    if (list && !list.length) throw new Error(`Give the ${LABELS[m][1].toLowerCase()} first: ${LABELS[m][2]}.`);
    let url, body, held;
    if (m === "calibrate") {
      const rows = calRows(), classify = $("#cal-tool").value === "classify";
      held = rows.held;
      url = "v1/calibrate";
      body = { name: optional("#cal-name"), question, tool: $("#cal-tool").value, rows: rows.fit, options: classify ? parseOptions($("#options").value, true) : undefined, none: classify ? optional("#none") : undefined, model, timeout };
    } else if (m === "rank") {
      url = "v1/rank";
      body = { items: list, instructions: question, state, describe: optional("#describe"), none: optional("#none"), top_k: number("#top-k"), model, timeout };
    } else if (m === "rerank") {
      url = "v1/rerank";
      body = { query: question, documents: list.map((d) => (typeof d === "string" || (d && typeof d === "object") ? d : String(d))), top_n: number("#top-k"), min_relevance: number("#min-relevance"), return_documents: true, model, timeout };
    } else if (m === "filter") {
      url = "v1/filter";
      body = { items: list, question, state, min_confidence: number("#min-confidence") ?? 0.5, describe: optional("#describe"), examples: parseExamples(), model, timeout };
    } else if (m === "classify") {
      url = "v1/classify";
      body = { texts: list, question, options: parseOptions($("#options").value, true), none: optional("#none"), examples: parseExamples(), model, timeout };
    } else if (m === "score") {
      url = "v1/score";
      const levels = parseLevels();
      body = { texts: list, question, levels, true: levels ? undefined : optional("#noul-true"), false: levels ? undefined : optional("#noul-false"), examples: parseExamples(), model, timeout };
    } else if (m === "score_list") {
      const kind = $("#evaluator-kind").value;
      if (kind === "exec" && !server.allow_exec) throw new Error("This server does not allow exec: evaluators");
      url = "v1/score_list";
      body = { refs: list.map(text), evaluator: `${kind}:${$("#evaluator-arg").value.trim()}`, top_k: number("#top-k"), model, timeout };
    } else {
      let q;
      if (m === "choice") q = { type: "choice", instructions: question, criteria: parseOptions($("#items").value) };
      else if (m === "levels") q = { type: "score", instructions: question, criteria: parseList($("#items").value).map(text) };
      else {
        q = { type: "noul", instructions: question };
        const yes = optional("#noul-true"), no = optional("#noul-false");
        if (yes || no) q.criteria = { true: yes, false: no };
      }
      url = "v1/systemone";
      body = { model, state, questions: { q } };
    }
    return { url, body: JSON.parse(JSON.stringify(body)), mode: m, held };
  }

  async function run(event) {
    event.preventDefault();
    $("#play-error").hidden = true;
    $("#results").hidden = true;
    let request;
    try { request = buildRequest(); } catch (error) { return showError(error.message); }
    const button = $("#run");
    button.disabled = true;
    document.body.dataset.busy = "true";
    $("#play-status").textContent = "asking…";
    const started = performance.now();
    try {
      const meta = {};
      const data = await api(request.url, request.body, meta);
      const elapsed = performance.now() - started;
      $("#play-status").textContent = "";
      await showResult(request, data, elapsed, meta.headers);
    } catch (error) {
      $("#play-status").textContent = "";
      showError(error.message);
    } finally {
      button.disabled = false;
      delete document.body.dataset.busy;
    }
  }
  function showError(message) {
    $("#results").hidden = true;
    const box = $("#play-error");
    box.textContent = message;
    box.hidden = false;
  }

  function barRow(position, label, probability, options = {}) {
    const fill = h("span", { class: "fill" });
    fill.style.width = probability === null || probability === undefined ? "0" : Math.max(0, Math.min(1, probability)) * 100 + "%";
    const bar = h("span", { class: "bar" }, fill);
    if (options.threshold !== undefined) {
      const mark = h("span", { class: "threshold", title: "min confidence" });
      mark.style.left = options.threshold * 100 + "%";
      bar.append(mark);
    }
    const title = typeof label === "string" ? label : "";
    return h("li", { class: "bar-row " + (options.class || ""), "data-probability": probability ?? "", "data-index": options.index ?? "" },
      h("span", { class: "pos", text: position ?? "" }),
      h("span", { class: "label", title }, label, ...(options.tags || []).map((t) => h("span", { class: "tag", text: t }))),
      bar,
      h("span", { class: "pct", text: options.value ?? pct(probability) }),
      options.note ? h("div", { class: "note", text: options.note }) : null);
  }

  async function showResult(request, data, elapsed, headers) {
    const bars = $("#bars");
    bars.replaceChildren();
    $("#no-fit").hidden = true;
    $("#chunks").hidden = true;
    $("#cal").hidden = request.mode !== "calibrate";
    const body = request.body;
    const usage = data.usage || (data.meta && data.meta.usage) || {};
    // A decision's body has no run id or call count: the server sends them as headers.
    const header = (name) => (headers ? headers.get("x-decirank-" + name) : null);
    const runId = data.run_id || data.id || header("run-id");
    if (usage.calls === undefined && header("calls") !== null) usage.calls = Number(header("calls"));
    const facts = [
      ["model", data.model || (data.meta && data.meta.model) || "—"],
      ["tokens", `${int(usage.input_tokens)} in · ${int(usage.output_tokens)} out`],
      ["cost", money(usage.cost, usage.currency)],
      ["calls", int(usage.calls)],
      ["took", ms(elapsed)],
    ];
    const summary = $("#result-summary");
    summary.replaceChildren(...facts.map(([k, v]) => h("span", {}, k + " ", h("b", { text: v }))));
    if (runId && server.runlog) summary.append(h("a", { href: "#/runs/" + encodeURIComponent(runId), id: "open-run", text: "open run ›" }));

    if (request.mode === "calibrate") showCalibration(request, data, summary);
    else if (request.mode === "rank") {
      const rows = data.ranked.map((entry) => ({ entry }));
      if (data.none !== null && data.none !== undefined) {
        const at = rows.findIndex((r) => r.entry.probability === null || r.entry.probability < data.none);
        rows.splice(at === -1 ? rows.length : at, 0, { none: data.none });
      }
      let position = 0;
      for (const row of rows) {
        if (row.none !== undefined) {
          bars.append(barRow("", body.none || "none of these", row.none, { class: "none-option", tags: ["nothing fits"] }));
        } else if (row.entry.probability === null) {
          bars.append(barRow(++position, label(row.entry.item, body.describe), null, { class: "out", index: row.entry.index, tags: ["out before the final"], value: "—" }));
        } else {
          bars.append(barRow(++position, label(row.entry.item, body.describe), row.entry.probability, { index: row.entry.index }));
        }
      }
      if (data.no_fit) {
        $("#no-fit").textContent = `No fit: "${body.none || "none of these"}" (${pct(data.none)}) beat every item.`;
        $("#no-fit").hidden = false;
      }
      if (runId && (body.items.length > MAX_OPTIONS || data.ranked.some((e) => e.probability === null))) showChunks(runId);
    } else if (request.mode === "rerank") {
      data.results.forEach((r, i) => bars.append(barRow(i + 1, label(r.document && r.document.text !== undefined ? r.document.text : body.documents[r.index]), r.relevance_score, { index: r.index })));
    } else if (request.mode === "filter") {
      const sorted = [...data.decisions].sort((a, b) => b.probability - a.probability || a.index - b.index);
      sorted.forEach((d, i) => bars.append(barRow(i + 1, label(d.item, body.describe), d.probability, { index: d.index, class: d.kept ? "kept" : "dropped", tags: [d.kept ? "kept" : "dropped"], threshold: data.min_confidence })));
      summary.append(h("span", {}, "kept ", h("b", { text: `${data.count} of ${data.decisions.length}` })));
    } else if (request.mode === "classify") {
      data.decisions.forEach((d) => bars.append(barRow(d.index + 1, label(body.texts[d.index]), d.probability, { index: d.index, tags: [d.choice] })));
    } else if (request.mode === "score" && data.levels) {
      data.levels.forEach((d) => bars.append(gradedRow(d, body.texts[d.index], body.levels)));
      summary.append(h("span", {}, "levels ", h("b", { text: body.levels.join(" < ") })));
    } else if (request.mode === "score") {
      data.probabilities.forEach((p, i) => bars.append(barRow(i + 1, label(body.texts[i]), p, { index: i })));
    } else if (request.mode === "score_list") {
      data.ranked.forEach((r) => bars.append(barRow(r.rank, r.ref, r.score, { class: r.pruned ? "dropped" : "", tags: [r.verdict, ...(r.pruned ? ["pruned"] : [])], value: r.score === null ? "—" : r.score.toFixed(3), note: [r.reason, ...r.issues.map((issue) => "• " + issue)].filter(Boolean).join("\n") })));
    } else {
      const answer = data.answers.q;
      const question = body.questions.q;
      if (answer.type === "noul") {
        bars.append(barRow(1, "true" + (question.criteria && question.criteria.true ? ": " + question.criteria.true : ""), answer.noul));
        bars.append(barRow(2, "false" + (question.criteria && question.criteria.false ? ": " + question.criteria.false : ""), 1 - answer.noul));
      } else if (answer.type === "choice") {
        Object.entries(answer.probabilities).sort((a, b) => b[1] - a[1]).forEach(([key, p], i) =>
          bars.append(barRow(i + 1, `${key}: ${question.criteria[key]}`, p, { tags: key === answer.choice ? ["choice"] : [] })));
      } else {
        Object.entries(answer.probabilities).forEach(([level, p]) =>
          bars.append(barRow(level, answer.legend[level], p, { tags: Number(level) === Math.round(answer.score) ? ["score"] : [] })));
        summary.append(h("span", {}, "score ", h("b", { text: `${Number(answer.score).toFixed(2)} (confidence ${pct(answer.confidence)})` })));
      }
    }
    $("#results").hidden = false;
  }
  /** One text's graded answer: its most likely level as a tag and that level's probability as the bar, then
   * the expected level and a small bar per level, lowest first, so a close call between two levels shows. */
  function gradedRow(decision, item, levels) {
    // The text in a span of its own, so that a long one is cut short rather than the level's tag after it.
    const shown = label(item);
    const row = barRow(decision.index + 1, h("span", { class: "text", title: shown, text: shown }), decision.probabilities[decision.level], { index: decision.index, class: "graded", tags: [decision.level] });
    row.dataset.level = decision.level;
    row.dataset.expected = decision.expected_level;
    const spread = levels.map((name) => {
      const p = decision.probabilities[name] ?? 0;
      const fill = h("i");
      fill.style.width = Math.max(0, Math.min(1, p)) * 100 + "%";
      return h("span", { class: "level" + (name === decision.level ? " top" : ""), "data-level": name, "data-probability": p }, name + " ", h("span", { class: "mini" }, fill), " " + pct(p));
    });
    row.append(h("div", { class: "levels" }, h("span", { class: "expected", text: `expected ${Number(decision.expected_level).toFixed(2)} of 0–${levels.length - 1}` }), ...spread));
    return row;
  }
  function label(item, describe) {
    if (describe && item && typeof item === "object") {
      const shown = path(item, describe);
      if (shown !== undefined) return text(shown);
    }
    return text(item);
  }

  // --- calibrate: the fit, its reliability, and the guarantee tried on the held-out rows -------
  let calibrated = null;
  const fact = (name, label, shown, value) => h("span", { "data-fact": name, "data-value": value === null || value === undefined ? null : String(value) }, label + " ", h("b", { text: shown }));
  const f3 = (v) => (v === null || v === undefined ? "—" : v.toFixed(3));
  function showCalibration(request, data, summary) {
    const { before, after } = data, choice = data.tool === "classify";
    summary.append(
      fact("method", "method", data.method),
      fact("ece", "ECE", `${f3(before.ece)} → ${f3(after.ece)}`),
      fact("brier", "Brier", `${f3(before.brier)} → ${f3(after.brier)}`),
      fact("rows", "fitted on", `${data.rows} rows` + (data.positives === undefined || data.positives === null ? "" : ` (${data.positives} yes)`), data.rows),
      fact("held", "held out", String(request.held.length), request.held.length));
    $("#cal-caption").textContent = (choice ? "the top option's probability against how often it was right" : "the probability of yes against how often it was yes") + ", per tenth; after is out-of-fold";
    reliabilityPlot($("#cal-plot"), [{ name: "before", color: PALETTE[1], table: before.table }, { name: "after", color: PALETTE[0], table: after.table }]);
    calibrated = { ...request.body, name: data.name, tool: data.tool, held: request.held };
    $("#cal-for-filter").hidden = choice;
    $("#cal-for-classify").hidden = !choice;
    $("#cal-check").hidden = $("#cal-error").hidden = $("#cal-note").hidden = true;
    $("#cal-try").disabled = !request.held.length;
    $("#cal-status").textContent = request.held.length ? `on the ${request.held.length} held-out rows` : "No rows are held out: fit fewer to try it.";
  }
  function reliabilityPlot(box, series) {
    const W = 360, H = 300, L = 44, R = 10, T = 10, B = 38, grey = "#aab3c2";
    const sx = (x) => L + x * (W - L - R), sy = (y) => T + (1 - y) * (H - T - B);
    const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
    for (let i = 0; i <= 4; i++) {
      const v = i / 4;
      svg.append(h("svg:line", { x1: sx(0), x2: sx(1), y1: sy(v), y2: sy(v), stroke: "#e6e9ee" }),
        h("svg:text", { x: L - 6, y: sy(v) + 3, "text-anchor": "end", text: v }),
        h("svg:text", { x: sx(v), y: H - 24, "text-anchor": "middle", text: v }));
    }
    svg.append(h("svg:line", { class: "diagonal", x1: sx(0), y1: sy(0), x2: sx(1), y2: sy(1), stroke: grey, "stroke-dasharray": "4 4" }),
      h("svg:text", { x: sx(0.5), y: H - 6, "text-anchor": "middle", text: "mean probability" }),
      h("svg:text", { x: 12, y: sy(0.5), "text-anchor": "middle", transform: `rotate(-90 12 ${sy(0.5)})`, text: "observed frequency" }));
    for (const s of series) {
      svg.append(h("svg:path", { d: s.table.map((b, i) => `${i ? "L" : "M"}${sx(b.mean_probability).toFixed(1)},${sy(b.frequency).toFixed(1)}`).join(" "), fill: "none", stroke: s.color, "stroke-width": 2, "data-series": s.name }));
      for (const b of s.table) {
        svg.append(h("svg:circle", { cx: sx(b.mean_probability), cy: sy(b.frequency), r: 2 + Math.min(6, Math.sqrt(b.rows)), fill: s.color, "fill-opacity": 0.75, "data-series": s.name },
          h("svg:title", { text: `${s.name}, ${b.low}–${b.high}: ${b.rows} rows, mean ${pct(b.mean_probability)}, observed ${pct(b.frequency)}` })));
      }
    }
    box.replaceChildren(svg, h("div", { class: "legend" }, [...series, { name: "perfectly calibrated", color: grey }].map((s) => h("span", {}, h("i", { "data-color": s.color }), s.name))));
    $$(".legend i", box).forEach((i) => (i.style.background = i.dataset.color));
  }
  async function tryGuarantee() {
    const c = calibrated, choice = c.tool === "classify", button = $("#cal-try");
    const texts = c.held.map((r) => r.item ?? r.state), answers = c.held.map((r) => r.answer);
    const common = { question: c.question, calibration: c.name, model: c.model, timeout: c.timeout };
    const body = choice ? { texts, options: c.options, none: c.none, coverage: number("#cal-coverage"), ...common } : { items: texts, target_recall: number("#cal-recall"), confidence: number("#cal-confidence"), ...common };
    $("#cal-check").hidden = $("#cal-error").hidden = $("#cal-note").hidden = true;
    const bad = answers.findIndex((a) => (choice ? typeof a !== "string" : typeof a !== "boolean"));
    let data;
    button.disabled = true;
    document.body.dataset.busy = "true";
    try {
      if (bad >= 0) throw new Error(`Held-out row ${c.rows.length + bad + 1}: the answer should be ${choice ? "an option key" : "true or false"}`);
      data = await api(choice ? "v1/classify" : "v1/filter", JSON.parse(JSON.stringify(body)));
    } catch (error) {
      $("#cal-error").textContent = error.message;
      $("#cal-error").hidden = false;
      return;
    } finally {
      button.disabled = false;
      delete document.body.dataset.busy;
    }
    let facts, held, note = null;
    if (choice) {
      const target = data.coverage.coverage, n = data.decisions.length;
      const coverage = data.decisions.filter((d) => d.prediction_set.includes(answers[d.index])).length / n;
      const right = data.decisions.filter((d) => d.choice === answers[d.index]).length / n;
      held = coverage >= target;
      facts = [fact("coverage", "coverage", `${pct(coverage)} (promised ${pct(target)})`, coverage), fact("set-size", "mean set size", data.coverage.mean_set_size.toFixed(2), data.coverage.mean_set_size), fact("accuracy", "top choice right", pct(right), right)];
    } else {
      const p = data.promise, kept = data.decisions.filter((d) => d.kept);
      const positives = answers.filter((a) => a === true).length, hits = kept.filter((d) => answers[d.index] === true).length;
      const recall = positives ? hits / positives : null, precision = kept.length ? hits / kept.length : null;
      held = recall === null || recall >= p.target_recall;
      note = p.note;
      facts = [fact("cutoff", "cut-off", p.threshold === null ? "none: every row kept" : `model probability ≥ ${f3(p.threshold)}`, p.threshold),
        fact("kept", "kept", `${kept.length} of ${texts.length}`, kept.length),
        fact("recall", "recall", `${pct(recall)} (promised ${pct(p.target_recall)} at confidence ${pct(p.confidence)})`, recall),
        fact("precision", "precision", pct(precision), precision)];
    }
    facts.push(fact("held", "the promise", held ? "held on these rows" : "missed on these rows", held));
    $("#cal-check").replaceChildren(...facts);
    $("#cal-check").hidden = false;
    $("#cal-note").textContent = note || "";
    $("#cal-note").hidden = !note;
  }

  /** The chunks of a long list and its final round, read from the run's model calls. */
  async function showChunks(runId) {
    const box = $("#chunks");
    let run;
    try { run = await api("v1/runs/" + encodeURIComponent(runId)); } catch (_) { return; }
    const decisions = answeredDecisions(run);
    if (decisions.length < 2) return;
    const finalOptions = new Set(Object.values(optionsOf(decisions[decisions.length - 1])));
    box.replaceChildren(h("h3", { text: `${decisions.length - 1} chunks, then a final round` }));
    decisions.forEach((call, i) => {
      const options = optionsOf(call);
      const probabilities = (call.answers && call.answers.rank && call.answers.rank.probabilities) || {};
      const isFinal = i === decisions.length - 1;
      const keys = Object.keys(options).sort((a, b) => (probabilities[b] ?? 0) - (probabilities[a] ?? 0));
      const onward = isFinal ? 0 : keys.filter((k) => finalOptions.has(options[k])).length;
      const title = isFinal ? `Final round: ${keys.length} options` : `Chunk ${i + 1}: ${keys.length} items, ${onward} go on to the final`;
      const list = h("ol", { class: "bars" }, keys.slice(0, 10).map((k, n) => barRow(n + 1, options[k], probabilities[k] ?? null, { tags: !isFinal && finalOptions.has(options[k]) ? ["to the final"] : [] })));
      box.append(h("details", { class: "chunk", "data-chunk": isFinal ? "final" : String(i + 1), open: isFinal }, h("summary", { text: title + (keys.length > 10 ? " (best 10 shown)" : "") }), list));
    });
    box.hidden = false;
  }
  function answeredDecisions(run) {
    const byDecision = new Map();
    for (const child of run.children || []) {
      if (child.kind !== "model") continue;
      const seen = byDecision.get(child.decision);
      if (!seen || (child.status === "success" && seen.status !== "success")) byDecision.set(child.decision, child);
    }
    return [...byDecision.entries()].sort((a, b) => a[0] - b[0]).map(([, call]) => call);
  }
  const optionsOf = (call) => (call.request && call.request.questions && call.request.questions.rank && call.request.questions.rank.options) || {};

  // --- copy as code ------------------------------------------------------------------------
  let lang = "python";
  const sq = (s) => "'" + String(s).replace(/'/g, "'\\''") + "'";
  function py(value, indent = "") {
    if (value === null || value === undefined) return "None";
    if (value === true) return "True";
    if (value === false) return "False";
    if (typeof value === "number" || typeof value === "string") return JSON.stringify(value);
    const inner = indent + "    ";
    const flat = JSON.stringify(value);
    if (Array.isArray(value)) {
      if (flat.length < 60) return "[" + value.map((v) => py(v, inner)).join(", ") + "]";
      return "[\n" + value.map((v) => inner + py(v, inner) + ",\n").join("") + indent + "]";
    }
    const entries = Object.entries(value);
    if (flat.length < 60) return "{" + entries.map(([k, v]) => JSON.stringify(k) + ": " + py(v, inner)).join(", ") + "}";
    return "{\n" + entries.map(([k, v]) => inner + JSON.stringify(k) + ": " + py(v, inner) + ",\n").join("") + indent + "}";
  }
  const kwargs = (pairs) => pairs.filter(([, v]) => v !== undefined).map(([k, v]) => `    ${k}=${py(v, "    ")},\n`).join("");

  function code(request, language) {
    const b = request.body;
    const model = b.model || server.model;
    const origin = location.origin + location.pathname.replace(/[^/]*$/, "");
    if (language === "curl") {
      const auth = sessionStorage.getItem(KEY) ? ` \\\n  -H "authorization: Bearer $DECIRANK_SERVER_API_KEY"` : "";
      return `curl -sS ${origin}${request.url} \\\n  -H 'content-type: application/json'${auth} \\\n  --data-binary @- <<'EOF'\n${JSON.stringify(b, null, 2)}\nEOF\n`;
    }
    if (language === "python") {
      if (request.mode === "calibrate") return `import decirank\n\nresult = decirank.calibrate(\n${kwargs([["rows", b.rows], ["question", b.question], ["name", b.name], ["tool", b.tool], ["options", b.options], ["none", b.none], ["model", model], ["timeout", b.timeout]])})\nfound = result.to_dict()\nprint(found["method"], found["before"]["ece"], found["after"]["ece"])\n`;
      if (request.mode === "rank") return `import decirank\n\nresult = decirank.rank(\n${kwargs([["items", b.items], ["instructions", b.instructions], ["state", b.state], ["describe", b.describe], ["none", b.none], ["top_k", b.top_k], ["model", model], ["timeout", b.timeout]])})\nfor entry in result.ranked:\n    print(entry.probability, entry.item)\n`;
      if (request.mode === "rerank") return `import decirank\n\nresult = decirank.rerank(\n${kwargs([["query", b.query], ["documents", b.documents], ["top_k", b.top_n], ["min_relevance", b.min_relevance], ["model", model], ["timeout", b.timeout]])})\nprint(result.to_dict())\n`;
      if (request.mode === "filter") return `import decirank\n\nresult = decirank.filter(\n${kwargs([["items", b.items], ["question", b.question], ["state", b.state], ["min_confidence", b.min_confidence], ["describe", b.describe], ["examples", b.examples], ["model", model], ["timeout", b.timeout]])})\nprint(result.items)\n`;
      if (request.mode === "classify") return `import decirank\n\nresult = decirank.classify(\n${kwargs([["texts", b.texts], ["question", b.question], ["options", b.options], ["none", b.none], ["examples", b.examples], ["model", model], ["timeout", b.timeout]])})\nfor decision in result.decisions:\n    print(decision.choice, decision.probability)\n`;
      if (request.mode === "score") {
        const shown = b.levels ? "for decision in result.levels:\n    print(decision.index, decision.level, round(decision.expected_level, 2))\n" : "print(result.probabilities)\n";
        return `import decirank\n\nresult = decirank.score(\n${kwargs([["texts", b.texts], ["question", b.question], ["levels", b.levels], ["true", b.true], ["false", b.false], ["examples", b.examples], ["model", model], ["timeout", b.timeout]])})\n${shown}`;
      }
      if (request.mode === "score_list") return `import decirank\n\nresult = decirank.score_list(\n${kwargs([["refs", b.refs], ["evaluator", b.evaluator], ["top_k", b.top_k], ["model", model], ["timeout", b.timeout]])})\nprint(result.to_dict())\n`;
      const q = b.questions.q;
      let question;
      if (q.type === "choice") question = `decirank.ChoiceQuestion(${py(q.instructions)}, ${py(q.criteria, "    ")})`;
      else if (q.type === "score") question = `decirank.ScoreQuestion(${py(q.instructions)}, levels=(${q.criteria.map((l) => py(l)).join(", ")}))`;
      else question = `decirank.LikelihoodQuestion(${py(q.instructions)}${q.criteria && q.criteria.true ? ", true=" + py(q.criteria.true) : ""}${q.criteria && q.criteria.false ? ", false=" + py(q.criteria.false) : ""})`;
      return `import asyncio\n\nimport decirank\n\nrequest = decirank.DecisionRequest(\n    state=${py(b.state, "    ")},\n    questions={"q": ${question}},\n)\nresponse = asyncio.run(decirank.Decider.resolve(${py(model)}).decide(request))\nprint(response.answers["q"])\n`;
    }
    // CLI: the same call, run by the decirank command with the same model
    const flags = (pairs) => pairs.filter(([, v]) => v !== undefined && v !== null).map(([f, v]) => ` \\\n  ${f} ${sq(v)}`).join("");
    const stdin = (list) => ` <<'EOF'\n${JSON.stringify(list, null, 1)}\nEOF\n`;
    const state = (s) => (s === null ? "null" : typeof s === "string" ? s : JSON.stringify(s));
    // --levels reads a,b,c and trims each; levels that hold a comma or edge spaces, or whose a,b,c would read as JSON, go as a JSON list.
    const cliLabels = (labels) => (labels.some((l) => l.includes(",") || l !== l.trim()) || /^\s*["[{]/.test(labels[0]) ? JSON.stringify(labels) : labels.join(","));
    // --examples takes a file or a stored set's name; examples written out in the form stay in the Python and curl tabs.
    const examples = typeof b.examples === "string" ? b.examples : undefined;
    if (request.mode === "rank") return `decirank rank - --json${flags([["-m", model], ["-i", b.instructions], ["-s", state(b.state)], ["-d", b.describe], ["--none", b.none], ["-k", b.top_k], ["--timeout", b.timeout]])}${stdin(b.items)}`;
    if (request.mode === "rerank") return `decirank rerank - --json${flags([["-m", model], ["-q", b.query], ["-k", b.top_n], ["--min-relevance", b.min_relevance], ["--timeout", b.timeout]])}${stdin(b.documents)}`;
    if (request.mode === "filter") return `decirank filter - --json${flags([["-m", model], ["-q", b.question], ["-s", state(b.state)], ["--min-confidence", b.min_confidence], ["-d", b.describe], ["--examples", examples], ["--timeout", b.timeout]])}${stdin(b.items)}`;
    if (request.mode === "classify") return `decirank classify - --json${flags([["-m", model], ["-q", b.question], ["--options", JSON.stringify(b.options)], ["--none", b.none], ["--examples", examples], ["--timeout", b.timeout]])}${stdin(b.texts)}`;
    if (request.mode === "score") return `decirank score - --json${flags([["-m", model], ["-q", b.question], ["--levels", b.levels && cliLabels(b.levels)], ["--true", b.true], ["--false", b.false], ["--examples", examples], ["--timeout", b.timeout]])}${stdin(b.texts)}`;
    if (request.mode === "calibrate") return `decirank calibrate ${sq(b.name || "NAME")} - --json${flags([["-m", model], ["-q", b.question], ["-t", b.tool], ["--options", b.options && JSON.stringify(b.options)], ["--none", b.none], ["--timeout", b.timeout]])}${stdin(b.rows)}`;
    if (request.mode === "score_list") return `decirank score-list --refs - --json${flags([["-m", model], ["-e", b.evaluator], ["-k", b.top_k], ["--timeout", b.timeout]])}${stdin(b.refs)}`;
    return `# decirank has no command for one raw question; ask this server's /v1/systemone (the curl tab),\n# or point any System One client at it: --model systemone:${model} --base-url ${origin.replace(/\/$/, "")}\n`;
  }
  function refreshCode() {
    if ($("#code-panel").hidden) return;
    $$("#code-tabs [data-lang]").forEach((b) => b.classList.toggle("on", b.dataset.lang === lang));
    try { $("#code").textContent = code(buildRequest(), lang); } catch (error) { $("#code").textContent = "# " + error.message; }
  }
  async function copyCode() {
    const content = $("#code").textContent;
    try { await navigator.clipboard.writeText(content); } catch (_) {
      const range = document.createRange();
      range.selectNodeContents($("#code"));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      document.execCommand("copy");
    }
    $("#copy-now").textContent = "copied";
    setTimeout(() => ($("#copy-now").textContent = "copy"), 1200);
  }

  // --- runs --------------------------------------------------------------------------------
  function fillSelect(select, values) {
    const chosen = select.value;
    select.replaceChildren(h("option", { value: "", text: "all" }), ...values.map((v) => h("option", { value: v, text: v })));
    select.value = values.includes(chosen) ? chosen : "";
  }
  async function loadRuns() {
    const query = new URLSearchParams({ limit: $("#f-limit").value });
    for (const [name, sel] of [["tool", "#f-tool"], ["model", "#f-model"], ["status", "#f-status"]]) if ($(sel).value) query.set(name, $(sel).value);
    $("#runs-status").textContent = "loading…";
    let data;
    try { data = await api("v1/runlog/runs?" + query); } catch (error) { $("#runs-status").textContent = error.message; return; }
    if (!data.enabled) {
      $("#runs-status").textContent = "The run log is off on this server.";
      $("#runs-table tbody").replaceChildren();
      return;
    }
    fillSelect($("#f-tool"), data.tools);
    fillSelect($("#f-model"), data.models);
    fillSelect($("#f-status"), data.statuses);
    $("#runs-status").textContent = `${data.runs.length} run${data.runs.length === 1 ? "" : "s"}`;
    $("#runs-table tbody").replaceChildren(...data.runs.map((r) => {
      const open = () => (location.hash = "#/runs/" + encodeURIComponent(r.id));
      return h("tr", { "data-run": r.id, onclick: open },
        h("td", { text: when(r.started_at), title: r.started_at }),
        h("td", {}, h("a", { href: "#/runs/" + encodeURIComponent(r.id), text: r.tool })),
        h("td", { text: r.model || r.role || "—" }),
        h("td", { class: "num", text: int(r.items) }),
        h("td", { class: "num", text: `${int(r.input_tokens)} / ${int(r.output_tokens)}`, title: "input / output tokens" }),
        h("td", { class: "num", text: money(r.cost, r.currency) }),
        h("td", { class: "num", text: ms(r.duration_ms) }),
        h("td", {}, h("span", { class: "status " + r.status, text: r.status, title: r.error ? `${r.error_type}: ${r.error}` : null })));
    }));
    loadCharts();
  }

  const PALETTE = ["#2f6fde", "#d9534f", "#2a9d5c", "#b7791f", "#8a4fd1", "#1aa3a3", "#c2478a", "#5c6b7a"];
  async function loadCharts() {
    let data;
    try { data = await api("v1/runlog/series"); } catch (_) { return; }
    const width = data.bucket_seconds;
    $("#bucket-name").textContent = width >= 86400 ? (width === 86400 ? "day" : "week") : width >= 3600 ? (width === 3600 ? "hour" : width / 3600 + " hours") : width / 60 + " min";
    const models = Object.keys(data.models);
    const color = (m) => PALETTE[models.indexOf(m) % PALETTE.length];
    const series = (key, dash) => models.map((m) => ({ name: m, color: color(m), dash, points: data.models[m].filter((p) => p[key] !== null).map((p) => ({ x: Date.parse(p.t), y: p[key], calls: p.calls })) }));
    lineChart($("#chart-latency"), [...series("p50_ms", false), ...series("p95_ms", true)], ms, width * 1000, models, color);
    const costs = series("cost", false);
    lineChart($("#chart-cost"), costs, (v) => money(v), width * 1000, models, color);
    if (costs.some((l) => l.points.length) && costs.every((l) => l.points.every((p) => p.y === 0))) $("#chart-cost").append(h("p", { class: "muted", text: "Every call so far cost nothing." }));
  }
  function lineChart(box, lines, format, bucketMs, models, color) {
    const W = 520, H = 200, L = 58, R = 12, T = 10, B = 26;
    const points = lines.flatMap((l) => l.points);
    box.replaceChildren();
    if (!points.length) return box.append(h("p", { class: "muted", text: "No model calls yet." }));
    let x0 = Math.min(...points.map((p) => p.x)), x1 = Math.max(...points.map((p) => p.x));
    if (x1 === x0) { x0 -= bucketMs; x1 += bucketMs; }
    const top = Math.max(...points.map((p) => p.y)) * 1.1 || 1;
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - y / top) * (H - T - B);
    const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
    for (let i = 0; i <= 4; i++) {
      const y = (top * i) / 4;
      svg.append(h("svg:line", { x1: L, x2: W - R, y1: sy(y), y2: sy(y), stroke: "#e6e9ee" }));
      svg.append(h("svg:text", { x: L - 6, y: sy(y) + 3, "text-anchor": "end", text: format(y) }));
    }
    const ticks = new Set();
    for (let i = 0; i <= 3; i++) {
      const x = x0 + ((x1 - x0) * i) / 3;
      const d = new Date(x);
      const span = x1 - x0;
      const shown = span > 2 * 86400000 ? d.toLocaleDateString(undefined, { month: "short", day: "numeric" }) : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
      if (ticks.has(shown)) continue;
      ticks.add(shown);
      svg.append(h("svg:text", { x: sx(x), y: H - 8, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle", text: shown }));
    }
    for (const line of lines) {
      if (!line.points.length) continue;
      const d = line.points.map((p, i) => `${i ? "L" : "M"}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(" ");
      svg.append(h("svg:path", { d, fill: "none", stroke: line.color, "stroke-width": 2, "stroke-dasharray": line.dash ? "5 4" : null, "data-model": line.name }));
      for (const p of line.points) {
        svg.append(h("svg:circle", { cx: sx(p.x), cy: sy(p.y), r: 3, fill: line.color }, h("svg:title", { text: `${line.name}: ${format(p.y)} (${p.calls} calls, ${new Date(p.x).toLocaleString()})` })));
      }
    }
    box.append(svg, h("div", { class: "legend" }, models.map((m) => h("span", {}, h("i", { "data-color": color(m) }), m))));
    $$(".legend i", box).forEach((i) => (i.style.background = i.dataset.color));
  }

  // --- one run -----------------------------------------------------------------------------
  async function loadRun(id) {
    const box = $("#run-detail");
    box.replaceChildren(h("p", { class: "muted", text: "loading…" }));
    let run;
    try { run = await api("v1/runs/" + encodeURIComponent(id)); } catch (error) { return box.replaceChildren(h("div", { class: "error", text: error.message })); }
    const facts = [
      ["tool", run.tool], ["status", run.status], ["model", run.model || run.role], ["started", when(run.started_at)],
      ["duration", ms(run.duration_ms)], ["model calls", int(run.calls)], ["tokens", `${int(run.input_tokens)} in · ${int(run.output_tokens)} out · ${int(run.cached_tokens)} cached`], ["cost", money(run.cost, run.currency)],
    ];
    const card = h("div", { class: "card", id: "run-card", "data-run": run.id },
      h("h2", { text: `${run.tool} run ` }, h("span", { class: "status " + run.status, text: run.status })),
      h("p", { class: "muted", text: run.id + (run.parent_id ? " · part of " + run.parent_id : "") }),
      // A run kept under DECIRANK_RUNLOG_TEXTS=hashes holds each text's SHA-256 and length: say so, or its inputs read as garbled.
      run.texts === "hashes" ? h("p", { class: "muted", id: "run-texts", text: "texts kept as hashes (SHA-256 and length): what was asked and how, not what the texts said" }) : null,
      h("div", { class: "facts" }, facts.map(([k, v]) => h("div", {}, h("span", { text: k }), v ?? "—"))),
      run.error ? h("div", { class: "error", text: `${run.error_type}: ${run.error}` }) : null,
      h("h3", { text: "Model calls" }),
      callTree(run),
      h("details", {}, h("summary", { text: "inputs" }), h("pre", { text: JSON.stringify(run.inputs, null, 2) })),
      h("details", {}, h("summary", { text: "outputs" }), h("pre", { text: JSON.stringify(run.outputs, null, 2) })));
    if (run.parent_id) card.prepend(h("p", {}, h("a", { href: "#/runs/" + encodeURIComponent(run.parent_id), text: "‹ the run this is part of" })));
    box.replaceChildren(card);
  }
  function callTree(run) {
    const children = run.children || [];
    const steps = children.filter((c) => c.kind !== "model");
    const decisions = new Map();
    for (const call of children.filter((c) => c.kind === "model")) {
      if (!decisions.has(call.decision)) decisions.set(call.decision, []);
      decisions.get(call.decision).push(call);
    }
    const numbers = [...decisions.keys()].sort((a, b) => a - b);
    const name = (n, i) => (run.tool === "rank" && numbers.length > 1 ? (i === numbers.length - 1 ? "final round" : `chunk ${i + 1}`) : `decision ${n}`);
    const root = h("li", {}, h("span", { class: "node" }, h("span", { class: "what", text: run.tool }), h("span", { class: "muted", text: `${numbers.length} decision${numbers.length === 1 ? "" : "s"}, ${children.length - steps.length} model call${children.length - steps.length === 1 ? "" : "s"}` })));
    const branches = h("ul");
    numbers.forEach((n, i) => {
      const attempts = decisions.get(n).sort((a, b) => a.attempt - b.attempt);
      const failover = attempts.length > 1 ? `, ${attempts.length} attempts (failover)` : "";
      branches.append(h("li", { class: "decision", "data-decision": n },
        h("span", { class: "node" }, h("span", { class: "what", text: name(n, i) }), h("span", { class: "muted", text: optionCount(attempts[0]) + failover })),
        h("ul", {}, attempts.map(callNode))));
    });
    for (const step of steps) {
      branches.append(h("li", { class: "step" }, h("span", { class: "node" }, h("a", { href: "#/runs/" + encodeURIComponent(step.id), class: "what", text: `${step.tool} step` }), h("span", { class: "status " + step.status, text: step.status }), h("span", { class: "muted", text: `${ms(step.duration_ms)} · ${money(step.cost, step.currency)}` }))));
    }
    if (!children.length) branches.append(h("li", { class: "muted", text: "no model calls (nothing to decide, or answered without a model)" }));
    root.append(branches);
    return h("ul", { class: "tree", id: "call-tree" }, root);
  }
  function optionCount(call) {
    const questions = (call.request && call.request.questions) || {};
    const n = Object.keys(questions).length;
    const first = Object.values(questions)[0];
    const options = first && first.options ? `, ${Object.keys(first.options).length} options` : "";
    return `${n} question${n === 1 ? "" : "s"}${options}`;
  }
  function callNode(call) {
    return h("li", { class: "call", "data-call": call.id, "data-model": call.model, "data-status": call.status },
      h("span", { class: "node" },
        h("span", { text: `attempt ${call.attempt}` }),
        h("span", { class: "what", text: call.model }),
        h("span", { class: "status " + call.status, text: call.status }),
        call.cached ? h("span", { class: "tag", text: "cache hit" }) : null,
        h("span", { class: "muted", text: `${ms(call.duration_ms)} · ${int(call.input_tokens)} in / ${int(call.output_tokens)} out tokens · ${money(call.cost, call.currency)}` }),
        call.error ? h("span", { class: "err", text: `${call.error_type}: ${call.error}` }) : null,
        h("details", {}, h("summary", { text: "request and answers" }), h("pre", { text: JSON.stringify({ request: call.request, answers: call.answers }, null, 2) }))));
  }

  // --- wiring ------------------------------------------------------------------------------
  function route() {
    const hash = location.hash || "#/playground";
    const one = hash.match(/^#\/runs\/(.+)$/);
    const view = one ? "run" : hash.startsWith("#/runs") ? "runs" : "playground";
    $("#view-playground").hidden = view !== "playground";
    $("#view-runs").hidden = view !== "runs";
    $("#view-run").hidden = view !== "run";
    $("#nav-playground").classList.toggle("on", view === "playground");
    $("#nav-runs").classList.toggle("on", view !== "playground");
    if (view === "runs") loadRuns();
    if (view === "run") loadRun(decodeURIComponent(one[1]));
  }

  function fillModels(listing) {
    const select = $("#model");
    const groups = [h("option", { value: "", text: `server's model (${listing.default})` })];
    const roles = Object.entries(listing.roles);
    if (roles.length) groups.push(h("optgroup", { label: "roles" }, roles.map(([role, chain]) => h("option", { value: role, text: `${role} → ${chain.join(", ")}` }))));
    const byProvider = new Map();
    for (const model of listing.models) {
      if (!byProvider.has(model.provider)) byProvider.set(model.provider, []);
      byProvider.get(model.provider).push(model);
    }
    for (const [provider, models] of byProvider) {
      groups.push(h("optgroup", { label: provider }, models.map((m) => h("option", { value: m.name, disabled: !m.usable, title: m.note || m.description, text: m.name + (m.usable ? "" : " (another server)") }))));
    }
    select.replaceChildren(...groups);
  }

  async function init() {
    $$("#tool-tabs button").forEach((b) => b.addEventListener("click", () => setTool(b.dataset.tool)));
    $("#decision-type").addEventListener("change", () => setTool("decision"));
    $("#cal-tool").addEventListener("change", () => setTool("calibrate"));
    $("#cal-try").addEventListener("click", tryGuarantee);
    $("#cal-file").addEventListener("change", async () => {
      const file = $("#cal-file").files[0];
      if (!file) return;
      $("#items").value = await file.text();
      if (!$("#cal-name").value) $("#cal-name").value = file.name.replace(/\.\w+$/, "").replace(/[^\w.-]+/g, "-").replace(/^[^a-zA-Z0-9]+/, "");
      countItems();
      refreshCode();
    });
    $("#play-form").addEventListener("submit", run);
    $("#play-form").addEventListener("input", () => { showGraded(); countItems(); refreshCode(); });
    $("#play-form").addEventListener("change", refreshCode);
    $("#example").addEventListener("click", fillExample);
    $("#copy-code").addEventListener("click", () => { $("#code-panel").hidden = false; refreshCode(); });
    $("#code-close").addEventListener("click", () => ($("#code-panel").hidden = true));
    $("#copy-now").addEventListener("click", copyCode);
    $$("#code-tabs [data-lang]").forEach((b) => b.addEventListener("click", () => { lang = b.dataset.lang; refreshCode(); }));
    for (const sel of ["#f-tool", "#f-model", "#f-status", "#f-limit"]) $(sel).addEventListener("change", loadRuns);
    $("#runs-refresh").addEventListener("click", loadRuns);
    $("#forget-key").hidden = !sessionStorage.getItem(KEY);
    $("#forget-key").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });
    window.addEventListener("hashchange", route);
    setTool("rank");
    fillExample();
    try {
      server = await api("v1/server");
      fillModels(await api("v1/models"));
    } catch (error) {
      showError("Could not read the server's settings: " + error.message);
    }
    $("#server-info").textContent = `v${server.version} · model ${server.model}${server.allow_exec ? " · exec: allowed" : ""}`;
    const kinds = server.evaluators.map((k) => h("option", { value: k, text: k + ":" }));
    $("#evaluator-kind").replaceChildren(...kinds);
    $("#forget-key").hidden = !sessionStorage.getItem(KEY);
    document.body.dataset.ready = "true";
    route();
  }
  init();
})();
