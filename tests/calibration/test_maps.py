"""The maps and the promises on data whose truth is known: drawn from a stated distribution, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from decirank.calibration import (
    _maps,
    choose_map,
    choose_temperature,
    conformal_sets,
    precision_cutoff,
    recall_cutoff,
    reliability,
)
from decirank.calibration._guarantees import beta_binomial_cdf, binomial_tail
from decirank.calibration._maps import PLATT_PRIORS, ProbabilityMap, fit_map


def _overconfident(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A model whose logit is three times the truth's: ranks well, far too sure. Returns (model p, labels, true p)."""
    rng = np.random.default_rng(seed)
    true_logit = rng.normal(0.0, 1.5, n)
    truth = 1 / (1 + np.exp(-true_logit))
    labels = (rng.random(n) < truth).astype(int)
    return 1 / (1 + np.exp(-3 * true_logit)), labels, truth


def test_platt_recovers_the_slope_of_an_overconfident_model():
    p, y, _ = _overconfident(20_000, 0)
    fitted = fit_map("platt", p, y)
    assert fitted.parameters["a"] == pytest.approx(1 / 3, abs=0.03)
    assert fitted.parameters["b"] == pytest.approx(0.0, abs=0.05)


def test_isotonic_is_monotone_and_never_says_zero_or_one():
    p, y, _ = _overconfident(300, 1)
    fitted = fit_map("isotonic", p, y)
    grid = np.linspace(0, 1, 501)
    mapped = fitted(grid)
    assert np.all(np.diff(mapped) >= 0)
    assert 0 < mapped.min() and mapped.max() < 1


def test_choose_map_lowers_held_out_calibration_error_of_an_overconfident_model():
    """Fitted on 100 rows, measured on 2,000 others, over 20 draws (one draw's base rate can be off by chance)."""
    before, after, gap_model, gap_fitted = [], [], [], []
    for draw in range(20):
        p, y, truth = _overconfident(2_100, 200 + draw)
        fitted, losses, out_of_fold = choose_map(p[:100], y[:100], seed=draw)
        assert fitted.method in ("platt", "isotonic")
        assert set(losses) == {"identity", "platt", "isotonic"}
        assert len(out_of_fold) == 100
        before.append(reliability(p[100:], y[100:]).ece)
        after.append(reliability(fitted(p[100:]), y[100:]).ece)
        # Against the true probabilities, not only the labels.
        gap_model.append(np.abs(p[100:] - truth[100:]).mean())
        gap_fitted.append(np.abs(fitted(p[100:]) - truth[100:]).mean())
    assert np.mean(before) > 0.1
    assert np.mean(after) < 0.06
    assert np.mean(gap_fitted) < np.mean(gap_model) / 2


