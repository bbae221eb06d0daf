// threadline web viewer: vanilla JS over the JSON API in threadline/web/app.py.
// The tree and the context are virtual lists: only the rows in sight are in the DOM, and rows
// are fetched a page at a time, so a 10,000-message session stays responsive.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const PAGE = 100;
let INFO = null;

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// replaceChildren without the null/false placeholders of conditional children.
function put(el, ...kids) {
  el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

function status(msg, isError = false) {
  const el = $("#status");
  el.textContent = msg || "";
  el.classList.toggle("error", !!isError);
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-Threadline": "1" },
  };
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

const enc = encodeURIComponent;
const fmtTime = (t) => (t || "").replace("T", " ").replace(/\.\d+/, "").replace("Z", "");

// ---------------------------------------------------------------------------------------------
// Modal: every write goes form -> preview -> confirm.

const modal = {
  open(title, body, okText, onOk, { danger = false } = {}) {
    $("#modal-title").textContent = title;
    const holder = $("#modal-body");
    holder.replaceChildren(body);
    const ok = $("#modal-ok");
    ok.textContent = okText;
    ok.className = danger ? "danger" : "primary";
    ok.disabled = false;
    ok.onclick = async () => {
      ok.disabled = true;
      $(".error-box", holder)?.remove();
      try {
        await onOk();
      } catch (e) {
        holder.append(h("div", { class: "error-box", "data-testid": "modal-error" }, e.message));
        ok.disabled = false;
      }
    };
    $("#modal-cancel").onclick = () => modal.close();
    $("#modal").classList.remove("hidden");
    const first = $("input, textarea, select", holder);
    (first || ok).focus();
  },
  close() { $("#modal").classList.add("hidden"); },
};
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") modal.close();
});

function field(label, name, value = "", type = "text") {
  const input = type === "textarea"
    ? h("textarea", { name }, value)
    : h("input", { name, type, value });
  return h("div", { class: "form-row" }, h("label", {}, label), input);
}

function formValues(root) {
  const out = {};
  for (const el of root.querySelectorAll("input, textarea, select")) {
    if (el.name) out[el.name] = el.type === "checkbox" ? el.checked : el.value;
  }
  return out;
}

function describeChange(p) {
  const box = h("div", { "data-testid": "preview" });
  const leafMove = p.leaf_before === p.leaf_after
    ? "The leaf stays where it is."
    : `The leaf moves from ${p.leaf_before ?? "(start)"} to ${p.leaf_after ?? "(start)"}.`;
  box.append(h("p", {}, leafMove));
  box.append(h("p", {}, `Context: ${p.context_before} → ${p.context_after} messages.`));
  const d = p.diff;
  if (d.removed || d.added) {
    box.append(h("p", {}, `From position ${d.at}: ${d.removed} message(s) leave, ` +
                          `${d.added} message(s) join.`));
    for (const r of d.removed_rows) {
      box.append(h("div", { class: "change" }, h("span", { class: "minus" }, "− "),
        h("span", { class: `role role-${r.role}` }, r.role), r.preview));
    }
    if (d.removed > d.removed_rows.length) box.append(h("div", { class: "muted" }, `… and ${d.removed - d.removed_rows.length} more`));
    for (const r of d.added_rows) {
      box.append(h("div", { class: "change" }, h("span", { class: "plus" }, "+ "),
        h("span", { class: `role role-${r.role}` }, r.role), r.preview));
    }
  } else {
    box.append(h("p", { class: "muted" }, "The messages of the context do not change."));
  }
  if (p.result !== null && p.result !== undefined) {
    box.append(h("details", {}, h("summary", {}, "Library result"),
      h("pre", {}, JSON.stringify(p.result, null, 2))));
  }
  return box;
}

// Ask for the arguments (if any), preview on a scratch copy, then confirm and apply.
function writeFlow(page, title, action, fields, fixedArgs = {}, { danger = false } = {}) {
  const form = h("div", {}, fields);
  const go = async () => {
    const args = { ...formValues(form), ...fixedArgs };
    const preview = await api(`/api/sessions/${enc(page.id)}/preview`, { action, args });
    const body = h("div", {}, h("p", {}, h("b", {}, "This will change:")), describeChange(preview));
    modal.open(`${title}: confirm`, body, "Confirm", async () => {
      await page.write(`/api/sessions/${enc(page.id)}/apply`, { action, args }, async () => {
        modal.close();
        // the selected positions named messages of the old view: they do not survive the write
        page.sel = null;
        page.anchor = null;
        status("Saved; reloading…");
        await page.refresh();
        status(`${title}: done`);
      });
    }, { danger });
  };
  if (!fields.length) return go().catch((e) => status(e.message, true));
  modal.open(title, form, "Preview", go);
}

// ---------------------------------------------------------------------------------------------
// Tree lanes: each row draws its slice of the graph (like git log --graph) as a small SVG.
// The first child continues its parent's lane; later children start in lanes opened at the
// branch point ("forks") and run down ("through") to where their subtree begins.

