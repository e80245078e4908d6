"""ztsession.py — reads ztrain sessions (runs/<session>/<name>/results.json + metrics.jsonl) and owns
what the three session tools share: loading and checking run directories, picking each run's 1-rank
baseline, speedup / efficiency / loss agreement, strong vs weak scaling, labels, and one table renderer
(aligned text with a units row, markdown, csv, json). Not a program: imported by
tools/session_table.py, tools/compare_sessions.py and tools/plot_session.py (see tools/README.md).

Errors the user can fix (missing session, malformed results.json, ...) raise SessionError with a
one-line message naming the file; the scripts print it and exit 2 (`fail()` below)."""
import csv
import io
import json
import math
import os
import sys


class SessionError(Exception):
    """A one-line, user-facing error: the scripts print it and exit 2."""


def fail(prog, err):
    print(f"{prog}: {err}", file=sys.stderr)
    sys.exit(2)


# results.json keys every run must have for the tools to say anything about it
REQUIRED = ("world_size", "device", "zero_stage", "steps", "duration_s", "tokens_per_s", "params", "params_hash")


class Run:
    """One run directory: results.json as a dict, metrics.jsonl deduplicated by step (last line wins: a
    resumed run logs again the steps after its checkpoint), and each loss exactly as ztrain printed it."""

    def __init__(self, path):
        self.path = path
        self.dirname = os.path.basename(os.path.normpath(path))
        self.res = _read_results(os.path.join(path, "results.json"))
        self.metrics, self.loss_text = _read_metrics(os.path.join(path, "metrics.jsonl"))
        r = self.res
        # the directory's name, not results.json's "name": ztrain suffixes -1, -2 to a name that exists
        self.name = self.dirname
        self.ranks = int(r["world_size"])
        self.nodes = r.get("nodes", 1)
        self.device = r["device"]
        self.stage = r["zero_stage"]
        self.precision = r.get("precision", "?")
        self.threads = r.get("threads_per_rank")
        self.micro_batch = r.get("micro_batch")
        self.global_batch = r.get("global_batch")
        self.seq_len = r.get("seq_len")
        self.tokens_per_s = float(r["tokens_per_s"])
        # runs are comparable (speedup, loss agreement) only with the same model and data shape
        self.model = (r.get("n_layer"), r.get("n_embd"), r["params"], self.seq_len, self.precision)

    @property
    def model_label(self):
        n_layer, n_embd = self.model[0], self.model[1]
        return f"L{n_layer} C{n_embd}" if n_layer is not None else f"{self.model[2]} params"

    def tokens_at(self, step):
        """Training tokens seen (all ranks) after `step` optimizer steps."""
        if self.global_batch and self.seq_len:
            return step * self.global_batch * self.seq_len
        return step * float(self.res.get("tokens", 0)) / max(1, self.res["steps"])


def _read_results(path):
    if not os.path.isfile(path):
        raise SessionError(f"{path}: missing")
    try:
        with open(path) as f:
            res = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SessionError(f"{path}: invalid JSON: {e}") from None
    if not isinstance(res, dict):
        raise SessionError(f"{path}: malformed: expected a JSON object, found {type(res).__name__}")
    missing = [k for k in REQUIRED if k not in res]
    if missing:
        raise SessionError(f"{path}: malformed: missing key(s) {', '.join(missing)}")
    try:
        int(res["world_size"]), float(res["tokens_per_s"]), float(res["duration_s"])
    except (TypeError, ValueError):
        raise SessionError(f"{path}: malformed: world_size, tokens_per_s and duration_s must be numbers") from None
    return res


