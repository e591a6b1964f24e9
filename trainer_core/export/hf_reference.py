#!/usr/bin/env python3
"""An exported model read and run as a Hugging Face Mixtral or Qwen2-MoE
loader would, in plain Python (no numpy, no torch): the check that
trellis-export's layout means what config.json says.

The safetensors files are read from the format's description alone: an
unsigned 64-bit little-endian header length, a JSON header {name: {dtype,
shape, data_offsets [begin, end)}} (offsets into the bytes after the header),
the tensors' bytes; model.safetensors.index.json maps each name to its file.
The forward follows transformers' MixtralForCausalLM: embed, per layer
RMSNorm -> grouped-query attention (rotate-half RoPE, causal, 1/sqrt(head_dim))
-> residual -> RMSNorm -> sparse MoE (softmax over the router's logits, top k,
the k gates renormalized, SwiGLU experts w2(silu(w1 x) * w3 x)) -> residual;
final RMSNorm, lm_head. Qwen2MoeForCausalLM differs in its names, q/k/v
biases, and a shared expert scaled by sigmoid(shared_expert_gate x).
config.json's trellis_extensions add the balancing bias (added to the
probabilities to choose experts only), as hf_layout.h documents.

  hf_reference.py MODEL_DIR BATCHES.safetensors STEP
prints {"loss": mean cross entropy of step STEP's batch, "tokens": targets};
  hf_reference.py MODEL_DIR
only loads the model: {"tensors": count, "bytes": of their data}.
"""
import json
import math
import operator
import os
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        count = 1
        for d in info["shape"]:
            count *= d
        if len(raw) != count * (2 if info["dtype"] == "BF16" else 4):
            raise SystemExit("%s: tensor %s: %d bytes for shape %s" % (path, name, len(raw),
                                                                      info["shape"]))
        if info["dtype"] == "F32":
            values = list(struct.unpack("<%df" % count, raw))
        elif info["dtype"] == "BF16":
            halves = struct.unpack("<%dH" % count, raw)
            values = list(struct.unpack("<%df" % count,
                                        struct.pack("<%dI" % count, *[h << 16 for h in halves])))
        elif info["dtype"] == "I32":
            values = list(struct.unpack("<%di" % count, raw))
        else:
            raise SystemExit("%s: tensor %s has dtype %s" % (path, name, info["dtype"]))
        out[name] = (info["shape"], values)
    return out


def load_model(model_dir):
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    weights = {}
    for file in sorted(set(index["weight_map"].values())):
        weights.update(read_safetensors(os.path.join(model_dir, file)))
    if set(weights) != set(index["weight_map"]):
        raise SystemExit("the files' tensors differ from the index's weight_map")
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f), weights


def rows(tensor):  # [out, in] as a list of rows
    (out_dim, in_dim), values = tensor
    return [values[i * in_dim:(i + 1) * in_dim] for i in range(out_dim)]


def linear(x, w_rows):  # y = W x
    return [sum(map(operator.mul, row, x)) for row in w_rows]


def rms_norm(x, w, eps):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * scale * g for v, g in zip(x, w)]


def rope(vec, pos, theta):  # rotate-half, as transformers' apply_rotary_pos_emb
    half = len(vec) // 2
    out = list(vec)
    for i in range(half):
        angle = pos * theta ** (-2.0 * i / len(vec))
        c, s = math.cos(angle), math.sin(angle)
        out[i] = vec[i] * c - vec[i + half] * s
        out[i + half] = vec[i + half] * c + vec[i] * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def swiglu(x, gate, up, down):
    h = [silu(g) * u for g, u in zip(linear(x, gate), linear(x, up))]
    return linear(h, down)


def softmax(xs):
    m = max(xs)
    e = [math.exp(v - m) for v in xs]
    s = sum(e)
    return [v / s for v in e]


