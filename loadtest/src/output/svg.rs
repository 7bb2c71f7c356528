//! The picture beside the report, hand-written SVG (no plotting crate): on
//! top, latency over time (x = send time, y = end-to-end ms on a log scale,
//! p50/p95/max per time bin) with the pause and the catch-up shaded; below,
//! the latency distribution as a CDF, steady state and spike apart. Both
//! carry the 45 ms SLO line, so a reader sees at a glance where the budget
//! holds and what the spike cost.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use crate::verdict::latency::{seconds_between, Sample, SpikeOutcome};

/// The end-to-end budget of SPEC §1, in milliseconds.
pub const SLO_MS: f64 = 45.0;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 860.0;
const LEFT: f64 = 80.0;
/// Right edge of both plots; the SLO label sits beyond it.
const RIGHT: f64 = 925.0;
/// Top and bottom of the latency-over-time plot area.
const TIME_TOP: f64 = 80.0;
const TIME_BOTTOM: f64 = 400.0;
/// Top and bottom of the distribution plot area.
const CDF_TOP: f64 = 490.0;
const CDF_BOTTOM: f64 = 780.0;
/// Time bins of the upper plot: about one per 3 pixels.
const TIME_BINS: usize = 300;
/// Points of each CDF curve.
const CDF_POINTS: usize = 400;

const STEADY_COLOUR: &str = "#1f77b4";
const SPIKE_COLOUR: &str = "#ff7f0e";
const MAX_COLOUR: &str = "#d62728";
const SLO_COLOUR: &str = "#c00000";

/// What the picture shows.
pub struct Picture<'a> {
    pub title: String,
    /// Time zero of the x axis: the start of the run.
    pub started_at: DateTime<Utc>,
    /// Every applied event of the run.
    pub samples: &'a [Sample],
    /// The injected spike: from SIGSTOP (or the burst) to SIGCONT (or the
    /// burst's end), and what to call it.
    pub pause: Option<(DateTime<Utc>, DateTime<Utc>, &'a str)>,
    pub spike: Option<&'a SpikeOutcome>,
    /// End of the warm-up, when one was set.
    pub warmup_until: Option<DateTime<Utc>>,
    pub steady: &'a [Sample],
    pub spiked: &'a [Sample],
}

/// A log10 axis over `[low, high]` milliseconds mapped onto `[from, to]`.
#[derive(Debug, Clone, Copy)]
struct LogScale {
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl LogScale {
    fn map(&self, ms: f64) -> f64 {
        let ms = ms.clamp(self.low, self.high);
        let fraction = (ms.log10() - self.low.log10()) / (self.high.log10() - self.low.log10());
        self.from + fraction * (self.to - self.from)
    }

    /// Decades between the bounds.
    fn decades(&self) -> impl Iterator<Item = f64> + '_ {
        let first = self.low.log10().round() as i32;
        let last = self.high.log10().round() as i32;
        (first..=last).map(|e| 10f64.powi(e))
    }
}

/// Latency range shown: whole decades around the data, at least 1-100 ms so
/// the SLO line is always inside.
fn latency_range(samples: &[Sample]) -> (f64, f64) {
    let ms: Vec<f64> = samples.iter().map(latency_ms).collect();
    let min = ms.iter().copied().fold(1.0, f64::min).max(0.01);
    let max = ms.iter().copied().fold(100.0, f64::max);
    (
        10f64.powf(min.log10().floor()),
        10f64.powf(max.log10().ceil()),
    )
}

fn latency_ms(sample: &Sample) -> f64 {
    sample.latency().num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", ms / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// A step for about `target` ticks over `span` seconds.
fn time_step(span: f64, target: f64) -> f64 {
    const STEPS: [f64; 12] = [
        0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
    ];
    STEPS
        .into_iter()
        .find(|step| span / step <= target)
        .unwrap_or(3600.0)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The value at quantile `q` of sorted values.
fn at_quantile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// Polylines through `points`, broken where a point is missing.
fn polylines(out: &mut String, points: &[Option<(f64, f64)>], colour: &str, width: f64) {
    for run in points.split(|p| p.is_none()) {
        if run.len() < 2 {
            continue;
        }
        let coordinates: Vec<String> = run
            .iter()
            .flatten()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{}"/>"#,
            coordinates.join(" ")
        );
    }
}

pub fn render(picture: &Picture<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="28" font-size="16" font-weight="bold" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(&picture.title)
    );
    let (low, high) = latency_range(picture.samples);
    latency_over_time(&mut out, picture, low, high);
    distribution(&mut out, picture, low, high);
    out.push_str("</svg>\n");
    out
}

