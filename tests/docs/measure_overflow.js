// Injected into a built docs page by test_docs_browser.py: after layout, record what overflows
// and which inline code breaks across lines, as JSON in <script id="specreg-measure">.
window.addEventListener("load", () => setTimeout(() => {
  const box = (e) => ({scroll: e.scrollWidth, client: e.clientWidth, text: e.textContent});
  const out = {
    viewport: window.innerWidth,
    page: document.documentElement.scrollWidth,
    tables: [...document.querySelectorAll(".md-typeset table")].map((t) => {
      const wrap = t.closest(".md-typeset__scrollwrap") || t.parentElement;
      return {...box(wrap), table: t.scrollWidth, head: t.rows[0].textContent};
    }),
    code: [...document.querySelectorAll(".md-typeset pre > code")].map((c) => ({
      ...box(c), shell: !!c.closest(".language-bash, .language-sh, .language-console")})),
    cellCode: [...document.querySelectorAll(".md-typeset td code, .md-typeset th code")].map(
      (c) => ({text: c.textContent, lines: c.getClientRects().length})),
  };
  const node = document.createElement("script");
  node.type = "application/json";
  node.id = "specreg-measure";
  node.textContent = JSON.stringify(out);
  document.body.appendChild(node);
}, 300));