const LANE_W = 12;
const LANE_COLOURS = ["#4a7bd0", "#d0794a", "#4aa36b", "#a04ad0", "#c9a227", "#d04a7b", "#3aa6b9"];
const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function laneGraph(r, lanes) {
  const width = Math.max(lanes, r.lane + 1, ...r.forks.map((f) => f + 1)) * LANE_W;
  const g = svg("svg", { class: "lanes", width, height: 24, "data-testid": "lanes" });
  const x = (lane) => lane * LANE_W + LANE_W / 2;
  const colour = (lane) => LANE_COLOURS[lane % LANE_COLOURS.length];
  for (const l of r.through) g.append(svg("line", { x1: x(l), y1: 0, x2: x(l), y2: 24, stroke: colour(l), "stroke-width": 2 }));
  if (r.depth > 0) g.append(svg("line", { x1: x(r.lane), y1: 0, x2: x(r.lane), y2: 12, stroke: colour(r.lane), "stroke-width": 2 }));
  if (r.children > 0 && !r.folded) g.append(svg("line", { x1: x(r.lane), y1: 12, x2: x(r.lane), y2: 24, stroke: colour(r.lane), "stroke-width": 2 }));
  for (const f of r.forks) {
    g.append(svg("path", { d: `M ${x(r.lane)} 12 C ${x(r.lane)} 20, ${x(f)} 14, ${x(f)} 24`,
                           fill: "none", stroke: colour(f), "stroke-width": 2, class: "fork" }));
  }
  const dot = r.run
    ? svg("rect", { x: x(r.lane) - 3, y: 9, width: 6, height: 6, fill: "#fff", stroke: colour(r.lane), "stroke-width": 1.5 })
    : svg("circle", { cx: x(r.lane), cy: 12, r: r.leaf ? 5 : r.on_path ? 4 : 3,
                      fill: r.on_path ? colour(r.lane) : "#fff", stroke: colour(r.lane), "stroke-width": 2 });
  g.append(dot);
  return g;
}

// Terminal escapes (colours, cursor moves) in tool output would show as boxes: removed.
const ANSI_RE = /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -\/]*[0-~]/g;
function stripAnsi(s) { return typeof s === "string" ? s.replace(ANSI_RE, "") : s; }

// ---------------------------------------------------------------------------------------------
// Virtual list: fixed row height, pages fetched on demand, rows outside the viewport removed.

class VirtualList {
  constructor(container, rowHeight, fetchPage, renderRow) {
    this.el = container;
    this.rowHeight = rowHeight;
    this.fetchPage = fetchPage;
    this.renderRow = renderRow;
    this.spacer = h("div", { class: "spacer" });
    this.el.replaceChildren(this.spacer);
    this.pages = new Map();
    this.loading = new Set();
    this.total = 0;
    this.generation = 0;
    this.el.addEventListener("scroll", () => this.render());
  }

  async reset() {
    this.generation += 1;
    this.pages.clear();
    this.loading.clear();
    await this.load(Math.floor(this.firstVisible() / PAGE));
  }

  firstVisible() { return Math.floor(this.el.scrollTop / this.rowHeight); }

  async load(pageNo) {
    if (this.pages.has(pageNo) || this.loading.has(pageNo)) return;
    const gen = this.generation;
    this.loading.add(pageNo);
    try {
      const data = await this.fetchPage(pageNo * PAGE, PAGE);
      if (gen !== this.generation) return;
      this.total = data.total;
      this.pages.set(pageNo, data.rows);
      this.onData?.(data);
    } catch (e) {
      status(e.message, true);
    } finally {
      this.loading.delete(pageNo);
    }
    this.render();
  }

  row(i) {
    const page = this.pages.get(Math.floor(i / PAGE));
    return page ? page[i % PAGE] : undefined;
  }

  scrollTo(i) {
    this.el.scrollTop = Math.max(0, i * this.rowHeight - this.el.clientHeight / 3);
    this.render();
  }

  render() {
    this.spacer.style.height = `${this.total * this.rowHeight}px`;
    const first = Math.max(0, this.firstVisible() - 5);
    const count = Math.ceil(this.el.clientHeight / this.rowHeight) + 10;
    const last = Math.min(this.total, first + count);
    const nodes = [];
    for (let i = first; i < last; i++) {
      const r = this.row(i);
      if (r === undefined) {
        this.load(Math.floor(i / PAGE));
        nodes.push(h("div", { class: "row pending", style: `top:${i * this.rowHeight}px;height:${this.rowHeight}px` }, "…"));
        continue;
      }
      const el = this.renderRow(r, i);
      el.style.top = `${i * this.rowHeight}px`;
      nodes.push(el);
    }
    this.spacer.replaceChildren(...nodes);
  }
}

// ---------------------------------------------------------------------------------------------
// Session list

async function showList() {
  const main = $("#main");
  const page = h("div", { class: "list-page", "data-testid": "list-page" });
  main.replaceChildren(page);
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const q = params.get("q") || "";
  const tag = params.get("tag") || "";
  const tools = h("div", { class: "list-tools" });
  if (INFO.search) {
    const box = h("input", { type: "search", placeholder: "Search all sessions (keyword + semantic)",
                             value: q, "data-testid": "search" });
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter") location.hash = `#/?q=${enc(box.value)}${tag ? `&tag=${enc(tag)}` : ""}`;
    });
    tools.append(box, h("button", { onclick: () => { location.hash = `#/?q=${enc(box.value)}`; } }, "Search"));
    if (q) tools.append(h("a", { href: "#/" }, "clear search"));
  }
  page.append(tools);
  let data;
  try {
    data = await api(`/api/sessions?q=${enc(q)}&tag=${enc(tag)}`);
  } catch (e) {
    page.append(h("p", { class: "error-box" }, e.message));
    return;
  }
  if (!page.isConnected) return;  // a newer page replaced this one while it loaded
  const allTags = Object.entries(data.tags);
  if (allTags.length) {
    const chips = h("div", { class: "list-tools", "data-testid": "tag-filters" }, h("span", { class: "muted" }, "Tags:"));
    for (const [t, count] of allTags) {
      chips.append(h("a", { class: `chip tag${t === tag ? " active" : ""}`, "data-tag": t,
                            href: t === tag ? "#/" : `#/?tag=${enc(t)}${q ? `&q=${enc(q)}` : ""}` }, `${t} (${count})`));
    }
    page.append(chips);
  }
  const ix = data.index;
  if (ix && ix.semantic && ix.embedded < ix.total) {
    page.append(h("p", { class: "muted", "data-testid": "index-progress" },
      `indexing ${ix.embedded.toLocaleString("en")} / ${ix.total.toLocaleString("en")} messages for semantic search; keyword matches are complete`));
  }
  if (!data.sessions.length && !q && !tag) {
    page.append(emptyStore());
  } else {
    const table = h("table", { class: "sessions", "data-testid": "sessions" },
      h("tr", {}, h("th", {}, "Session"), h("th", {}, "Modified ↓"), h("th", {}, "Messages"),
        h("th", {}, q ? "Match" : "First message"), h("th", {}, "Tags")));
    for (const s of data.sessions) {
      const match = s.hit ? (s.hit.snippet || s.hit.text || "") : (s.first_message || "");
      table.append(h("tr", { "data-session": s.id },
        h("td", {}, h("a", { href: `#/s/${enc(s.id)}` }, s.name || s.id),
          s.name ? h("div", { class: "muted" }, s.id) : null,
          s.parent_session ? h("div", { class: "muted" }, `from ${s.parent_session}`) : null,
          s.damaged ? h("div", { class: "damaged", "data-testid": "damaged", title: s.damaged }, `damaged: ${s.damaged.slice(0, 160)}`) : null),
        h("td", {}, fmtTime(s.modified)),
        h("td", {}, s.message_count),
        h("td", {}, match.slice(0, 160)),
        h("td", {}, s.tags.map((t) => h("span", { class: "chip tag" }, t)))));
    }
    if (!data.sessions.length) table.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No session matches.")));
    page.append(table);
  }
  for (const sk of data.skipped || []) {
    page.append(h("div", { class: "muted", "data-testid": "skipped-session" },
      `Skipped unreadable session ${sk.id}: ${sk.reason}`));
  }
  if (INFO.manage_tags) page.append(manageTagsPanel());
  status(`${data.sessions.length} session(s)`);
}

