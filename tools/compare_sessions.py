#!/usr/bin/python3
"""compare_sessions.py — two ztrain sessions side by side (a new build against an old one, one machine
against another): each run of A matched to a run of B by (ranks, ZeRO stage, micro-batch) — by name
among several such, or by name alone when no run has its key (--by name: by name only) — then tokens/s
of both and the ratio B/A, final training and validation loss of both, and the max |loss difference| over
the steps both logged ("bit-identical" when every logged loss is equal as text and params_hash too).

  tools/compare_sessions.py runs/A runs/B [--by key|name] [--markdown | --csv | --json]

Exit 2 with one line naming the file for a missing or empty session or a malformed results.json.
Library: tools/ztsession.py."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ztsession as zs  # noqa: E402

USAGE = "usage: tools/compare_sessions.py runs/A runs/B [--by key|name] [--markdown | --csv | --json]"

COLS = [
    zs.Col("a", "A run"), zs.Col("b", "B run"), zs.Col("matched", "by"), zs.Col("ranks", "ranks"),
    zs.Col("stage", "ZeRO", "(stage)"), zs.Col("micro_batch", "micro", "(seq)"),
    zs.Col("a_tokens_per_s", "A tokens/s", "(tok/s)", "{:.0f}"),
    zs.Col("b_tokens_per_s", "B tokens/s", "(tok/s)", "{:.0f}"), zs.Col("ratio", "B/A", "(tok/s)", "{:.3f}"),
    zs.Col("a_final_loss", "A loss", "(final)", "{:.4f}"), zs.Col("b_final_loss", "B loss", "(final)", "{:.4f}"),
    zs.Col("a_val_loss", "A val_loss", "(final)", "{:.4f}"), zs.Col("b_val_loss", "B val_loss", "(final)", "{:.4f}"),
    zs.Col("losses", "losses", "(B vs A)"),
]


def key(r):
    return (r.ranks, r.stage, r.micro_batch)


def match(runs_a, runs_b, by):
    """-> [(a, b, how)], runs of A left over, runs of B left over."""
    free_b = list(runs_b)
    pairs, only_a = [], []
    for a in runs_a:
        same_key = [b for b in free_b if key(b) == key(a)] if by == "key" else []
        if same_key:  # among several with the key: the same name, else the same model, else the first
            b = next((b for b in same_key if b.name == a.name),
                     next((b for b in same_key if b.model == a.model), same_key[0]))
            how = "key"
        else:
            b = next((b for b in free_b if b.name == a.name), None)
            how = "name"
        if b is None:
            only_a.append(a)
            continue
        free_b.remove(b)
        pairs.append((a, b, how))
    return pairs, only_a, free_b


def row(a, b, how):
    ag = zs.loss_agreement(b, a)
    ratio = b.tokens_per_s / a.tokens_per_s if a.tokens_per_s > 0 else None
    if ag["identical"]:
        losses = "bit-identical"
    elif ag["steps_compared"]:
        losses = f"max|dL| {zs.fmt_diff(ag['max_abs_diff'])}"
    else:
        losses = "no common steps"
    diff = f"{a.ranks}/{b.ranks} ranks" if a.ranks != b.ranks else a.ranks
    return {"a": a.name, "b": b.name, "matched": how, "ranks": diff, "stage": a.stage if a.stage == b.stage
            else f"{a.stage}/{b.stage}", "micro_batch": a.micro_batch if a.micro_batch == b.micro_batch
            else f"{a.micro_batch}/{b.micro_batch}", "a_tokens_per_s": a.tokens_per_s, "b_tokens_per_s": b.tokens_per_s,
            "ratio": ratio, "a_final_loss": a.res.get("final_loss"), "b_final_loss": b.res.get("final_loss"),
            "a_val_loss": a.res.get("final_val_loss"), "b_val_loss": b.res.get("final_val_loss"),
            "losses": losses, "loss_identical": ag["identical"], "loss_max_abs_diff": ag["max_abs_diff"],
            "steps_compared": ag["steps_compared"], "same_model": a.model == b.model}


def compare(path_a, path_b, by, style):
    runs_a, runs_b = zs.load_session(path_a), zs.load_session(path_b)
    name_a, name_b = zs.session_name(path_a, runs_a), zs.session_name(path_b, runs_b)
    pairs, only_a, only_b = match(runs_a, runs_b, by)
    rows = [row(a, b, how) for a, b, how in pairs]
    how = "(ranks, ZeRO stage, micro-batch), else by name" if by == "key" else "name"
    header = [f"A = session {name_a} ({path_a}, {len(runs_a)} runs), B = session {name_b} ({path_b}, "
              f"{len(runs_b)} runs): {len(pairs)} pair(s) matched by {how}"]
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    footer = []
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        footer.append(f"tokens/s B/A: geometric mean {gm:.3f} over {len(ratios)} pair(s), "
                      f"min {min(ratios):.3f}, max {max(ratios):.3f} (> 1: B is faster)")
    same = sum(1 for r in rows if r["loss_identical"])
    footer.append(f"losses: {same} of {len(rows)} pair(s) bit-identical (every logged loss equal as text, same "
                  f"params_hash); max|dL|: largest |loss B - loss A| over the steps both logged")
    if any(not r["same_model"] for r in rows):
        footer.append("some pairs are different models (n_layer, n_embd, params, seq_len or precision differ)")
    if only_a:
        footer.append("only in A (unmatched): " + ", ".join(r.name for r in only_a))
    if only_b:
        footer.append("only in B (unmatched): " + ", ".join(r.name for r in only_b))
    doc = {"a": {"session": name_a, "path": path_a}, "b": {"session": name_b, "path": path_b}, "matched_by": by,
           "pairs": rows, "only_a": [r.name for r in only_a], "only_b": [r.name for r in only_b]}
    return zs.render(COLS, rows, style, header, footer, doc)


def main(argv):
    by = "key"
    if "--by" in argv:
        i = argv.index("--by")
        if i + 1 >= len(argv) or argv[i + 1] not in ("key", "name"):
            zs.fail("compare_sessions.py", USAGE)
        by = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    style, args = zs.parse_style(argv, "compare_sessions.py", USAGE)
    if len(args) != 2:
        zs.fail("compare_sessions.py", USAGE)
    try:
        sys.stdout.write(compare(args[0], args[1], by, style))
    except zs.SessionError as e:
        zs.fail("compare_sessions.py", e)


if __name__ == "__main__":
    main(sys.argv[1:])