def _read_metrics(path):
    """-> ([record by ascending step], {step: loss text}). The text is kept so that 'bit-identical' means
    what it says: the same characters ztrain printed (%.9g), not floats that happen to round alike."""
    by_step, text = {}, {}
    if not os.path.isfile(path):
        return [], {}
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                raw = json.loads(line, parse_float=str, parse_int=str)
                step = int(rec["step"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise SessionError(f"{path}:{i}: malformed metrics line: {e}") from None
            by_step[step] = rec
            if "loss" in raw:
                text[step] = raw["loss"]
    return [by_step[s] for s in sorted(by_step)], text


def load_session(path):
    """All runs of a session directory (its subdirectories with results.json), in table order: model,
    ZeRO stage, micro-batch, ranks, name. A subdirectory without results.json (a run still going, or one
    that died) is skipped with a note on stderr."""
    if not os.path.isdir(path):
        raise SessionError(f"{path}: no such session directory")
    runs = []
    for d in sorted(os.listdir(path)):
        full = os.path.join(path, d)
        if not os.path.isdir(full):
            continue
        if not os.path.exists(os.path.join(full, "results.json")):
            print(f"note: {full}: no results.json (unfinished run?), skipped", file=sys.stderr)
            continue
        runs.append(Run(full))
    if not runs:
        raise SessionError(f"{path}: empty session: no run directory with a results.json")
    runs.sort(key=lambda r: (str(r.model), r.stage, r.micro_batch or 0, r.ranks, r.name))
    return runs


def session_name(path, runs):
    return runs[0].res.get("session") or os.path.basename(os.path.normpath(path))


# ---------------------------------------------------------------- comparisons

def baseline(run, runs):
    """The 1-rank run `run` is measured against: a 1-rank run is its own; otherwise a 1-rank run of the
    same model, among several the one with the same ZeRO stage, micro-batch and device, else the first.
    None when the session has no such run."""
    if run.ranks == 1:
        return run
    ones = [r for r in runs if r.ranks == 1 and r.model == run.model]
    same = [r for r in ones if (r.stage, r.micro_batch, r.device) == (run.stage, run.micro_batch, run.device)]
    return (same or ones or [None])[0]


def loss_agreement(a, b):
    """How run a's losses agree with run b's: identical (every logged loss equal as text, same steps,
    same params_hash), the max |loss difference| over common steps and where it is."""
    common = sorted(set(a.loss_text) & set(b.loss_text))
    identical = bool(common) and a.loss_text == b.loss_text and a.res["params_hash"] == b.res["params_hash"]
    worst, at = None, None
    for s in common:
        try:
            d = abs(float(a.loss_text[s]) - float(b.loss_text[s]))
        except ValueError:
            d = math.inf
        if worst is None or d > worst:
            worst, at = d, s
    return {"identical": identical, "max_abs_diff": worst, "at_step": at, "steps_compared": len(common),
            "same_params_hash": a.res["params_hash"] == b.res["params_hash"]}


def fmt_diff(d):
    return "-" if d is None else f"{d:.2e}"


def scaling_mode(runs):
    """'strong' when each model/stage/micro-batch group keeps its global batch across rank counts,
    'weak' when the global batch grows with the ranks, 'strong and weak' / 'mixed' otherwise, None when
    the session has a single rank count."""
    if len({r.ranks for r in runs}) < 2:
        return None
    kinds = set()
    groups = {}
    for r in runs:
        groups.setdefault((r.model, r.stage, r.micro_batch, r.device), {})[r.ranks] = r.global_batch
    for by_ranks in groups.values():
        if len(by_ranks) < 2:
            continue
        gbs = [by_ranks[n] for n in sorted(by_ranks)]
        if None in gbs:
            kinds.add("unknown")
        elif len(set(gbs)) == 1:
            kinds.add("strong")
        elif all(x < y for x, y in zip(gbs, gbs[1:])):
            kinds.add("weak")
        else:
            kinds.add("mixed")
    if kinds == {"strong"} or kinds == {"weak"}:
        return kinds.pop()
    if kinds == {"strong", "weak"}:
        return "strong and weak"
    return "mixed" if kinds else None


def run_label(run, runs):
    """Legend/table label that names a run by its rank count, plus whatever else varies in the session
    (model, ZeRO stage, micro-batch), plus the run's name only if that is still ambiguous."""
    parts = [f"{run.ranks} rank" + ("s" if run.ranks != 1 else "")]
    if len({r.model for r in runs}) > 1:
        parts.append(run.model_label)
    if len({r.stage for r in runs}) > 1:
        parts.append(f"ZeRO-{run.stage}")
    if len({r.micro_batch for r in runs}) > 1:
        parts.append(f"mb {run.micro_batch}")
    label = ", ".join(parts)
    twins = [r for r in runs if (r.ranks, r.model, r.stage, r.micro_batch) == (run.ranks, run.model, run.stage,
                                                                            run.micro_batch)]
    return f"{label} ({run.name})" if len(twins) > 1 else label


def analyze(runs):
    """One dict per run (table order) with everything the table and the plots show: speedup = tokens/s
    over the baseline's (baseline() above), efficiency = speedup / ranks, and loss agreement with it."""
    rows = []
    for r in runs:
        base = baseline(r, runs)
        res = r.res
        row = {"name": r.name, "model": r.model_label, "ranks": r.ranks, "nodes": r.nodes, "device": r.device,
               "precision": r.precision, "threads": r.threads, "stage": r.stage, "micro_batch": r.micro_batch,
               "global_batch": r.global_batch, "steps": res["steps"], "duration_s": float(res["duration_s"]),
               "tokens_per_s": r.tokens_per_s, "final_loss": res.get("final_loss"),
               "final_val_loss": res.get("final_val_loss"), "best_val_loss": res.get("best_val_loss"),
               "final_val_mlm_acc": res.get("final_val_mlm_acc"),
               "peak_rss_mib": res["peak_rss_bytes"] / 2**20 if "peak_rss_bytes" in res else None,
               "params_hash": res["params_hash"], "baseline": base.name if base else None,
               "speedup": None, "efficiency": None, "losses": "-", "loss_identical": None, "loss_max_abs_diff": None}
        if base is not None and base.tokens_per_s > 0:
            row["speedup"] = r.tokens_per_s / base.tokens_per_s
            row["efficiency"] = row["speedup"] / r.ranks
        if base is r:
            row["losses"] = "reference"
        elif base is not None:
            ag = loss_agreement(r, base)
            row["loss_identical"], row["loss_max_abs_diff"] = ag["identical"], ag["max_abs_diff"]
            row["loss_at_step"] = ag["at_step"]
            row["losses"] = "bit-identical" if ag["identical"] else f"max|dL| {fmt_diff(ag['max_abs_diff'])}"
        rows.append(row)
    return rows


# ---------------------------------------------------------------- rendering

class Col:
    """A table column: key into the row dict, header, units row entry, and how to print a value."""

    def __init__(self, key, head, unit="", fmt="{}"):
        self.key, self.head, self.unit, self.fmt = key, head, unit, fmt

    def cell(self, row):
        v = row.get(self.key)
        if v is None:
            return "-"
        return self.fmt.format(v) if isinstance(self.fmt, str) else self.fmt(v)


def render(cols, rows, style, header=(), footer=(), doc=None):
    """One table in one of four styles. text: nccl-tests-like (comment header, column names, units row,
    rows, comment footer); markdown: header/footer as paragraphs and a pipe table; csv: column keys and
    raw values only; json: `doc` (a dict with everything) dumped as is."""
    if style == "json":
        return json.dumps(doc, indent=2) + "\n"
    if style == "csv":
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow([c.key for c in cols])
        for r in rows:
            w.writerow(["" if r.get(c.key) is None else r[c.key] for c in cols])
        return out.getvalue()
    cells = [[c.cell(r) for c in cols] for r in rows]
    if style == "markdown":
        lines = [h for h in header] + [""] if header else []
        lines.append("| " + " | ".join(c.head + (f" {c.unit}" if c.unit else "") for c in cols) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        lines += [""] + list(footer) if footer else []
        return "\n".join(lines) + "\n"
    widths = [max(len(c.head), len(c.unit), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

    def line(vals):  # first column left-aligned (run names), numbers right-aligned
        return " ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths)))

    lines = [f"# {h}" for h in header]
    lines.append("# " + line([c.head for c in cols]))
    lines.append("# " + line([c.unit for c in cols]))
    lines += ["  " + line(row) for row in cells]
    lines += [f"# {f}" for f in footer]
    return "\n".join(lines) + "\n"


def parse_style(args, prog, usage):
    """--markdown | --csv | --json (at most one) -> style name, the other arguments."""
    styles = {"--markdown": "markdown", "--csv": "csv", "--json": "json", "--text": "text"}
    style, rest = "text", []
    for a in args:
        if a in styles:
            style = styles[a]
        elif a in ("-h", "--help"):
            print(usage)
            sys.exit(0)
        elif a.startswith("--"):
            fail(prog, f"unknown option {a}\n{usage}")
        else:
            rest.append(a)
    return style, rest