def _off_by(a: float, b: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A model whose truth is ``sigmoid(a * logit(p) + b)``. Returns (model p, labels, true p)."""
    rng = np.random.default_rng(seed)
    true_logit = rng.normal(0.0, 1.5, n)
    truth = 1 / (1 + np.exp(-true_logit))
    labels = (rng.random(n) < truth).astype(int)
    return 1 / (1 + np.exp(-(true_logit - b) / a)), labels, truth


@pytest.mark.parametrize(("a", "b", "closer"), [(1.3, 0.3, 0.9), (1 / 3, 0.0, 1.02)])
def test_platts_prior_brings_a_nearly_right_model_closer_and_holds_a_far_one_back_no_further(monkeypatch, a, b, closer):
    """Fitted on 100 rows, measured against the true probabilities of 2,000 others, over 30 draws: with
    the prior towards the identity a somewhat under-sure model's map is at least 10% closer to the truth
    than with Platt alone, and a three times over-sure one's no further from it (within 2%)."""

    def gap(priors: tuple[float, ...]) -> float:
        monkeypatch.setattr(_maps, "PLATT_PRIORS", priors)
        gaps = []
        for draw in range(30):
            p, y, truth = _off_by(a, b, 2_100, 500 + draw)
            fitted, _, _ = choose_map(p[:100], y[:100], seed=draw)
            gaps.append(np.abs(fitted(p[100:]) - truth[100:]).mean())
        return float(np.mean(gaps))

    assert gap(PLATT_PRIORS) < closer * gap((0.0,))


def test_a_platt_map_keeps_its_prior_and_one_stored_without_it_applies_as_before():
    p, y, _ = _off_by(1.3, 0.3, 100, 7)
    fitted, losses, _ = choose_map(p, y, methods=("platt",), seed=0)
    assert set(losses) == {"platt"}
    assert fitted.parameters["prior"] in PLATT_PRIORS
    again = ProbabilityMap.from_dict(fitted.to_dict())
    assert again == fitted and np.array_equal(again(p), fitted(p))
    stored = ProbabilityMap.from_dict({"method": "platt", "parameters": {"a": 0.5, "b": -0.25}})
    assert stored([0.2, 0.5, 0.9]) == pytest.approx(1 / (1 + np.exp(-(0.5 * np.log([0.25, 1.0, 9.0]) - 0.25))))


def test_choose_map_keeps_a_calibrated_model_as_it_is():
    rng = np.random.default_rng(3)
    p = rng.random(2_000)
    y = (rng.random(2_000) < p).astype(int)
    fitted, losses, _ = choose_map(p, y, seed=0)
    assert losses["identity"] <= min(losses.values()) + 0.005
    assert np.abs(fitted(p) - p).mean() < 0.03


def test_temperature_softens_an_overconfident_choice():
    rng = np.random.default_rng(4)
    n, k = 400, 5
    logits = rng.normal(0, 1, (n, k))
    truth_p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    truth = np.array([rng.choice(k, p=row) for row in truth_p])
    model = np.exp(3 * logits) / np.exp(3 * logits).sum(1, keepdims=True)
    fitted, losses, _ = choose_temperature(model, truth, seed=0)
    assert fitted.method == "temperature"
    assert fitted.parameters["t"] == pytest.approx(3.0, rel=0.25)
    assert losses["temperature"] < losses["identity"]
    assert np.allclose(fitted(model).sum(axis=1), 1.0)


def _at_least(share: float, level: float, draws: int) -> bool:
    """``share`` of ``draws`` is at least ``level``, up to 2.5 standard errors of the draws themselves."""
    return share >= level - 2.5 * (level * (1 - level) / draws) ** 0.5


def test_binomial_and_beta_binomial_tails_are_distributions():
    assert binomial_tail(10, 0.3, 0) == 1.0
    assert binomial_tail(10, 0.3, 11) == 0.0
    assert binomial_tail(10, 0.5, 6) == pytest.approx(386 / 1024)
    assert beta_binomial_cdf(30, 2.0, 5.0, 30) == 1.0
    # Against simulation: J | F ~ Binomial(m, F), F ~ Beta(a, b).
    rng = np.random.default_rng(5)
    draws = rng.binomial(40, rng.beta(3, 20, 200_000))
    assert beta_binomial_cdf(40, 3.0, 20.0, 4) == pytest.approx((draws <= 4).mean(), abs=0.005)


@pytest.mark.parametrize("target", [0.8, 0.9, 0.95])
def test_the_recall_promise_holds_in_at_least_its_confidence_of_draws(target):
    """Over 400 seeded draws of 100 labelled rows and a batch of 300 new ones, recall >= target 90% of the time."""
    held, thresholds = 0, 0
    for draw in range(400):
        p, y, _ = _overconfident(400, 100 + draw)
        cut = recall_cutoff(p[:100], y[:100], target, 0.9, batch_size=300)
        kept = np.ones(300, bool) if cut.threshold is None else p[100:] >= cut.threshold
        positives = y[100:] == 1
        held += (kept & positives).sum() / positives.sum() >= target
        thresholds += cut.threshold is not None
    assert _at_least(held / 400, 0.9, 400)
    assert thresholds > 200  # a real cut-off, not "keep everything", most of the time
    assert held / 400 < 0.995  # and not so timid that it keeps everything it can


def test_too_few_positives_keep_every_row_and_say_why():
    cut = recall_cutoff([0.1, 0.9, 0.8, 0.2], [0, 1, 1, 0], 0.95, 0.9)
    assert cut.threshold is None
    assert "every row is kept" in cut.note


def test_the_precision_promise_holds_in_at_least_its_confidence_of_draws():
    held, found = 0, 0
    for draw in range(300):
        p, y, _ = _overconfident(2_000, 1000 + draw)
        cut = precision_cutoff(p[:300], y[:300], 0.8, 0.9)
        if cut is None:
            continue
        found += 1
        kept = p[300:] >= cut.threshold
        held += y[300:][kept].mean() >= 0.8
    assert found > 150  # most draws of 300 rows can promise it
    assert _at_least(held / found, 0.9, found)


@pytest.mark.parametrize("coverage", [0.8, 0.9])
def test_conformal_sets_cover_at_least_their_level_in_at_least_the_confidence_of_draws(coverage):
    rng = np.random.default_rng(6)
    met, sizes = 0, []
    for _ in range(300):
        logits = rng.normal(0, 1.5, (600, 6))
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        truth = np.array([rng.choice(6, p=row) for row in p])
        sets = conformal_sets(p[:100][np.arange(100), truth[:100]], coverage, 0.9, batch_size=500)
        members = [sets.members(row) for row in p[100:]]
        met += np.mean([t in m for t, m in zip(truth[100:], members, strict=True)]) >= coverage
        sizes.append(np.mean([len(m) for m in members]))
    assert _at_least(met / 300, 0.9, 300)
    assert np.mean(sizes) < 6  # smaller than every option
