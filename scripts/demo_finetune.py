#!/usr/bin/env python3
"""demo_finetune.py — the Python side of scripts/demo_finetune.sh (`make demo-finetune`).

  resave SRC DST      GPT2LMHeadModel.from_pretrained(SRC).save_pretrained(DST): ztrain's export loaded and saved
                      again by transformers, so the base the demo fine-tunes is "a GPT-2 saved by transformers"
  compare RUN RUN     two ztrain run directories: the per-step losses of metrics.jsonl and results.json's
                      params_hash must be equal (bit for bit); exit 1 if not (no torch needed: /usr/bin/python3)
  check ...           the merged export in transformers: its loss on the validation windows `ztrain eval` scores
                      (window i = tokens[i*T : i*T+T+1] of the shard after its 64-byte header), next to ztrain's
                      value; the PEFT adapters on the transformers base (PeftModel.from_pretrained): logits vs
                      the merged model's (max abs diff < 1e-4) and PEFT's own loss on the same windows.
                      Ends with one line "RESULT key=value ..." for the shell script. Run it with .venv-ref/bin/python.
"""
import argparse
import json
import os
import sys


def resave(a):
    from transformers import GPT2LMHeadModel
    m = GPT2LMHeadModel.from_pretrained(a.src)
    m.save_pretrained(a.dst)
    n = sum(p.numel() for p in m.parameters())
    print(f"transformers {__import__('transformers').__version__}: GPT2LMHeadModel.from_pretrained({a.src}) "
          f"({n} params) -> save_pretrained({a.dst})")


def run_sig(d):
    losses = {}
    with open(os.path.join(d, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "loss" in r:
                losses[r["step"]] = r["loss"]
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    return [losses[k] for k in sorted(losses)], res["params_hash"]


def compare(a):
    (la, ha), (lb, hb) = run_sig(a.run_a), run_sig(a.run_b)
    same_l, same_h = la == lb and len(la) > 0, ha == hb
    diff = [i + 1 for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    print(f"per-step losses: {len(la)} vs {len(lb)} logged steps, "
          + ("all equal (bit for bit)" if same_l else f"differ (first at step {diff[0] if diff else '?'})"))
    print(f"params_hash:     {ha}\n                 {hb}  " + ("equal" if same_h else "DIFFERENT"))
    print("RESULT identical=" + ("yes" if same_l and same_h else "no") + f" steps={len(la)}")
    return 0 if same_l and same_h else 1


def check(a):
    import numpy as np
    import torch
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    T, S = a.seq_len, a.sequences
    val = np.fromfile(a.val, dtype=np.uint16, offset=64)  # the shard: 64-byte header, uint16 tokens
    S = min(S, (len(val) - 1) // T)
    win = torch.tensor(np.stack([val[i * T:i * T + T + 1] for i in range(S)]).astype(np.int64))
    x, y = win[:, :T], win[:, 1:]

    def val_loss(model):
        with torch.no_grad():
            logits = model(x).logits
        # ztrain: each sequence's mean token loss, then the mean over sequences
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        return float(ce.view(S, T).mean(1).double().mean()), logits

    merged = GPT2LMHeadModel.from_pretrained(a.merged).eval()
    hf_loss, merged_logits = val_loss(merged)
    rel = abs(hf_loss - a.ztrain_loss) / a.ztrain_loss
    print(f"transformers, merged export ({a.merged}): val loss {hf_loss:.6f} on the same {S} windows of {T} tokens; "
          f"ztrain eval {a.ztrain_loss:.6f}; relative difference {rel:.2g}")

    from peft import PeftModel
    base = GPT2LMHeadModel.from_pretrained(a.base_hf).eval()
    pm = PeftModel.from_pretrained(base, a.adapters).eval()
    peft_loss, peft_logits = val_loss(pm)
    d = float((peft_logits - merged_logits).abs().max())
    ok = d < 1e-4  # fp32 unmerged (two more GEMMs) vs merged weights round differently: measured 5-6e-6 over 33M logits
    n_lora = sum(p.numel() for n, p in pm.named_parameters() if "lora_" in n)
    print(f"peft {__import__('peft').__version__}: PeftModel.from_pretrained(transformers base, {a.adapters}): val loss "
          f"{peft_loss:.6f}; logits within {d:.2g} of the merged model's ({'<' if ok else 'NOT <'} 1e-4); {n_lora} adapter "
          f"parameters")
    print(f"RESULT hf_loss={hf_loss:.6f} rel={rel:.2g} peft_loss={peft_loss:.6f} peft_maxdiff={d:.2g} trainable={n_lora} "
          f"ok={'yes' if ok and rel < 1e-5 else 'no'}")
    return 0 if ok and rel < 1e-5 else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("resave")
    s.add_argument("src")
    s.add_argument("dst")
    s = sub.add_parser("compare")
    s.add_argument("run_a")
    s.add_argument("run_b")
    s = sub.add_parser("check")
    s.add_argument("--merged", required=True)
    s.add_argument("--adapters", required=True)
    s.add_argument("--base-hf", required=True)
    s.add_argument("--val", required=True)
    s.add_argument("--seq-len", type=int, required=True)
    s.add_argument("--sequences", type=int, required=True)
    s.add_argument("--ztrain-loss", type=float, required=True)
    a = p.parse_args()
    return {"resave": resave, "compare": compare, "check": check}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
