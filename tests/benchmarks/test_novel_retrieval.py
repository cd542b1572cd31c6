"""benchmarks/novel_retrieval.py: a seed whose history cannot tune the cascade still measures every other policy."""

from __future__ import annotations

from pathlib import Path

from benchmarks import novel_retrieval

POOL = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "pools" / "qm9_novel.csv"


def test_a_history_without_hits_leaves_the_cascade_out_and_measures_the_rest(tmp_path: Path) -> None:
    # 40 molecules of the qm9_novel pool; with 10 answers of history and the top 5% as hits, seed 2's history holds
    # none of the 2 hits, so the cascade (tuned on the history's hits) cannot be tuned. It used to stop the run. (Seed 0
    # tunes it; the seeds were read off the pool's relaxed-geometry DFT of 2026-12-07: a different truth moves the hits.)
    pool = tmp_path / "pool.csv"
    pool.write_text("".join(POOL.read_text().splitlines(keepends=True)[:41]))
    out = novel_retrieval.run(str(pool), 10, [2, 0], 0.05, "maximize", tmp_path / "cache.db", space="qm9")
    untuned, tuned = out["seeds"]
    assert untuned["cascade"] is None and "cannot tune the cascade" in untuned["cascade_untuned"]
    assert untuned["voi_shipped"] >= untuned["oracle"] > 0 and untuned["voi_cold"] >= untuned["oracle"]
    assert untuned["ratios"]["shipped_x_cascade"] is None and untuned["ratios"]["shipped_x_oracle"] >= 1.0
    assert tuned["cascade"] is not None and "cascade_untuned" not in tuned  # seed 0 tunes it as before
    assert out["mean_ratios"]["shipped_x_cascade"] == tuned["ratios"]["shipped_x_cascade"]
