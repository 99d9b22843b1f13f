"""``a2a testbed bench --plot``: measured throughput against shard size, with predictions and the MCF bound."""

from __future__ import annotations

from a2a_compiler.files import write_png


def plot_bench(result, path) -> None:
    """One line per schedule/baseline (measured, solid; the model's prediction, dotted) and the bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = result.header
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = list(dict.fromkeys(r["label"] for r in result.results))
    for i, label in enumerate(labels):
        rows = sorted((r for r in result.results if r["label"] == label), key=lambda r: r["size_bytes"])
        x = [r["size_bytes"] for r in rows]
        line, = ax.plot(x, [r["algbw_GBps"] * 1e3 for r in rows], "o-", label=label)
        ax.plot(x, [r["predicted_algbw_GBps"] * 1e3 for r in rows], ":", color=line.get_color())
    ax.axhline(h["throughput_bound_GBps"] * 1e3, color="k", ls="--", lw=1, label="MCF bound (N-1)Fb")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("shard size per peer (bytes)")
    ax.set_ylabel("algorithm bandwidth (MB/s)")
    fab = h["fabric"]
    ax.set_title(f"{h['spec']}, {fab['link_bw_Bps'] * 8 / 1e6:g} Mbit/s links, {fab['forwarding']} forwarding",
                 fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    write_png(fig, path)