function emptyStore() {
  const box = h("div", { class: "empty", "data-testid": "empty-store" },
    h("h2", {}, "This store has no sessions yet"),
    h("p", {}, "Create one with ", h("code", {}, "threadline new"), " or import transcripts with ",
      h("code", {}, "threadline import"), "."));
  if (INFO.examples.length) {
    box.append(h("p", {}, "threadline ships a few real transcripts as examples:"),
      h("ul", {}, INFO.examples.map((t) => h("li", {}, t))),
      h("button", { class: "primary", "data-testid": "import-examples", onclick: () => {
        modal.open("Import the examples", h("div", {},
          h("p", {}, `This creates ${INFO.examples.length} session(s) in ${INFO.store}, marked as examples:`),
          h("ul", {}, INFO.examples.map((t) => h("li", {}, t)))), "Import", async () => {
          const r = await api("/api/examples/import", {});
          modal.close();
          status(`Imported ${r.created.length} example session(s)`);
          showList();
        });
      } }, "Import the examples"));
  }
  return box;
}

function manageTagsPanel() {
  const form = h("div", {},
    h("div", { class: "form-row" }, h("label", {}, "Operation"),
      h("select", { name: "op", "data-testid": "mt-op" },
        h("option", { value: "find_and_tag" }, "find_and_tag: tag every session a search finds"),
        h("option", { value: "delete_tag" }, "delete_tag: remove a tag from every session"),
        h("option", { value: "merge_tags" }, "merge_tags: rename a tag on every session"))),
    field("Search words", "query"), field("Tag (merge: into)", "tag"), field("Merge from tag", "tag_from"));
  const panel = h("div", { class: "panel", "data-testid": "manage-tags" }, h("h3", {}, "Manage session tags"), form,
    h("button", { "data-testid": "mt-preview", onclick: async () => {
      const args = formValues(form);
      try {
        const p = await api("/api/catalog/manage_tags", { ...args, confirm: false });
        const body = h("div", {}, h("p", { "data-testid": "mt-preview-body" }, p.message),
          h("ul", {}, p.sample.map((n) => h("li", {}, n))));
        modal.open("Manage tags: confirm", body, "Confirm", async () => {
          const r = await api("/api/catalog/manage_tags", { ...args, confirm: true, token: p.token });
          modal.close();
          await showList();
          status(r.message);
        });
      } catch (e) { status(e.message, true); }
    } }, "Preview"));
  return panel;
}

// ---------------------------------------------------------------------------------------------
// Session page

class SessionPage {
  constructor(id) {
    this.id = id;
    this.fold = new Set();
    this.unfold = new Set();
    this.outline = false;
    this.bookkeeping = false;  // runs of custom/label entries are one row each until asked
    this.lanes = 1;
    this.sel = null; // [start, end] positions in the context
    this.anchor = null;
    this.current = null; // entry id shown in details
    this.activeTags = "";
    this.tab = "details";
    this.tagsByPos = new Map();
    this.payloadRequest = 0;
    // Change detection (see checkForChanges): the session version this page last saw or wrote,
    // how many of its own writes and reloads are under way, and a counter that moves whenever
    // one starts, so a poll that overlapped one knows its answer is stale.
    this.version = null;
    this.writing = 0;
    this.refreshing = 0;
    this.epoch = 0;
    this.refreshChain = Promise.resolve();
  }

  async mount() {
    const main = $("#main");
    this.head = h("div", { class: "session-head", "data-testid": "session-head" });
    this.treeHead = h("div", { class: "col-head" });
    this.ctxHead = h("div", { class: "col-head" });
    const treeBox = h("div", { class: "vlist", "data-testid": "tree" });
    const ctxBox = h("div", { class: "vlist", "data-testid": "context" });
    this.tabs = h("div", { class: "tabs" });
    this.tabBody = h("div", { class: "tab-body", "data-testid": "side" });
    main.replaceChildren(this.head, h("div", { class: "columns" },
      h("section", { class: "col" }, this.treeHead, treeBox),
      h("section", { class: "col" }, this.ctxHead, ctxBox),
      h("section", { class: "col side" }, this.tabs, this.tabBody)));
    this.tree = new VirtualList(treeBox, 24, (o, l) => this.fetchTree(o, l), (r) => this.treeRow(r));
    this.ctx = new VirtualList(ctxBox, 56, (o, l) => this.fetchContext(o, l), (r) => this.ctxRow(r));
    this.ctx.onData = (d) => this.renderCtxHead(d);
    this.tree.onData = (d) => this.renderTreeHead(d);
    await this.refresh();
    if (this.unmounted) return;  // left while it loaded: no poll for a page nobody sees
    this.poll = setInterval(() => this.checkForChanges(), 3000);
    this.onFocus = () => this.checkForChanges();
    window.addEventListener("focus", this.onFocus);
  }

