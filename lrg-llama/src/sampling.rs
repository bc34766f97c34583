//! Picking the next token among those the constraint allows.

use rand::Rng;
use rand::rngs::StdRng;
use toktrie::SimpleVob;

/// Samples a token id from `logits` restricted to `allowed`: the most likely
/// one when `temperature <= 0`, otherwise from the softmax at that
/// temperature, cut to the nucleus `top_p` when given. `None` when no token
/// is allowed.
pub(crate) fn sample(
    logits: &[f32],
    allowed: &SimpleVob,
    temperature: f32,
    top_p: Option<f32>,
    rng: &mut StdRng,
) -> Option<u32> {
    // Only ids both in the mask and in the logits count (the two can differ by
    // padding at the end of the vocabulary).
    let mut best: Option<(u32, f32)> = None;
    let mut candidates: Vec<(u32, f32)> = Vec::new();
    let greedy = temperature <= 0.0 || !temperature.is_finite();
    allowed.iter_set_entries(|i| {
        let Some(&l) = logits.get(i) else { return };
        if l.is_nan() {
            return;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i as u32, l));
        }
        if !greedy {
            candidates.push((i as u32, l));
        }
    });
    let (best_id, max) = best?;
    if greedy || candidates.len() == 1 {
        return Some(best_id);
    }
    let mut weights: Vec<f64> = candidates
        .iter()
        .map(|&(_, l)| f64::from((l - max) / temperature).exp())
        .collect();
    if let Some(p) = top_p.filter(|p| *p < 1.0) {
        nucleus(&mut weights, f64::from(p));
    }
    let total: f64 = weights.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return Some(best_id);
    }
    let mut r = rng.random::<f64>() * total;
    for (&(id, _), w) in candidates.iter().zip(&weights) {
        r -= w;
        if r <= 0.0 {
            return Some(id);
        }
    }
    Some(best_id)
}

/// Top-p: zero the weights of all but the likeliest tokens whose share of
/// the total reaches `top_p` (the likeliest one always stays).
fn nucleus(weights: &mut [f64], top_p: f64) {
    let total: f64 = weights.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]));
    let mut before = 0.0;
    for i in order {
        if before >= top_p * total {
            weights[i] = 0.0;
        } else {
            before += weights[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn mask(n: usize, allowed: &[u32]) -> SimpleVob {
        let mut m = SimpleVob::alloc(n);
        for &a in allowed {
            m.allow_token(a);
        }
        m
    }

    #[test]
    fn greedy_takes_the_best_allowed() {
        let logits = [5.0, 1.0, 3.0, 2.0];
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            sample(&logits, &mask(4, &[1, 2, 3]), 0.0, None, &mut rng),
            Some(2)
        );
        assert_eq!(sample(&logits, &mask(4, &[]), 0.0, None, &mut rng), None);
    }

    #[test]
    fn sampling_stays_in_the_mask_and_follows_the_seed() {
        let logits = [9.0, 1.0, 1.1, 0.9, 1.0];
        let m = mask(5, &[1, 2, 3]);
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..50)
                .map(|_| sample(&logits, &m, 1.0, None, &mut rng).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(3);
        assert!(a.iter().all(|t| [1, 2, 3].contains(t)));
        assert_eq!(a, draw(3));
        // at temperature 1 with near-equal logits, more than one token shows up
        assert!(a.iter().any(|&t| t != a[0]));
    }

    #[test]
    fn top_p_keeps_only_the_likeliest_tokens() {
        let logits = [0.0, 3.0, 2.0, 0.0, 2.9];
        let m = mask(5, &[1, 2, 3, 4]);
        let mut rng = StdRng::seed_from_u64(5);
        let draws: Vec<u32> = (0..200)
            .map(|_| sample(&logits, &m, 1.0, Some(0.5), &mut rng).unwrap())
            .collect();
        // Tokens 1 and 4 hold about 0.43 and 0.39 of the mass: the two of
        // them reach 0.5, the rest never show up.
        assert!(draws.iter().all(|t| [1, 4].contains(t)), "{draws:?}");
        assert!(draws.contains(&1) && draws.contains(&4));
        let tiny: Vec<u32> = (0..50)
            .map(|_| sample(&logits, &m, 1.0, Some(1e-6), &mut rng).unwrap())
            .collect();
        assert!(tiny.iter().all(|&t| t == 1), "{tiny:?}");
    }
}
