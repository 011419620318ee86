//! The least-squares line through a set of points: one fit for the trace's per-SM clock map
//! (cycles to ns) and for `bench`'s growth of the step time with the context.

/// A fitted line `y = mean_y + slope · (x − mean_x)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// dy/dx.
    pub slope: f64,
    /// The points' mean x, through which the line passes.
    pub mean_x: f64,
    /// The points' mean y.
    pub mean_y: f64,
}

impl Line {
    /// The least-squares line through `points`, or None where their x values do not vary
    /// (fewer than two distinct ones), since no slope is defined there.
    pub fn through(points: &[(f64, f64)]) -> Option<Line> {
        let (mean_x, mean_y) = mean_point(points)?;
        let (sxx, sxy) = points.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
            (
                a + (x - mean_x) * (x - mean_x),
                b + (x - mean_x) * (y - mean_y),
            )
        });
        (sxx > 0.0).then(|| Line {
            slope: sxy / sxx,
            mean_x,
            mean_y,
        })
    }

    /// The line's y at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.mean_y + self.slope * (x - self.mean_x)
    }
}

/// The points' mean (x, y), or None where there are none.
pub fn mean_point(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    (!points.is_empty()).then(|| {
        points
            .iter()
            .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_noisy_line_and_refuses_a_vertical_one() {
        let points: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let x = i as f64;
                (x, 3.0 + 0.5 * x + if i % 2 == 0 { 0.1 } else { -0.1 })
            })
            .collect();
        let line = Line::through(&points).unwrap();
        assert!((line.slope - 0.5).abs() < 0.01, "{line:?}");
        assert!((line.at(10.0) - 8.0).abs() < 0.05, "{line:?}");
        assert_eq!(Line::through(&[(1.0, 2.0), (1.0, 5.0)]), None);
        assert_eq!(Line::through(&[]), None);
    }
}
