// Runs on every page (Material's document$ also fires after instant navigation).

// Render the math that pymdownx.arithmatex wrapped in \( \) and \[ \].
function renderMath() {
  renderMathInElement(document.body, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    ignoredClasses: ["highlight", "md-search"],
    throwOnError: false,
  });
}

// Material's search overlay has role="dialog" but no accessible name.
function nameSearchDialog() {
  const search = document.querySelector(".md-search[role=dialog]");
  if (search && !search.hasAttribute("aria-label")) search.setAttribute("aria-label", "Search");
}

// Wide equations and tables scroll sideways, and long printed output scrolls down its box
// (Material makes only sideways-scrolling code focusable); keyboard users must reach them all.
function focusableScrollers() {
  const scrollers = ".katex-display, .md-typeset__scrollwrap, .md-typeset pre > code";
  for (const el of document.querySelectorAll(scrollers)) {
    if (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight) {
      el.setAttribute("tabindex", "0");
    }
  }
}

// The language switcher goes to the same place on the other edition: both editions give a
// heading the same anchor, so the current #anchor is kept.
function switcherKeepsAnchor() {
  for (const a of document.querySelectorAll("a.md-select__link[hreflang]")) {
    a.addEventListener("click", () => {
      if (location.hash) a.href = a.href.split("#")[0] + location.hash;
    });
  }
}

function onPage() {
  renderMath();
  nameSearchDialog();
  focusableScrollers();
  switcherKeepsAnchor();
}

if (typeof document$ !== "undefined") {
  document$.subscribe(onPage);
} else {
  document.addEventListener("DOMContentLoaded", onPage);
}