def layer(cfg, w, i, xs):
    p = "model.layers.%d." % i
    qwen = cfg["model_type"] == "qwen2_moe"
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    heads, kv_heads, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    wq, wk, wv, wo = (rows(w[p + "self_attn.%s_proj.weight" % n]) for n in "qkvo")

    def project(x, weight, n):
        y = linear(x, weight)
        if qwen:  # Qwen2-MoE's q/k/v projections have biases
            y = [a + b for a, b in zip(y, w[p + "self_attn.%s_proj.bias" % n][1])]
        return y

    normed = [rms_norm(x, w[p + "input_layernorm.weight"][1], eps) for x in xs]
    q = [project(x, wq, "q") for x in normed]
    k = [project(x, wk, "k") for x in normed]
    v = [project(x, wv, "v") for x in normed]
    attn = [[0.0] * (heads * hd) for _ in xs]
    for h in range(heads):
        kvh = h // (heads // kv_heads)
        qs = [rope(q[t][h * hd:(h + 1) * hd], t, theta) for t in range(len(xs))]
        ks = [rope(k[t][kvh * hd:(kvh + 1) * hd], t, theta) for t in range(len(xs))]
        vs = [v[t][kvh * hd:(kvh + 1) * hd] for t in range(len(xs))]
        for t in range(len(xs)):
            probs = softmax([sum(map(operator.mul, qs[t], ks[u])) / math.sqrt(hd)
                             for u in range(t + 1)])
            for d in range(hd):
                attn[t][h * hd + d] = sum(probs[u] * vs[u][d] for u in range(t + 1))
    xs = [[a + b for a, b in zip(x, linear(o, wo))] for x, o in zip(xs, attn)]

    moe = p + ("mlp." if qwen else "block_sparse_moe.")
    names = ("gate_proj", "up_proj", "down_proj") if qwen else ("w1", "w3", "w2")
    experts = cfg["num_experts"] if qwen else cfg["num_local_experts"]
    renormalize = cfg.get("norm_topk_prob", False) if qwen else True
    router = rows(w[moe + "gate.weight"])
    bias = None
    if "router_bias" in cfg.get("trellis_extensions", []):
        bias = w[moe + "gate.e_score_correction_bias"][1]
    expert_weights = [tuple(rows(w[moe + "experts.%d.%s.weight" % (e, n)]) for n in names)
                      for e in range(experts)]
    out = []
    for x in xs:
        y = rms_norm(x, w[p + "post_attention_layernorm.weight"][1], eps)
        probs = softmax(linear(y, router))
        select = [pr + b for pr, b in zip(probs, bias)] if bias else probs
        top = sorted(range(len(probs)), key=lambda e: -select[e])[:cfg["num_experts_per_tok"]]
        total = sum(probs[e] for e in top) if renormalize else 1.0
        ffn = [0.0] * len(x)
        for e in top:
            ffn = [a + probs[e] / total * b for a, b in zip(ffn, swiglu(y, *expert_weights[e]))]
        if qwen:
            shared = tuple(rows(w[moe + "shared_expert.%s.weight" % n]) for n in names)
            gate = linear(y, rows(w[moe + "shared_expert_gate.weight"]))[0]
            scale = 1.0 / (1.0 + math.exp(-gate))
            ffn = [a + scale * b for a, b in zip(ffn, swiglu(y, *shared))]
        out.append([a + b for a, b in zip(x, ffn)])
    return out


def main():
    cfg, w = load_model(sys.argv[1])
    if len(sys.argv) == 2:
        size = 2 if cfg["torch_dtype"] == "bfloat16" else 4
        print(json.dumps({"tensors": len(w), "bytes": sum(len(v) * size for _, v in w.values())}))
        return
    batches_path, step = sys.argv[2], int(sys.argv[3])
    if cfg["architectures"] not in (["MixtralForCausalLM"], ["Qwen2MoeForCausalLM"]):
        raise SystemExit("config.json: architectures %s" % cfg["architectures"])
    batches = read_safetensors(batches_path)
    (steps, batch, seq), inputs = batches["inputs"]
    targets = batches["targets"][1]
    embed = rows(w["model.embed_tokens.weight"])
    head = rows(w["lm_head.weight"])
    total, count = 0.0, 0
    for r in range(batch):
        at = ((step - 1) * batch + r) * seq
        xs = [list(embed[tok]) for tok in inputs[at:at + seq]]
        for i in range(cfg["num_hidden_layers"]):
            xs = layer(cfg, w, i, xs)
        for t, x in enumerate(xs):
            target = targets[at + t]
            if target < 0:
                continue
            logits = linear(rms_norm(x, w["model.norm.weight"][1], cfg["rms_norm_eps"]), head)
            m = max(logits)
            total += m + math.log(sum(math.exp(z - m) for z in logits)) - logits[target]
            count += 1
    print(json.dumps({"loss": total / count, "tokens": count}))


if __name__ == "__main__":
    main()
