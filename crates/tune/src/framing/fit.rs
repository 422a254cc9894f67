//! The arithmetic of framing detection: per-size minima, least squares, a robust noise scale.
//!
//! The model (round trip against IP bytes `x`, for a cell boundary offset `o`):
//!
//! ```text
//! rtt(x) = a + c*x + d*saw(x + o),   saw(u) = ceil(u/48) - u/48 - 1/2   (in [-1/2, 1/2))
//! ```
//!
//! An ATM staircase `a' + b*ceil((x+o)/48)` is exactly this with `c = b/48` and `d = b` (its
//! sawtooth is as tall as its steps); a straight line is `d = 0`. So one linear fit per offset
//! gives both the step position and how much of the slope comes in steps.

/// ATM's cell payload: AAL5 carries 48 bytes in each 53-byte cell (ITU-T I.363.5).
pub const CELL_PAYLOAD: u32 = 48;

/// One size of the sweep: IP bytes and the lowest round trip any of its echoes had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeMin {
    pub ip_bytes: u16,
    pub min_ms: f64,
    pub replies: usize,
}

/// The lowest round trip per size, sizes ascending; sizes without a reply are left out. The
/// minimum sheds queueing: any one echo may wait behind other traffic, the fastest did not.
pub fn per_size_min(echoes: impl IntoIterator<Item = (u16, Option<u64>)>) -> Vec<SizeMin> {
    let mut by_size = std::collections::BTreeMap::<u16, (f64, usize)>::new();
    for (size, rtt_ns) in echoes {
        if let Some(ns) = rtt_ns {
            let ms = ns as f64 / 1e6;
            let e = by_size.entry(size).or_insert((f64::INFINITY, 0));
            e.0 = e.0.min(ms);
            e.1 += 1;
        }
    }
    by_size
        .into_iter()
        .map(|(ip_bytes, (min_ms, replies))| SizeMin {
            ip_bytes,
            min_ms,
            replies,
        })
        .collect()
}

/// Cells of an IP packet of `x` bytes with `overhead` bytes over it (cake's ATM rounding).
pub fn cells(x: f64, overhead: f64) -> f64 {
    ((x + overhead) / f64::from(CELL_PAYLOAD)).ceil()
}

/// The zero-mean sawtooth of cell padding at offset `o`: ceil(u/48) - u/48 - 1/2 with u = x + o.
pub fn saw(x: f64, o: f64) -> f64 {
    let u = (x + o) / f64::from(CELL_PAYLOAD);
    u.ceil() - u - 0.5
}

/// A least-squares fit: the coefficients, their standard errors (from `sigma`), the residuals.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearFit {
    pub coef: Vec<f64>,
    pub se: Vec<f64>,
    pub residuals: Vec<f64>,
    /// The noise scale, robust (1.4826 x the median absolute residual, Gaussian-consistent).
    pub sigma: f64,
    pub rss: f64,
}

/// Fits `y ~ rows` by the normal equations, with one pass that drops points over 5 sigma away
/// (a size whose every echo met a queue) and fits again. `None` when the columns are
/// dependent or too few points remain.
pub fn least_squares(rows: &[Vec<f64>], y: &[f64]) -> Option<LinearFit> {
    let first = solve_fit(rows, y)?;
    let keep: Vec<usize> = (0..y.len())
        .filter(|&i| first.residuals[i].abs() <= 5.0 * first.sigma.max(1e-9))
        .collect();
    if keep.len() == y.len() {
        return Some(first);
    }
    let rows2: Vec<Vec<f64>> = keep.iter().map(|&i| rows[i].clone()).collect();
    let y2: Vec<f64> = keep.iter().map(|&i| y[i]).collect();
    solve_fit(&rows2, &y2)
}

fn solve_fit(rows: &[Vec<f64>], y: &[f64]) -> Option<LinearFit> {
    let p = rows.first()?.len();
    if rows.len() < p + 3 {
        return None;
    }
    // XᵀX and Xᵀy.
    let mut xtx = vec![vec![0.0; p]; p];
    let mut xty = vec![0.0; p];
    for (row, &yi) in rows.iter().zip(y) {
        for j in 0..p {
            xty[j] += row[j] * yi;
            for k in 0..p {
                xtx[j][k] += row[j] * row[k];
            }
        }
    }
    let coef = solve(&xtx, &xty)?;
    let residuals: Vec<f64> = rows
        .iter()
        .zip(y)
        .map(|(row, yi)| yi - row.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>())
        .collect();
    let rss = residuals.iter().map(|r| r * r).sum();
    let sigma = robust_sigma(&residuals);
    // Var(coef_j) = sigma² (XᵀX)⁻¹_jj.
    let se = (0..p)
        .map(|j| {
            let mut e = vec![0.0; p];
            e[j] = 1.0;
            solve(&xtx, &e).map(|col| sigma * col[j].max(0.0).sqrt())
        })
        .collect::<Option<Vec<f64>>>()?;
    Some(LinearFit {
        coef,
        se,
        residuals,
        sigma,
        rss,
    })
}