  unmount() {
    this.unmounted = true;
    clearInterval(this.poll);
    window.removeEventListener("focus", this.onFocus);
  }

  // One write of this page: POST, keep the version the server reports after it, then run
  // `after` (close the dialog, reload, report). The change poll stands aside meanwhile, so the
  // page's own write never reads as "the session changed on disk".
  async write(path, body, after) {
    this.writing += 1;
    this.epoch += 1;
    try {
      const r = await api(path, body);
      if (r.version !== undefined) this.version = r.version;
      await after(r);
      return r;
    } finally {
      this.writing -= 1;
    }
  }

  // Another process (an agent, the REPL, the CLI) changed the session: reload what the page
  // shows. Runs every 3 s and when the window regains focus.
  async checkForChanges() {
    if (document.hidden || this.polling || this.writing || this.refreshing ||
        !$("#modal").classList.contains("hidden")) return;
    this.polling = true;
    const epoch = this.epoch;
    // Whether no write or reload of the page started since this poll did: only then is what
    // the poll saw current, and its message must not replace the status of the user's action.
    const undisturbed = () => this.epoch === epoch && !this.writing;
    try {
      const info = await api(`/api/sessions/${enc(this.id)}`);
      if (!undisturbed() || info.version === this.version) return;
      await this.refresh();
      if (this.epoch === epoch + 1 && !this.writing) status("Reloaded: the session changed on disk");
    } catch (e) {
      if (undisturbed()) status(e.message, true);
    } finally {
      this.polling = false;
    }
  }

  // Reloads run one after another, so the last one started is the one whose info the page keeps.
  refresh() {
    this.refreshing += 1;
    this.epoch += 1;
    const run = () => this.reload().finally(() => { this.refreshing -= 1; });
    this.refreshChain = this.refreshChain.then(run, run);
    return this.refreshChain;
  }

  async reload() {
    // Tags first: listing them may remove invalid ones (a write), and the info read after it
    // then has the version the change poll compares against.
    await this.loadTags();
    this.info = await api(`/api/sessions/${enc(this.id)}`);
    this.version = this.info.version;
    this.renderHead();
    await Promise.all([this.tree.reset(), this.ctx.reset()]);
    await this.renderTab();
  }

  fetchTree(offset, limit) {
    const p = new URLSearchParams({ offset, limit, fold: [...this.fold].join(","),
      unfold: [...this.unfold].join(","), outline: this.outline ? "1" : "0",
      bookkeeping: this.bookkeeping ? "1" : "0" });
    return api(`/api/sessions/${enc(this.id)}/tree?${p}`);
  }

  fetchContext(offset, limit) {
    const p = new URLSearchParams({ offset, limit, active_tags: this.activeTags });
    return api(`/api/sessions/${enc(this.id)}/context?${p}`);
  }

  async loadTags() {
    this.tagList = [];
    this.tagsByPos = new Map();
    if (!INFO.tag_listing) return;
    const r = await api(`/api/sessions/${enc(this.id)}/tags`);
    this.tagList = r.tags || [];
    for (const t of this.tagList) {
      if (t.status !== "valid" || t.special) continue;
      const list = this.tagsByPos.get(t.position) || [];
      list.push(t.name);
      this.tagsByPos.set(t.position, list);
    }
  }

  has(action) { return INFO.actions.includes(action); }

  renderHead() {
    const i = this.info;
    const tb = h("div", { class: "toolbar" });
    if (this.has("tag")) tb.append(h("button", { "data-testid": "btn-tag", onclick: () => this.tagAt(null) }, "Tag…"));
    if (this.has("undo")) tb.append(h("button", { "data-testid": "btn-undo", onclick: () =>
      writeFlow(this, "Undo", "undo", [field("User turns", "n", "1", "number")]) }, "Undo…"));
    if (this.has("undo_to")) tb.append(h("button", { "data-testid": "btn-undo-to", onclick: () => this.undoTo(null) }, "Undo to tag…"));
    if (this.has("clear")) tb.append(h("button", { onclick: () => writeFlow(this, "Clear (start over)", "clear", []) }, "Clear"));
    if (INFO.compact) tb.append(h("button", { "data-testid": "btn-compact", onclick: () => this.compact() }, "Compact…"));
    put(this.head, 
      h("a", { href: "#/" }, "← sessions"),
      h("h1", { "data-testid": "session-title" }, i.name || i.id),
      h("span", { class: "muted" }, `${i.entries} entries · ${i.messages} messages · ${i.context_messages} in context · ${(i.file_bytes / 1024).toFixed(1)} KiB`),
      i.model ? h("span", { class: "chip" }, `${i.model.provider}/${i.model.model_id}`) : null,
      h("span", { class: "chip" }, `thinking ${i.thinking_level}`),
      i.header.metadata && i.header.metadata.example ? h("span", { class: "chip label" }, "example") : null,
      i.header.parent_session ? h("span", { class: "muted" }, "from ", h("a", { href: `#/s/${enc(i.header.parent_session)}` }, i.header.parent_session)) : null,
      tb);
    const rep = i.load_report;
    if (rep && (rep.corrupt_lines.length || rep.orphans.length || rep.duplicate_ids.length || rep.torn_bytes)) {
      this.head.append(h("span", { class: "chip", title: JSON.stringify(rep) },
        `load report: ${rep.corrupt_lines.length} corrupt, ${rep.orphans.length} orphans, ${rep.duplicate_ids.length} duplicates, ${rep.torn_bytes} torn bytes`));
    }
  }

