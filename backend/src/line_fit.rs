//! The least-squares line through a set of points: one fit for the trace's per-SM clock map
//! (cycles to ns) and for `bench`'s growth of the step time with the context.

/// A fitted line `y = mean_y + slope · (x − mean_x)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// dy/dx, or None where the x values do not vary (fewer than two distinct ones), since no
    /// slope is defined there.
    pub slope: Option<f64>,
    /// The points' mean x, through which the line passes.
    pub mean_x: f64,
    /// The points' mean y.
    pub mean_y: f64,
}

impl Line {
    /// The least-squares line through `points`, or None where there are none.
    pub fn through(points: &[(f64, f64)]) -> Option<Line> {
        if points.is_empty() {
            return None;
        }
        let n = points.len() as f64;
        let (mean_x, mean_y) = points
            .iter()
            .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n));
        let (sxx, sxy) = points.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
            (
                a + (x - mean_x) * (x - mean_x),
                b + (x - mean_x) * (y - mean_y),
            )
        });
        Some(Line {
            slope: (sxx > 0.0).then(|| sxy / sxx),
            mean_x,
            mean_y,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_noisy_line_and_no_slope_of_a_vertical_one() {
        let points: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let x = i as f64;
                (x, 3.0 + 0.5 * x + if i % 2 == 0 { 0.1 } else { -0.1 })
            })
            .collect();
        let line = Line::through(&points).unwrap();
        let slope = line.slope.unwrap();
        assert!((slope - 0.5).abs() < 0.01, "{line:?}");
        // At x = 10 the line passes within the noise of 3 + 0.5 x.
        assert!(
            (line.mean_y + slope * (10.0 - line.mean_x) - 8.0).abs() < 0.05,
            "{line:?}"
        );
        let vertical = Line::through(&[(1.0, 2.0), (1.0, 5.0)]).unwrap();
        assert_eq!(vertical.slope, None);
        assert_eq!((vertical.mean_x, vertical.mean_y), (1.0, 3.5));
        assert_eq!(Line::through(&[]), None);
    }
}
