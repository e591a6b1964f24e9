#!/usr/bin/env python3
"""An exported model (trellis-export) loaded by other software and run on a
step's batch: its loss against the one trellis-train reported.

  export_check.py MODEL_DIR BATCHES.safetensors STEP TRAIN.jsonl

Every file of the index is loaded by safetensors' own reader (each tensor
named in the index, nothing else in the files). Where transformers is
installed, AutoModelForCausalLM loads the directory (output_loading_info:
no missing, unexpected or mismatched weight) and its fp32 logits give the
step's loss; else trainer_core/export/hf_reference.py (plain Python) does.
Prints JSON; exits 1 when the loss is off by more than 2e-4 relative (the
trainer's fp32 GPU run against an fp32 CPU forward).
"""
import json
import os
import subprocess
import sys

try:  # on the GPU machine; elsewhere only hf_reference.py runs the model
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError:
    torch = None


def main():
    model_dir, batches_path, train_path = sys.argv[1], sys.argv[2], sys.argv[4]
    step = int(sys.argv[3])
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    reported = [json.loads(l) for l in open(train_path)][step - 1]["loss"]
    out = {"model": model_dir, "reported_loss": reported}
    AutoModelForCausalLM = None
    if torch is not None:
        loaded = {}
        for file in sorted(set(weight_map.values())):
            loaded.update(load_file(os.path.join(model_dir, file)))
        assert set(loaded) == set(weight_map), "the files' tensors differ from the index"
        out["tensors_loaded_by_safetensors"] = len(loaded)
        try:
            from transformers import AutoModelForCausalLM
        except ImportError:
            pass
    if AutoModelForCausalLM is not None:
        model, info = AutoModelForCausalLM.from_pretrained(
            model_dir, torch_dtype=torch.float32, output_loading_info=True)
        out["loader"] = type(model).__name__
        out["loading_info"] = {k: sorted(map(str, v)) for k, v in info.items()}
        assert not any(info.values()), "weights left out or missing: %s" % info
        batches = load_file(batches_path)
        inputs = batches["inputs"][step - 1].long()
        targets = batches["targets"][step - 1].long()
        with torch.no_grad():
            logits = model(input_ids=inputs).logits.float()
        out["loss"] = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                      ignore_index=-1).item()
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        ref = os.path.join(here, "..", "..", "trainer_core", "export", "hf_reference.py")
        res = subprocess.run([sys.executable, ref, model_dir, batches_path, str(step)],
                             capture_output=True, text=True, check=True)
        out["loader"] = "hf_reference.py"
        out["loss"] = json.loads(res.stdout)["loss"]
    out["rel_diff"] = abs(out["loss"] - reported) / reported
    print(json.dumps(out, indent=1))
    sys.exit(0 if out["rel_diff"] <= 2e-4 else 1)


if __name__ == "__main__":
    main()
