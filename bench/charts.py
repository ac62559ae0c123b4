"""The PNG charts of docs/benchmarks/report.md, drawn from series that bench/report.py computes.
matplotlib is imported only to draw: without it the report renders and the PNGs stay as they are.
"""
import os

# key: (file, alt text, y label, title, x label)
CHARTS = {
    "throughput_tok_s": ("chart_throughput_vs_batch.png", "throughput vs batch",
                         "throughput, tokens/s (B x 256 / total time)",
                         "Throughput vs batch size (prompt 128, 256 new tokens)", "batch size"),
    "tpot_ms": ("chart_tpot_vs_batch.png", "per-token latency vs batch",
                "time per output token, ms (per sequence)",
                "Per-token latency vs batch size (prompt 128, 256 new tokens)", "batch size"),
    "genlen": ("chart_tpot_vs_genlen.png", "per-token latency vs generation length",
               "time per output token, ms", "Per-token latency vs generation length",
               "new tokens (prompt 26 for 50/100, 128 otherwise)"),
}
COLORS = {"lite-llama": "#d62728", "hf_eager": "#1f77b4", "hf_static": "#2ca02c"}


def files(series):
    """(key, file, alt text) of each chart that the series allow."""
    return [(k, CHARTS[k][0], CHARTS[k][1]) for k in CHARTS if series.get(k)]


def draw(series, out_dir, subtitle, model_title, engine_title):
    """series: {chart key: {model: {engine: [(x, y), ...]}}}. Returns a line saying what it did."""
    try:
        import matplotlib
    except ImportError:
        return "charts left as they are (no matplotlib: pip install matplotlib)"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = []
    for key, fname, _ in files(series):
        _, _, ylabel, title, xlabel = CHARTS[key]
        per_model = series[key]
        n = len(per_model)
        fig, axes = plt.subplots(1, n, figsize=(max(7.5, 5.2 * n), 4.8), squeeze=False)
        for ax, (model, engines) in zip(axes[0], per_model.items()):
            for eng, pts in engines.items():
                pts = sorted(pts)
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=COLORS.get(eng),
                        label=engine_title(eng))
                if key == "genlen":
                    continue
                up = (eng == "lite-llama") == (key == "throughput_tok_s")  # ours above when it is on top
                for x, y in pts:
                    ax.annotate(f"{y:,.{0 if y >= 100 else 1 if y >= 10 else 2}f}", (x, y),
                                textcoords="offset points", xytext=(0, 7 if up else -12), ha="center",
                                fontsize=7, color=COLORS.get(eng))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if key != "genlen":
                ax.margins(x=0.08, y=0.12)
            ticks = sorted({x for pts in engines.values() for x, _ in pts})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(x) for x in ticks])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(model_title(model) + (", batch 1" if key == "genlen" else ""))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{title}\n{subtitle}", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
        done.append(fname)
    return "wrote " + (", ".join(done) or "no charts")
