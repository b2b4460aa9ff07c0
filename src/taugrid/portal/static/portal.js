// TauGrid portal: live updates layered on server-rendered pages (they work without this).
// The page names its stream in <body data-stream>; the stream (server-sent events) says
// "changed" when the page's data changed, and the page then re-fetches itself and swaps
// in every [data-live] element; "log" events append to the log. EventSource reconnects
// by itself; after a reconnect (e.g. a hub restart) the page refreshes to catch up.
// The log box opens scrolled to its newest line and follows new lines while the reader
// stays at the end (scrolling up stops following; back at the end, it follows again).
(function () {
  "use strict";
  var url = document.body.getAttribute("data-stream");
  var status = document.getElementById("live-status");
  var logEl = document.getElementById("log");
  var logBox = document.getElementById("log-box") || logEl;
  var search = document.getElementById("log-q");
  var logText = logEl ? logEl.textContent : "";
  var es = null, broken = false, planned = false, busy = false, again = false;
  var FOCUSABLE = "a[href],button,input,select,textarea,summary,[tabindex]";

  function say(text) { if (status) status.textContent = text; }

  function renderLog() {
    if (!logEl) return;
    var q = search ? search.value : "";
    var text = q ? logText.split("\n").filter(function (l) { return l.indexOf(q) >= 0; }).join("\n") : logText;
    var atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
    logEl.textContent = text;  // textContent: log lines are never parsed as HTML
    if (atEnd) toEnd();
  }

  function toEnd() { logBox.scrollTop = logBox.scrollHeight; }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin" }).then(function (r) {
      if (r.redirected && r.url.indexOf("/ui/login") >= 0) { location.href = r.url; return null; }
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var focused = document.activeElement && document.activeElement.id;
      var within = null;  // a focused control inside a swapped section: where it was
      document.querySelectorAll("[data-live]").forEach(function (el) {
        if (!focused && el.contains(document.activeElement)) {
          within = [el.id, Array.prototype.indexOf.call(el.querySelectorAll(FOCUSABLE), document.activeElement)];
        }
      });
      var ticked = {};  // keep what the user ticked (compare boxes) across the swap
      document.querySelectorAll("[data-live] input[type=checkbox]:checked").forEach(function (c) { ticked[c.value] = true; });
      var opened = [];  // and what they expanded (the older checkpoints)
      document.querySelectorAll("[data-live] details[open][id]").forEach(function (d) { opened.push(d.id); });
      document.querySelectorAll("[data-live]").forEach(function (el) {
        var fresh = doc.getElementById(el.id);
        if (fresh) el.replaceWith(document.importNode(fresh, true));
      });
      document.querySelectorAll("[data-live] input[type=checkbox]").forEach(function (c) { if (ticked[c.value]) c.checked = true; });
      opened.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      else if (within && document.getElementById(within[0])) {  // keyboard users keep their place
        var target = document.getElementById(within[0]).querySelectorAll(FOCUSABLE)[within[1]];
        if (target) target.focus();
      }
    }).catch(function () {}).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }

  function connect() {
    if (!url || !window.EventSource) return;
    es = new EventSource(url);
    es.addEventListener("open", function () {
      say("live");
      if (broken) { broken = false; refresh(); }
    });
    es.addEventListener("changed", refresh);
    es.addEventListener("log", function (e) {
      logText += JSON.parse(e.data).text;
      renderLog();
    });
    es.addEventListener("logout", function () { location.href = "/ui/login"; });
    es.addEventListener("bye", function () { planned = true; });
    es.addEventListener("error", function () {
      if (planned) { planned = false; return; }  // the server ended the stream on purpose
      broken = true;
      say("reconnecting…");
      if (es.readyState === EventSource.CLOSED) { es = null; setTimeout(connect, 3000); }
    });
  }

  if (logEl) {  // from here on this script keeps the box at its end (not the CSS)
    logBox.classList.add("js");
    toEnd();
  }
  if (search && logEl) {
    search.addEventListener("input", renderLog);
    // the server filtered the first response; the stream brings the whole log from here on
    if (search.value) logText = logEl.textContent;
  }
  connect();
})();
