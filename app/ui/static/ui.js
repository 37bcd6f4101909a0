// Quotient's web view: the one script. It refreshes the decisions journal every few seconds by fetching
// its rows (/ui/decisions/rows with the page's own filter) and swapping them in, without a reload.
"use strict";
(function () {
  const rows = document.getElementById("decision-rows");
  const stamp = document.getElementById("refreshed");
  if (!rows || !stamp) return;
  const every = Math.max(1, Number(stamp.dataset.every) || 3) * 1000;
  const url = "/ui/decisions/rows" + window.location.search;
  async function refresh() {
    try {
      const answer = await fetch(url, {headers: {"Accept": "text/html"}, cache: "no-store"});
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      rows.innerHTML = await answer.text();   // HTML Quotient rendered and escaped on the server
      stamp.textContent = "refreshed at " + new Date().toLocaleTimeString() + ", every " + every / 1000 + " s";
      stamp.classList.remove("stale");
    } catch (e) {
      stamp.textContent = "refresh failed (" + e.message + "); trying again";
      stamp.classList.add("stale");
    }
  }
  setInterval(refresh, every);
})();