/// How well `coef` fits every point, those the fit dropped included: the sum of squared
/// residuals, each capped at (5 sigma)². Fits that dropped different points compare fairly (a
/// wrong cell offset misses one size per cell by a whole step; dropping it must not make it win),
/// and a size far off counts, but only so much.
pub fn capped_rss(rows: &[Vec<f64>], y: &[f64], fit: &LinearFit) -> f64 {
    let cap = (5.0 * fit.sigma).powi(2);
    rows.iter()
        .zip(y)
        .map(|(row, yi)| {
            let r = yi - row.iter().zip(&fit.coef).map(|(a, b)| a * b).sum::<f64>();
            (r * r).min(cap)
        })
        .sum()
}

/// 1.4826 x the median of |r - median(r)|: the standard deviation for Gaussian noise, and not
/// thrown by a few sizes far off.
pub fn robust_sigma(r: &[f64]) -> f64 {
    let med = median(r.to_vec());
    1.4826 * median(r.iter().map(|v| (v - med).abs()).collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Solves `a x = b` (a small square system) by Gaussian elimination with partial pivoting;
/// `None` when `a` is singular.
fn solve(a: &[Vec<f64>], b: &[f64]) -> Option<Vec<f64>> {
    let n = b.len();
    let mut m: Vec<Vec<f64>> = a
        .iter()
        .zip(b)
        .map(|(row, &bi)| row.iter().copied().chain([bi]).collect())
        .collect();
    let scale = a.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col].abs() <= scale * 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (v, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staircase_is_a_line_plus_a_sawtooth_as_tall_as_its_steps() {
        for o in 0..48 {
            for x in 40..300 {
                let (x, o) = (f64::from(x), f64::from(o));
                let stair = 3.0 * cells(x, o);
                let model = 1.5 + 3.0 / 48.0 * (x + o) + 3.0 * saw(x, o);
                assert!((stair - model).abs() < 1e-9, "x {x} o {o}");
            }
        }
    }

    #[test]
    fn least_squares_recovers_a_plane_and_drops_a_far_outlier() {
        // Over 0..200 bytes (four cells), so that the sawtooth is not a line.
        let rows: Vec<Vec<f64>> = (0..200)
            .map(|i| vec![1.0, f64::from(i), saw(f64::from(i), 5.0)])
            .collect();
        let mut y: Vec<f64> = rows.iter().map(|r| 2.0 + 0.5 * r[1] + 4.0 * r[2]).collect();
        // Tiny deterministic noise, so that sigma is not zero, and one size that met a queue.
        for (i, v) in y.iter_mut().enumerate() {
            *v += if i % 2 == 0 { 0.01 } else { -0.01 };
        }
        y[7] += 50.0;
        let fit = least_squares(&rows, &y).expect("fits");
        for (got, want) in fit.coef.iter().zip([2.0, 0.5, 4.0]) {
            assert!((got - want).abs() < 0.02, "{:?}", fit.coef);
        }
        assert_eq!(fit.residuals.len(), 199, "the outlier is dropped");
        assert!(fit.sigma < 0.02, "{}", fit.sigma);
    }

    #[test]
    fn dependent_columns_do_not_fit() {
        let rows: Vec<Vec<f64>> = (0..10)
            .map(|i| vec![1.0, 2.0 * f64::from(i), f64::from(i)])
            .collect();
        assert!(least_squares(&rows, &[1.0; 10]).is_none());
    }

    #[test]
    fn the_minimum_per_size_ignores_losses() {
        let mins = per_size_min([
            (64, Some(3_000_000)),
            (64, Some(2_000_000)),
            (65, None),
            (63, Some(1_000_000)),
        ]);
        assert_eq!(mins.len(), 2);
        assert_eq!(
            (mins[0].ip_bytes, mins[0].min_ms, mins[0].replies),
            (63, 1.0, 1)
        );
        assert_eq!(
            (mins[1].ip_bytes, mins[1].min_ms, mins[1].replies),
            (64, 2.0, 2)
        );
    }
}