  renderTreeHead(d) {
    const outline = h("input", { type: "checkbox", "data-testid": "outline", checked: this.outline,
      onchange: (e) => { this.outline = e.target.checked; this.tree.reset(); } });
    const books = h("input", { type: "checkbox", "data-testid": "bookkeeping", checked: this.bookkeeping,
      onchange: (e) => { this.bookkeeping = e.target.checked; this.tree.reset(); } });
    this.lanes = d.lanes || 1;
    put(this.treeHead, h("b", {}, "Tree"), h("span", { class: "muted", "data-testid": "tree-total" }, `${d.total} rows`),
      h("label", { title: "Only branch points, compactions, summaries, labels and the leaf" }, outline, " table of contents"),
      h("label", { title: "Show custom records (progress lines, …) and label entries one by one instead of one row per run" }, books, " bookkeeping"),
      d.sidechains_folded ? h("span", { class: "muted" }, `${d.sidechains_folded} sidechain(s) folded`) : null,
      h("button", { onclick: () => this.locateLeaf() }, "Go to leaf"));
  }

  async locateLeaf() {
    const p = new URLSearchParams({ offset: 0, limit: 1, locate: this.info.leaf_id || "",
      fold: [...this.fold].join(","), unfold: [...this.unfold].join(","), outline: this.outline ? "1" : "0",
      bookkeeping: this.bookkeeping ? "1" : "0" });
    const r = await api(`/api/sessions/${enc(this.id)}/tree?${p}`);
    if (r.locate_index !== null) this.tree.scrollTo(r.locate_index);
  }

  treeRow(r) {
    const cls = ["row", "tree-row", r.on_path ? "on-path" : "", r.leaf ? "leaf" : "",
                 r.run ? "run-row" : "", this.current === r.id ? "current" : ""].join(" ");
    const el = h("div", { class: cls, "data-entry": r.id, "data-type": r.type, "data-lane": r.lane,
                          title: r.run ? `${r.run} bookkeeping entries from ${r.id}` : `${r.id} · ${r.type} · depth ${r.depth}` },
      laneGraph(r, this.lanes),
      r.leaf ? h("span", { class: "chip leaf-chip" }, "leaf") : null,
      r.role ? h("span", { class: `role role-${r.role}` }, r.role) : null,
      r.label ? h("span", { class: "chip label" }, r.label) : null,
      r.sidechain ? h("span", { class: "chip" }, "sidechain") : null,
      h("span", { class: `type-${r.type}` }, r.summary),
      r.children > 1 ? h("span", { class: "muted" }, ` (${r.children} branches)`) : null);
    if (r.folded && r.hidden) {
      el.append(h("a", { class: "fold", "data-testid": "unfold", onclick: (e) => {
        e.stopPropagation(); this.fold.delete(r.id); this.unfold.add(r.id); this.tree.reset();
      } }, `▸ ${r.hidden} folded`));
    } else if (r.children && this.unfold.has(r.id)) {
      el.append(h("a", { class: "fold", onclick: (e) => {
        e.stopPropagation(); this.unfold.delete(r.id); this.fold.add(r.id); this.tree.reset();
      } }, "▾ fold"));
    }
    if (r.run) {
      // a collapsed run: clicking shows its entries one by one
      el.addEventListener("click", () => { this.bookkeeping = true; this.tree.reset(); });
    } else {
      el.addEventListener("click", () => this.showEntry(r.id));
    }
    return el;
  }

  renderCtxHead(d) {
    const sel = this.sel;
    const parts = [h("b", {}, "Context"),
      h("span", { class: "muted", "data-testid": "ctx-total" }, `${d.total} messages`),
      h("input", { placeholder: "active tags", value: this.activeTags, size: 10, title: "Conditional operations apply when one of their tags is active",
        onchange: (e) => { this.activeTags = e.target.value; this.ctx.reset(); } })];
    if (sel) {
      parts.push(h("span", { "data-testid": "selection" }, `selected ${sel[0]}–${sel[1]}`));
      const args = { start: sel[0], end: sel[1] };
      if (this.has("digest")) parts.push(h("button", { "data-testid": "btn-digest", onclick: () =>
        writeFlow(this, `Digest ${sel[0]}–${sel[1]}`, "digest", [field("Summary", "summary", "", "textarea"), field("Only with tags", "tags")], args) }, "Digest…"));
      if (this.has("snip")) parts.push(h("button", { "data-testid": "btn-snip", onclick: () =>
        writeFlow(this, `Snip ${sel[0]}–${sel[1]}`, "snip", [field("Only with tags", "tags")], args) }, "Snip…"));
      const roleField = () => h("div", { class: "form-row" }, h("label", {}, "Role"),
        h("select", { name: "role" }, ["assistant", "user", "system"].map((r) => h("option", { value: r }, r))));
      if (this.has("revise")) parts.push(h("button", { "data-testid": "btn-revise", onclick: () =>
        writeFlow(this, `Revise ${sel[0]}–${sel[1]}`, "revise", [roleField(), field("Replacement text", "text", "", "textarea"), field("Only with tags", "tags")], args) }, "Revise…"));
      if (this.has("resequence") && sel[1] > sel[0]) {
        const order = [];
        for (let p = sel[1]; p >= sel[0]; p--) order.push(p);
        parts.push(h("button", { "data-testid": "btn-resequence", onclick: () =>
          writeFlow(this, `Resequence ${sel[0]}–${sel[1]}`, "resequence", [field("New order (positions)", "new_order", order.join(",")), field("Only with tags", "tags")]) }, "Resequence…"));
      }
      if (this.has("insert")) parts.push(h("button", { "data-testid": "btn-insert", onclick: () =>
        writeFlow(this, `Insert after ${sel[1]}`, "insert", [roleField(), field("Text", "text", "", "textarea"), field("Only with tags", "tags")], { after: sel[1] }) }, `Insert after ${sel[1]}…`));
      if (this.has("tag_messages")) parts.push(h("button", { onclick: () =>
        writeFlow(this, `Tag messages ${sel[0]}–${sel[1]}`, "tag_messages", [field("Tags", "tags")], args) }, "Tag messages…"));
      if (this.has("tag")) parts.push(h("button", { "data-testid": "btn-tag-here", onclick: () => this.tagAt(sel[1] + 1) }, `Tag at ${sel[1] + 1}…`));
      parts.push(h("button", { onclick: () => { this.sel = null; this.ctx.render(); this.renderCtxHead(d); } }, "×"));
    }
    this.lastCtx = d;
    put(this.ctxHead, ...parts);
  }

