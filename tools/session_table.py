#!/usr/bin/python3
"""session_table.py — one table for a ztrain session: every run of runs/<session>/ with its ranks, nodes,
device, precision, ZeRO stage, batch, duration, tokens/s, speedup and scaling efficiency against the
session's 1-rank run, final and best validation loss, peak memory, and whether its losses agree with the
1-rank run's ("bit-identical", or the max |loss difference|). The header says strong or weak scaling.

  tools/session_table.py runs/<session> [--markdown | --csv | --json]

Plain aligned text by default (a header, a units row, one row per run, a footer). Exit 2 with one line
naming the file for a missing or empty session or a malformed results.json. Library: tools/ztsession.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ztsession as zs  # noqa: E402

USAGE = "usage: tools/session_table.py runs/<session> [--markdown | --csv | --json]"

COLS = [
    zs.Col("name", "run"), zs.Col("model", "model"), zs.Col("ranks", "ranks"), zs.Col("nodes", "nodes"),
    zs.Col("device", "device"), zs.Col("precision", "prec"), zs.Col("threads", "thr", "(/rank)"),
    zs.Col("stage", "ZeRO", "(stage)"), zs.Col("micro_batch", "micro", "(seq)"),
    zs.Col("global_batch", "global", "(seq)"), zs.Col("steps", "steps"),
    zs.Col("duration_s", "time", "(s)", "{:.1f}"), zs.Col("tokens_per_s", "tokens/s", "(tok/s)", "{:.0f}"),
    zs.Col("speedup", "speedup", "(x 1-rank)", "{:.2f}"), zs.Col("efficiency", "effic", "(spd/rank)", "{:.2f}"),
    zs.Col("final_val_loss", "val_loss", "(final)", "{:.4f}"), zs.Col("best_val_loss", "val_loss", "(best)", "{:.4f}"),
    zs.Col("final_val_mlm_acc", "mlm_acc", "(val, final)", "{:.4f}"),
    zs.Col("peak_rss_mib", "peak_mem", "(MiB)", "{:.0f}"), zs.Col("losses", "losses", "(vs 1-rank)"),
]


def scaling_line(mode, runs):
    counts = ", ".join(str(n) for n in sorted({r.ranks for r in runs}))
    gbs = sorted({r.global_batch for r in runs if r.global_batch is not None})
    if mode is None:
        return f"one rank count ({counts}): no scaling to measure"
    if mode == "strong":
        return (f"strong scaling: the global batch ({', '.join(map(str, gbs))} sequences) stays fixed while the "
                f"ranks go {counts}; each rank gets a smaller share")
    if mode == "weak":
        return (f"weak scaling: the global batch grows with the ranks ({counts} ranks; micro_batch x ranks, "
                f"{', '.join(map(str, gbs))} sequences); the work per rank stays fixed")
    return f"{mode} scaling: some groups keep the global batch fixed, others grow it with the ranks ({counts})"


def losses_line(rows, mode):
    compared = [r for r in rows if r["loss_identical"] is not None]
    if not compared:
        return "losses: nothing to compare (no N-rank run with a 1-rank run of the same model in the session)"
    if all(r["loss_identical"] for r in compared):
        return (f"losses: bit-identical: each of the {len(compared)} N-rank run(s) logs the same loss as its 1-rank "
                f"run at every step (metrics.jsonl, compared as text) and ends with the same params_hash")
    bad = [r for r in compared if not r["loss_identical"]]
    worst = max(bad, key=lambda r: -1 if r["loss_max_abs_diff"] is None else r["loss_max_abs_diff"])
    why = " (expected: weak scaling changes the global batch)" if mode == "weak" else ""
    return (f"losses: NOT identical in {len(bad)} of {len(compared)} N-rank run(s): max |loss - 1-rank loss| "
            f"{zs.fmt_diff(worst['loss_max_abs_diff'])} ({worst['name']} vs {worst['baseline']}, step "
            f"{worst.get('loss_at_step')}){why}")


def table(path, style):
    runs = zs.load_session(path)
    rows = zs.analyze(runs)
    name, mode = zs.session_name(path, runs), zs.scaling_mode(runs)
    models = ", ".join(sorted({f"{r.model_label} ({r.model[2]:,} params, seq {r.seq_len}, {r.precision})"
                               for r in runs}))
    header = [f"ztrain session {name} ({path}): {len(runs)} run(s) of {models}",
              scaling_line(mode, runs), losses_line(rows, mode)]
    footer = ["speedup = tokens/s / tokens/s of the 1-rank run of the same model (with the same ZeRO stage, "
              "micro-batch and device when there is one); effic = speedup / ranks",
              "tokens/s: tokens of training steps 2.. over their time (results.json); time: the whole run, start-up, "
              "evaluation and checkpoints included; peak_mem: the largest peak RSS over the ranks"]
    if not any(r.ranks == 1 for r in runs):
        footer.insert(0, "no 1-rank run in this session: no speedup, efficiency or loss comparison")
    doc = {"session": name, "path": path, "scaling": mode, "losses": losses_line(rows, mode),
           "bit_identical": bool(rows) and all(r["loss_identical"] in (True, None) for r in rows)
           and any(r["loss_identical"] for r in rows), "runs": rows}
    # the masked-LM accuracy column only where some run is an encoder's (results.json final_val_mlm_acc)
    cols = [c for c in COLS if c.key != "final_val_mlm_acc" or any(r.get("final_val_mlm_acc") is not None for r in rows)]
    return zs.render(cols, rows, style, header, footer, doc)


def main(argv):
    style, args = zs.parse_style(argv, "session_table.py", USAGE)
    if len(args) != 1:
        zs.fail("session_table.py", USAGE)
    try:
        sys.stdout.write(table(args[0], style))
    except zs.SessionError as e:
        zs.fail("session_table.py", e)


if __name__ == "__main__":
    main(sys.argv[1:])