fn latency_over_time(out: &mut String, picture: &Picture<'_>, low: f64, high: f64) {
    let y = LogScale {
        low,
        high,
        from: TIME_BOTTOM,
        to: TIME_TOP,
    };
    // Wide enough for the last send and for the end of the catch-up.
    let span = picture
        .samples
        .iter()
        .map(|s| seconds_between(picture.started_at, s.sent_at))
        .chain(
            picture
                .spike
                .map(|s| seconds_between(picture.started_at, s.caught_up_at)),
        )
        .fold(1.0, f64::max);
    let x = |seconds: f64| LEFT + (seconds / span).clamp(0.0, 1.0) * (RIGHT - LEFT);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">End-to-end latency by send time, per {} ms bin</text>"#,
        TIME_TOP - 12.0,
        (span / TIME_BINS as f64 * 1000.0).round().max(1.0)
    );

    // Shaded phases first, so the curves are drawn over them.
    if let Some(until) = picture.warmup_until {
        let x1 = x(seconds_between(picture.started_at, until));
        let _ = writeln!(
            out,
            r##"<rect x="{LEFT}" y="{TIME_TOP}" width="{:.1}" height="{}" fill="#9ecae1" fill-opacity="0.3"/><text x="{:.1}" y="{}" text-anchor="middle" fill="#31688e">warm-up</text>"##,
            (x1 - LEFT).max(1.0),
            TIME_BOTTOM - TIME_TOP,
            (LEFT + x1) / 2.0,
            TIME_BOTTOM - 8.0
        );
    }
    if let Some((began, ended, label)) = picture.pause {
        let (x0, x1) = (
            x(seconds_between(picture.started_at, began)),
            x(seconds_between(picture.started_at, ended)),
        );
        let _ = writeln!(
            out,
            r##"<rect x="{x0:.1}" y="{TIME_TOP}" width="{:.1}" height="{}" fill="#888" fill-opacity="0.25"/>"##,
            (x1 - x0).max(1.0),
            TIME_BOTTOM - TIME_TOP
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#444">{}</text>"##,
            (x0 + x1) / 2.0,
            TIME_TOP + 14.0,
            escape(label)
        );
        if let Some(spike) = picture.spike {
            let x2 = x(seconds_between(picture.started_at, spike.caught_up_at));
            let _ = writeln!(
                out,
                r##"<rect x="{x1:.1}" y="{TIME_TOP}" width="{:.1}" height="{}" fill="#ffd700" fill-opacity="0.3"/>"##,
                (x2 - x1).max(1.0),
                TIME_BOTTOM - TIME_TOP
            );
            // Beside the band, or inside it when the band reaches the edge.
            let (label_x, anchor) = if x2 + 110.0 > RIGHT {
                (x2 - 4.0, "end")
            } else {
                (x2 + 4.0, "start")
            };
            let _ = writeln!(
                out,
                r##"<text x="{label_x:.1}" y="{}" text-anchor="{anchor}" fill="#7a6000">catch-up {:.2} s</text>"##,
                TIME_TOP + 30.0,
                seconds_between(ended, spike.caught_up_at)
            );
        }
    }

    axes_frame(out, TIME_TOP, TIME_BOTTOM);
    for decade in y.decades() {
        let py = y.map(decade);
        grid_line(out, py);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            py + 4.0,
            format_ms(decade)
        );
    }
    let step = time_step(span, 12.0);
    let mut tick = 0.0;
    while tick <= span + 1e-9 {
        let px = x(tick);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{TIME_BOTTOM}" x2="{px:.1}" y2="{}" stroke="#000"/><text x="{px:.1}" y="{}" text-anchor="middle">{tick}</text>"##,
            TIME_BOTTOM + 5.0,
            TIME_BOTTOM + 18.0
        );
        tick += step;
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">send time (s since start)</text>"#,
        (LEFT + RIGHT) / 2.0,
        TIME_BOTTOM + 36.0
    );
    y_label(
        out,
        "end-to-end latency (log scale)",
        (TIME_TOP + TIME_BOTTOM) / 2.0,
    );

    let mut bins: Vec<Vec<f64>> = vec![Vec::new(); TIME_BINS];
    for sample in picture.samples {
        let seconds = seconds_between(picture.started_at, sample.sent_at);
        let bin = ((seconds / span * TIME_BINS as f64) as usize).min(TIME_BINS - 1);
        bins[bin].push(latency_ms(sample));
    }
    let mut curves: [Vec<Option<(f64, f64)>>; 3] = Default::default();
    for (index, bin) in bins.iter_mut().enumerate() {
        bin.sort_by(f64::total_cmp);
        let px = x((index as f64 + 0.5) * span / TIME_BINS as f64);
        for (curve, q) in curves.iter_mut().zip([0.5, 0.95, 1.0]) {
            curve.push((!bin.is_empty()).then(|| (px, y.map(at_quantile(bin, q)))));
        }
    }
    polylines(out, &curves[2], MAX_COLOUR, 1.0);
    polylines(out, &curves[1], SPIKE_COLOUR, 1.5);
    polylines(out, &curves[0], STEADY_COLOUR, 2.0);
    slo_horizontal(out, y.map(SLO_MS));
    legend(
        out,
        RIGHT - 280.0,
        TIME_TOP - 16.0,
        &[
            (STEADY_COLOUR, "p50".to_owned()),
            (SPIKE_COLOUR, "p95".to_owned()),
            (MAX_COLOUR, "max per bin".to_owned()),
        ],
    );
}

