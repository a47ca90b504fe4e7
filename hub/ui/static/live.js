// Live updates from the hub's Watch feed (hub/ui/live.py, docs/dashboard.md "Live updates").
// The page's #live block says what it shows (data-watch: "kind" or "kind:field=value"
// tokens) and the feed's revision read before the page was (data-revision). An EventSource on
// data-stream follows the feed from that revision; an event for an object the page shows
// refreshes the block (htmx's "live-refresh" trigger), once per burst of events. The browser
// resumes a lost connection itself from the last event's id. A refused stream (the revision no
// longer kept, a lost session, no feed) refreshes the block and tries again, backing off: the
// only polling left. A page with nothing to watch (data-watch empty) refreshes slowly.
// A field the user is editing keeps what they typed through a refresh; the others show the
// hub's values. No inline script: the CSP allows none. State for tests: <body data-live=...>,
// counters.
(function () {
  "use strict";
  var DEBOUNCE_MS = 200;
  var POLL_MS = 15000;
  var MAX_WAIT_MS = 60000;
  var TYPES = ["added", "modified", "deleted", "bookmark"];
  var source = null;
  var revision = 0;
  var refusals = 0;
  var pending = null;
  var counts = { liveEvents: 0, liveRefreshes: 0, liveBookmarks: 0 };

  function block() { return document.getElementById("live"); }

  function count(name) {
    counts[name] += 1;
    document.body.dataset[name] = String(counts[name]);
  }

  function mark(state) { document.body.dataset.live = state; }

  function rules(el) {
    return (el.dataset.watch || "").split(/\s+/).filter(Boolean).map(function (token) {
      var kind = token.split(":")[0];
      var test = token.slice(kind.length + 1);
      var eq = test.indexOf("=");
      return { kind: kind, field: eq > 0 ? test.slice(0, eq) : "", value: test.slice(eq + 1) };
    });
  }

  function shows(list, data) {
    return list.some(function (rule) {
      var object = data[rule.kind];
      return !!object && (!rule.field || String(object[rule.field]) === rule.value);
    });
  }

  // What the user is editing in the block survives a refresh; every other field shows what
  // the hub says now (a scale made elsewhere reaches the Scale field). A field is being
  // edited when it has the focus or holds a value other than the one it was rendered with;
  // fields are matched by id. (hx-preserve kept every such field at its page-load value.)
  var edits = null;

  function isEdited(field) {
    if (!field.id || field.type === "hidden") { return false; }
    if (field === document.activeElement) { return true; }
    if (field.type === "checkbox" || field.type === "radio") {
      return field.checked !== field.defaultChecked;
    }
    if (field.tagName === "SELECT") {
      var rendered = 0;
      Array.prototype.forEach.call(field.options, function (option, i) {
        if (option.defaultSelected) { rendered = i; }
      });
      return field.selectedIndex !== rendered;
    }
    return field.value !== field.defaultValue;
  }

  function keepEdits(event) {
    var el = block();
    if (!el || event.detail.target !== el) { return; }
    edits = Array.prototype.filter.call(el.querySelectorAll("input, select, textarea"), isEdited)
      .map(function (field) {
        return { id: field.id, value: field.value, checked: field.checked,
                 focused: field === document.activeElement };
      });
  }

  function offers(select, value) {
    return Array.prototype.some.call(select.options, function (o) { return o.value === value; });
  }

  function restoreEdits() {
    if (edits === null) { return; }
    edits.forEach(function (kept) {
      var field = document.getElementById(kept.id);
      if (!field) { return; }
      if (field.type === "checkbox" || field.type === "radio") {
        field.checked = kept.checked;
      } else if (field.tagName !== "SELECT" || offers(field, kept.value)) {
        field.value = kept.value; // a choice gone from a refreshed list is not forced back
      }
      if (kept.focused && document.activeElement !== field) { field.focus(); }
    });
    edits = null;
  }

  document.addEventListener("htmx:beforeSwap", keepEdits);
  document.addEventListener("htmx:afterSwap", restoreEdits);

  function refresh() {
    pending = null;
    document.body.dataset.livePending = "0";
    var el = block();
    if (!el) { return; }
    count("liveRefreshes");
    htmx.trigger(el, "live-refresh");
  }

  function soon() {
    if (pending === null) {
      document.body.dataset.livePending = "1";
      pending = setTimeout(refresh, DEBOUNCE_MS);
    }
  }

  function onEvent(event) {
    var id = Number(event.lastEventId);
    if (id > revision) { revision = id; }
    var data;
    try { data = JSON.parse(event.data); } catch (e) { return; }
    if (data.type === "bookmark") { count("liveBookmarks"); return; }
    var el = block();
    if (el && shows(rules(el), data)) { count("liveEvents"); soon(); }
  }

  function url(el, list) {
    var kinds = [];
    list.forEach(function (rule) {
      var word = rule.kind + "s";
      if (kinds.indexOf(word) < 0) { kinds.push(word); }
    });
    var query = kinds.map(function (k) { return "kinds=" + encodeURIComponent(k); });
    query.push("since_revision=" + revision);
    return el.dataset.stream + "?" + query.join("&");
  }

  function connect() {
    var el = block();
    if (!el || !el.dataset.stream) { return; }
    var list = rules(el);
    if (!list.length) { poll(POLL_MS); return; }
    // The block may have been refreshed meanwhile: its revision is newer than what we saw.
    var theirs = Number(el.dataset.revision) || 0;
    if (theirs > revision) { revision = theirs; }
    source = new EventSource(url(el, list));
    TYPES.forEach(function (type) { source.addEventListener(type, onEvent); });
    source.addEventListener("open", function () { refusals = 0; mark("open"); });
    source.addEventListener("error", function (event) {
      if (event.data) { return; } // the hub's own error event: the stream ends, then resumes
      if (source && source.readyState === EventSource.CLOSED) { refused(); }
      else { mark("reconnecting"); }
    });
    mark("connecting");
  }

  function refused() {
    source.close();
    source = null;
    refusals += 1;
    mark("refused");
    // The first time at once (a revision too old: the block is refreshed, then the stream
    // resumes from the refreshed block's revision); then slowly, backing off.
    poll(refusals === 1 ? 0 : Math.min(MAX_WAIT_MS, POLL_MS * Math.pow(2, refusals - 2)));
  }

  function poll(wait) {
    setTimeout(function () {
      refresh();
      var retried = false;
      function retry() {
        if (retried) { return; }
        retried = true;
        document.body.removeEventListener("htmx:afterSettle", retry);
        connect();
      }
      // Connect once the refreshed block is in (its revision), or anyway if it never comes.
      document.body.addEventListener("htmx:afterSettle", retry);
      setTimeout(retry, 5000);
    }, wait);
  }

  document.addEventListener("DOMContentLoaded", connect);
})();
