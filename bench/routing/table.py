"""The Markdown table of a routing benchmark (bench/routing/run.sh) from its
JSON: table.py ROUTING.json > ROUTING.md"""
import json
import sys


def table(doc):
    runs = doc["runs"]
    r0 = runs[0]
    eps = list(r0["ep_rank_load"])
    md = [f"# Group-limited routing against plain top-k ({doc['date'][:10]})", "",
          f"- Machine: {doc['machine']}", f"- Command: `{doc['command']}` ({doc['seconds']} s)",
          f"- Corpus: the byte corpus of `{doc['texts']}` ({doc['corpus']})",
          f"- Model: bench/routing/moe-routing.toml, {r0['layers']} layers, {r0['experts']} experts, "
          f"top-{r0['experts_per_token']}; {r0['steps']} steps of {r0['tokens_per_step']:,} tokens "
          f"({r0['epochs']:.2f} epochs: every step's batch is new text), world 1, fp32, "
          "the same initial weights and batches in every run.",
          "- EP load: per layer and step, the token-expert pairs of the busiest expert-parallel "
          "rank (a block of experts / ep consecutive experts) over the mean rank's; the model is "
          "the same at any world size, so this is the load each EP size would see. `late`: mean "
          "over the second half of the steps (the router has learned); `worst`: over all steps "
          "and layers. The busiest rank sets the layer's pace and the memory every rank must hold "
          "room for. With expert_groups > 1, an EP size that does not divide it is refused at "
          "submit (a group would straddle two ranks); its columns show what the groups leave "
          "unbalanced there.",
          "- Loss: mean of the last tenth of the steps' losses, each measured before training on "
          "its batch (unseen text); `vs top-k`: against plain top-k with the same balancing.", "",
          "| balancing | expert_groups | " +
          " | ".join(f"EP {e} late | EP {e} worst" for e in eps) +
          " | expert late | first loss | tail loss | vs top-k |",
          "|---|---|" + "---|---|" * len(eps) + "---|---|---|---|"]
    plain = {(r["aux_loss_coef"], r["router_bias_rate"]): r["tail_loss"]
             for r in runs if r["expert_groups"] == 1}
    for r in runs:
        bal = (f"aux {r['aux_loss_coef']:g}" +
               (f" + bias {r['router_bias_rate']:g}" if r["router_bias_rate"] else ""))
        cells = " | ".join(f"{r['ep_rank_load'][e]['late_mean_max_over_mean']:.3f} | "
                           f"{r['ep_rank_load'][e]['worst_max_over_mean']:.2f}" for e in eps)
        base = plain.get((r["aux_loss_coef"], r["router_bias_rate"]))
        delta = ("" if base is None or r["expert_groups"] == 1
                 else f"{(r['tail_loss'] / base - 1) * 100:+.1f}%")
        md.append(f"| {bal} | {r['expert_groups']} | {cells} | "
                  f"{r['expert_load']['late_mean_max_over_mean']:.2f} | {r['first_loss']:.4f} | "
                  f"{r['tail_loss']:.4f} | {delta} |")
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(json.load(open(sys.argv[1]))))