fn distribution(out: &mut String, picture: &Picture<'_>, low: f64, high: f64) {
    let x = LogScale {
        low,
        high,
        from: LEFT,
        to: RIGHT,
    };
    let y = |fraction: f64| CDF_BOTTOM - fraction * (CDF_BOTTOM - CDF_TOP);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">Latency distribution (CDF)</text>"#,
        CDF_TOP - 12.0
    );
    axes_frame(out, CDF_TOP, CDF_BOTTOM);
    for decade in x.decades() {
        let px = x.map(decade);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{CDF_TOP}" x2="{px:.1}" y2="{CDF_BOTTOM}" stroke="#ddd"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
            CDF_BOTTOM + 18.0,
            format_ms(decade)
        );
    }
    for percent in [0, 25, 50, 75, 95, 100] {
        let py = y(f64::from(percent) / 100.0);
        grid_line(out, py);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{percent}%</text>"#,
            LEFT - 6.0,
            py + 4.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">end-to-end latency: event time → ledger row processed_at (log scale)</text>"#,
        (LEFT + RIGHT) / 2.0,
        CDF_BOTTOM + 36.0
    );
    y_label(
        out,
        "share of events ≤ latency",
        (CDF_TOP + CDF_BOTTOM) / 2.0,
    );

    let mut entries = Vec::new();
    for (samples, colour, name) in [
        (picture.steady, STEADY_COLOUR, "steady state"),
        (picture.spiked, SPIKE_COLOUR, "caught in the spike"),
    ] {
        if samples.is_empty() {
            continue;
        }
        let mut sorted: Vec<f64> = samples.iter().map(latency_ms).collect();
        sorted.sort_by(f64::total_cmp);
        let points: Vec<Option<(f64, f64)>> = (0..=CDF_POINTS)
            .map(|i| {
                let q = i as f64 / CDF_POINTS as f64;
                Some((x.map(at_quantile(&sorted, q.max(1e-9))), y(q)))
            })
            .collect();
        polylines(out, &points, colour, 2.0);
        entries.push((
            colour,
            format!(
                "{name}: {} events, p95 {:.1} ms",
                sorted.len(),
                at_quantile(&sorted, 0.95)
            ),
        ));
    }
    let px = x.map(SLO_MS);
    let _ = writeln!(
        out,
        r#"<line x1="{px:.1}" y1="{CDF_TOP}" x2="{px:.1}" y2="{CDF_BOTTOM}" stroke="{SLO_COLOUR}" stroke-width="1.5" stroke-dasharray="6,4"/><text x="{:.1}" y="{}" fill="{SLO_COLOUR}">SLO {SLO_MS} ms</text>"#,
        px + 4.0,
        CDF_BOTTOM - 8.0
    );
    legend(out, LEFT, CDF_BOTTOM + 58.0, &entries);
}

