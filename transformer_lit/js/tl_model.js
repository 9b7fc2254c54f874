/* tl_model.js: the course's decoder-only language model, forward pass in plain JavaScript (no library).
 *
 * Reading this file is a review of the course. Each function names the chapter section it implements:
 *   token embedding ........ 09 "Token embeddings, and why √d_model"   (no √d_model factor: LLaMA-style)
 *   RMSNorm ................ 03 "RMSNorm"
 *   RoPE ................... 05 "Rotary position embedding, RoPE"       (pairs (i, i + D/2), as LLaMA and Hugging Face)
 *   grouped-query attention  01 "Multi-query and grouped-query attention" and 00 "The causal mask"
 *   the KV cache ........... 10 "The KV cache as an explicit object"
 *   SwiGLU ................. 04 "SwiGLU: the gated FFN of PaLM and LLaMA"
 *   pre-norm residual block  03 "Pre-norm and post-norm: where the norm sits"
 *   tied unembedding ....... 09 "Weight tying: what it saves"
 *   sampling filters ....... 10 "Choosing the next token: the sampling filters"
 *   the tokenizer .......... 14 "Reading its tokenizer"                (regex pieces, then byte-pair merges by rank)
 * The weights come from `python -m transformer_lit.browser export <model dir>` (a manifest.json and a weights.bin;
 * the manifest also carries the vocabulary in id order, the tokenizer's piece regex and its merges in rank order),
 * stored as float16 or as int8 with one float32 scale per row, and are turned into float32 once, at load.
 * All arithmetic is float32 storage (Float32Array) with float64 accumulators (JavaScript numbers).
 *
 * The same file runs in three places: loaded by a <script> tag (it defines `TLModel`), as a Web Worker (it
 * answers messages, see the end of the file), and under Node (module.exports).
 */