  ctxRow(r) {
    const sel = this.sel;
    const selected = sel && r.position >= sel[0] && r.position <= sel[1];
    const bookmarks = this.tagsByPos.get(r.position + 1) || [];
    const el = h("div", { class: `row ctx-row${selected ? " selected" : ""}${r.kind === "synthetic" ? " synthetic" : ""}${r.kind === "marker" ? " marker" : ""}`,
                          "data-position": r.position, "data-view-id": r.view_id },
      h("div", { class: "pos" }, r.position),
      h("div", { class: "body" },
        h("div", {}, h("span", { class: `role role-${r.role}` }, r.role),
          r.kind !== "message" ? h("span", { class: "chip" }, r.kind) : null,
          r.tags.map((t) => h("span", { class: "chip tag" }, t)),
          bookmarks.map((t) => h("span", { class: "chip bookmark", title: `tag ${t}: after this message` }, `⚑ ${t}`))),
        h("div", { class: "text" }, r.preview)));
    el.addEventListener("click", (e) => {
      if (e.shiftKey && this.anchor !== null) {
        this.sel = [Math.min(this.anchor, r.position), Math.max(this.anchor, r.position)];
      } else {
        this.anchor = r.position;
        this.sel = [r.position, r.position];
      }
      this.ctx.render();
      this.renderCtxHead(this.lastCtx);
      this.showViewItem(r.view_id);
    });
    return el;
  }

  // -- side panel ---------------------------------------------------------------------------

  async renderTab() {
    const tabs = [["details", "Details"]];
    if (this.has("tag")) tabs.push(["tags", "Tags"]);
    if (this.has("toggle")) tabs.push(["ops", "Operations"]);
    if (INFO.formats.length) tabs.push(["payload", "Provider payload"]);
    if (INFO.purge) tabs.push(["purge", "Purge"]);
    this.tabs.replaceChildren(...tabs.map(([k, label]) => h("button", {
      class: this.tab === k ? "on" : "", "data-testid": `tab-${k}`,
      onclick: () => { this.tab = k; this.renderTab(); } }, label)));
    try {
      if (this.tab === "details") await this.renderDetails();
      else if (this.tab === "tags") this.renderTags();
      else if (this.tab === "ops") await this.renderOps();
      else if (this.tab === "payload") this.renderPayload();
      else if (this.tab === "purge") this.renderPurge();
    } catch (e) {
      put(this.tabBody, h("p", { class: "error-box" }, e.message));
    }
  }

  showEntry(id) {
    this.current = id; this.currentView = null; this.tab = "details";
    this.tree.render(); this.renderTab();
  }

  showViewItem(vid) {
    this.currentView = vid; this.current = null; this.tab = "details";
    this.tree.render(); this.renderTab();
  }

  async renderDetails() {
    const body = this.tabBody;
    if (this.currentView) {
      const d = await api(`/api/sessions/${enc(this.id)}/view/${enc(this.currentView)}`);
      put(body, h("h3", {}, `Message (${d.kind})`),
        h("dl", { class: "meta" }, h("dt", {}, "view id"), h("dd", {}, d.view_id),
          h("dt", {}, "entry"), h("dd", {}, d.entry_id ? h("a", { onclick: () => this.showEntry(d.entry_id) }, d.entry_id) : "—"),
          h("dt", {}, "tags"), h("dd", {}, d.tags.join(", ") || "—")),
        renderMessage(d.message));
      return;
    }
    if (!this.current) {
      put(body, h("p", { class: "muted" },
        "Click an entry in the tree for its details, or a message of the context (shift-click to select a range)."));
      return;
    }
    const d = await api(`/api/sessions/${enc(this.id)}/entries/${enc(this.current)}`);
    const buttons = h("div", { class: "toolbar" });
    if (d.id !== this.info.leaf_id) buttons.append(h("button", { "data-testid": "btn-branch", onclick: () =>
      writeFlow(this, "Branch here", "branch", [], { entry_id: d.id }) }, "Branch here"));
    buttons.append(h("button", { "data-testid": "btn-label", onclick: () =>
      writeFlow(this, d.label ? "Change or remove the label" : "Label this entry", "label",
        [field("Label (empty removes)", "label", d.label || "")], { target_id: d.id }) }, d.label ? "Edit label…" : "Label…"));
    const rec = d.record || {};
    const msg = rec.message;
    put(body, h("h3", {}, `${d.type} entry`), buttons,
      h("dl", { class: "meta", "data-testid": "entry-meta" },
        h("dt", {}, "id"), h("dd", {}, d.id),
        h("dt", {}, "parent"), h("dd", {}, d.parent_id ? h("a", { onclick: () => this.showEntry(d.parent_id) }, d.parent_id) : "(root)"),
        h("dt", {}, "children"), h("dd", {}, d.children.length ? d.children.map((c) => h("a", { onclick: () => this.showEntry(c), style: "margin-right:6px" }, c.slice(0, 8))) : "—"),
        h("dt", {}, "timestamp"), h("dd", {}, d.timestamp),
        h("dt", {}, "size"), h("dd", { "data-testid": "entry-size" }, `${d.size} bytes`),
        h("dt", {}, "depth"), h("dd", {}, d.depth),
        h("dt", {}, "label"), h("dd", {}, d.label || "—"),
        h("dt", {}, "on current path"), h("dd", {}, d.on_path ? "yes" : "no"),
        h("dt", {}, "context position"), h("dd", {}, d.positions.length ? d.positions.join(", ") : "not in the context"),
        h("dt", {}, "message tags"), h("dd", {}, d.message_tags.join(", ") || "—"),
        d.purged ? [h("dt", {}, "purged"), h("dd", {}, "yes")] : null),
      msg ? renderMessage(msg) : null,
      h("details", {}, h("summary", {}, "Record as stored"), h("pre", {}, JSON.stringify(rec, null, 2))));
  }

