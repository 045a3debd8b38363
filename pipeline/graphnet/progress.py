"""Stage gnn's progress lines: one line per epoch per member, prefixed `[gnn <slug>] seed k (i/n)`, with the ETA of
the whole stage run from the member's mean epoch time so far.

Members may train side by side (`gnn.member_workers`, pipeline/graphnet/member_pool.py): the n members then run in
rounds of `workers`, and the ETA counts the rounds after the member's own instead of the members after it.
"""
from __future__ import annotations

STAGE = "gnn"


def epochs_left(epoch: int, best_epoch: int, budget: int, patience: int) -> tuple[int, int]:
    """(expected, at most) epochs this member still trains after `epoch` (0-based): at most the rest of the budget;
    expected, until early stopping ends it should the valid score not improve again (`patience` epochs after the
    best one)."""
    at_most = max(budget - epoch - 1, 0)
    return min(at_most, max(best_epoch + patience - epoch, 0)), at_most


def later_rounds(position: int, members: int, workers: int = 1) -> int:
    """Rounds of members that start after the round of the member at 0-based `position` (members run `workers` at
    a time, in order): with one worker, the members after it."""
    rounds = -(-members // max(workers, 1))
    return rounds - position // max(workers, 1) - 1


def epoch_reporter(slug: str, member: int, position: int, members: int, budget: int, patience: int, run=None,
                   workers: int = 1):
    """on_epoch callback: one line per epoch, `seed k (i/n) epoch e/N`, with the ETA from the mean epoch time so far
    and the early-stopping state (`epochs_left`; the later rounds of members are expected to train as long as this
    one), beside its upper bound (every remaining epoch of the budget). `run` (a tracking run, or anything with
    `log(dict)`) gets every epoch's row with the member's seed."""
    from tqdm import tqdm

    seconds: list[float] = []
    later = later_rounds(position, members, workers)

    def on_epoch(row: dict) -> None:
        seconds.append(row["seconds"])
        per_epoch = sum(seconds) / len(seconds)
        expected, at_most = epochs_left(row["epoch"], row["best_epoch"], budget, patience)
        eta = (expected + later * (row["epoch"] + 1 + expected)) * per_epoch
        bound = (at_most + later * budget) * per_epoch
        shown = max(budget, row["epoch"] + 1)          # GST's head fine-tuning runs past the budget
        print(f"[{STAGE} {slug}] seed {member} ({position + 1}/{members}) epoch {row['epoch'] + 1}/{shown}: "
              f"loss {row['loss']:.4f} valid {row['valid_score']:.4f} lr {row['lr']:.2e} "
              f"{row['configs_per_second']:.0f} configs/s, {per_epoch:.1f} s/epoch, ETA "
              f"{tqdm.format_interval(eta)} (at most {tqdm.format_interval(bound)})", flush=True)
        if run is not None:
            run.log({**row, "seed": member})
    return on_epoch