(function (global) {
  "use strict";

  // -- float16 -> float32 for every one of the 65536 bit patterns, computed once (no Float16Array needed)
  var HALF = null;
  function halfTable() {
    if (HALF) return HALF;
    HALF = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
      HALF[h] = e === 0 ? s * f * Math.pow(2, -24)                      // subnormal: f · 2^-24
              : e === 31 ? (f ? NaN : s * Infinity)
              : s * (1 + f / 1024) * Math.pow(2, e - 15);
    }
    return HALF;
  }

  // -- one tensor of the manifest, as float32: float16 looked up, int8 times its row's scale, float32 copied
  function dequantise(t, buffer) {
    var n = t.shape.reduce(function (a, b) { return a * b; }, 1), out = new Float32Array(n), i;
    if (t.dtype === "float32") out.set(new Float32Array(buffer, t.offset, n));
    else if (t.dtype === "float16") {
      var h = new Uint16Array(buffer, t.offset, n), tab = halfTable();
      for (i = 0; i < n; i++) out[i] = tab[h[i]];
    } else if (t.dtype === "int8") {
      var q = new Int8Array(buffer, t.offset, n), rows = t.shape[0], cols = n / rows;
      var sc = new Float32Array(buffer, t.scale_offset, rows);
      for (var r = 0; r < rows; r++) { var a = sc[r], o = r * cols; for (i = 0; i < cols; i++) out[o + i] = q[o + i] * a; }
    } else throw new Error("tensor " + t.name + ": unknown dtype " + t.dtype);
    return out;
  }

  // -- y = W x for W of shape (rows, cols) stored row by row: each output reads one contiguous row (cache friendly);
  //    four rows at a time share each load of x and give the CPU four independent sums to overlap
  function matvec(W, x, y, rows, cols) {
    var r = 0, i;
    for (; r + 3 < rows; r += 4) {
      var o0 = r * cols, o1 = o0 + cols, o2 = o1 + cols, o3 = o2 + cols, a = 0, b = 0, c = 0, d = 0;
      for (i = 0; i < cols; i++) {
        var xi = x[i];
        a += W[o0 + i] * xi; b += W[o1 + i] * xi; c += W[o2 + i] * xi; d += W[o3 + i] * xi;
      }
      y[r] = a; y[r + 1] = b; y[r + 2] = c; y[r + 3] = d;
    }
    for (; r < rows; r++) {
      var q = r * cols, c0 = 0;
      for (i = 0; i < cols; i++) c0 += W[q + i] * x[i];
      y[r] = c0;
    }
    return y;
  }

  // -- 03 "RMSNorm": y = x / sqrt(mean(x²) + ε) · g   (no mean subtracted, no bias)
  function rmsNorm(x, g, eps, y) {
    var n = x.length, ss = 0, i;
    for (i = 0; i < n; i++) ss += x[i] * x[i];
    var inv = 1 / Math.sqrt(ss / n + eps);
    for (i = 0; i < n; i++) y[i] = x[i] * inv * g[i];
    return y;
  }

  // -- 05 "Rotary position embedding, RoPE": rotate each pair (x_i, x_{i+D/2}) of every head by pos · θ_i,
  //    θ_i = base^(-2i/D). The pairing is the course's default (interleaved=False), the one LLaMA checkpoints use.
  function rope(x, nHeads, D, cos, sin) {
    var half = D / 2;
    for (var h = 0; h < nHeads; h++) {
      var o = h * D;
      for (var i = 0; i < half; i++) {
        var a = x[o + i], b = x[o + i + half];
        x[o + i] = a * cos[i] - b * sin[i];                            // rotate_half: (x1, x2) -> (-x2, x1)
        x[o + i + half] = b * cos[i] + a * sin[i];
      }
    }
  }

  // -- 04 "SwiGLU": hidden = SiLU(W1 x) ⊙ (W3 x), then W2 hidden
  function swiglu(gate, up, n) {
    for (var i = 0; i < n; i++) { var g = gate[i]; gate[i] = g / (1 + Math.exp(-g)) * up[i]; }
    return gate;
  }

  // -- 14 "Reading its tokenizer": text -> ids as the checkpoint's tokenizer.json says. The text is cut into pieces by
  //    a regex (its matches and the text between them: a token never crosses a piece's edge); inside a piece, start
  //    from its characters and merge the adjacent pair learned earliest, again and again, until no learned pair is
  //    left (Sennrich et al. 2016). Without merges (a word-level vocabulary, e.g. one character per token) each piece
  //    is one token. Tokens are keys of Maps, never of plain objects: a token may be spelled "constructor".
  //    spec = {pattern: "...", merges: [[left, right], ...] in rank order, or null}
  function Tokenizer(vocab, spec) {
    var ids = this.ids = new Map(), chars = this.chars = new Set(), ranks = null;
    this.vocab = vocab;
    vocab.forEach(function (t, i) { ids.set(t, i); if (Array.from(t).length === 1) chars.add(t); });
    this.pattern = new RegExp(spec.pattern, "gu");                   // "g": all matches; "u": code points, as Python
    if (spec.merges) {                                               // rank of (left, right): ranks.get(left).get(right)
      ranks = new Map();
      spec.merges.forEach(function (m, r) {
        if (!ids.has(m[0] + m[1])) throw new Error("merge " + JSON.stringify(m) + ": its join is not a token");
        if (!ranks.has(m[0])) ranks.set(m[0], new Map());
        if (!ranks.get(m[0]).has(m[1])) ranks.get(m[0]).set(m[1], r);
      });
    }
    this.ranks = ranks; this.cache = new Map();
  }
  // -- the regex's matches and the text between them, in order (the patterns shipped never match an empty string)
  Tokenizer.prototype.pieces = function (text) {
    var re = this.pattern, out = [], end = 0, m;
    re.lastIndex = 0;
    while ((m = re.exec(text)) !== null) {
      if (m.index > end) out.push(text.slice(end, m.index));
      if (m[0].length) out.push(m[0]); else re.lastIndex += text.codePointAt(re.lastIndex) > 0xffff ? 2 : 1;
      end = m.index + m[0].length;
    }
    if (end < text.length) out.push(text.slice(end));
    return out;
  };
  // -- one piece into tokens: merge the adjacent pair of lowest rank (the leftmost on a tie) until none is learned
  Tokenizer.prototype.merge = function (piece) {
    var parts = Array.from(piece), ranks = this.ranks;
    while (parts.length > 1) {
      var best = Infinity, at = -1;
      for (var i = 0; i + 1 < parts.length; i++) {
        var row = ranks.get(parts[i]), r = row === undefined ? undefined : row.get(parts[i + 1]);
        if (r !== undefined && r < best) { best = r; at = i; }
      }
      if (at < 0) break;
      parts.splice(at, 2, parts[at] + parts[at + 1]);
    }
    return parts;
  };
  // -- text -> {ids, unknown}: characters the vocabulary lacks are left out and reported, never guessed
  Tokenizer.prototype.encode = function (text) {
    var known = "", unknown = [], ids = [], chars = Array.from(text), i, j;
    for (i = 0; i < chars.length; i++) {
      if (this.chars.has(chars[i])) known += chars[i];
      else if (unknown.indexOf(chars[i]) < 0) unknown.push(chars[i]);
    }
    var pieces = this.pieces(known);
    for (i = 0; i < pieces.length; i++) {
      var got = this.cache.get(pieces[i]);
      if (got === undefined) {
        var toks = this.ranks ? this.merge(pieces[i]) : [pieces[i]];
        got = [];
        for (j = 0; j < toks.length; j++) {
          var id = this.ids.get(toks[j]);
          if (id === undefined) { if (unknown.indexOf(toks[j]) < 0) unknown.push(toks[j]); } else got.push(id);
        }
        this.cache.set(pieces[i], got);
      }
      for (j = 0; j < got.length; j++) ids.push(got[j]);
    }
    return { ids: ids, unknown: unknown };
  };
  Tokenizer.prototype.decode = function (ids) { var v = this.vocab; return ids.map(function (i) { return v[i]; }).join(""); };

  function Model(manifest, buffer) {
    var c = this.config = manifest.config;
    if (c.norm !== "rms" || c.positional !== "rope" || c.activation !== "swiglu")
      throw new Error("tl_model.js runs RMSNorm + RoPE + SwiGLU models only, got " + [c.norm, c.positional, c.activation]);
    this.manifest = manifest;
    this.vocab = manifest.vocab;
    this.tokenizer = new Tokenizer(manifest.vocab, manifest.tokenizer);
    var W = this.w = {}, i;
    manifest.tensors.forEach(function (t) { W[t.name] = dequantise(t, buffer); });
    this.E = c.d_model; this.H = c.n_heads; this.G = c.n_kv_heads; this.D = c.head_dim; this.F = c.d_ff;
    this.L = c.n_layers; this.V = c.vocab_size; this.T = c.max_len;
    this.U = W["lm_head"] || W["embed"];                               // 09 "Weight tying": U = E when tied
    // -- 05 RoPE: the cos/sin tables for every position of the context, in float64 then stored as float32 (as PyTorch)
    var half = this.D / 2;
    this.cos = []; this.sin = [];
    for (var p = 0; p < this.T; p++) {
      var cs = new Float32Array(half), sn = new Float32Array(half);
      for (i = 0; i < half; i++) { var ang = p * Math.pow(c.rope_base, -2 * i / this.D); cs[i] = Math.cos(ang); sn[i] = Math.sin(ang); }
      this.cos.push(cs); this.sin.push(sn);
    }
    // -- scratch vectors, allocated once: a step allocates nothing but its returned logits
    var E = this.E, HD = this.H * this.D, GD = this.G * this.D;
    this.s = { x: new Float32Array(E), h: new Float32Array(E), q: new Float32Array(HD), k: new Float32Array(GD),
               v: new Float32Array(GD), a: new Float32Array(HD), o: new Float32Array(E), g: new Float32Array(this.F),
               u: new Float32Array(this.F), sc: new Float64Array(this.T) };
  }

  // -- 10 "The KV cache as an explicit object": per layer, keys and values of every position so far, (G, T, D) each
  Model.prototype.newCache = function () {
    var layers = [];
    for (var l = 0; l < this.L; l++)
      layers.push({ k: new Float32Array(this.G * this.T * this.D), v: new Float32Array(this.G * this.T * this.D) });
    return { layers: layers, length: 0 };
  };

  // -- 01 "Multi-query and grouped-query attention" + 00 "The causal mask": query head h reads key/value head
  //    floor(h / (H/G)); the new token sees positions 0..t (the cache), so the causal mask is the loop bound.
  //    Scores are scaled by 1/sqrt(D) (02 "why divide by sqrt(d_k)"); the softmax is in float64.
  Model.prototype.attend = function (layer, t, attn) {
    var D = this.D, T = this.T, rep = this.H / this.G, scale = 1 / Math.sqrt(D);
    var K = layer.k, Vc = layer.v, q = this.s.q, a = this.s.a, sc = this.s.sc, j, i;
    for (var h = 0; h < this.H; h++) {
      var g = Math.floor(h / rep), qo = h * D, base = g * T * D, m = -Infinity;
      for (j = 0; j <= t; j++) {                                       // scores q·k_j / sqrt(D)
        var ko = base + j * D, dot = 0;
        for (i = 0; i < D; i++) dot += q[qo + i] * K[ko + i];
        dot *= scale; sc[j] = dot; if (dot > m) m = dot;
      }
      var z = 0;
      for (j = 0; j <= t; j++) { var e = Math.exp(sc[j] - m); sc[j] = e; z += e; }   // softmax, max subtracted
      for (i = 0; i < D; i++) a[qo + i] = 0;
      for (j = 0; j <= t; j++) {                                       // weighted sum of the values
        var w = sc[j] / z, vo = base + j * D;
        if (attn) attn[h][j] = w;
        for (i = 0; i < D; i++) a[qo + i] += w * Vc[vo + i];
      }
    }
  };

  // -- 09 "The decoder-only language model": one new token through every block, its keys and values appended to
  //    the cache; returns the next-token logits (Float32Array of V). With `keepAttention`, also the attention row
  //    of the new token in every layer and head: out.attention[layer][head] = Float32Array(t + 1).
  Model.prototype.step = function (cache, token, keepAttention) {
    var t = cache.length, s = this.s, W = this.w, E = this.E, D = this.D, T = this.T, eps = this.config.eps;
    if (t >= T) throw new Error("the context is full: " + T + " tokens");
    if (!(token >= 0 && token < this.V)) throw new Error("token " + token + " is not in 0.." + (this.V - 1));
    s.x.set(W["embed"].subarray(token * E, (token + 1) * E));          // 09: the token's row of the embedding
    var attention = keepAttention ? [] : null;
    for (var l = 0; l < this.L; l++) {
      var p = "layers." + l + ".", layer = cache.layers[l];
      // -- 03 pre-norm: x = x + Attention(RMSNorm(x))
      rmsNorm(s.x, W[p + "attn_norm"], eps, s.h);
      matvec(W[p + "wq"], s.h, s.q, this.H * D, E);
      matvec(W[p + "wk"], s.h, s.k, this.G * D, E);
      matvec(W[p + "wv"], s.h, s.v, this.G * D, E);
      rope(s.q, this.H, D, this.cos[t], this.sin[t]);
      rope(s.k, this.G, D, this.cos[t], this.sin[t]);
      for (var g = 0; g < this.G; g++) {                               // 10: append k, v at slot t of the cache
        layer.k.set(s.k.subarray(g * D, (g + 1) * D), (g * T + t) * D);
        layer.v.set(s.v.subarray(g * D, (g + 1) * D), (g * T + t) * D);
      }
      var rows = null;
      if (keepAttention) { rows = []; for (var h = 0; h < this.H; h++) rows.push(new Float32Array(t + 1)); attention.push(rows); }
      this.attend(layer, t, rows);
      matvec(W[p + "wo"], s.a, s.o, E, this.H * D);
      for (var i = 0; i < E; i++) s.x[i] += s.o[i];
      // -- 03 pre-norm: x = x + SwiGLU(RMSNorm(x))
      rmsNorm(s.x, W[p + "ffn_norm"], eps, s.h);
      matvec(W[p + "w1"], s.h, s.g, this.F, E);
      matvec(W[p + "w3"], s.h, s.u, this.F, E);
      swiglu(s.g, s.u, this.F);
      matvec(W[p + "w2"], s.g, s.o, E, this.F);
      for (i = 0; i < E; i++) s.x[i] += s.o[i];
    }
    cache.length = t + 1;
    // -- 09: final RMSNorm, then logits = h Uᵀ with the tied unembedding U = E
    rmsNorm(s.x, W["norm"], eps, s.h);
    var logits = matvec(this.U, s.h, new Float32Array(this.V), this.V, E);
    return keepAttention ? { logits: logits, attention: attention } : logits;
  };

  // -- text <-> ids with the model's own tokenizer (see Tokenizer above)
  Model.prototype.encode = function (text) { return this.tokenizer.encode(text); };
  Model.prototype.decode = function (ids) { return this.tokenizer.decode(ids); };

  // -- greedy continuation: the argmax of each step's logits, fed back through the cache
  Model.prototype.greedy = function (ids, n) {
    var cache = this.newCache(), logits = null, out = [];
    for (var i = 0; i < ids.length; i++) logits = this.step(cache, ids[i]);
    for (var k = 0; k < n && cache.length < this.T; k++) {
      var best = argmax(logits); out.push(best);
      if (k + 1 < n && cache.length < this.T) logits = this.step(cache, best);
    }
    return out;
  };

  function argmax(a) { var b = 0; for (var i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; }

  // -- 10 "Choosing the next token: the sampling filters": softmax(logits / temperature), then top-p keeps the
  //    smallest set of most likely tokens whose probability reaches p, renormalised. Returns [{id, p}] by p, descending.
  function distribution(logits, temperature, topP) {
    var n = logits.length, m = -Infinity, i, probs = [];
    if (temperature <= 0) { var b = argmax(logits); return [{ id: b, p: 1 }]; }
    for (i = 0; i < n; i++) m = Math.max(m, logits[i] / temperature);
    var z = 0;
    for (i = 0; i < n; i++) { var e = Math.exp(logits[i] / temperature - m); probs.push({ id: i, p: e }); z += e; }
    probs.forEach(function (o) { o.p /= z; });
    probs.sort(function (a, b) { return b.p - a.p || a.id - b.id; });
    var kept = [], cum = 0;
    for (i = 0; i < n; i++) { kept.push(probs[i]); cum += probs[i].p; if (cum >= topP) break; }
    kept.forEach(function (o) { o.p /= cum; });
    return kept;
  }
  function sample(dist, u) {                                           // u uniform in [0, 1)
    var c = 0;
    for (var i = 0; i < dist.length; i++) { c += dist[i].p; if (u < c) return dist[i].id; }
    return dist[dist.length - 1].id;
  }

  // -- loading: the manifest (JSON) and the weights (one binary file) from two URLs. fetchFiles runs on the page:
  //    a worker whose script JupyterLab serves from /files/ runs sandboxed (the server's Content-Security-Policy
  //    "sandbox allow-scripts" gives it an opaque origin), so it cannot fetch; the page fetches and hands the bytes over.
  function fetchFiles(manifestUrl, weightsUrl) {
    return fetch(manifestUrl).then(function (r) {
      if (!r.ok) throw new Error(manifestUrl + ": HTTP " + r.status); return r.json();
    }).then(function (manifest) {
      return fetch(weightsUrl).then(function (r) {
        if (!r.ok) throw new Error(weightsUrl + ": HTTP " + r.status); return r.arrayBuffer();
      }).then(function (buf) {
        if (buf.byteLength !== manifest.weights_bytes)
          throw new Error(weightsUrl + " has " + buf.byteLength + " bytes; the manifest says " + manifest.weights_bytes);
        return { manifest: manifest, weights: buf };
      });
    });
  }
  function load(manifestUrl, weightsUrl) {
    return fetchFiles(manifestUrl, weightsUrl).then(function (f) { return new Model(f.manifest, f.weights); });
  }

  var api = { Model: Model, Tokenizer: Tokenizer, load: load, fetchFiles: fetchFiles, distribution: distribution, sample: sample, argmax: argmax,
              dequantise: dequantise, rmsNorm: rmsNorm, rope: rope, matvec: matvec };

  // -- as a Web Worker: the page stays responsive while the model loads and runs. Messages in:
  //    {model: {manifest, weights}} (what fetchFiles returns, the weights' ArrayBuffer transferred), {reset: ids} (a new
  //    prompt: runs it through a fresh cache), {step: id}. Out: {ready, manifest} | {logits, attention: rows of the new
  //    tokens, length, ms, n} | {error}.
  var isWorker = typeof WorkerGlobalScope !== "undefined" && global instanceof WorkerGlobalScope;
  if (isWorker) {
    var model = null, cache = null;
    global.onmessage = function (e) {
      var msg = e.data;
      try {
        if (msg.model) {
          model = new Model(msg.model.manifest, msg.model.weights);
          global.postMessage({ ready: true, manifest: model.manifest });
          return;
        }
        var ids = msg.reset || [msg.step], rows = [], out = null, t0 = Date.now();
        if (msg.reset) cache = model.newCache();
        for (var i = 0; i < ids.length; i++) { out = model.step(cache, ids[i], true); rows.push(out.attention); }
        global.postMessage({ logits: out && out.logits, attention: rows, length: cache.length, ms: Date.now() - t0, n: ids.length });
      } catch (err) { global.postMessage({ error: String(err.message || err) }); }
    };
  }
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else global.TLModel = api;
})(typeof self !== "undefined" ? self : this);