  renderTags() {
    const list = h("ul", { class: "items", "data-testid": "tags-list" });
    for (const t of this.tagList) {
      const li = h("li", { "data-tag": t.name },
        h("b", {}, t.name), h("span", { class: "muted" }, `@${t.position}`),
        h("span", { class: `state-${t.status}` }, t.status), t.reason ? h("span", { class: "muted" }, t.reason) : null);
      if (this.has("undo_to") && (t.status === "valid" || t.status === "other_branch")) {
        li.append(h("button", { "data-testid": "undo-to", onclick: () => this.undoTo(t.name) }, "Undo to"));
      }
      if (this.has("untag") && !t.special) {
        li.append(h("button", { "data-testid": "untag", onclick: () => writeFlow(this, `Remove tag ${t.name}`, "untag", [], { name: t.name }) }, "Remove"));
      }
      list.append(li);
    }
    if (!this.tagList.length) list.append(h("li", { class: "muted" }, "No tags."));
    put(this.tabBody, h("h3", {}, "Tags (bookmarks)"), list,
      h("p", { class: "muted" }, "Select a message in the context and use “Tag at …” to mark the boundary after it."));
  }

  tagAt(position) {
    const fields = [field("Name (empty: automatic)", "name")];
    if (position === null) fields.push(field("Position (empty: end)", "position", "", "number"));
    writeFlow(this, position === null ? "Set a tag" : `Set a tag at position ${position}`, "tag", fields,
      position === null ? {} : { position });
  }

  undoTo(name) {
    if (name) return writeFlow(this, `Undo to tag ${name}`, "undo_to", [], { name });
    const choices = this.tagList.filter((t) => !t.special || t.name === "__session_start__");
    const sel = h("select", { name: "name" }, choices.map((t) => h("option", { value: t.name }, `${t.name} (@${t.position}, ${t.status})`)));
    writeFlow(this, "Undo to a tag", "undo_to", [h("div", { class: "form-row" }, h("label", {}, "Tag"), sel)]);
  }

  async renderOps() {
    const r = await api(`/api/sessions/${enc(this.id)}/operations`);
    const list = h("ul", { class: "items", "data-testid": "ops-list" });
    for (const op of r.operations) {
      const id = op.id;
      const state = op.state;
      const li = h("li", { "data-op": id, "data-state": state, "data-standing": op.standing },
        h("b", {}, op.kind), h("span", { class: `state-${state}` }, state),
        h("span", { class: "muted", title: op.reason || "" }, op.standing.replaceAll("_", " ")),
        op.summary ? h("span", { class: "muted" }, `“${op.summary.slice(0, 60)}”`) : null,
        op.tags && op.tags.length ? op.tags.map((t) => h("span", { class: "chip tag" }, t)) : null,
        h("span", { class: "muted", title: id }, id.slice(0, 8)));
      const active = state === "active";
      li.append(h("label", {}, h("input", { type: "checkbox", checked: active, "data-testid": "op-toggle",
        onchange: (e) => { e.target.checked = active; writeFlow(this, `${active ? "Switch off" : "Switch on"} ${op.kind}`, "toggle", [], { op_id: id, active: !active }); } }), " on"));
      if (this.has("revert") && state !== "reverted") {
        li.append(h("button", { onclick: () => writeFlow(this, `Revert ${op.kind}`, "revert", [], { op_id: id }) }, "Revert"));
      }
      if (this.has("expand") && (op.kind === "revise" || op.kind === "snip")) {
        const verb = op.expanded ? "collapse" : "expand";
        li.append(h("button", { "data-testid": `op-${verb}`, onclick: () => writeFlow(this, `${op.expanded ? "Collapse" : "Expand"} ${op.kind}`, verb, [], { op_id: id }) }, op.expanded ? "Collapse" : "Expand"));
      }
      list.append(li);
    }
    if (!r.operations.length) list.append(h("li", { class: "muted" }, "No context operations."));
    put(this.tabBody, h("h3", {}, "Context operations"), list);
  }

  renderPayload() {
    const sel = h("select", { "data-testid": "provider" }, INFO.formats.map((f) => h("option", { value: f.name }, f.label)));
    const notes = h("div", { "data-testid": "adjustments", class: "adjustments" });
    const out = h("pre", { "data-testid": "payload" }, "");
    let chosen = ""; // none yet: the server opens on the session's own provider format
    const load = async () => {
      out.textContent = "…";
      try {
        const mine = ++this.payloadRequest;
        const q = { active_tags: this.activeTags };
        if (chosen) q.format = chosen;
        const r = await api(`/api/sessions/${enc(this.id)}/payload?${new URLSearchParams(q)}`);
        if (mine !== this.payloadRequest) return; // a later choice is on its way
        sel.value = r.format;
        this.renderAdjustments(notes, r);
        const text = JSON.stringify(r.payload, null, 2);
        out.textContent = text.length > 200000 ? `${text.slice(0, 200000)}\n… (${text.length} characters in all)` : text;
      } catch (e) { out.textContent = e.message; }
    };
    sel.addEventListener("change", () => { chosen = sel.value; load(); });
    put(this.tabBody, h("h3", {}, "What the provider receives"), sel, notes, out);
    load();
  }

