#!/usr/bin/python3
"""plot_session.py — PNG plots of a ztrain session, one colour per run, runs named by their rank count:
  loss_vs_step.png    training loss (lines) and validation loss (dashed, markers) against optimizer step
  loss_vs_tokens.png  the same against training tokens seen
  throughput.png      tokens/s of every logged step, per run
  mlm_accuracy.png    masked-LM runs (encoders) only: the accuracy on the masked positions, training (lines) and
                      validation (dashed, markers), against optimizer step
  scaling.png         speedup over the 1-rank run against ranks, with the ideal line, and scaling efficiency
                      (skipped, with a note, when the session has a single rank count)

  tools/plot_session.py runs/<session> [--out DIR]        (default DIR: the session directory)

Needs matplotlib (Debian: python3-matplotlib); drawn with the Agg backend, no display needed. Exit 2 with
one line naming the file for a missing or empty session or a malformed results.json.
Library: tools/ztsession.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ztsession as zs  # noqa: E402

try:  # a clear error from plot() rather than a traceback when it is missing
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator
except ImportError:
    plt = None

USAGE = "usage: tools/plot_session.py runs/<session> [--out DIR]"
PROG = "plot_session.py"


def _style(i):
    """Runs with bit-identical losses draw exactly on top of each other: earlier runs get wider, paler
    lines so that every run stays visible underneath the later ones."""
    return {"color": f"C{i % 10}", "lw": max(1.0, 4.0 - 0.8 * i), "alpha": 0.85}


def _legend(ax, n):
    if n > 8:
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize="small")


def _identical_note(rows):
    compared = [r for r in rows if r["loss_identical"] is not None]
    if compared and all(r["loss_identical"] for r in compared):
        return f"\n(all {len(rows)} runs bit-identical: their curves coincide)"
    return ""


def plot_losses(runs, labels, rows, name, out, by_tokens):
    """One panel per model (losses of different models share no scale), one colour per run."""
    models = sorted({r.model for r in runs}, key=str)
    fig, axes = plt.subplots(len(models), 1, figsize=(9, 5.5 * len(models)), squeeze=False,
                             layout="constrained")
    what = "tokens" if by_tokens else "step"
    fig.suptitle(f"session {name}: training and validation loss vs {what}{_identical_note(rows)}")
    for ax, model in zip(axes[:, 0], models):
        mine = [r for r in runs if r.model == model]
        for i, r in enumerate(mine):
            st = _style(i)
            pts = [(m["step"], m["loss"]) for m in r.metrics if "loss" in m]
            ax.plot([r.tokens_at(s) if by_tokens else s for s, _ in pts], [v for _, v in pts],
                    label=f"{labels[r]}: train", **st)
            val = [(m["step"], m["val_loss"]) for m in r.metrics if m.get("val_loss") is not None]
            if val:
                ax.plot([r.tokens_at(s) if by_tokens else s for s, _ in val], [v for _, v in val], ls="--",
                        marker="o", ms=4 + max(0, 4 - i), mfc="none", label=f"{labels[r]}: validation",
                        color=st["color"], lw=1.2)
        ax.set_xlabel("training tokens seen (all ranks)" if by_tokens else "optimizer step")
        ax.set_ylabel("loss (nats/token, cross-entropy)")
        if len(models) > 1:
            ax.set_title(f"model {mine[0].model_label} ({mine[0].model[2]:,} params)")
        if by_tokens:
            ax.xaxis.set_major_formatter(EngFormatter())
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        _legend(ax, 2 * len(mine))
    path = os.path.join(out, "loss_vs_tokens.png" if by_tokens else "loss_vs_step.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_mlm_accuracy(runs, labels, name, out):
    """the masked-LM accuracy of the runs that log it (metrics.jsonl mlm_acc, val_mlm_acc); None when none does"""
    mine = [r for r in runs if any("mlm_acc" in m for m in r.metrics)]
    if not mine:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    for i, r in enumerate(mine):
        st = _style(i)
        pts = [(m["step"], m["mlm_acc"]) for m in r.metrics if "mlm_acc" in m]
        ax.plot(*zip(*pts), label=f"{labels[r]}: train", **st)
        val = [(m["step"], m["val_mlm_acc"]) for m in r.metrics if m.get("val_mlm_acc") is not None]
        if val:
            ax.plot(*zip(*val), ls="--", marker="o", ms=5, mfc="none", color=st["color"], lw=1.2,
                    label=f"{labels[r]}: validation (fixed masked set)")
    ax.set_xlabel("optimizer step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("accuracy on the masked positions (argmax = original token)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"session {name}: masked-LM accuracy")
    ax.grid(alpha=0.3)
    _legend(ax, 2 * len(mine))
    path = os.path.join(out, "mlm_accuracy.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_throughput(runs, labels, name, out):
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    hi, lo = 0.0, float("inf")
    for i, r in enumerate(runs):
        pts = [(m["step"], m["tokens_per_s"]) for m in r.metrics if m.get("tokens_per_s")]
        if not pts:
            continue
        st = _style(i)
        st["lw"] = 1.5
        ax.plot(*zip(*pts), marker=".", label=f"{labels[r]} (mean {r.tokens_per_s:,.0f} tok/s)", **st)
        hi, lo = max(hi, max(p[1] for p in pts)), min(lo, min(p[1] for p in pts))
    if hi > 0 and hi / lo > 30:  # several models in one session: a log axis keeps the slow ones readable
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("optimizer step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("throughput (tokens/s, all ranks together)")
    ax.set_title(f"session {name}: training throughput per step\n(step 1 includes warm-up; evaluation and "
                 f"checkpoint time are not in these numbers)")
    ax.grid(alpha=0.3)
    _legend(ax, len(runs))
    path = os.path.join(out, "throughput.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_scaling(runs, rows, name, out):
    """One series per 1-rank baseline (same model, stage, micro-batch): speedup and efficiency vs ranks."""
    series = {}
    for r, row in zip(runs, rows):
        if row["speedup"] is not None:
            series.setdefault(row["baseline"], []).append((r, row))
    series = {k: v for k, v in series.items() if len({r.ranks for r, _ in v}) > 1}
    if not series:
        return None
    mode = zs.scaling_mode(runs) or ""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    ranks = sorted({r.ranks for r in runs})
    a1.plot(ranks, ranks, "k--", lw=1, label="ideal (speedup = ranks)")
    a2.axhline(100.0, color="k", ls="--", lw=1, label="ideal (100%)")
    many = len(series) > 1
    for i, (base, pts) in enumerate(sorted(series.items())):
        pts.sort(key=lambda p: p[0].ranks)
        r0 = pts[0][0]
        label = (f"{r0.model_label}, ZeRO-{r0.stage}, micro-batch {r0.micro_batch}" if many
                 else f"ZeRO-{r0.stage}, micro-batch {r0.micro_batch}, {r0.device}")
        xs = [p[0].ranks for p in pts]
        a1.plot(xs, [p[1]["speedup"] for p in pts], marker="o", color=f"C{i % 10}", label=label)
        a2.plot(xs, [100 * p[1]["efficiency"] for p in pts], marker="o", color=f"C{i % 10}", label=label)
        if not many:
            for x, (_, row) in zip(xs, pts):
                a1.annotate(f"{row['speedup']:.2f}x", (x, row["speedup"]), textcoords="offset points", xytext=(6, -12))
                a2.annotate(f"{100 * row['efficiency']:.0f}%", (x, 100 * row["efficiency"]),
                            textcoords="offset points", xytext=(6, -12))
    for ax in (a1, a2):
        ax.set_xlabel("ranks (MPI processes)")
        ax.set_xticks(ranks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small" if many else "small")
    a1.set_ylabel("speedup (tokens/s / 1-rank tokens/s)")
    a1.set_title("speedup over 1 rank")
    a2.set_ylabel("scaling efficiency (speedup / ranks, %)")
    a2.set_ylim(bottom=0)
    a2.set_title("scaling efficiency")
    threads = "/".join(str(t) for t in sorted({r.threads for r in runs if r.threads is not None}))
    fig.suptitle(f"session {name}: {mode + ' scaling' if mode else 'scaling'} "
                 f"({', '.join(sorted({r.device for r in runs}))}, {threads or '?'} thread(s) per rank)")
    path = os.path.join(out, "scaling.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot(path, out):
    if plt is None:
        raise zs.SessionError("matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    runs = zs.load_session(path)
    rows = zs.analyze(runs)
    name = zs.session_name(path, runs)
    labels = {r: zs.run_label(r, runs) for r in runs}
    os.makedirs(out, exist_ok=True)
    written = [plot_losses(runs, labels, rows, name, out, False),
               plot_losses(runs, labels, rows, name, out, True),
               plot_throughput(runs, labels, name, out)]
    p = plot_mlm_accuracy(runs, labels, name, out)
    if p:
        written.append(p)
    if len({r.ranks for r in runs}) < 2:
        print(f"{PROG}: scaling.png skipped: one rank count ({runs[0].ranks}) in session {name}")
    else:
        p = plot_scaling(runs, rows, name, out)
        if p:
            written.append(p)
        else:
            print(f"{PROG}: scaling.png skipped: no run has a 1-rank run of the same model to compare with")
    for p in written:
        print(f"wrote {p}")


def main(argv):
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        if i + 1 >= len(argv):
            zs.fail(PROG, USAGE)
        out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 1 or argv[0].startswith("-"):
        zs.fail(PROG, USAGE)
    try:
        plot(argv[0], out or argv[0])
    except zs.SessionError as e:
        zs.fail(PROG, e)


if __name__ == "__main__":
    main(sys.argv[1:])
