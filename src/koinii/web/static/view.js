// The view's live updates, in plain JavaScript over the daemon's server-sent events.
//
// A page that follows its channel says so on <body>: data-live is its stream (the moves
// after the seq the page was rendered at), data-refresh the part of the page to fetch
// again after each move and data-refresh-into where it goes. Each `move` event carries
// one line, rendered (and escaped) by the daemon, appended to #moves, newest at the
// bottom. The browser reconnects by itself, resuming from the last move it got
// (Last-Event-ID); `reload` means the page fell too far behind: load it anew.
(function () {
  "use strict";
  const body = document.body;
  const moves = document.getElementById("moves");
  if (moves) moves.scrollTop = moves.scrollHeight;
  const url = body.dataset.live;
  if (!url || !window.EventSource) return;
  const status = document.getElementById("live-status");
  const refreshUrl = body.dataset.refresh;
  const refreshInto = body.dataset.refreshInto;
  let refreshing = false;
  let again = false;

  function say(text, state) {
    status.hidden = false;
    status.textContent = text;
    status.dataset.state = state;
  }

  async function refresh() {
    if (!refreshUrl) return;
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      do {
        again = false;
        const reply = await fetch(refreshUrl, { credentials: "same-origin" });
        const into = document.getElementById(refreshInto);
        if (reply.ok && into) into.innerHTML = await reply.text();
      } while (again);
    } catch (error) {
      say("reconnecting…", "down");
    } finally {
      refreshing = false;
    }
  }

  function added(event) {
    if (moves) {
      const atBottom = moves.scrollHeight - moves.scrollTop - moves.clientHeight < 48;
      moves.insertAdjacentHTML("beforeend", event.data);
      const line = moves.lastElementChild;
      line.classList.add("fresh");
      setTimeout(() => line.classList.remove("fresh"), 2500);
      while (moves.children.length > 1000) moves.firstElementChild.remove();
      const empty = document.getElementById("no-moves");
      if (empty) empty.remove();
      if (atBottom) moves.scrollTop = moves.scrollHeight;
    }
    refresh();
  }

  const source = new EventSource(url);
  source.addEventListener("open", () => say("live", "live"));
  source.addEventListener("error", () => say("reconnecting…", "down"));
  source.addEventListener("reload", () => window.location.reload());
  source.addEventListener("move", added);
})();