  renderAdjustments(box, r) {
    const own = INFO.formats.find((f) => f.name === r.own_format);
    const head = h("p", { class: "muted" }, own ? `This session's own format: ${own.label}. ` : "",
      r.adjustments.length ? `The send policy made ${r.adjustments.length} adjustment(s) so the provider accepts it:`
        : "Sent as it is: the send policy changed nothing.");
    const list = h("ul", { "data-testid": "adjustment-list" }, r.adjustments.map((a) =>
      h("li", { "data-kind": a.kind, title: a.view_id || "" }, h("b", {}, a.kind.replaceAll("_", " ")), ` [${a.position}] ${a.detail}`)));
    const items = [head, list];
    if (this.has("repair") && r.adjustments.some((a) => a.kind === "answered_dangling_call")) {
      items.push(h("button", { "data-testid": "btn-repair", onclick: () => writeFlow(this, "Repair interrupted tool calls", "repair", []) },
        "Repair in the log…"));
    }
    put(box, ...items);
  }

  renderPurge() {
    const ids = h("textarea", { name: "ids", placeholder: "entry ids, one per line" }, this.current || "");
    put(this.tabBody, h("h3", {}, "Purge (really delete content)"),
      h("p", { class: "muted" }, "Purge removes the content of entries from the store for good; the tree keeps their ids."),
      ids, h("button", { class: "danger", "data-testid": "btn-purge", onclick: async () => {
        const entryIds = ids.value.split(/\s+/).filter(Boolean);
        try {
          const p = await api(`/api/sessions/${enc(this.id)}/purge`, { entry_ids: entryIds, confirm: false });
          modal.open("Purge: confirm", h("div", {}, h("p", {}, "This will delete, with no copy kept:"),
            h("p", {}, `${p.plan.entry_ids.length} entries, ${p.plan.bytes} bytes; ${p.plan.leaves_view.length + p.plan.also_leaving_view.length} message(s) leave the context.`),
            h("pre", { "data-testid": "purge-preview" }, JSON.stringify(p.plan, null, 2))), "Purge", async () => {
            await this.write(`/api/sessions/${enc(this.id)}/purge`, { entry_ids: entryIds, confirm: true, fingerprint: p.plan.fingerprint }, async () => {
              modal.close();
              status("Saved; reloading…");
              await this.refresh();
              status("Purged");
            });
          }, { danger: true });
        } catch (e) { status(e.message, true); }
      } }, "Preview purge…"));
  }

  async compact() {
    const form = h("div", {}, field("Keep recent tokens (empty: default)", "keep_recent_tokens", "", "number"));
    modal.open("Compact", form, "Preview", async () => {
      const args = formValues(form);
      const p = await api(`/api/sessions/${enc(this.id)}/compact`, { ...args, confirm: false });
      const body = h("div", { "data-testid": "compact-preview" },
        h("p", {}, `${p.summarized_messages} message(s) are summarized; ${p.kept_entries} entries from ${p.first_kept_entry_id} are kept verbatim` +
          `${p.split_turn ? " (the cut splits a turn)" : ""}. Tokens before: ${p.tokens_before}; kept: ${p.kept_tokens}.`),
        h("p", {}, h("b", {}, "Summary that will be written (extractive summarizer):")),
        h("pre", {}, p.summary));
      modal.open("Compact: confirm", body, "Compact", async () => {
        await this.write(`/api/sessions/${enc(this.id)}/compact`, { ...args, confirm: true, leaf_id: p.leaf_id }, async () => {
          modal.close();
          status("Saved; reloading…");
          await this.refresh();
          status("Compact: done");
        });
      });
    });
  }
}

function renderMessage(m) {
  const box = h("div", { "data-testid": "message" }, h("div", {}, h("span", { class: `role role-${m.role}` }, m.role),
    m.model ? h("span", { class: "muted" }, m.model) : null,
    m.stop_reason ? h("span", { class: "muted" }, ` · ${m.stop_reason}`) : null,
    m.usage ? h("span", { class: "muted" }, ` · usage in ${m.usage.input || 0} / out ${m.usage.output || 0}`) : null));
  for (const b of m.content) {
    let text = "";
    if (b.type === "text") text = b.text.content;
    else if (b.type === "tool_use") text = `→ ${b.tool_use.name} [${b.tool_use.id}]\n${JSON.stringify(b.tool_use.input, null, 2)}`;
    else if (b.type === "tool_result") {
      const c = b.tool_result.content;
      text = `← result [${b.tool_result.tool_use_id}]${b.tool_result.is_error ? " (error)" : ""}\n` +
        (typeof c === "string" ? c : c.map((x) => (x.type === "text" ? x.text.content : "[image]")).join("\n"));
    } else if (b.type === "thinking") text = b.thinking.redacted ? "(redacted thinking)" : b.thinking.content;
    else if (b.type === "image") text = `[image ${b.image.source.media_type || b.image.source.type}]`;
    text = stripAnsi(text);
    box.append(h("div", { class: `block block-${b.type}` }, text.length > 20000 ? `${text.slice(0, 20000)}…` : text));
  }
  return box;
}

// ---------------------------------------------------------------------------------------------
// Routing

let currentPage = null;
let navigation = 0;  // the newest route(): an older one that finishes late changes nothing

async function route() {
  const mine = ++navigation;
  modal.close();
  document.body.dataset.ready = "";
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/s\/([^?]+)/);
  currentPage?.unmount();
  try {
    if (m) {
      currentPage = new SessionPage(decodeURIComponent(m[1]));
      window.threadlinePage = currentPage;
      await currentPage.mount();
      if (mine === navigation) status("");
    } else {
      currentPage = null;
      await showList();
    }
  } catch (e) {
    if (mine === navigation) status(e.message, true);
  }
  if (mine === navigation) document.body.dataset.ready = hash;
}

async function start() {
  INFO = await api("/api/info");
  $("#store-url").textContent = INFO.store;
  window.addEventListener("hashchange", route);
  await route();
}

start();
