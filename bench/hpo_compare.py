#!/usr/bin/python3
"""Side-by-side table of bench/hpo.sh's two JSON files (Optuna's and ours) and the issue's verdicts.

Usage: bench/hpo_compare.py OUT_DIR TRIALS
"""
import json
import os
import sys


def main():
    out, trials = sys.argv[1], int(sys.argv[2])
    opt = json.load(open(os.path.join(out, "optuna.json")))["results"]
    ours = json.load(open(os.path.join(out, "ours.json")))["results"]
    key = f"regret@{trials}"
    beat_tpe, beat_best = 0, 0
    print(f"median regret at {trials} trials (lower is better); ms per suggestion in brackets\n")
    for fn in ours:
        o, u = opt.get(fn, {}), ours[fn]
        cells = [f"optuna {s} {v[key]:.4g} [{v['ms_per_trial']:.2f}]" for s, v in o.items()]
        cells += [f"gpugeek {s} {v[key]:.4g} [{v['ms_per_trial']:.2f}]" for s, v in u.items()]
        our_best = min(u.items(), key=lambda kv: kv[1][key])
        opt_best = min(o.items(), key=lambda kv: kv[1][key])
        tpe = o["tpe"][key]
        ok_tpe = our_best[1][key] <= tpe
        ok_best = our_best[1][key] <= opt_best[1][key]
        beat_tpe += ok_tpe
        beat_best += ok_best
        print(f"{fn}:")
        for c in cells:
            print(f"  {c}")
        print(f"  ours best: {our_best[0]} {our_best[1][key]:.4g} = {our_best[1][key] / tpe:.3g}x Optuna TPE"
              f" ({'<=' if ok_tpe else '>'}), {our_best[1][key] / opt_best[1][key]:.3g}x Optuna's best"
              f" {opt_best[0]} ({'<=' if ok_best else '>'})")
    n = len(ours)
    print(f"\nour best <= Optuna TPE on {beat_tpe}/{n} (target {n}/{n}); <= Optuna's best on {beat_best}/{n} (target 3)")
    tpe_ms = [u["tpe"][f"ms_at_trial_{trials}"] for u in ours.values() if "tpe" in u]
    if tpe_ms:
        print(f"our TPE suggestion at trial {trials}: max {max(tpe_ms):.2f} ms over the functions (target <= 1 ms);"
              f" Optuna TPE mean {max(v['tpe']['ms_per_trial'] for v in opt.values()):.1f} ms per trial at most")
    lc_o, lc_u = os.path.join(out, "optuna_lcbench.json"), os.path.join(out, "ours_lcbench.json")
    if os.path.exists(lc_o) and os.path.exists(lc_u):
        lo, lu = json.load(open(lc_o))["lcbench"], json.load(open(lc_u))["lcbench"]
        print(f"\nLCBench, regret (accuracy points) at the full budget of {lu['budget_epochs']} epochs:")
        for task in [t for t in lu if t != "budget_epochs"]:
            row = "  ".join(f"{p} {v['regret@q4']:.3g}" for p, v in lu[task].items())
            ref = "  ".join(f"{p} {v['regret@q4']:.3g}" for p, v in lo.get(task, {}).items())
            none = lu[task]["none"]["regret@q4"]
            print(f"  {task}: gpugeek {row}\n  {' ' * len(task)}  optuna  {ref}")
            print(f"  {' ' * len(task)}  asha_r4 better than no pruning: {lu[task]['asha_r4']['regret@q4'] < none}")
            if "grace_check" in lu[task].get("asha", {}):
                print(f"  {' ' * len(task)}  asha (grace 1): {lu[task]['asha']['grace_check']}")


if __name__ == "__main__":
    main()
