// The explorer: move d_k, the scale, the temperature, the sequence length and the q/k variance,
// and watch the scores, one attention row, the softmax Jacobian and the expected entropy change.
// Everything is computed here, in the browser; `math` mirrors attnscale's functions of the same
// names, and the browser test checks it against test vectors the library writes at build time.
// Charts: uPlot, from the npm registry (docs/assets/vendor/uplot, copied by `nox -s docs`).
(function () {
  "use strict";

  // -- math ---------------------------------------------------------------------------------

  /** A seeded uniform generator on [0, 1) (mulberry32): the same draws on every visit. */
  function rng(seed) {
    let a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** One standard normal draw (Box-Muller, one of the pair). */
  function normal(rand) {
    return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  }

  /** ``count`` standard normal draws. */
  function normals(rand, count) {
    const out = new Float64Array(count);
    for (let i = 0; i < count; i++) out[i] = normal(rand);
    return out;
  }

  /** One Gamma(shape, 1) draw, shape >= 1 (Marsaglia and Tsang 2000). */
  function gamma(rand, shape) {
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x, v;
      do {
        x = normal(rand);
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = 1 - rand();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
    }
  }

  /** The standard deviation of the softmax input c·q·k / T, for q and k with independent
   * zero-mean entries of variance ``variance``, and c = 1/√d_k when ``scaled`` (else 1):
   * Var(q·k) = d_k · variance² (attnscale.scaled_dot_product_moments). */
  function logitStd(dk, variance, scaled, temperature) {
    const c = scaled ? 1 / Math.sqrt(dk) : 1;
    return (c * Math.sqrt(dk) * variance) / temperature;
  }

  /** A row's softmax and what the charts read from it, from one pass of exponentials:
   * p, the entropy -Σ p log p in nats (0 log 0 = 0, log p from the log-softmax), the largest
   * probability, and the Frobenius norm of the Jacobian diag(p) - p pᵀ, in the library's form
   * that stays accurate for nearly one-hot rows (in units of s = 1 - p_max). */
  function rowStats(z, p = new Float64Array(z.length)) {
    const n = z.length;
    let m = -Infinity;
    let top = 0;
    for (let i = 0; i < n; i++) if (z[i] > m) { m = z[i]; top = i; }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += p[i] = Math.exp(z[i] - m);
    const logSum = Math.log(sum);
    let h = 0;
    for (let i = 0; i < n; i++) {
      p[i] /= sum;
      if (p[i] > 0) h -= p[i] * (z[i] - m - logSum);
    }
    const a = p[top];
    let s = 0;
    for (let i = 0; i < n; i++) if (i !== top) s += p[i];
    const unit = s > 0 ? s : 1;
    let b = 0, b4 = 0, diag = 0;
    for (let i = 0; i < n; i++) {
      if (i === top) continue;
      const u2 = (p[i] / unit) ** 2;
      b += u2;
      b4 += u2 * u2;
      diag += u2 * (1 - p[i]) ** 2;
    }
    const inner = diag + a * a * (1 + 2 * b) + s * s * Math.max(b * b - b4, 0);
    return { p, entropy: Math.max(h, 0), maxProbability: a, jacobianNorm: s * Math.sqrt(inner) };
  }

  /** attnscale.tempered_softmax at T = 1. */
  const softmax = (z) => rowStats(z).p;
  /** attnscale.softmax_entropy, in nats or divided by log n. */
  const entropy = (z, normalized = false) =>
    rowStats(z).entropy / (normalized ? Math.log(z.length) : 1);
  /** attnscale.max_probability. */
  const maxProbability = (z) => rowStats(z).maxProbability;
  /** attnscale.softmax_jacobian_norm (Frobenius). */
  const jacobianNorm = (z) => rowStats(z).jacobianNorm;
  /** attnscale.saturated_fraction: the share of rows whose largest probability exceeds
   * ``threshold``. */
  const saturatedFraction = (rows, threshold = 0.99) =>
    rows.filter((z) => maxProbability(z) > threshold).length / rows.length;

  // -- what the charts show -----------------------------------------------------------------

  const PAIRS = 4096; // q·k pairs in the histogram
  const BINS = 61;
  const ROW_VALUES = 16384; // standard normal values behind each point of the σ curves
  const PER_DECADE = 8;
  const SIGMAS = Array.from({ length: 6 * PER_DECADE + 1 }, (_, i) => 10 ** (-2 + i / PER_DECADE)); // 0.01 to 10^4
  const DKS = Array.from({ length: 49 }, (_, i) => 2 ** (4 + i / 6)); // 16 to 4096
  const SATURATED = 0.99;
  // The row chart's floor: uPlot's log axis loops forever on ranges that reach far below it
  const P_FLOOR = 1e-12;

  const cache = new Map();
  function cached(key, make) {
    if (!cache.has(key)) cache.set(key, make());
    return cache.get(key);
  }

  /** Draws for one d_k, standard in every other setting (the sliders only rescale them):
   * q·k = ‖q‖·g exactly for Gaussian k, with ‖q‖² ~ χ²(d_k) = 2·Gamma(d_k/2). */
  function draws(dk, n) {
    return cached(`draws ${dk} ${n}`, () => {
      const rand = rng(dk * 7919 + n);
      const pairs = new Float64Array(PAIRS);
      const g = normals(rand, PAIRS);
      for (let i = 0; i < PAIRS; i++) pairs[i] = Math.sqrt(2 * gamma(rand, dk / 2)) * g[i];
      const norm = Math.sqrt(2 * gamma(rand, dk / 2)); // one query's ‖q‖
      return { pairs, row: normals(rand, n), norm };
    });
  }

  /** For one n, over a grid of logit spreads σ: the mean H/log n, the fraction of saturated
   * rows and the mean Jacobian norm of rows of n logits ~ N(0, σ²) (the same draws at every σ,
   * so the curves are smooth). Each row is sorted from its largest draw down, and at each σ only
   * the entries within 50 of the row's maximum are used: e^-50 is lost against a row sum >= 1. */
  function curves(n) {
    return cached(`curves ${n}`, () => {
      const count = Math.min(512, Math.max(4, Math.ceil(ROW_VALUES / n)));
      const rand = rng(n);
      const rows = Array.from({ length: count }, () => normals(rand, n).sort().reverse());
      const out = { entropy: [], saturated: [], jacobian: [] };
      const z = new Float64Array(n);
      const p = new Float64Array(n);
      for (const sigma of SIGMAS) {
        let h = 0, sat = 0, jac = 0;
        for (const row of rows) {
          let k = 0;
          while (k < n && sigma * (row[0] - row[k]) <= 50) z[k] = sigma * row[k++];
          const r = rowStats(z.subarray(0, k), p.subarray(0, k));
          h += r.entropy;
          sat += r.maxProbability > SATURATED ? 1 : 0;
          jac += r.jacobianNorm;
        }
        out.entropy.push(h / count / Math.log(n));
        out.saturated.push(sat / count);
        out.jacobian.push(jac / count);
      }
      return out;
    });
  }

  /** A curve over SIGMAS read at σ, linear in log σ (held at the ends). */
  function at(curve, sigma) {
    const x = (Math.log10(sigma) + 2) * PER_DECADE;
    if (x <= 0) return curve[0];
    if (x >= SIGMAS.length - 1) return curve[SIGMAS.length - 1];
    const i = Math.floor(x);
    return curve[i] + (x - i) * (curve[i + 1] - curve[i]);
  }

  function histogram(values, lo, hi) {
    const width = (hi - lo) / BINS;
    const counts = new Float64Array(BINS);
    for (const v of values) {
      const b = Math.floor((v - lo) / width);
      if (b >= 0 && b < BINS) counts[b] += 1;
    }
    const centres = Array.from({ length: BINS }, (_, i) => lo + (i + 0.5) * width);
    return { centres, density: Array.from(counts, (c) => c / (values.length * width)) };
  }

  /** Everything the charts and summaries show, for one setting of the sliders. */
  function compute(s) {
    const sigma = logitStd(s.dk, s.variance, s.scaled, s.temperature);
    const c = sigma / Math.sqrt(s.dk); // the factor from q·k of unit-variance entries to logits
    const d = draws(s.dk, s.n);
    const scores = Float64Array.from(d.pairs, (x) => c * x);
    let sq = 0;
    for (const x of scores) sq += x * x;
    const range = 4 * Math.max(sigma, 1);
    const hist = histogram(scores, -range, range);
    const gauss = hist.centres.map(
      (x) => Math.exp(-0.5 * (x / sigma) ** 2) / (sigma * Math.sqrt(2 * Math.PI)),
    );
    const row = Float64Array.from(d.row, (g) => c * d.norm * g);
    const stats = rowStats(row);
    const probs = stats.p.sort().reverse();
    const curve = curves(s.n);
    return {
      sigma,
      sampleStd: Math.sqrt(sq / scores.length),
      hist,
      gauss,
      probs,
      rowEntropy: stats.entropy / Math.log(s.n),
      rowMax: stats.maxProbability,
      rowJacobian: stats.jacobianNorm,
      curve,
      jacobianAt: at(curve.jacobian, sigma),
      byDk: DKS.map((dk) => logitStd(dk, s.variance, s.scaled, s.temperature)),
      entropyAt: at(curve.entropy, sigma),
      saturatedAt: at(curve.saturated, sigma),
    };
  }

  // -- text, in both editions ---------------------------------------------------------------

  const TEXT = {
    en: {
      name: "Attention explorer",
      dk: "key dimension d_k",
      scaled: "divide by √d_k",
      temperature: "temperature T",
      n: "sequence length n",
      variance: "variance of q and k entries",
      hist: "Scores c·q·k/T over 4096 pairs",
      histAxis: ["score", "density"],
      sample: "sampled",
      normal: "N(0, σ²)",
      row: "One attention row, probabilities sorted",
      rowAxis: ["rank", "probability"],
      jacobian: "Softmax Jacobian norm against the spread σ",
      jacobianAxis: ["logit spread σ", "‖J‖_F (mean over rows)"],
      byDk: "Expected entropy and saturated rows against d_k",
      byDkAxis: ["d_k", "share"],
      entropyName: "H / log n",
      saturatedName: "rows with max p > 0.99",
      you: "this setting",
      histSummary: (r) =>
        `Spread σ = ${f(r.sigma)} predicted; ${f(r.sampleStd)} in the 4096 sampled scores.`,
      rowSummary: (r, s) =>
        `One row of n = ${s.n} keys: entropy H/log n = ${f(r.rowEntropy)}, ` +
        `largest probability ${f(r.rowMax)} (uniform: ${f(1 / s.n)}).`,
      jacobianSummary: (r) =>
        `At σ = ${f(r.sigma)}: mean ‖J‖_F ${f(r.jacobianAt)}; this row's ${f(r.rowJacobian)}.`,
      byDkSummary: (r, s) =>
        `At d_k = ${s.dk}: expected H/log n ${f(r.entropyAt)}, ` +
        `saturated rows ${pct(r.saturatedAt)}.`,
      more: "Open the full explorer",
      tryIt: {
        variance: "Try it: move d_k and switch the scale off and on (q and k have entries of variance 1).",
        temperature: "Try it: one row of n = 256 scores q·k/(√d_k·T), d_k = 64, at the temperature T you set.",
      },
    },
    zh: {
      name: "注意力探索器",
      dk: "键维度 d_k",
      scaled: "除以 √d_k",
      temperature: "温度 T",
      n: "序列长度 n",
      variance: "q 与 k 各分量的方差",
      hist: "4096 对 q、k 的分数 c·q·k/T",
      histAxis: ["分数", "密度"],
      sample: "抽样",
      normal: "N(0, σ²)",
      row: "一行注意力：按大小排序的概率",
      rowAxis: ["名次", "概率"],
      jacobian: "Softmax 雅可比矩阵的范数随离散程度 σ 的变化",
      jacobianAxis: ["logit 离散程度 σ", "‖J‖_F（各行平均）"],
      byDk: "期望熵与饱和行随 d_k 的变化",
      byDkAxis: ["d_k", "比例"],
      entropyName: "H / log n",
      saturatedName: "最大概率 > 0.99 的行",
      you: "当前设置",
      histSummary: (r) =>
        `预测的离散程度 σ = ${f(r.sigma)}；4096 个抽样分数的标准差为 ${f(r.sampleStd)}。`,
      rowSummary: (r, s) =>
        `一行 n = ${s.n} 个键：熵 H/log n = ${f(r.rowEntropy)}，` +
        `最大概率 ${f(r.rowMax)}（均匀分布时为 ${f(1 / s.n)}）。`,
      jacobianSummary: (r) =>
        `σ = ${f(r.sigma)} 时：‖J‖_F 的平均值为 ${f(r.jacobianAt)}；这一行为 ${f(r.rowJacobian)}。`,
      byDkSummary: (r, s) =>
        `d_k = ${s.dk} 时：期望 H/log n 为 ${f(r.entropyAt)}，饱和行占 ${pct(r.saturatedAt)}。`,
      more: "打开完整的探索器",
      tryIt: {
        variance: "动手试试：拖动 d_k，并关闭或打开缩放（q 与 k 各分量的方差为 1）。",
        temperature: "动手试试：一行 n = 256 个分数 q·k/(√d_k·T)，d_k = 64，温度 T 由你设定。",
      },
    },
  };

  function f(x) {
    if (x === 0) return "0";
    const a = Math.abs(x);
    return a >= 1e4 || a < 1e-3 ? x.toExponential(2) : x.toPrecision(3);
  }
  function pct(x) {
    return `${(100 * x).toFixed(x > 0 && x < 0.01 ? 2 : 0)}%`;
  }

  // -- controls -----------------------------------------------------------------------------

  // Each slider moves over exponents of 2 (log scale), the checkbox is the scale.
  const CONTROLS = {
    dk: { min: 4, max: 12, step: 1, value: 6, show: (e) => String(2 ** e) },
    temperature: { min: -2, max: 2, step: 0.25, value: 0, show: (e) => f(2 ** e) },
    n: { min: 3, max: 12, step: 1, value: 8, show: (e) => String(2 ** e) },
    variance: { min: -2, max: 2, step: 0.25, value: 0, show: (e) => f(2 ** e) },
  };
  const KINDS = {
    full: { controls: ["dk", "scaled", "temperature", "n", "variance"], charts: ["hist", "row", "jacobian", "byDk"] },
    variance: { controls: ["dk", "scaled"], charts: ["hist"] },
    temperature: { controls: ["temperature"], charts: ["row"] },
  };

  let uid = 0;

  function element(tag, attrs = {}, text = "") {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text) el.textContent = text;
    return el;
  }

  function colours() {
    const css = getComputedStyle(document.body);
    const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
    return {
      fg: v("--md-default-fg-color", "#000"),
      grid: v("--md-default-fg-color--lightest", "#ddd"),
      main: v("--md-typeset-a-color", "#3f51b5"),
      accent: v("--md-accent-fg-color", "#ff6e42"),
      second: v("--md-default-fg-color--light", "#666"),
    };
  }

  /** A CSS colour with opacity ``alpha`` (canvas needs a colour it can parse). */
  function withAlpha(colour, alpha) {
    const probe = element("span");
    probe.style.color = colour;
    document.body.append(probe);
    const rgb = getComputedStyle(probe).color.match(/[\d.]+/g) || ["0", "0", "0"];
    probe.remove();
    return `rgba(${rgb[0]}, ${rgb[1]}, ${rgb[2]}, ${alpha})`;
  }

  function axis(label, c, extra = {}) {
    return {
      label,
      stroke: c.fg,
      grid: { stroke: c.grid, width: 1 },
      ticks: { stroke: c.grid, width: 1 },
      ...extra,
    };
  }

  /** A dot on each point of ``points(u)``, drawn over the chart. */
  function dots(points, colour) {
    return (u) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = colour;
      ctx.strokeStyle = getComputedStyle(document.body).getPropertyValue("--md-default-bg-color") || "#fff";
      ctx.lineWidth = 2 * devicePixelRatio;
      for (const [x, y] of points(u)) {
        const px = u.valToPos(x, "x", true);
        const py = u.valToPos(y, "y", true);
        ctx.beginPath();
        ctx.arc(px, py, 5 * devicePixelRatio, 0, 2 * Math.PI);
        ctx.fill();
        ctx.stroke();
      }
      ctx.restore();
    };
  }

  class Explorer {
    constructor(root) {
      this.root = root;
      this.kind = KINDS[root.dataset.kind] ? root.dataset.kind : "full";
      this.lang = document.documentElement.lang.startsWith("zh") ? "zh" : "en";
      this.t = TEXT[this.lang];
      this.state = { dk: 64, scaled: true, temperature: 1, n: 256, variance: 1 };
      this.charts = {};
      this.redraws = [];
      this.build();
      this.update();
      new ResizeObserver(() => this.resize()).observe(this.root);
      // Material switches the colour scheme with an attribute on <body>: redraw in its colours.
      new MutationObserver(() => this.restyle()).observe(document.body, {
        attributes: true,
        attributeFilter: ["data-md-color-scheme"],
      });
    }

    build() {
      const { controls, charts } = KINDS[this.kind];
      this.root.replaceChildren();
      this.root.classList.add(`explorer-${this.kind}`);
      this.root.setAttribute("role", "group");
      this.root.setAttribute("aria-label", this.t.name);
      if (this.kind !== "full") this.root.append(element("p", { class: "explorer-intro" }, this.t.tryIt[this.kind]));
      const form = element("div", { class: "explorer-controls" });
      for (const name of controls) form.append(this.control(name));
      this.root.append(form);
      const grid = element("div", { class: "explorer-charts" });
      for (const name of charts) {
        const id = `explorer-${++uid}`;
        const figure = element("figure", { class: "explorer-chart", "aria-labelledby": `${id}-title` });
        figure.append(element("figcaption", { id: `${id}-title` }, this.t[name]));
        const plot = element("div", { class: "explorer-plot", role: "img", "aria-describedby": `${id}-summary` });
        const summary = element("p", { class: "explorer-summary", id: `${id}-summary`, "aria-live": "polite" });
        figure.append(plot, summary);
        grid.append(figure);
        this.charts[name] = { plot, summary, figure, u: null };
      }
      this.root.append(grid);
      if (this.kind !== "full" && this.root.dataset.more) {
        const p = element("p", { class: "explorer-more" });
        p.append(element("a", { href: this.root.dataset.more }, this.t.more));
        this.root.append(p);
      }
    }

    control(name) {
      const wrap = element("div", { class: "explorer-control" });
      const id = `explorer-${++uid}-${name}`;
      if (name === "scaled") {
        const box = element("input", { type: "checkbox", id, name });
        box.checked = this.state.scaled;
        box.addEventListener("change", () => {
          this.state.scaled = box.checked;
          this.update();
        });
        wrap.append(box, element("label", { for: id }, this.t.scaled));
        wrap.classList.add("explorer-check");
        return wrap;
      }
      const spec = CONTROLS[name];
      const slider = element("input", {
        type: "range", id, name, min: spec.min, max: spec.max, step: spec.step,
      });
      slider.value = String(Math.log2(this.state[name]));
      const out = element("output", { for: id });
      const show = () => {
        const text = spec.show(Number(slider.value));
        out.textContent = text;
        slider.setAttribute("aria-valuetext", `${this.t[name]} = ${text}`);
      };
      show();
      slider.addEventListener("input", () => {
        this.state[name] = 2 ** Number(slider.value);
        show();
        this.update();
      });
      wrap.append(element("label", { for: id }, this.t[name]), slider, out);
      return wrap;
    }

    /** Recompute and redraw; the time it took is kept in ``redraws`` (milliseconds). */
    update() {
      const start = performance.now();
      const s = this.state;
      const r = compute(s);
      this.result = r;
      const t = this.t;
      const put = (name, data, summary) => {
        const chart = this.charts[name];
        if (!chart) return;
        chart.data = data;
        if (chart.u) chart.u.setData(data);
        else chart.u = this.make(name, data);
        chart.summary.textContent = summary;
        chart.plot.setAttribute("aria-label", `${t[name]}. ${summary}`);
      };
      put("hist", [r.hist.centres, r.hist.density, r.gauss], t.histSummary(r, s));
      put("row", [Array.from(r.probs, (_, i) => i + 1), Array.from(r.probs, (p) => Math.max(p, P_FLOOR))], t.rowSummary(r, s));
      put("jacobian", [SIGMAS, r.curve.jacobian], t.jacobianSummary(r, s));
      put("byDk", [DKS, DKS.map((_, i) => at(r.curve.entropy, r.byDk[i])), DKS.map((_, i) => at(r.curve.saturated, r.byDk[i]))], t.byDkSummary(r, s));
      this.redraws.push(performance.now() - start);
    }

    width(name) {
      return Math.max(240, Math.floor(this.charts[name].figure.clientWidth) || 320);
    }

    make(name, data) {
      const c = colours();
      const t = this.t;
      const me = this;
      const base = { width: this.width(name), height: 220, legend: { show: name === "hist" || name === "byDk", live: false }, cursor: { show: false } };
      let opts;
      if (name === "hist") {
        opts = {
          ...base,
          scales: { x: { time: false } },
          axes: [axis(t.histAxis[0], c), axis(t.histAxis[1], c, { size: 60 })],
          series: [
            {},
            { label: t.sample, stroke: c.main, fill: withAlpha(c.main, 0.35), paths: uPlot.paths.bars({ size: [1, Infinity] }) },
            { label: t.normal, stroke: c.accent, width: 2 },
          ],
        };
      } else if (name === "row") {
        opts = {
          ...base,
          scales: {
            x: { time: false, distr: 3, range: (u, lo, hi) => [1, Math.max(hi, 2)] },
            y: { distr: 3, range: (u, lo) => [10 ** Math.floor(Math.log10(lo)), 1] },
          },
          axes: [
            axis(t.rowAxis[0], c),
            axis(t.rowAxis[1], c, {
              size: 60,
              values: (u, v) => v.map((p) => (p == null ? "" : p >= 1e-3 ? String(p) : p.toExponential(0))),
            }),
          ],
          series: [{}, { label: t.row, stroke: c.main, width: 2 }],
        };
      } else if (name === "jacobian") {
        opts = {
          ...base,
          scales: { x: { time: false, distr: 3 }, y: { range: (u, lo, hi) => [0, Math.max(hi, 1e-3) * 1.05] } },
          axes: [axis(t.jacobianAxis[0], c), axis(t.jacobianAxis[1], c, { size: 60 })],
          series: [{}, { label: t.jacobian, stroke: c.main, width: 2 }],
          hooks: { draw: [dots(() => [[me.result.sigma, me.result.jacobianAt]], c.accent)] },
        };
      } else {
        opts = {
          ...base,
          scales: { x: { time: false, distr: 3, log: 2 }, y: { range: [0, 1.02] } },
          axes: [axis(t.byDkAxis[0], c, { values: (u, v) => v.map((x) => (x == null ? "" : String(Math.round(x)))) }), axis(t.byDkAxis[1], c, { size: 50 })],
          series: [
            {},
            { label: t.entropyName, stroke: c.main, width: 2 },
            { label: t.saturatedName, stroke: c.accent, width: 2, dash: [6, 4] },
          ],
          hooks: {
            draw: [
              dots(() => [[me.state.dk, me.result.entropyAt]], c.main),
              dots(() => [[me.state.dk, me.result.saturatedAt]], c.accent),
            ],
          },
        };
      }
      return new uPlot(opts, data, this.charts[name].plot);
    }

    resize() {
      for (const [name, chart] of Object.entries(this.charts)) {
        if (chart.u && Math.abs(chart.u.width - this.width(name)) > 4) {
          chart.u.setSize({ width: this.width(name), height: 220 });
        }
      }
    }

    restyle() {
      for (const [name, chart] of Object.entries(this.charts)) {
        if (!chart.u) continue;
        chart.u.destroy();
        chart.u = this.make(name, chart.data);
      }
    }
  }

  const instances = [];
  let warmed;
  const ready = new Promise((resolve) => (warmed = resolve));

  function start() {
    for (const root of document.querySelectorAll(".attnscale-explorer:not([data-started])")) {
      root.dataset.started = "";
      instances.push(new Explorer(root));
    }
    // The σ curves of every n, one n per task while the page is idle: a move of the n slider
    // then only reads them (computing them takes longer than a redraw at large n).
    const { min, max } = CONTROLS.n;
    const todo = Array.from({ length: max - min + 1 }, (_, i) => 2 ** (min + i));
    const next = () => {
      if (!todo.length || !instances.some((e) => e.kind === "full")) return warmed();
      curves(todo.shift());
      setTimeout(next, 0);
    };
    setTimeout(next, 0);
  }

  window.attnscaleExplorer = {
    math: { rng, normal, normals, logitStd, rowStats, softmax, entropy, maxProbability, jacobianNorm, saturatedFraction },
    instances,
    ready, // resolves once the σ curves of every n are computed
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