fn axes_frame(out: &mut String, top: f64, bottom: f64) {
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{}" height="{}" fill="none" stroke="#000"/>"##,
        RIGHT - LEFT,
        bottom - top
    );
}

fn grid_line(out: &mut String, py: f64) {
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{py:.1}" x2="{RIGHT}" y2="{py:.1}" stroke="#ddd"/>"##
    );
}

fn y_label(out: &mut String, text: &str, middle: f64) {
    let _ = writeln!(
        out,
        r#"<text x="18" y="{middle}" text-anchor="middle" transform="rotate(-90 18 {middle})">{text}</text>"#
    );
}

fn slo_horizontal(out: &mut String, py: f64) {
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{py:.1}" x2="{RIGHT}" y2="{py:.1}" stroke="{SLO_COLOUR}" stroke-width="1.5" stroke-dasharray="6,4"/><text x="{}" y="{:.1}" fill="{SLO_COLOUR}" text-anchor="start">SLO {SLO_MS} ms</text>"#,
        RIGHT + 4.0,
        py + 4.0
    );
}

/// Entries side by side from `x`, each a coloured stroke and its label.
fn legend<S: AsRef<str>>(out: &mut String, x: f64, y: f64, entries: &[(&str, S)]) {
    let mut x = x;
    for (colour, label) in entries {
        let label = label.as_ref();
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            x + 22.0,
            x + 28.0,
            y + 4.0,
            escape(label)
        );
        // About 7 px per character at 12 px sans-serif, then a gap.
        x += 28.0 + 7.0 * label.chars().count() as f64 + 24.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent_ms: i64, latency_ms: i64) -> Sample {
        let sent_at = DateTime::<Utc>::from_timestamp_millis(1_800_000_000_000 + sent_ms).unwrap();
        Sample {
            sent_at,
            processed_at: sent_at + chrono::Duration::milliseconds(latency_ms),
        }
    }

    #[test]
    fn log_scale_maps_decades_evenly() {
        let scale = LogScale {
            low: 1.0,
            high: 1000.0,
            from: 300.0,
            to: 0.0,
        };
        assert_eq!(scale.map(1.0), 300.0);
        assert!((scale.map(10.0) - 200.0).abs() < 1e-9);
        assert_eq!(scale.map(1000.0), 0.0);
        assert_eq!(scale.map(1e6), 0.0, "clamped");
        assert_eq!(scale.decades().count(), 4);
    }

    #[test]
    fn latency_range_always_contains_the_slo() {
        assert_eq!(latency_range(&[sample(0, 3)]), (1.0, 100.0));
        assert_eq!(
            latency_range(&[sample(0, 3), sample(1, 5_500)]),
            (1.0, 10_000.0)
        );
    }

    #[test]
    fn picture_has_both_plots_the_slo_and_the_pause() {
        let samples: Vec<Sample> = (0..2_000).map(|i| sample(i * 10, 3 + i % 7)).collect();
        let started_at = samples[0].sent_at;
        let spike = SpikeOutcome {
            began_at: samples[500].sent_at,
            caught_up_at: samples[1100].sent_at,
            window_end: samples[1110].sent_at,
        };
        let svg = render(&Picture {
            title: "lag-spike <test> & co".into(),
            started_at,
            samples: &samples,
            pause: Some((
                samples[500].sent_at,
                samples[1000].sent_at,
                "consumer paused",
            )),
            spike: Some(&spike),
            warmup_until: Some(samples[100].sent_at),
            steady: &samples[..500],
            spiked: &samples[500..],
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("lag-spike &lt;test&gt; &amp; co"));
        assert_eq!(svg.matches("SLO 45 ms").count(), 2);
        assert!(svg.contains("consumer paused"));
        assert!(svg.contains("warm-up"));
        assert!(svg.contains("catch-up 1.00 s"));
        assert!(svg.contains("steady state: 500 events"));
        assert!(svg.contains("<polyline"));
    }
}
