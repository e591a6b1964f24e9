"""The Markdown table of bench/routing/init.sh from its JSON:
init_table.py ROUTING-INIT.json > ROUTING-INIT.md"""
import json
import random
import sys


def random_router_load(tokens, experts, k, seed=1):
    """Mean busiest-over-mean expert load of one layer whose router picks each
    token's k experts uniformly at random: the floor a real router is read
    against (a finite batch is never perfectly even). About 100,000 tokens in
    all: the larger the batch, the less the figure varies."""
    trials = max(4, 100_000 // tokens)
    rng = random.Random(seed)
    total = 0.0
    for _ in range(trials):
        load = [0] * experts
        for _ in range(tokens):
            for e in rng.sample(range(experts), k):
                load[e] += 1
        total += max(load) * experts / (tokens * k)
    return total / trials


def table(doc):
    runs = doc["runs"]
    r0 = runs[0]
    floor = random_router_load(r0["tokens_per_step"], r0["experts"], r0["experts_per_token"])
    md = [f"# What the untrained model routes: document length and initial scale ({doc['date'][:10]})",
          "", f"- Machine: {doc['machine']}",
          f"- Command: `{doc['command']}` ({doc['seconds']} s)",
          f"- Model: `{doc['spec']}` ({r0['layers']} layers, {r0['experts']} experts, "
          f"top-{r0['experts_per_token']}, {r0['tokens_per_step']:,} tokens per step), "
          f"world 1, {r0['steps']} steps; the corpus is `trellis-corpus synthetic` "
          f"({doc['corpus_tokens']:,} tokens, seed 1234), the same tokens in every run, split "
          "into documents of `doc_tokens` (0: one document), so a row's attention spans at most "
          "that many positions.",
          "- Figure: a layer's busiest expert's token-expert pairs over the mean expert's; at "
          f"most {r0['experts_per_token']} (every token sends a slot to the same expert). "
          f"A router picking at random would show about {floor:.2f} per layer at this batch. "
          "`step 1` is the untrained model (before any update), per layer from the first; "
          "`late` the mean over the second half of the steps, per layer.",
          "- Loss: `first` is step 1's; `tail` the mean of the last tenth of the steps, each "
          "scored before training on its batch. Losses compare across `init_std` at the same "
          "`doc_tokens` (the same targets), not across document lengths (a boundary masks a "
          "target).", "",
          "| doc_tokens | init_std | step 1, by layer | step 1 worst | late, by layer | first loss | tail loss |",
          "|---|---|---|---|---|---|---|"]
    for r in runs:
        layers = r["expert_load_by_layer"]
        first = [l["first_step_max_over_mean"] for l in layers]
        late = [l["late_mean_max_over_mean"] for l in layers]
        md.append(f"| {r['doc_tokens'] or 'one document'} | {r['init_std']:g} | "
                  f"{' '.join(f'{v:.2f}' for v in first)} | {max(first):.2f} | "
                  f"{' '.join(f'{v:.2f}' for v in late)} | {r['first_loss']:.4f} | "
                  f"{r['tail_loss']:.4f} |")
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(json.load(open(sys.argv[1]))))
