// continuity viewer: the few things a page cannot do without a script. Everything is readable
// without it; text from the store is only ever set as textContent, never as markup, except the
// live view's frames, which the server rendered (and escaped) with the page's own templates.
"use strict";

function openWhole(pre) {
  const src = pre.dataset.src;
  if (!src || pre.dataset.loaded) return;
  pre.dataset.loaded = "1";
  fetch(src, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.status))))
    .then((b) => {
      pre.textContent = b.body;
      const clip = pre.parentElement.querySelector(".clip");
      if (clip) clip.remove();
    })
    .catch(() => { delete pre.dataset.loaded; });
}

document.addEventListener("toggle", (e) => {
  const d = e.target;
  if (d.tagName === "DETAILS" && d.open) {
    d.querySelectorAll(":scope > pre[data-src]").forEach(openWhole);
  }
}, true);

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-open]");
  if (!a) return;
  e.preventDefault();
  fetch(a.dataset.open, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.status))))
    .then((b) => { a.closest(".block").textContent = b.body; });
});

function follow(list) {
  const status = document.getElementById("live-status");
  const count = document.getElementById("frame-count");
  const url = list.dataset.live + "?after=" + encodeURIComponent(list.dataset.last);
  const source = new EventSource(url);
  source.addEventListener("frames", (e) => {
    const data = JSON.parse(e.data);
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    const holder = document.createElement("template");
    holder.innerHTML = data.html; // rendered and escaped by the server's templates
    holder.content.querySelectorAll(".frame").forEach((f) => {
      if (!document.getElementById(f.id)) { f.classList.add("fresh"); list.appendChild(f); }
    });
    list.dataset.last = String(data.last);
    if (count) count.textContent = String(data.last + 1);
    document.querySelectorAll(".shown-last, .shown-head").forEach((el) => {
      el.textContent = String(data.last);
    });
    if (status) status.textContent = "following new frames… (last seq " + data.last + ")";
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  });
  source.onerror = () => { if (status) status.textContent = "reconnecting…"; };
  source.onopen = () => { if (status) status.textContent = "following new frames…"; };
}

document.addEventListener("DOMContentLoaded", () => {
  const list = document.getElementById("timeline");
  if (list && list.dataset.live) follow(list);
  const focus = document.querySelector(".frame.focus");
  if (focus) focus.scrollIntoView({ block: "center" });
});
