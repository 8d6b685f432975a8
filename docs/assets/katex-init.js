// Render the math that pymdownx.arithmatex wraps in .arithmatex spans/divs.
// Material's instant navigation swaps page content without a reload, so
// render on every page change rather than once on load.
function renderMath() {
  renderMathInElement(document.body, {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
      { left: "$", right: "$", display: false },
    ],
    ignoredClasses: ["highlight", "md-search"],
    throwOnError: false,
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(renderMath);
} else {
  document.addEventListener("DOMContentLoaded", renderMath);
}
